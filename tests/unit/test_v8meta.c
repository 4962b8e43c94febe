/* test_v8meta.c: V8's v8dbg_ constants read from real ELF files: the machine's node, a
 * fixture compiled with Node 20's values (tests/unit/data/v8dbg_fixture.c), forged variants. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "v8meta.h"
#include "v8proc.h"

static char dir[] = "/tmp/prowl-v8meta-XXXXXX";

/* Reads the ELF file at path into *m; returns v8_meta_read's result. */
static int read_file(const char *path, struct v8_meta *m)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;
	Elf *elf;

	assert_true(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	r = v8_meta_read(elf, m);
	if (elf)
		elf_end(elf);
	close(fd);
	return r;
}

/* The fixture compiled with extra cc flags, read. */
static int read_fixture(const char *flags, struct v8_meta *m)
{
	char so[256];

	snprintf(so, sizeof(so), "%s/f.so", dir);
	assert_int_equal(run_cmd("cc -shared -fPIC -fno-common %s -o %s tests/unit/data/v8dbg_fixture.c", flags, so), 0);
	return read_file(so, m);
}

static int setup(void **state)
{
	(void)state;
	elf_version(EV_CURRENT);
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return run_cmd("rm -rf %s", dir);
}

static void expect_node20(const struct v8_meta *m)
{
	assert_true(m->found);
	assert_int_equal(m->v[V8_FP_CONTEXT], -8);
	assert_int_equal(m->v[V8_FP_FUNCTION], -16);
	assert_int_equal(m->v[V8_FP_BYTECODE_ARRAY], -32);
	assert_int_equal(m->v[V8_FP_BYTECODE_OFFSET], -40);
	assert_int_equal(m->v[V8_FT_ENTRY], 1);
	assert_int_equal(m->v[V8_FT_INTERPRETED], 13);
	assert_int_equal(m->v[V8_FT_TURBOFAN], 16);
	assert_int_equal(v8_frame_marker(m, V8_FT_STUB), 34);
	assert_int_equal(m->v[V8_T_JS_FUNCTION], 2066);
	assert_int_equal(m->v[V8_T_SFI], 262);
	assert_int_equal(m->v[V8_O_FN_SHARED], 24);
	assert_int_equal(m->v[V8_O_MAP_TYPE], 12);
	assert_int_equal(m->v[V8_STR_NOT_STRING_MASK], -128);
	/* Zero-valued constants live in .bss: read as 0, and present. */
	assert_true(m->has[V8_SMI_TAG]);
	assert_int_equal(m->v[V8_SMI_TAG], 0);
	assert_int_equal(m->v[V8_O_MAP], 0);
	assert_true(m->builtins_lo && m->builtins_hi > m->builtins_lo);
	/* What splitting optimized frames into their inlined functions reads. */
	assert_int_equal(m->v[V8_T_INSTRUCTION_STREAM], 252);
	assert_int_equal(m->v[V8_O_CODE_SPT], 24);
	assert_int_equal(m->v[V8_DD_SFI], 6);
	assert_int_equal(m->v[V8_DD_INLINING_POSITIONS], 7);
	assert_int_equal(m->v[V8_CODE_KIND_BASELINE], 11);
}

static void test_machine_node(void **state)
{
	struct v8_meta m;

	(void)state;
	if (access("/usr/bin/node", R_OK) != 0)
		skip_because("/usr/bin/node is not installed (apt-get install nodejs)");
	assert_int_equal(read_file("/usr/bin/node", &m), 0);
	assert_true(m.is_v8);
	assert_true(m.nsyms > 400);
	if (m.v[V8_FT_INTERPRETED] != 13)
		skip_because("/usr/bin/node is not Node 20 (V8 11.3): its frame types differ from the fixture's");
	expect_node20(&m);
}

static void test_fixture(void **state)
{
	struct v8_meta m;

	(void)state;
	assert_int_equal(read_fixture("", &m), 0);
	expect_node20(&m);
	assert_int_equal(m.nsyms, V8__N); /* each constant once */
	/* Bytecodes::kBytecodeSizes: its address, and its row length from its size */
	assert_int_not_equal(m.bc_sizes, 0);
	assert_int_equal(m.bc_count, 6);
	assert_int_equal(read_fixture("-DNO_BYTECODE_SIZES", &m), 0);
	assert_int_equal(m.bc_sizes, 0);
	assert_int_equal(m.bc_count, 0);
}

static void test_older_names(void **state)
{
	struct v8_meta m;
	char why[256];

	(void)state;
	/* Node 18's V8 calls TurboFan's frame OptimizedFrame. */
	assert_int_equal(read_fixture("-DOLD_NAMES", &m), 0);
	assert_int_equal(m.v[V8_FT_TURBOFAN], 16);
	/* V8 12 (Node 22) writes a field's type "Tagged_T_" and calls the script field
	 * raw_script: the same values. */
	assert_int_equal(read_fixture("-DV8_12_NAMES", &m), 0);
	expect_node20(&m);
	assert_int_equal(m.v[V8_O_SFI_NAME], 16);
	assert_int_equal(m.v[V8_O_SFI_SCRIPT], 32);
	assert_int_equal(m.v[V8_T_INTERNALIZED], 8);
	assert_int_equal(m.v[V8_O_CODE_ISTREAM], 32); /* "Tagged_InstructionStream_" */
	assert_int_equal(m.v[V8_T_TRUSTED_BYTE_ARRAY], 212);
	/* A missing constant is named; a value out of range is named with it. */
	assert_int_equal(read_fixture("-DDROP_FP_FUNCTION", &m), -ENOENT);
	assert_false(m.found);
	assert_non_null(strstr(v8_meta_why(&m, -ENOENT, why, sizeof(why)), "v8dbg_off_fp_function"));
	assert_int_equal(read_fixture("-DFP_FUNCTION=13", &m), -EBADMSG);
	assert_non_null(strstr(v8_meta_why(&m, -EBADMSG, why, sizeof(why)), "v8dbg_off_fp_function = 13"));
	assert_int_equal(read_fixture("-DFP_FUNCTION=-4096", &m), -EBADMSG);
	/* Pointer compression: tagged words of 4 bytes, which the walk does not read. */
	assert_int_equal(read_fixture("-DTAGGED_SIZE=4", &m), -EOPNOTSUPP);
	assert_non_null(strstr(v8_meta_why(&m, -EOPNOTSUPP, why, sizeof(why)), "TaggedSize = 4"));
}

static void test_without_metadata(void **state)
{
	char src[256], so[256];
	struct v8_meta m;

	(void)state;
	/* V8's builtins without the constants: a V8 built without post-mortem support. */
	snprintf(src, sizeof(src), "%s/b.c", dir);
	snprintf(so, sizeof(so), "%s/b.so", dir);
	assert_int_equal(run_cmd("printf 'void Builtins_JSEntry(void) {}\\nint v8_other = 3;\\n' > %s && "
				 "cc -shared -fPIC -o %s %s", src, so, src), 0);
	assert_int_equal(read_file(so, &m), -ENODATA);
	assert_true(m.is_v8);
	assert_false(m.found);
	/* No V8 at all: nothing to say. */
	assert_int_equal(read_file("/proc/self/exe", &m), 0);
	assert_false(m.is_v8);
	assert_false(m.found);
	assert_int_equal(v8_meta_read(NULL, &m), -EINVAL);
}

/* The fixture with its bytes garbled or cut: every result is an answer, never a
 * crash (the sanitizer build runs this), and nothing garbled is "found" with values
 * out of range. */
static void test_garbled(void **state)
{
	char so[256];
	struct v8_meta m;
	uint8_t *buf;
	size_t len;
	FILE *f;

	(void)state;
	assert_int_equal(read_fixture("", &m), 0);
	snprintf(so, sizeof(so), "%s/f.so", dir);
	f = fopen(so, "rb");
	assert_non_null(f);
	buf = malloc(1 << 20);
	assert_non_null(buf);
	len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	srand(29);
	for (int round = 0; round < 400; round++) {
		uint8_t *copy = malloc(len);
		size_t n = round % 4 == 0 ? (size_t)rand() % len : len;
		Elf *elf;

		assert_non_null(copy);
		memcpy(copy, buf, len);
		for (int k = 0; k < 1 + round % 16; k++)
			copy[(size_t)rand() % len] = (uint8_t)rand();
		elf = elf_memory((char *)copy, n);
		if (elf) {
			if (v8_meta_read(elf, &m) == 0 && m.found)
				assert_true(m.v[V8_FP_FUNCTION] % 8 == 0 && m.v[V8_O_FN_SHARED] >= 0);
			elf_end(elf);
		}
		free(copy);
	}
	free(buf);
}

/* A v8_procs map of one entry, as the sampler's would be. */
struct one_proc {
	struct prowl_v8_proc vp;
	uint32_t pid;
	int sets;
};

static int one_set(void *ctx, uint32_t pid, const struct prowl_v8_proc *vp)
{
	struct one_proc *o = ctx;

	o->pid = pid;
	o->vp = *vp;
	o->sets++;
	return 0;
}

static int one_get(void *ctx, uint32_t pid, struct prowl_v8_proc *ret)
{
	struct one_proc *o = ctx;

	if (!o->sets || pid != o->pid)
		return -ENOENT;
	*ret = o->vp;
	return 0;
}

/* A process whose mappings changed keeps its registration (its generation, and with it what
 * was named of it) while its V8 is laid out the same; an exec, or another layout, does not. */
static void test_registration_kept(void **state)
{
	struct one_proc o = { 0 };
	const struct maps_io io = { .ctx = &o, .v8_proc_set = one_set, .v8_proc_get = one_get };
	struct v8_file vf;

	(void)state;
	assert_int_equal(read_fixture("", &vf.meta), 0);
	assert_int_equal(v8_proc_register(&io, 7, &vf, 0x400000, 1, 0x500000, 0x900000, 0, false), 0);
	assert_int_equal(o.sets, 1);
	assert_int_equal(o.vp.gen, 1);
	assert_int_equal(o.vp.builtins_low, vf.meta.builtins_lo + 0x400000);
	/* Reloaded, the same: kept. */
	assert_int_equal(v8_proc_register(&io, 7, &vf, 0x400000, 2, 0x500000, 0x900000, 0, true), 0);
	assert_int_equal(o.sets, 1);
	assert_int_equal(o.vp.gen, 1);
	/* After an exec the same layout is a new process. */
	assert_int_equal(v8_proc_register(&io, 7, &vf, 0x400000, 3, 0x500000, 0x900000, 0, false), 0);
	assert_int_equal(o.sets, 2);
	assert_int_equal(o.vp.gen, 3);
	/* Its builtins remapped, its text moved, or another process: registered anew. */
	assert_int_equal(v8_proc_register(&io, 7, &vf, 0x400000, 4, 0x500000, 0x900000, 0x7f0000000000, true), 0);
	assert_int_equal(o.vp.gen, 4);
	assert_int_equal(o.vp.copy_low, vf.meta.builtins_lo + 0x7f0000000000);
	assert_int_equal(v8_proc_register(&io, 7, &vf, 0x400000, 5, 0x500000, 0xa00000, 0x7f0000000000, true), 0);
	assert_int_equal(o.vp.gen, 5);
	assert_int_equal(v8_proc_register(&io, 8, &vf, 0x400000, 6, 0x500000, 0xa00000, 0x7f0000000000, true), 0);
	assert_int_equal(o.vp.gen, 6);
	assert_int_equal(o.sets, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_machine_node),
		cmocka_unit_test(test_fixture),
		cmocka_unit_test(test_older_names),
		cmocka_unit_test(test_without_metadata),
		cmocka_unit_test(test_garbled),
		cmocka_unit_test(test_registration_kept),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

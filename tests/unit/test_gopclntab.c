/* test_gopclntab.c: unit tests of the .gopclntab reader on the Go workload built without
 * symbols (-s -w): names at nm's addresses of the unstripped build, and damaged tables. */
#include "testutil.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>

#include "gopclntab.h"

static char stripped[PATH_MAX + 64], full[PATH_MAX + 64];
static uint8_t *image; /* the stripped build, in memory */
static size_t image_size;

static int setup(void **state)
{
	char self[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct stat st;
	FILE *f;

	(void)state;
	if (n < 0)
		return -1;
	self[n] = 0;
	slash = strrchr(self, '/');
	*slash = 0;
	/* build/tests/test_gopclntab -> build/workloads/gosplit{,_stripped} */
	snprintf(stripped, sizeof(stripped), "%s/../workloads/gosplit_stripped", self);
	snprintf(full, sizeof(full), "%s/../workloads/gosplit", self);
	if (stat(stripped, &st) < 0)
		return 0; /* the tests skip */
	image_size = (size_t)st.st_size;
	image = malloc(image_size);
	f = fopen(stripped, "rb");
	if (!image || !f || fread(image, 1, image_size, f) != image_size)
		return -1;
	fclose(f);
	elf_version(EV_CURRENT);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(image);
	return 0;
}

/* nm's address of sym in the unstripped build. */
static uint64_t nm_addr(const char *sym)
{
	char cmd[PATH_MAX + 128], line[512];
	uint64_t addr = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm %s", full);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char name[400], type;
		unsigned long long a;

		if (sscanf(line, "%llx %c %399s", &a, &type, name) == 3 && strcmp(name, sym) == 0)
			addr = a;
	}
	pclose(p);
	assert_true(addr != 0);
	return addr;
}

/* gopcln_open() on a copy of the image with `len` bytes at the table's offset `at`
 * replaced by `bytes`. */
static int open_damaged(uint64_t at, const void *bytes, size_t len)
{
	uint8_t *copy = malloc(image_size);
	struct gopcln *g = NULL;
	Elf *elf;
	int r;

	assert_non_null(copy);
	memcpy(copy, image, image_size);
	memcpy(copy + at, bytes, len);
	elf = elf_memory((char *)copy, image_size);
	assert_non_null(elf);
	r = gopcln_open(elf, &g);
	if (r == 0) {
		/* Whatever it accepted must still be safe to look up. */
		struct gopcln_frame fr[8];
		size_t n;

		for (uint64_t pc = 0x401000; pc < 0x500000; pc += 0x333)
			gopcln_lookup(g, pc, fr, 8, &n);
	}
	gopcln_free(g);
	elf_end(elf);
	free(copy);
	return r;
}

/* The table format the Go toolchain that built the workload writes: `go version FILE`
 * names the release (go1.N...); 1.18 and 1.19 write the 118 layout, 1.20 and later 120. */
static int expected_version(void)
{
	char cmd[sizeof(stripped) + 32], line[256];
	int minor = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "go version %s 2>/dev/null", stripped);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (fgets(line, sizeof(line), p)) {
		const char *v = strstr(line, "go1.");

		if (v)
			minor = atoi(v + 4);
	}
	pclose(p);
	assert_true(minor >= 18); /* older Go writes tables prowl does not read */
	return minor >= 20 ? 120 : 118;
}

/* The file offset of .gopclntab. */
static uint64_t table_offset(void)
{
	Elf *elf = elf_memory((char *)image, image_size);
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	uint64_t off = 0;

	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && strcmp(elf_strptr(elf, shstrndx, sh.sh_name), ".gopclntab") == 0)
			off = sh.sh_offset;
	}
	elf_end(elf);
	assert_true(off != 0);
	return off;
}

static void test_names_at_nm_addresses(void **state)
{
	static const char *const funcs[] = { "main.leafGoAlpha", "main.leafGoBeta", "main.main", "runtime.main" };
	struct gopcln *g = NULL;
	struct gopcln_frame fr[8];
	int has_inline;
	size_t n;
	Elf *elf;

	(void)state;
	if (!image)
		skip_because("no go on this machine: build/workloads/gosplit_stripped is not built");
	elf = elf_memory((char *)image, image_size);
	assert_int_equal(gopcln_open(elf, &g), 0);
	assert_int_equal(gopcln_version(g, &has_inline), expected_version());
	for (size_t i = 0; i < sizeof(funcs) / sizeof(funcs[0]); i++) {
		uint64_t a = nm_addr(funcs[i]);

		gopcln_lookup(g, a, fr, 8, &n);
		assert_true(n >= 1);
		assert_string_equal(fr[n - 1].function, funcs[i]);
		assert_true(fr[n - 1].line > 0);
		assert_non_null(fr[n - 1].file);
	}
	gopcln_lookup(g, 0x10, fr, 8, &n); /* below the text */
	assert_int_equal(n, 0);
	gopcln_free(g);
	elf_end(elf);
}

static void test_damaged_tables(void **state)
{
	const uint32_t go12 = 0xfffffffb, junk = 0x12345678;
	const uint64_t huge = 1ull << 40, zero = 0;
	const uint8_t bad_quantum = 3;
	uint64_t t;

	(void)state;
	if (!image)
		skip_because("no go on this machine: build/workloads/gosplit_stripped is not built");
	t = table_offset();
	assert_int_equal(open_damaged(t, &go12, 4), -ENOTSUP);  /* Go 1.2-1.17 */
	assert_int_equal(open_damaged(t, &junk, 4), -EBADMSG);
	assert_int_equal(open_damaged(t + 6, &bad_quantum, 1), -EBADMSG);
	assert_int_equal(open_damaged(t + 8, &huge, 8), -EBADMSG);  /* nfunc */
	assert_int_equal(open_damaged(t + 8, &zero, 8), -EBADMSG);
	for (int w = 3; w < 8; w++) /* each table offset past the end */
		assert_int_equal(open_damaged(t + 8 + 8 * (uint64_t)w, &huge, 8), -EBADMSG);
	/* Damage inside the tables: lookups stay inside the section. */
	for (uint64_t at = 72; at < 40000; at += 997) {
		uint32_t v = 0xffffffffu;

		open_damaged(t + at, &v, 4);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_at_nm_addresses),
		cmocka_unit_test(test_damaged_tables),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

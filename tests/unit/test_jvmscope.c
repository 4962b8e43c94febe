/* test_jvmscope.c: an nmethod's debug information (PcDescs, scope records, metadata) laid
 * out as HotSpot lays it, in both layouts and both integer codings, and garbled copies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jvmscope.h"

/* The JVM's memory: one buffer at BASE. The nmethod is at BASE; its fields at the
 * offsets below; PcDescs, scopes and metadata follow it (old layout), or PcDescs and
 * scopes in an "immutable" part and metadata in a "mutable" one (new layout). */
#define BASE   0x7f0000100000ull
#define MEMLEN 4096
#define METHOD_A 0x7f00aaaa0000ull /* the nmethod's own method (outermost) */
#define METHOD_B 0x7f00bbbb0000ull /* inlined into A */
#define METHOD_C 0x7f00cccc0000ull /* inlined into B */

static uint8_t mem[MEMLEN];

static int mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < BASE || addr - BASE > MEMLEN || len > MEMLEN - (addr - BASE))
		return -EFAULT;
	memcpy(buf, mem + (addr - BASE), len);
	return 0;
}

static const struct jvm_mem jmem = { mem_read, NULL };

static void put32(size_t at, int32_t v)
{
	memcpy(mem + at, &v, 4);
}

static void put64(size_t at, uint64_t v)
{
	memcpy(mem + at, &v, 8);
}

/* UNSIGNED5 (x = 1) or the older coding (x = 0). */
static size_t put_u5(size_t at, uint32_t v, unsigned int x)
{
	const uint32_t l = 192 - x;

	for (int i = 0; i < 4 && v >= l; i++) {
		mem[at++] = (uint8_t)(l + (v - l) % 64 + x);
		v = (v - l) / 64;
	}
	mem[at++] = (uint8_t)(v + x);
	return at;
}

/* A scope record: sender offset, method index (from 1), bci + 1, then three
 * offsets prowl does not read. */
static size_t put_scope(size_t at, uint32_t sender, uint32_t idx, int32_t bci, unsigned int x)
{
	at = put_u5(at, sender, x);
	at = put_u5(at, idx, x);
	at = put_u5(at, (uint32_t)(bci + 1), x);
	for (int i = 0; i < 3; i++)
		at = put_u5(at, 0, x);
	return at;
}

/* Field offsets in the nmethod (as a JVM's tables would give them). */
enum { F_PCS = 0x10, F_PCS_END = 0x14, F_DATA = 0x18, F_DATA_END = 0x20, F_META = 0x24, F_BASE = 0x28,
       F_MBASE = 0x30, F_META_END = 0x38 };
/* Where things lie, from BASE. */
enum { DATA = 0x100, PCS = 0x200, META = 0x400, IMM = 0x800, MUT = 0xc00 };

static uint32_t rec_outer, rec_mid, rec_inner;

/* The PcDescs: pc offsets 10 (A only), 40 (C in B in A), 100 (B in A) and the end
 * sentinel; the scopes: A at bci 7, B at bci 3 (inlined at A's 7), C at its entry. */
static struct prowl_java_proc layout(bool newer, unsigned int jdk)
{
	unsigned int x = jdk >= 20;
	size_t pcs = newer ? IMM : PCS, data = newer ? IMM + 0x100 : DATA, meta = newer ? MUT + 0x20 : META;
	size_t at = data + 1; /* offset 0 is serialized_null */
	struct prowl_java_proc jp = { .flags = PROWL_JAVA_SCOPES | (newer ? PROWL_JAVA_SCOPES_NEW : 0),
				      .jdk_major = (uint16_t)jdk, .pd_size = 16, .pd_pc = 0, .pd_scope = 4,
				      .sc_pcs = F_PCS, .sc_pcs_end = F_PCS_END, .sc_data = F_DATA,
				      .sc_data_end = F_DATA_END, .sc_meta = F_META, .sc_base = F_BASE,
				      .sc_meta_base = F_MBASE, .sc_meta_end = F_META_END };
	const int32_t pcoff[4] = { 10, 40, 100, 0x7fffffff };

	memset(mem, 0, sizeof(mem));
	rec_outer = (uint32_t)(at - data);
	at = put_scope(at, 0, 1, 7, x);
	rec_mid = (uint32_t)(at - data);
	at = put_scope(at, rec_outer, 2, 3, x);
	rec_inner = (uint32_t)(at - data);
	at = put_scope(at, rec_mid, 3, -1, x);
	const uint32_t dec[4] = { rec_outer, rec_inner, rec_mid, 0 };
	for (int i = 0; i < 4; i++) {
		put32(pcs + 16 * i, pcoff[i]);
		put32(pcs + 16 * i + 4, (int32_t)dec[i]);
	}
	put64(meta, METHOD_A);
	put64(meta + 8, METHOD_B);
	put64(meta + 16, METHOD_C);
	if (newer) {
		put64(F_BASE, BASE + IMM);
		put64(F_MBASE, BASE + MUT);
		put32(F_PCS, 0);
		put32(F_PCS_END, 0x100);
		put32(F_DATA, 0x100);
		put32(F_DATA_END, 0x200);
		put32(F_META, 0x20);
		put32(F_META_END, 0x38);
	} else {
		put32(F_PCS, PCS);
		put32(F_PCS_END, PCS + 64);
		put64(F_DATA, BASE + DATA);
		put32(F_DATA_END, PCS); /* old: scopes end where PcDescs begin */
		put32(F_META, META);
		put64(F_META_END, BASE + META + 24);
		jp.sc_data_end = F_DATA_END;
	}
	return jp;
}

static void check_chains(const struct prowl_java_proc *jp)
{
	struct jvm_scope sc[JVM_SCOPE_MAX];
	size_t n;

	/* A pc inside the inlined C (leaf): the PcDesc at 40 is the first at or past 35. */
	assert_int_equal(jvm_scope_chain(&jmem, jp, BASE, 35, 1, sc, JVM_SCOPE_MAX, &n), 0);
	assert_int_equal(n, 3);
	assert_true(sc[0].method == METHOD_C && sc[0].bci == JVM_SCOPE_BCI_NONE);
	assert_true(sc[1].method == METHOD_B && sc[1].bci == 3);
	assert_true(sc[2].method == METHOD_A && sc[2].bci == 7);
	/* A return address 40 is recorded as 39: the call's PcDesc, not the next. */
	assert_int_equal(jvm_scope_chain(&jmem, jp, BASE, 39, 0, sc, JVM_SCOPE_MAX, &n), 0);
	assert_int_equal(n, 3);
	/* As a leaf pc, 40 is the PcDesc at 40; 41 the one at 100 (B in A). */
	assert_int_equal(jvm_scope_chain(&jmem, jp, BASE, 41, 1, sc, JVM_SCOPE_MAX, &n), 0);
	assert_int_equal(n, 2);
	assert_true(sc[0].method == METHOD_B && sc[1].method == METHOD_A);
	assert_int_equal(jvm_scope_chain(&jmem, jp, BASE, 5, 1, sc, JVM_SCOPE_MAX, &n), 0);
	assert_true(n == 1 && sc[0].method == METHOD_A && sc[0].bci == 7);
	/* The cap cuts the chain innermost first. */
	assert_int_equal(jvm_scope_chain(&jmem, jp, BASE, 35, 1, sc, 2, &n), 0);
	assert_int_equal(n, 2);
}

static void test_both_layouts_and_codings(void **state)
{
	struct prowl_java_proc jp;

	(void)state;
	jp = layout(false, 17);
	check_chains(&jp);
	jp = layout(false, 21);
	check_chains(&jp);
	jp = layout(true, 25);
	check_chains(&jp);
	/* The other coding of the same bytes is not read as a chain of these methods. */
	jp = layout(true, 25);
	jp.jdk_major = 17;
	{
		struct jvm_scope sc[JVM_SCOPE_MAX];
		size_t n = 0;
		int r = jvm_scope_chain(&jmem, &jp, BASE, 35, 1, sc, JVM_SCOPE_MAX, &n);

		assert_true(r < 0 || n != 3 || sc[2].method != METHOD_A || sc[0].method != METHOD_C);
	}
}

static void test_garbled(void **state)
{
	struct jvm_scope sc[JVM_SCOPE_MAX];
	struct prowl_java_proc jp;
	size_t n;

	(void)state;
	/* No scopes: nothing. */
	jp = layout(false, 17);
	jp.flags = 0;
	assert_int_equal(jvm_scope_chain(&jmem, &jp, BASE, 35, 1, sc, JVM_SCOPE_MAX, &n), -ENOENT);
	/* A sender at or past its record: a loop the walk refuses. */
	jp = layout(false, 17);
	put_scope(DATA + rec_mid, rec_inner, 2, 3, 0);
	assert_int_equal(jvm_scope_chain(&jmem, &jp, BASE, 35, 1, sc, JVM_SCOPE_MAX, &n), -EBADMSG);
	/* A method index past the metadata. */
	jp = layout(false, 17);
	put_scope(DATA + rec_outer, 0, 4, 7, 0);
	assert_int_equal(jvm_scope_chain(&jmem, &jp, BASE, 5, 1, sc, JVM_SCOPE_MAX, &n), -EBADMSG);
	/* Index 0 (null). */
	jp = layout(false, 17);
	put_scope(DATA + rec_outer, 0, 0, 7, 0);
	assert_int_equal(jvm_scope_chain(&jmem, &jp, BASE, 5, 1, sc, JVM_SCOPE_MAX, &n), -EBADMSG);
	/* PcDescs out of order. */
	jp = layout(false, 17);
	put32(PCS + 16, 5);
	assert_int_equal(jvm_scope_chain(&jmem, &jp, BASE, 35, 1, sc, JVM_SCOPE_MAX, &n), -EBADMSG);
	/* A decode offset past the scopes. */
	jp = layout(false, 17);
	put32(PCS + 4, 0x7000);
	assert_int_equal(jvm_scope_chain(&jmem, &jp, BASE, 5, 1, sc, JVM_SCOPE_MAX, &n), -EBADMSG);
	/* Regions reversed, unaligned, huge, or out of memory. */
	jp = layout(false, 17);
	put32(F_PCS_END, PCS - 16);
	assert_int_equal(jvm_scope_chain(&jmem, &jp, BASE, 5, 1, sc, JVM_SCOPE_MAX, &n), -EBADMSG);
	jp = layout(false, 17);
	put32(F_PCS_END, PCS + 60);
	assert_int_equal(jvm_scope_chain(&jmem, &jp, BASE, 5, 1, sc, JVM_SCOPE_MAX, &n), -EBADMSG);
	jp = layout(true, 25);
	put32(F_META_END, 0x7fffff00);
	assert_int_equal(jvm_scope_chain(&jmem, &jp, BASE, 5, 1, sc, JVM_SCOPE_MAX, &n), -EBADMSG);
	jp = layout(true, 25);
	put64(F_BASE, 0xffff800000000000ull);
	assert_int_equal(jvm_scope_chain(&jmem, &jp, BASE, 5, 1, sc, JVM_SCOPE_MAX, &n), -EFAULT);
	/* Random bytes over the whole memory: an error or a bounded chain. */
	unsigned int seed = 11;
	for (int round = 0; round < 3000; round++) {
		jp = layout(round & 1, round & 2 ? 25 : 17);
		for (int k = 0; k < 8; k++)
			mem[(size_t)rand_r(&seed) % MEMLEN] = (uint8_t)rand_r(&seed);
		if (jvm_scope_chain(&jmem, &jp, BASE, (uint32_t)rand_r(&seed) % 128, round & 4, sc, JVM_SCOPE_MAX,
				    &n) == 0) {
			assert_true(n >= 1 && n <= JVM_SCOPE_MAX);
			for (size_t i = 0; i < n; i++)
				assert_true(sc[i].method && !(sc[i].method & 7));
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_both_layouts_and_codings),
		cmocka_unit_test(test_garbled),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

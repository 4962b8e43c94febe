/* test_kallsyms_cache.c: the kernel's symbol index through the on-disk cache: the same
 * answers after a round trip (run-time code left out), a key per boot and module set,
 * and entries with a good checksum but bad contents refused without a crash. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "diskcache.h"
#include "kallsyms_cache.h"

static char dir[] = "/tmp/prowl-test-kcache.XXXXXX";
static char cdir[sizeof(dir) + 8];
static char boot[sizeof(dir) + 8], notes[sizeof(dir) + 8], mods[sizeof(dir) + 8];

static const char text[] = "ffffffff81000000 T _stext\n"
			   "ffffffff81000100 t __pfx_do_one\n"
			   "ffffffff81000110 t do_one\n"
			   "ffffffff81000200 D some_data\n"
			   "ffffffff81000300 T do_two\n"
			   "ffffffffa0000000 t ext4_fill_super\t[ext4]\n"
			   "ffffffffa0000400 t ext4_get_tree\t[ext4]\n"
			   "ffffffffa0001000 t bpf_prog_0123456789abcdef_prowl\t[bpf]\n"
			   "ffffffffa0002000 t ftrace_trampoline\t[__builtin__ftrace]\n"
			   "ffffffffa0003000 t xfs_iget\t[xfs]\n";

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(s, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(cdir, sizeof(cdir), "%s/cache", dir);
	snprintf(boot, sizeof(boot), "%s/boot", dir);
	snprintf(notes, sizeof(notes), "%s/notes", dir);
	snprintf(mods, sizeof(mods), "%s/mods", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	run_cmd("rm -rf %s", dir);
	return 0;
}

static struct kallsyms_ident_paths paths(void)
{
	return (struct kallsyms_ident_paths){ .boot_id = boot, .notes = notes, .modules = mods };
}

static struct kallsyms *parse(const char *s)
{
	struct kallsyms *k = NULL;
	FILE *f = fmemopen((void *)s, strlen(s), "r");

	assert_non_null(f);
	assert_int_equal(kallsyms_parse(f, &k), 0);
	fclose(f);
	return k;
}

/* What kallsyms_find answers for addr, as one string ("-" for no symbol). */
static void answer(const struct kallsyms *k, uint64_t addr, char *buf, size_t len)
{
	struct ksym s;

	if (!kallsyms_find(k, addr, &s))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%llx %s%s %s", (unsigned long long)s.addr, s.prefix, s.name,
			 s.module ? s.module : "(core)");
}

static struct diskcache *open_cache(void)
{
	struct diskcache *dc = NULL;

	run_cmd("rm -rf %s", cdir);
	assert_int_equal(diskcache_open(cdir, 64 << 20, &dc), 0);
	return dc;
}

static void test_round_trip(void **state)
{
	struct kallsyms_ident_paths p = paths();
	struct diskcache_key k;
	struct diskcache *dc = open_cache();
	struct kallsyms *a = parse(text), *b = NULL;
	char x[256], y[256];

	(void)state;
	write_file(boot, "1b1c7e4e-0000-4000-8000-000000000001\n");
	write_file(notes, "kernel build id bytes");
	write_file(mods, "ext4 1000000 0 - Live 0xffffffffa0000000\n");
	assert_int_equal(kallsyms_cache_key(&p, &k), 0);
	assert_int_equal(kallsyms_cached(dc, &k, &b), -ENOENT);
	kallsyms_keep(dc, &k, a);
	assert_int_equal(kallsyms_cached(dc, &k, &b), 0);
	assert_int_equal(b->n, a->n - 2); /* [bpf] and [__builtin__ftrace] left out */
	for (uint64_t addr = 0xffffffff80fffff0ull; addr < 0xffffffff81000400ull; addr += 8) {
		answer(a, addr, x, sizeof(x));
		answer(b, addr, y, sizeof(y));
		assert_string_equal(x, y);
	}
	answer(b, 0xffffffffa0000410ull, y, sizeof(y));
	assert_string_equal(y, "ffffffffa0000400 ext4_get_tree ext4");
	answer(b, 0xffffffff81000104ull, y, sizeof(y));
	assert_string_equal(y, "ffffffff81000100 __pfx_do_one (core)");
	answer(b, 0xffffffffa0003010ull, y, sizeof(y));
	assert_string_equal(y, "ffffffffa0003000 xfs_iget xfs");
	/* A BPF program's address is no longer named after the program. */
	answer(b, 0xffffffffa0001010ull, y, sizeof(y));
	assert_null(strstr(y, "bpf_prog"));
	kallsyms_free(a);
	kallsyms_free(b);
	diskcache_free(dc);
}

/* Another boot (KASLR moves everything), another module set, or another kernel:
 * another key. A missing boot id or kernel note: no key, nothing cached. */
static void test_key(void **state)
{
	struct kallsyms_ident_paths p = paths();
	struct diskcache_key k1, k2, k3, k4;

	(void)state;
	write_file(boot, "1b1c7e4e-0000-4000-8000-000000000001\n");
	write_file(notes, "kernel build id bytes");
	write_file(mods, "ext4 1000000 0 - Live 0xffffffffa0000000\n");
	assert_int_equal(kallsyms_cache_key(&p, &k1), 0);
	assert_int_equal(kallsyms_cache_key(&p, &k2), 0);
	assert_memory_equal(&k1, &k2, sizeof(k1));
	write_file(mods, "ext4 1000000 0 - Live 0xffffffffa0001000\n");
	assert_int_equal(kallsyms_cache_key(&p, &k2), 0);
	assert_memory_not_equal(&k1, &k2, sizeof(k1));
	write_file(boot, "1b1c7e4e-0000-4000-8000-000000000002\n");
	assert_int_equal(kallsyms_cache_key(&p, &k3), 0);
	assert_memory_not_equal(&k2, &k3, sizeof(k1));
	write_file(notes, "another kernel");
	assert_int_equal(kallsyms_cache_key(&p, &k4), 0);
	assert_memory_not_equal(&k3, &k4, sizeof(k1));
	/* No /proc/modules (a kernel without modules) is a key too. */
	unlink(mods);
	assert_int_equal(kallsyms_cache_key(&p, &k4), 0);
	unlink(boot);
	assert_true(kallsyms_cache_key(&p, &k4) < 0);
	/* The host's own files give a key. */
	assert_int_equal(kallsyms_cache_key(&kallsyms_ident_host, &k4), 0);
	assert_int_equal(k4.kind, DISKCACHE_KALLSYMS);
}

struct kc_header { /* as kallsyms_cache.c writes it */
	uint64_t n, nmods, names_len, base;
	uint32_t wide, pad;
};

/* One entry of n 32-bit symbols: addrs, name offsets, module indexes, one
 * module "m" at offset 0 of the names "m\0f\0g\0". */
static size_t forge(char *buf, struct kc_header h, const uint32_t *addr, const uint32_t *name, const uint16_t *mod,
		    const char *names)
{
	uint32_t mods0 = 0;
	char *p = buf;

	memcpy(p, &h, sizeof(h)), p += sizeof(h);
	memcpy(p, addr, h.n * 4), p += h.n * 4;
	memcpy(p, name, h.n * 4), p += h.n * 4;
	memcpy(p, mod, h.n * 2), p += h.n * 2;
	for (uint64_t i = 0; i < h.nmods; i++)
		memcpy(p, &mods0, 4), p += 4;
	memcpy(p, names, h.names_len), p += h.names_len;
	return (size_t)(p - buf);
}

/* Entries whose checksum is right (written by a bug, an older prowl, or by
 * hand) but whose index would read out of bounds or search wrongly. */
static void test_bad_entries(void **state)
{
	struct diskcache *dc = open_cache();
	struct diskcache_key k = { .kind = DISKCACHE_KALLSYMS, .build_id_len = 32 };
	struct kc_header good = { .n = 3, .nmods = 1, .names_len = 6, .base = 0xffffffff00000000ull };
	uint32_t addr[3] = { 0x100, 0x200, 0x300 }, name[3] = { 2, 4, 2 }, bad_addr[3] = { 0x100, 0x300, 0x200 };
	uint32_t bad_name[3] = { 2, 6, 2 };
	uint16_t mod[3] = { 0, 1, 0 }, bad_mod[3] = { 0, 2, 0 };
	struct kallsyms *ks = NULL;
	struct kc_header h;
	char buf[512];
	size_t len;

	(void)state;
	len = forge(buf, good, addr, name, mod, "m\0f\0g\0");
	assert_int_equal(diskcache_put(dc, &k, buf, len), 0);
	assert_int_equal(kallsyms_cached(dc, &k, &ks), 0); /* the forger is right */
	assert_int_equal(ks->n, 3);
	kallsyms_free(ks);
	ks = NULL;
#define REFUSED(l)                                                       \
	do {                                                             \
		assert_int_equal(diskcache_put(dc, &k, buf, (l)), 0);    \
		assert_int_equal(kallsyms_cached(dc, &k, &ks), -ENOENT); \
		assert_null(ks);                                         \
	} while (0)
	REFUSED(forge(buf, good, bad_addr, name, mod, "m\0f\0g\0")); /* out of order */
	REFUSED(forge(buf, good, addr, bad_name, mod, "m\0f\0g\0")); /* name past the blob */
	REFUSED(forge(buf, good, addr, name, bad_mod, "m\0f\0g\0")); /* no such module */
	REFUSED(forge(buf, good, addr, name, mod, "m\0f\0gg"));      /* last name unterminated */
	REFUSED(len - 1);                                            /* short */
	REFUSED(sizeof(h) - 1);
	len = forge(buf, good, addr, name, mod, "m\0f\0g\0");
	h = good, h.n = UINT64_MAX / 2; /* sizes whose sum would overflow */
	memcpy(buf, &h, sizeof(h));
	REFUSED(len);
	h = good, h.wide = 7;
	REFUSED(forge(buf, h, addr, name, mod, "m\0f\0g\0"));
	h = good, h.names_len = 0;
	REFUSED(forge(buf, h, addr, name, mod, ""));
	diskcache_free(dc);
}

/* The host's own kallsyms: the cached index answers as the parsed one. */
static void test_host(void **state)
{
	struct diskcache *dc = open_cache();
	struct diskcache_key k;
	struct kallsyms *a = NULL, *b = NULL;
	char x[1200], y[1200];
	size_t step;

	(void)state;
	if (kallsyms_load("/proc/kallsyms", &a) < 0 || a->hidden || a->n < 1000)
		skip_because("/proc/kallsyms is not readable with addresses here");
	assert_int_equal(kallsyms_cache_key(&kallsyms_ident_host, &k), 0);
	kallsyms_keep(dc, &k, a);
	assert_int_equal(kallsyms_cached(dc, &k, &b), 0);
	assert_true(b->n + 1000 > a->n && b->n <= a->n);
	step = a->n / 997;
	for (size_t i = 0; i < a->n; i += step) {
		answer(a, kallsyms_addr(a, i) + 1, x, sizeof(x));
		answer(b, kallsyms_addr(a, i) + 1, y, sizeof(y));
		if (strstr(x, " bpf") || strstr(x, "__builtin__"))
			continue;
		assert_string_equal(x, y);
	}
	kallsyms_free(a);
	kallsyms_free(b);
	diskcache_free(dc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_key),
		cmocka_unit_test(test_bad_entries),
		cmocka_unit_test(test_host),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

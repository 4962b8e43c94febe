/* test_symbolizer_limits.c: the symbolizer's memory caps: frame cache LRU, module
 * close/reopen by count and heap, page release, process and gone-pid eviction, churn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer.h"
#include "testutil.h"

#define NVARIANTS 5
#define NFUNCS 64

static char dir[] = "/tmp/prowl-symlim.XXXXXX";
static char src[PATH_MAX];

/* One build of the test program: -DVARIANT=n renames every function, so each
 * variant has its own build id and its own names. */
struct variant {
	char path[PATH_MAX];
	uint64_t fn_addr[NFUNCS]; /* ELF vaddr of fn_<k>_v<n>, from nm */
	uint64_t text_start, text_end; /* [start, end) of .text-ish code: min..max fn */
};
static struct variant vars[NVARIANTS];

static int write_source(void)
{
	FILE *f = fopen(src, "w");

	if (!f)
		return -1;
	fputs("#include <unistd.h>\n"
	      "#define CAT2(a, b) a##b\n"
	      "#define CAT(a, b) CAT2(a, b)\n"
	      "#define NAME(k) CAT(CAT(fn_, k), CAT(_v, VARIANT))\n"
	      "static volatile unsigned long sink;\n"
	      "#define F(k) __attribute__((noinline)) unsigned long NAME(k)(unsigned long x) \\\n"
	      "{ unsigned long r = x; for (unsigned long i = 0; i < x; i++) r = r * 31 + (i ^ sink) + k; return r; }\n",
	      f);
	for (int k = 0; k < NFUNCS; k++)
		fprintf(f, "F(%d)\n", k);
	/* "wait": say so on stdout once running, then read stdin until it closes. */
	fputs("int main(int argc, char **argv)\n{\n\tchar c;\n\tunsigned long t = 0;\n\t(void)argv;\n"
	      "\tif (argc > 1) {\n\t\tif (write(1, \"r\", 1) != 1)\n\t\t\treturn 1;\n"
	      "\t\twhile (read(0, &c, 1) > 0)\n\t\t\t;\n\t\treturn 0;\n\t}\n",
	      f);
	for (int k = 0; k < NFUNCS; k++)
		fprintf(f, "\tt += NAME(%d)(t + %d);\n", k, k);
	fputs("\treturn (int)t;\n}\n", f);
	return fclose(f) == 0 ? 0 : -1;
}

static int read_symbols(struct variant *v, int n)
{
	char cmd[PATH_MAX + 16], line[512], name[256];
	unsigned long long a;
	int found = 0;
	char t;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "nm '%s'", v->path);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	v->text_start = UINT64_MAX;
	while (fgets(line, sizeof(line), f)) {
		int k, vn;

		if (sscanf(line, "%llx %c %255s", &a, &t, name) != 3 || sscanf(name, "fn_%d_v%d", &k, &vn) != 2 ||
		    vn != n || k < 0 || k >= NFUNCS)
			continue;
		v->fn_addr[k] = a;
		if (a < v->text_start)
			v->text_start = a;
		if (a > v->text_end)
			v->text_end = a;
		found++;
	}
	pclose(f);
	v->text_end += 64; /* into the last function */
	return found == NFUNCS ? 0 : -1;
}

static int setup(void **state)
{
	(void)state;
	unsetenv("DEBUGINFOD_URLS");
	if (!mkdtemp(dir))
		return -1;
	snprintf(src, sizeof(src), "%s/variant.c", dir);
	if (write_source() < 0)
		return -1;
	for (int i = 0; i < NVARIANTS; i++) {
		snprintf(vars[i].path, sizeof(vars[i].path), "%s/v%d", dir, i);
		if (run_cmd("cc -g -O1 -DVARIANT=%d -o '%s' '%s'", i, vars[i].path, src) != 0 ||
		    read_symbols(&vars[i], i) < 0)
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	run_cmd("rm -rf '%s'", dir);
	return 0;
}

static struct symbolizer *new_sym(uint32_t frames, uint32_t modules, uint32_t procs, uint32_t gone)
{
	struct symbolizer_opts o = {
		.kallsyms = "/nonexistent",
		.max_cached_frames = frames,
		.max_modules = modules,
		.max_processes = procs,
		.max_gone_pids = gone,
	};
	struct symbolizer *s = NULL;

	assert_int_equal(symbolizer_new(&o, &s), 0);
	return s;
}

static struct symbolizer_stats stats(struct symbolizer *s)
{
	struct symbolizer_stats st;

	symbolizer_get_stats(s, &st);
	return st;
}

static long rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = 0;
	fclose(f);
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A frame answer with its strings copied (they do not outlive the next call). */
struct answer {
	size_t n;
	bool ok;
	char text[512];
};

static void frames_text(struct symbolizer *s, const struct sym_module *m, uint64_t addr, struct answer *ret)
{
	struct sym_frame fr[SYM_MAX_INLINE];
	size_t pos = 0;

	assert_int_equal(symbolizer_frames(s, m, addr, fr, SYM_MAX_INLINE, &ret->n, &ret->ok), 0);
	assert_true(ret->n >= 1);
	ret->text[0] = 0;
	for (size_t i = 0; i < ret->n && pos < sizeof(ret->text); i++) {
		int w = snprintf(ret->text + pos, sizeof(ret->text) - pos, "%s|%s|%s|%d|%d;", fr[i].function,
				 fr[i].system_name ? fr[i].system_name : "-", fr[i].file ? fr[i].file : "-",
				 fr[i].line, fr[i].start_line);

		assert_true(w > 0);
		pos += (size_t)w;
	}
}

static void expect_function(struct symbolizer *s, const struct sym_module *m, uint64_t addr, int k, int n)
{
	struct sym_frame fr[SYM_MAX_INLINE];
	char want[64];
	size_t nf = 0;
	bool ok = false;

	snprintf(want, sizeof(want), "fn_%d_v%d", k, n);
	assert_int_equal(symbolizer_frames(s, m, addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
	assert_true(ok);
	assert_true(nf >= 1);
	assert_string_equal(fr[nf - 1].function, want);
	assert_non_null(fr[nf - 1].file);
	assert_non_null(strstr(fr[nf - 1].file, "variant.c"));
	assert_true(fr[nf - 1].line > 0);
}

/* Thousands of addresses through a 64-entry cache: the cap holds, evictions
 * are counted, and every answer equals the one of an uncapped symbolizer. */
static void test_frame_cache_cap(void **state)
{
	const struct variant *v = &vars[0];
	struct symbolizer *small = new_sym(64, 0, 0, 0), *big = new_sym(0, 0, 0, 0);
	const struct sym_module *ms, *mb;
	size_t naddr = (size_t)(v->text_end - v->text_start);
	struct answer *first = calloc(naddr, sizeof(*first)), a, b;
	struct symbolizer_stats st;
	uint64_t misses;

	(void)state;
	assert_non_null(first);
	assert_true(naddr > 1000);
	assert_int_equal(symbolizer_module_from_file(small, v->path, &ms), 0);
	assert_int_equal(symbolizer_module_from_file(big, v->path, &mb), 0);
	for (size_t i = 0; i < naddr; i++) {
		frames_text(small, ms, v->text_start + i, &first[i]);
		st = stats(small);
		assert_true(st.cached_frames <= 64);
	}
	st = stats(small);
	assert_int_equal(st.cached_frames, 64);
	assert_int_equal(st.frame_misses, naddr);
	assert_int_equal(st.frame_evictions, naddr - 64);
	/* The most recent 64 are hits, all others were evicted and come back equal. */
	misses = st.frame_misses;
	for (size_t i = naddr - 64; i < naddr; i++) {
		frames_text(small, ms, v->text_start + i, &a);
		assert_string_equal(a.text, first[i].text);
	}
	assert_int_equal(stats(small).frame_misses, misses);
	for (size_t i = 0; i < naddr; i++) {
		frames_text(small, ms, v->text_start + i, &a);
		frames_text(big, mb, v->text_start + i, &b);
		assert_string_equal(a.text, first[i].text);
		assert_string_equal(b.text, first[i].text);
		assert_int_equal(a.ok, first[i].ok);
		assert_int_equal(a.n, first[i].n);
	}
	st = stats(small);
	assert_int_equal(st.cached_frames, 64);
	assert_true(st.frame_evictions >= 2 * naddr - 128);
	/* A hit refreshes an entry: touched early, it survives 63 newer entries. */
	frames_text(small, ms, v->fn_addr[0], &a);
	for (size_t i = 0; i < 63; i++)
		frames_text(small, ms, v->fn_addr[1] + i, &b);
	misses = stats(small).frame_misses;
	frames_text(small, ms, v->fn_addr[0], &b);
	assert_int_equal(stats(small).frame_misses, misses);
	print_message("frame cache: %zu addresses, cap 64: %" PRIu64 " evictions, mem_bytes %" PRIu64
		      " (uncapped: %" PRIu32 " entries, %" PRIu64 " bytes)\n",
		      naddr, st.frame_evictions, st.mem_bytes, stats(big).cached_frames, stats(big).mem_bytes);
	free(first);
	symbolizer_free(small);
	symbolizer_free(big);
}

/* 5 binaries with distinct build ids, at most 2 open: modules are closed and
 * reopened on demand, and answers stay right. */
static void test_module_eviction(void **state)
{
	struct symbolizer *s = new_sym(8, 2, 0, 0);
	const struct sym_module *m[NVARIANTS];
	struct symbolizer_stats st;

	(void)state;
	for (int i = 0; i < NVARIANTS; i++) {
		assert_int_equal(symbolizer_module_from_file(s, vars[i].path, &m[i]), 0);
		assert_true(stats(s).open_modules <= 2);
	}
	for (int i = 0; i < NVARIANTS; i++)
		for (int j = 0; j < i; j++)
			assert_string_not_equal(m[i]->build_id, m[j]->build_id);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < NVARIANTS; i++) {
			int k = (round * 7 + i) % NFUNCS;

			/* A new address each round: a miss, so the module must be open. */
			expect_function(s, m[i], vars[i].fn_addr[k] + (uint64_t)round, k, i);
			st = stats(s);
			assert_true(st.open_modules <= 2);
		}
	}
	st = stats(s);
	assert_true(st.module_evictions >= 10);
	assert_true(st.module_reopens >= 10);
	assert_int_equal(st.modules, 2 + NVARIANTS); /* + kernel and [anon] */
	print_message("modules: %" PRIu32 " known, %" PRIu32 " open, %" PRIu64 " evictions, %" PRIu64 " reopens\n",
		      st.modules, st.open_modules, st.module_evictions, st.module_reopens);
	symbolizer_free(s);
}

/* Whether mallinfo2() sees this process's allocations (not under ASan, whose
 * allocator glibc's counters do not know). */
static bool heap_measurable(void)
{
	struct mallinfo2 a = mallinfo2(), b;
	char *volatile p = malloc(4 << 20);

	assert_non_null(p);
	p[0] = 1;
	b = mallinfo2();
	free(p);
	return b.uordblks + b.hblkhd >= a.uordblks + a.hblkhd + (4 << 20);
}

/* The heap cap closes modules by what libdw allocated for them: with a tiny
 * cap only the module in use stays open, with a large one all stay open (so
 * the count cap is not what closed them), and answers stay right. */
static void test_module_heap_cap(void **state)
{
	struct symbolizer_opts o = { .kallsyms = "/nonexistent", .max_modules = 48 };
	const struct sym_module *m[NVARIANTS];
	struct symbolizer_stats st;
	struct symbolizer *s;

	(void)state;
	if (!heap_measurable())
		skip_because("mallinfo2() sees no heap in this build (ASan's allocator), so the module heap cap "
			     "cannot work here; it runs on the normal build");
	for (int cap = 0; cap < 2; cap++) {
		o.max_module_heap = cap == 0 ? 1 : 64u << 20;
		assert_int_equal(symbolizer_new(&o, &s), 0);
		for (int i = 0; i < NVARIANTS; i++)
			assert_int_equal(symbolizer_module_from_file(s, vars[i].path, &m[i]), 0);
		for (int round = 0; round < 2; round++)
			for (int i = 0; i < NVARIANTS; i++) {
				int k = (round * 5 + i) % NFUNCS;

				expect_function(s, m[i], vars[i].fn_addr[k] + (uint64_t)round, k, i);
				st = stats(s);
				if (cap == 0)
					assert_int_equal(st.open_modules, 1);
				assert_true(st.open_module_bytes > 0);
			}
		st = stats(s);
		print_message("heap cap %zu: %" PRIu32 " open, %" PRIu64 " B measured, %" PRIu64 " evictions\n",
			      o.max_module_heap, st.open_modules, st.open_module_bytes, st.module_evictions);
		if (cap == 0) {
			assert_true(st.module_evictions >= 2 * NVARIANTS - 1);
			assert_true(st.module_reopens >= NVARIANTS);
		} else {
			assert_int_equal(st.open_modules, NVARIANTS);
			assert_int_equal(st.module_evictions, 0);
		}
		symbolizer_free(s);
	}
}

/* Resident KiB of this process's mappings of path (from /proc/self/smaps). */
static long mapped_rss_kib(const char *path)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[PATH_MAX + 128];
	bool in = false;
	long total = 0, kib;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		int off = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &a, &b, &off) == 2 && off > 0) {
			line[strcspn(line, "\n")] = 0;
			in = strcmp(line + off, path) == 0;
		} else if (in && sscanf(line, "Rss: %ld kB", &kib) == 1) {
			total += kib;
		}
	}
	fclose(f);
	return total;
}

/* symbolizer_release_pages() drops the resident pages of the open modules'
 * files except the headers, and the modules keep answering (the pages fault
 * back in). */
static void test_release_pages(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0, 0);
	const struct sym_module *m;
	long before, after, page_kib = sysconf(_SC_PAGESIZE) / 1024;

	(void)state;
	assert_int_equal(symbolizer_module_from_file(s, vars[0].path, &m), 0);
	for (int k = 0; k < NFUNCS; k++)
		expect_function(s, m, vars[0].fn_addr[k], k, 0);
	before = mapped_rss_kib(vars[0].path);
	symbolizer_release_pages(s);
	after = mapped_rss_kib(vars[0].path);
	print_message("%s: %ld KiB resident before, %ld KiB after release\n", vars[0].path, before, after);
	/* Kept: the ELF and program headers (page 0) and the section headers. */
	assert_true(before >= 4 * page_kib);
	assert_true(after <= 3 * page_kib);
	assert_true(after < before);
	for (int k = 0; k < NFUNCS; k++)
		expect_function(s, m, vars[0].fn_addr[k] + 1, k, 0);
	assert_true(mapped_rss_kib(vars[0].path) > after);
	symbolizer_free(s);
	assert_int_equal(mapped_rss_kib(vars[0].path), 0);
}

static struct symbolizer *new_inflating_sym(uint64_t max_bytes)
{
	struct symbolizer_opts o = { .kallsyms = "/nonexistent", .inflate_dir = dir, .inflate_max_bytes = max_bytes };
	struct symbolizer *s = NULL;

	assert_int_equal(symbolizer_new(&o, &s), 0);
	return s;
}

/* Entries of dir other than the test's own files (v0.., variant.c, vz). */
static int stray_files(void)
{
	char cmd[PATH_MAX + 64], line[64];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep -cvE '^(v[0-9]+|variant\\.c|vz)$'", dir);
	f = popen(cmd, "r");
	assert_non_null(f);
	if (fgets(line, sizeof(line), f))
		n = atoi(line);
	pclose(f);
	return n;
}

/* A binary built with compressed DWARF (gcc -gz): with an inflate directory
 * the symbolizer hands libdw an inflated copy (counted, gone after), and every
 * answer equals the in-memory inflation's; past the budget it falls back. */
static void test_inflate_compressed_dwarf(void **state)
{
	char vz[PATH_MAX];
	struct symbolizer *mem, *file, *tight;
	const struct sym_module *mm, *mf, *mt;
	struct answer a, b, c;
	struct symbolizer_stats st;

	(void)state;
	snprintf(vz, sizeof(vz), "%s/vz", dir);
	assert_int_equal(run_cmd("cc -g -gz=zlib -O1 -DVARIANT=0 -o '%s' '%s'", vz, src), 0);
	assert_int_equal(run_cmd("eu-readelf -S '%s' | grep -q 'debug_info.* C '", vz), 0);
	mem = new_sym(0, 0, 0, 0);
	file = new_inflating_sym(64u << 20);
	tight = new_inflating_sym(1);
	assert_int_equal(symbolizer_module_from_file(mem, vz, &mm), 0);
	assert_int_equal(symbolizer_module_from_file(file, vz, &mf), 0);
	assert_int_equal(symbolizer_module_from_file(tight, vz, &mt), 0);
	for (int k = 0; k < NFUNCS; k++) {
		frames_text(mem, mm, vars[0].fn_addr[k] + 2, &a);
		frames_text(file, mf, vars[0].fn_addr[k] + 2, &b);
		frames_text(tight, mt, vars[0].fn_addr[k] + 2, &c);
		assert_true(a.ok);
		assert_non_null(strstr(a.text, "variant.c"));
		assert_string_equal(a.text, b.text);
		assert_string_equal(a.text, c.text);
	}
	st = stats(file);
	print_message("inflated: %" PRIu64 " files, %" PRIu64 " bytes held, %" PRIu64 " fallbacks\n", st.inflated_files,
		      st.inflated_bytes, st.inflate_fallbacks);
	assert_int_equal(st.inflated_files, 1);
	assert_true(st.inflated_bytes > 0);
	assert_int_equal(st.inflate_fallbacks, 0);
	assert_int_equal(stats(mem).inflated_files, 0);
	st = stats(tight);
	assert_int_equal(st.inflated_files, 0);
	assert_true(st.inflate_fallbacks >= 1);
	assert_int_equal(st.inflated_bytes, 0);
	/* Unnamed files: nothing in the directory, even while held. */
	assert_int_equal(stray_files(), 0);
	symbolizer_free(mem);
	symbolizer_free(file);
	symbolizer_free(tight);
	assert_int_equal(stray_files(), 0);
}

/* libc6-dbg's compressed debug file: found by build id, inflated to a file,
 * same answers, and libdw's heap for it is megabytes smaller. */
static void test_inflate_libc_debug(void **state)
{
	struct symbolizer *mem, *file;
	struct sym_addr am, af;
	struct answer a, b;
	struct symbolizer_stats sm, sf;
	char path[PATH_MAX];
	bool measurable = heap_measurable();

	(void)state;
	mem = new_sym(0, 0, 0, 0);
	file = new_inflating_sym(256u << 20);
	assert_int_equal(symbolizer_resolve_user(mem, (uint32_t)getpid(), (uint64_t)(uintptr_t)&getenv, &am), 0);
	assert_int_equal(symbolizer_resolve_user(file, (uint32_t)getpid(), (uint64_t)(uintptr_t)&getenv, &af), 0);
	snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", am.mod->build_id,
		 am.mod->build_id + 2);
	if (!strstr(am.mod->path, "libc.so") || access(path, R_OK) != 0) {
		symbolizer_free(mem);
		symbolizer_free(file);
		print_message("no libc6-dbg debug file for %s (%s)\n", am.mod->path, path);
		skip();
	}
	frames_text(mem, am.mod, am.addr, &a);
	frames_text(file, af.mod, af.addr, &b);
	print_message("getenv: %s\n", a.text);
	assert_true(a.ok);
	assert_null(strstr(a.text, "|-|0|")); /* a file and a line: the debug file was used */
	assert_string_equal(a.text, b.text);
	sm = stats(mem);
	sf = stats(file);
	print_message("libc: heap %" PRIu64 " B in memory, %" PRIu64 " B with an inflated file (%" PRIu64 " B)\n",
		      sm.open_module_bytes, sf.open_module_bytes, sf.inflated_bytes);
	assert_int_equal(sf.inflated_files, 1);
	assert_true(sf.inflated_bytes > 8u << 20);
	if (measurable)
		assert_true(sf.open_module_bytes + (6u << 20) < sm.open_module_bytes);
	symbolizer_free(mem);
	symbolizer_free(file);
}

/* A closed module whose file is gone gets fallback names; a deleted binary of
 * a live process is reopened through /proc/PID/map_files. */
static void test_module_file_gone(void **state)
{
	char copy[PATH_MAX], copy2[PATH_MAX], fallback[64], line[512];
	struct symbolizer *s = new_sym(0, 1, 0, 0);
	const struct sym_module *mc, *m1, *other;
	struct sym_frame fr[SYM_MAX_INLINE];
	uint64_t start = 0, off = 0, fn;
	struct child ch;
	size_t nf;
	bool ok;
	pid_t pid;
	FILE *f;

	(void)state;
	snprintf(copy, sizeof(copy), "%s/copy", dir);
	snprintf(copy2, sizeof(copy2), "%s/copy2", dir);
	assert_int_equal(run_cmd("cp '%s' '%s'", vars[3].path, copy), 0);
	assert_int_equal(symbolizer_module_from_file(s, copy, &mc), 0);
	expect_function(s, mc, vars[3].fn_addr[5], 5, 3);
	assert_int_equal(symbolizer_module_from_file(s, vars[4].path, &other), 0); /* closes the copy */
	expect_function(s, other, vars[4].fn_addr[5], 5, 4);
	assert_int_equal(stats(s).open_modules, 1);
	assert_int_equal(unlink(copy), 0);
	nf = 0;
	ok = true;
	fn = vars[3].fn_addr[6];
	assert_int_equal(symbolizer_frames(s, mc, fn, fr, SYM_MAX_INLINE, &nf, &ok), 0);
	assert_int_equal(nf, 1);
	assert_false(ok);
	snprintf(fallback, sizeof(fallback), "copy+0x%" PRIx64, fn); /* vaddr == offset in .text */
	assert_string_equal(fr[0].function, fallback);

	/* A live process running a binary that is deleted afterwards (another
	 * name: a reused inode number would look like the first copy). */
	assert_int_equal(run_cmd("cp '%s' '%s'", vars[1].path, copy2), 0);
	ch = spawn_waiter(copy2);
	pid = ch.pid;
	{
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
		f = fopen(path, "re");
		assert_non_null(f);
		while (fgets(line, sizeof(line), f)) {
			unsigned long long a, e, o;
			char perms[8];
			int pos = 0;

			if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &a, &e, perms, &o, &pos) >= 4 && pos &&
			    perms[2] == 'x' && strncmp(line + pos, copy2, strlen(copy2)) == 0) {
				start = a;
				off = o;
			}
		}
		fclose(f);
	}
	assert_true(start != 0);
	assert_int_equal(unlink(copy2), 0);
	{
		struct sym_addr a;

		fn = vars[1].fn_addr[9];
		assert_int_equal(symbolizer_resolve_user(s, (uint32_t)pid, start - off + fn, &a), 0);
		assert_int_equal(a.addr, fn);
		m1 = a.mod;
		assert_string_equal(m1->path, copy2);
		assert_true(m1->build_id[0] != 0);
		expect_function(s, m1, fn, 9, 1);
		/* Close it (max_modules = 1), then a miss must reopen via map_files. */
		expect_function(s, other, vars[4].fn_addr[7], 7, 4);
		assert_int_equal(stats(s).open_modules, 1);
		expect_function(s, m1, vars[1].fn_addr[10], 10, 1);
	}
	reap_child(&ch);
	symbolizer_forget_process(s, (uint32_t)pid);
	assert_int_equal(stats(s).processes, 0);
	symbolizer_free(s);
}

/* Resolves fn_0 of variant v in live process pid (started by spawn_waiter: its
 * mappings are final). */
static void resolve_in(struct symbolizer *s, pid_t pid, const struct variant *v, int n)
{
	const struct sym_module *mm = symbolizer_main_module(s, (uint32_t)pid);
	char path[64], line[512];
	struct sym_addr a;
	int r = -ENOENT;
	FILE *f;

	assert_non_null(mm);
	assert_string_equal(mm->path, v->path);
	/* The text mapping has vaddr == file offset: runtime = start - offset + vaddr. */
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	assert_non_null(f);
	while (r != 0 && fgets(line, sizeof(line), f)) {
		unsigned long long b, e, o;
		char perms[8];
		int pos = 0;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &b, &e, perms, &o, &pos) >= 4 && pos &&
		    perms[2] == 'x' && strncmp(line + pos, v->path, strlen(v->path)) == 0)
			r = symbolizer_resolve_user(s, (uint32_t)pid, b - o + v->fn_addr[0], &a);
	}
	fclose(f);
	assert_int_equal(r, 0);
	assert_ptr_equal(a.mod, mm);
	assert_int_equal(a.addr, v->fn_addr[0]);
	expect_function(s, a.mod, a.addr, 0, n);
}

/* 300 short-lived processes, each resolved while alive and forgotten after it
 * exits: the process count returns to zero and memory stays flat. */
static void test_process_churn(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0, 0);
	struct symbolizer_stats base, st100 = { 0 }, st;
	long rss100 = 0, rss300;

	(void)state;
	base = stats(s);
	for (int i = 1; i <= 300; i++) {
		struct child c = spawn_waiter(vars[i % 2].path);

		resolve_in(s, c.pid, &vars[i % 2], i % 2);
		assert_int_equal(stats(s).processes, base.processes + 1);
		reap_child(&c);
		symbolizer_forget_process(s, (uint32_t)c.pid);
		st = stats(s);
		assert_int_equal(st.processes, base.processes);
		if (i == 100) {
			st100 = st;
			rss100 = rss_kib();
		}
	}
	rss300 = rss_kib();
	st = stats(s);
	assert_int_equal(st.processes, base.processes);
	assert_int_equal(st.gone_pids, 0);
	assert_int_equal(st.modules, st100.modules); /* the same files: no new modules */
	assert_true(st.mem_bytes <= st100.mem_bytes + 1024);
	print_message("churn: mem_bytes base %" PRIu64 ", after 100 %" PRIu64 ", after 300 %" PRIu64
		      "; RSS after 100 %ld KiB, after 300 %ld KiB; %" PRIu32 " modules, %" PRIu64 " maps reads\n",
		      base.mem_bytes, st100.mem_bytes, st.mem_bytes, rss100, rss300, st.modules, st.maps_reads);
	symbolizer_free(s);
}

/* More live processes than max_processes: the least recently used are
 * evicted, and an evicted one that is still alive is simply read again. */
static void test_process_cap(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 4, 0);
	struct child c[10];
	struct symbolizer_stats st;

	(void)state;
	for (int i = 0; i < 10; i++) {
		c[i] = spawn_waiter(vars[2].path);
		resolve_in(s, c[i].pid, &vars[2], 2);
		assert_true(stats(s).processes <= 4);
	}
	st = stats(s);
	assert_int_equal(st.processes, 4);
	assert_true(st.process_evictions >= 6);
	/* c[0] was evicted long ago; it still resolves. */
	resolve_in(s, c[0].pid, &vars[2], 2);
	assert_int_equal(stats(s).processes, 4);
	assert_true(stats(s).process_evictions > st.process_evictions);
	for (int i = 0; i < 10; i++) {
		reap_child(&c[i]);
		symbolizer_forget_process(s, (uint32_t)c[i].pid);
	}
	st = stats(s);
	assert_int_equal(st.processes, 0);
	assert_int_equal(st.gone_pids, 0);
	symbolizer_free(s);
}

/* Pids that do not exist are remembered in a bounded set that also expires. */
static void test_gone_pids(void **state)
{
	struct symbolizer *s = new_sym(0, 0, 0, 16);
	struct symbolizer_stats st, st1;
	struct sym_addr a;
	uint32_t pid_max = 32768, pids[200], n = 0;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");

	(void)state;
	if (f) {
		if (fscanf(f, "%" SCNu32, &pid_max) != 1)
			pid_max = 32768;
		fclose(f);
	}
	for (uint32_t p = pid_max - 1; p > 1 && n < 200; p--)
		if (kill((pid_t)p, 0) < 0 && errno == ESRCH)
			pids[n++] = p;
	assert_int_equal(n, 200);
	for (uint32_t i = 0; i < 100; i++) {
		assert_int_equal(symbolizer_resolve_user(s, pids[i], 0x401000, &a), -ESRCH);
		assert_true(stats(s).gone_pids <= 16);
	}
	st1 = stats(s);
	for (uint32_t i = 100; i < 200; i++)
		assert_int_equal(symbolizer_resolve_user(s, pids[i], 0x401000, &a), -ESRCH);
	st = stats(s);
	assert_int_equal(st.gone_pids, 16);
	assert_int_equal(st.processes, 0);
	assert_true(st.mem_bytes <= st1.mem_bytes);
	/* The most recent one is still remembered: no new /proc read. */
	assert_int_equal(symbolizer_resolve_user(s, pids[199], 0x401000, &a), -ESRCH);
	assert_int_equal(stats(s).maps_reads, st.maps_reads);
	/* After the expiry a new miss prunes all the old entries. */
	usleep(2100 * 1000);
	assert_int_equal(symbolizer_resolve_user(s, pids[0], 0x401000, &a), -ESRCH);
	assert_int_equal(stats(s).gone_pids, 1);
	symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_cache_cap),
		cmocka_unit_test(test_module_eviction),
		cmocka_unit_test(test_module_heap_cap),
		cmocka_unit_test(test_release_pages),
		cmocka_unit_test(test_inflate_compressed_dwarf),
		cmocka_unit_test(test_inflate_libc_debug),
		cmocka_unit_test(test_module_file_gone),
		cmocka_unit_test(test_process_churn),
		cmocka_unit_test(test_process_cap),
		cmocka_unit_test(test_gone_pids),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

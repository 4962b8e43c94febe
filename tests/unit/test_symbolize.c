/* test_symbolize.c: end-to-end resolve stage: builds a small C program at test
 * time and checks frames against eu-addr2line, live processes, stripped/garbage files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer.h"
#include "testutil.h"

/* Keep the line numbers of helper() and work() in sync with HELPER_LINE/WORK_LINE. */
static const char prog_src[] =
	"#include <stdio.h>\n"                                                          /* 1 */
	"#include <unistd.h>\n"                                                         /* 2 */
	"static volatile unsigned long sink;\n"                                         /* 3 */
	"static inline __attribute__((always_inline)) unsigned long helper(unsigned long x)\n" /* 4 */
	"{\n"                                                                           /* 5 */
	"\tunsigned long r = 0;\n"                                                      /* 6 */
	"\tfor (unsigned long i = 0; i < x; i++)\n"                                     /* 7 */
	"\t\tr += (i * i) ^ (r >> 3);\n"                                                /* 8 */
	"\treturn r;\n"                                                                 /* 9 */
	"}\n"                                                                           /* 10 */
	"__attribute__((noinline)) unsigned long work(unsigned long n)\n"               /* 11 */
	"{\n"                                                                           /* 12 */
	"\tunsigned long t = 0;\n"                                                      /* 13 */
	"\tfor (unsigned long k = 0; k < n; k++)\n"                                     /* 14 */
	"\t\tt += helper(k + sink);\n"                                                  /* 15 */
	"\treturn t;\n"                                                                 /* 16 */
	"}\n"                                                                           /* 17 */
	"int main(int argc, char **argv)\n"                                             /* 18 */
	"{\n"                                                                           /* 19 */
	"\t(void)argv;\n"                                                               /* 20 */
	"\tif (argc > 1) {\n"                                                           /* 21 */
	"\t\tputs(\"ready\");\n"                                                        /* 22 */
	"\t\tfflush(stdout);\n"                                                         /* 23 */
	"\t\tfor (;;)\n"                                                                /* 24 */
	"\t\t\tsink += work(100);\n"                                                    /* 25 */
	"\t}\n"                                                                         /* 26 */
	"\treturn (int)work((unsigned long)argc);\n"                                    /* 27 */
	"}\n"
	/* deep(): 21 nested inlined calls, more than SYM_MAX_INLINE frames */
	"#define AI static inline __attribute__((always_inline)) unsigned long\n"
	"AI d0(unsigned long x) { return x * x + sink; }\n"
	"#define D(n, m) AI d##n(unsigned long x) { return d##m(x * 3 + n) ^ sink; }\n"
	"D(1, 0) D(2, 1) D(3, 2) D(4, 3) D(5, 4) D(6, 5) D(7, 6) D(8, 7) D(9, 8) D(10, 9)\n"
	"D(11, 10) D(12, 11) D(13, 12) D(14, 13) D(15, 14) D(16, 15) D(17, 16) D(18, 17)\n"
	"D(19, 18) D(20, 19)\n"
	"__attribute__((noinline)) unsigned long deep(unsigned long x) { return d20(x); }\n";
#define HELPER_LINE 4
#define WORK_LINE 11

struct ref_frame {
	char name[128];
	char file[PATH_MAX];
	int line;
};

struct ref {
	uint64_t addr;
	int n;
	struct ref_frame f[32];
};

static char dir[] = "/tmp/prowl sym test.XXXXXX"; /* a space on purpose */
static char src[PATH_MAX], rdyn[PATH_MAX], rdyn_stripped[PATH_MAX];
static char garbage[PATH_MAX], trunc_elf[PATH_MAX], kfix[PATH_MAX], kfix_hidden[PATH_MAX];

/* The test program built as PIE and as a fixed-address executable. */
struct bin {
	char path[PATH_MAX], stripped[PATH_MAX];
	const char *name, *cflags;
	uint64_t work_addr, work_size;
	uint64_t text_vaddr, text_offset; /* executable PT_LOAD */
	uint64_t first_vaddr;             /* PT_LOAD at file offset 0 */
};
static struct bin bins[] = {
	{ .name = "prog", .cflags = "-fPIE -pie" },
	{ .name = "prog_nopie", .cflags = "-fno-PIE -no-pie" },
};
#define NBINS (sizeof(bins) / sizeof(bins[0]))
static pid_t children[8];
static int nchildren;

static FILE *run_read(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static FILE *run_read(const char *fmt, ...)
{
	char cmd[64 * 1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return popen(cmd, "r");
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* Address and size of a symbol from `nm -S`, the independent reference. */
static void nm_symbol(const char *bin, const char *name, uint64_t *ret_addr, uint64_t *ret_size)
{
	char line[512], n[256], t;
	unsigned long long a, s;
	FILE *f = run_read("nm -S '%s'", bin);
	bool found = false;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %llx %c %255s", &a, &s, &t, n) == 4 && strcmp(n, name) == 0) {
			*ret_addr = a;
			*ret_size = s;
			found = true;
		}
	pclose(f);
	assert_true(found);
}

/* The executable PT_LOAD and the one at offset 0 from `readelf -lW`. */
static void segments(const char *bin, uint64_t *ret_vaddr, uint64_t *ret_offset, uint64_t *ret_first)
{
	char line[512], flags[16];
	unsigned long long off, va, pa, fsz, msz;
	FILE *f = run_read("readelf -lW '%s'", bin);
	bool found = false;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "LOAD ");

		if (!p || sscanf(p, "LOAD %llx %llx %llx %llx %llx %15[RWE ]", &off, &va, &pa, &fsz, &msz, flags) != 6)
			continue;
		if (off == 0)
			*ret_first = va;
		if (!found && strchr(flags, 'E')) {
			*ret_vaddr = va;
			*ret_offset = off;
			found = true;
		}
	}
	pclose(f);
	assert_true(found);
}

static void read_build_id(const char *bin, char *buf, size_t len)
{
	char line[512];
	FILE *f = run_read("eu-readelf -n '%s'", bin);

	assert_non_null(f);
	buf[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "Build ID: ");

		if (p) {
			snprintf(buf, len, "%s", p + 10);
			buf[strcspn(buf, "\n ")] = 0;
		}
	}
	pclose(f);
	assert_true(strlen(buf) >= 16);
}

/* "file:line[:col]" */
static void parse_loc(char *s, struct ref_frame *f)
{
	char *c1, *c2;

	s[strcspn(s, "\n")] = 0;
	f->line = 0;
	c1 = strrchr(s, ':');
	if (!c1) {
		snprintf(f->file, sizeof(f->file), "%s", s);
		return;
	}
	*c1 = 0;
	c2 = strrchr(s, ':');
	if (c2 && c2[1] >= '0' && c2[1] <= '9') {
		*c2 = 0;
		f->line = atoi(c2 + 1); /* c1 was the column */
	} else {
		f->line = atoi(c1 + 1);
	}
	snprintf(f->file, sizeof(f->file), "%s", s);
}

/* Runs `eu-addr2line -a -i -f` once for all addresses. Output per address:
 * "0x..", then "name[ inlined at .. in ..]", "file:line:col", then one
 * "name", "file:line:col" pair per inlined caller. */
static void addr2line(const char *bin, struct ref *refs, size_t n)
{
	static char cmd[64 * 1024];
	size_t off, i = 0, k = 0;
	char line[4096];
	FILE *f;

	off = (size_t)snprintf(cmd, sizeof(cmd), "eu-addr2line -a -i -f -e '%s'", bin);
	for (size_t j = 0; j < n; j++)
		off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, " 0x%" PRIx64, refs[j].addr);
	assert_true(off < sizeof(cmd));
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0x", 2) == 0) {
			struct ref *r;

			assert_true(i < n);
			r = &refs[i++];
			assert_true(strtoull(line, NULL, 16) == r->addr);
			r->n = 0;
			k = 0;
			continue;
		}
		assert_true(i > 0);
		struct ref *r = &refs[i - 1];
		if (k % 2 == 0) {
			char *p = strstr(line, " inlined at ");

			assert_true(r->n < 32);
			if (p)
				*p = 0;
			line[strcspn(line, "\n")] = 0;
			snprintf(r->f[r->n].name, sizeof(r->f[r->n].name), "%.127s", line);
		} else {
			parse_loc(line, &r->f[r->n]);
			r->n++;
		}
		k++;
	}
	assert_int_equal(pclose(f), 0);
	assert_int_equal(i, n);
}

static pid_t spawn(const char *bin)
{
	char buf[16] = { 0 };
	int fds[2];
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl(bin, bin, "spin", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	assert_true(read(fds[0], buf, sizeof(buf) - 1) > 0);
	close(fds[0]);
	assert_string_equal(buf, "ready\n");
	assert_true(nchildren < 8);
	children[nchildren++] = pid;
	return pid;
}

static void kill_child(pid_t pid)
{
	for (int i = 0; i < nchildren; i++) {
		if (children[i] != pid)
			continue;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		children[i] = children[--nchildren];
		return;
	}
}

/* Runtime address of vaddr in pid, from the mapping at file offset 0 of b. */
static uint64_t runtime_addr(pid_t pid, const struct bin *b, uint64_t vaddr)
{
	const char *path = b->path;
	char fn[64], line[PATH_MAX + 256];
	uint64_t base = 0;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e, off;
		int pos = 0;

		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &s, &e, &off, &pos) >= 3 && pos &&
		    strcmp(line + pos, path) == 0 && off == 0) {
			base = s;
			break;
		}
	}
	fclose(f);
	assert_true(base != 0);
	return base - b->first_vaddr + vaddr;
}

static int setup(void **state)
{
	static const char kallsyms_text[] = "ffffffff81000000 T _stext\n"
					    "ffffffff81001000 T do_syscall_64\n"
					    "ffffffff81002000 D some_data\n"
					    "ffffffffc0a01000 t nft_do_chain\t[nf_tables]\n";
	static const char kallsyms_hidden[] = "0000000000000000 T _stext\n"
					      "0000000000000000 T do_syscall_64\n";
	unsigned char junk[16384];

	(void)state;
	unsetenv("DEBUGINFOD_URLS");
	if (!mkdtemp(dir))
		return -1;
	snprintf(src, sizeof(src), "%s/prog.c", dir);
	snprintf(rdyn, sizeof(rdyn), "%s/prog_rdyn", dir);
	snprintf(rdyn_stripped, sizeof(rdyn_stripped), "%s/prog_rdyn_stripped", dir);
	snprintf(garbage, sizeof(garbage), "%s/garbage.bin", dir);
	snprintf(trunc_elf, sizeof(trunc_elf), "%s/trunc.elf", dir);
	snprintf(kfix, sizeof(kfix), "%s/kallsyms", dir);
	snprintf(kfix_hidden, sizeof(kfix_hidden), "%s/kallsyms_hidden", dir);
	write_file(src, prog_src, sizeof(prog_src) - 1);
	for (size_t i = 0; i < NBINS; i++) {
		struct bin *b = &bins[i];

		snprintf(b->path, sizeof(b->path), "%s/%s", dir, b->name);
		snprintf(b->stripped, sizeof(b->stripped), "%s/%s_stripped", dir, b->name);
		if (run_cmd("cc -g -O2 %s -o '%s' '%s'", b->cflags, b->path, src) != 0 ||
		    run_cmd("strip -o '%s' '%s'", b->stripped, b->path) != 0)
			return -1;
		nm_symbol(b->path, "work", &b->work_addr, &b->work_size);
		segments(b->path, &b->text_vaddr, &b->text_offset, &b->first_vaddr);
	}
	if (run_cmd("cc -g -O2 -rdynamic -o '%s' '%s'", rdyn, src) != 0 ||
	    run_cmd("strip -o '%s' '%s'", rdyn_stripped, rdyn) != 0 ||
	    run_cmd("head -c 4096 '%s' > '%s'", bins[0].path, trunc_elf) != 0)
		return -1;
	srand(42);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)rand();
	write_file(garbage, junk, sizeof(junk));
	write_file(kfix, kallsyms_text, sizeof(kallsyms_text) - 1);
	write_file(kfix_hidden, kallsyms_hidden, sizeof(kallsyms_hidden) - 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	while (nchildren)
		kill_child(children[0]);
	run_cmd("rm -rf '%s'", dir);
	return 0;
}

static struct symbolizer *new_symbolizer(const char *kallsyms)
{
	struct symbolizer_opts o = { .proc_root = "/proc", .kallsyms = kallsyms };
	struct symbolizer *s = NULL;

	assert_int_equal(symbolizer_new(&o, &s), 0);
	assert_non_null(s);
	return s;
}

static bool same_file(const char *ours, const char *ref)
{
	if (!ours)
		return strcmp(ref, "??") == 0;
	return strcmp(ours, ref) == 0;
}

/* Every byte of work() must give the same frames as eu-addr2line. */
static void sweep(const struct bin *b)
{
	struct symbolizer *s = new_symbolizer(kfix);
	const struct sym_module *mod;
	struct symbolizer_stats st;
	struct ref *refs;
	size_t n = b->work_size, inlined = 0;

	refs = calloc(n, sizeof(*refs));
	assert_non_null(refs);
	for (size_t i = 0; i < n; i++)
		refs[i].addr = b->work_addr + i;
	addr2line(b->path, refs, n);

	assert_int_equal(symbolizer_module_from_file(s, b->path, &mod), 0);
	assert_int_equal(mod->kind, SYM_MOD_ELF);
	assert_string_equal(mod->path, b->path);
	assert_string_equal(mod->name, b->name);
	assert_true(mod->start == b->text_vaddr);
	assert_true(mod->offset == b->text_offset);
	assert_true(mod->limit > b->work_addr + b->work_size - 1);
	for (size_t i = 0; i < n; i++) {
		struct sym_frame fr[SYM_MAX_INLINE];
		size_t nf = 0;
		bool ok = false;

		assert_int_equal(symbolizer_frames(s, mod, refs[i].addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
		assert_true(ok);
		if ((int)nf != refs[i].n)
			fail_msg("0x%" PRIx64 ": %zu frames, eu-addr2line %d", refs[i].addr, nf, refs[i].n);
		for (size_t k = 0; k < nf; k++) {
			const struct ref_frame *r = &refs[i].f[k];

			if (strcmp(fr[k].function, r->name) || !same_file(fr[k].file, r->file) || fr[k].line != r->line)
				fail_msg("0x%" PRIx64 " frame %zu: %s %s:%d, eu-addr2line %s %s:%d", refs[i].addr, k,
					 fr[k].function, fr[k].file ? fr[k].file : "(null)", fr[k].line, r->name,
					 r->file, r->line);
			if (strcmp(fr[k].function, "helper") == 0)
				assert_int_equal(fr[k].start_line, HELPER_LINE);
			if (strcmp(fr[k].function, "work") == 0)
				assert_int_equal(fr[k].start_line, WORK_LINE);
		}
		assert_string_equal(fr[nf - 1].function, "work");
		if (nf > 1) {
			assert_string_equal(fr[0].function, "helper");
			inlined++;
		}
	}
	/* The test is only meaningful if some addresses are in the inlined helper. */
	assert_true(inlined > 0);
	assert_true(mod->has_dwarf);

	symbolizer_get_stats(s, &st);
	assert_int_equal(st.frame_misses, n);
	assert_int_equal(st.frame_hits, 0);
	/* Cached: same strings again, counted as hits; a small max truncates. */
	for (size_t i = 0; i < n; i++) {
		struct sym_frame fr[1];
		size_t nf = 0;
		bool ok = false;

		assert_int_equal(symbolizer_frames(s, mod, refs[i].addr, fr, 1, &nf, &ok), 0);
		assert_int_equal(nf, 1);
		assert_true(ok);
		assert_string_equal(fr[0].function, refs[i].f[0].name);
	}
	symbolizer_get_stats(s, &st);
	assert_int_equal(st.frame_hits, n);
	assert_int_equal(st.frame_misses, n);
	free(refs);
	symbolizer_free(s);
}

static void test_sweep_vs_addr2line(void **state)
{
	(void)state;
	for (size_t i = 0; i < NBINS; i++)
		sweep(&bins[i]);
}

static void live_process(const struct bin *bin)
{
	struct symbolizer *s = new_symbolizer(kfix);
	struct symbolizer_stats st1, st2;
	struct sym_addr a, b;
	struct sym_frame fr[SYM_MAX_INLINE];
	struct ref ref = { .addr = bin->work_addr + bin->work_size / 2 };
	char bid[256];
	pid_t p1, p2;
	uint64_t addr2;
	size_t nf;
	bool ok;

	addr2line(bin->path, &ref, 1);
	read_build_id(bin->path, bid, sizeof(bid));
	p1 = spawn(bin->path);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)p1, runtime_addr(p1, bin, ref.addr), &a), 0);
	assert_non_null(a.mod);
	assert_int_equal(a.mod->kind, SYM_MOD_ELF);
	assert_string_equal(a.mod->path, bin->path);
	assert_string_equal(a.mod->build_id, bid);
	assert_true(a.addr == ref.addr);
	assert_int_equal(symbolizer_frames(s, a.mod, a.addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
	assert_true(ok);
	assert_int_equal((int)nf, ref.n);
	for (size_t k = 0; k < nf; k++) {
		assert_string_equal(fr[k].function, ref.f[k].name);
		assert_int_equal(fr[k].line, ref.f[k].line);
	}
	assert_ptr_equal(symbolizer_main_module(s, (uint32_t)p1), a.mod);

	/* A second process of the same binary shares the module. */
	symbolizer_get_stats(s, &st1);
	assert_int_equal(st1.processes, 1);
	p2 = spawn(bin->path);
	assert_int_equal(symbolizer_add_process(s, (uint32_t)p2), 0);
	symbolizer_get_stats(s, &st2);
	assert_int_equal(st2.processes, 2);
	assert_int_equal(st2.modules, st1.modules);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)p2, runtime_addr(p2, bin, ref.addr), &b), 0);
	assert_ptr_equal(b.mod, a.mod);
	assert_true(b.addr == a.addr);
	assert_int_equal(symbolizer_frames(s, b.mod, b.addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
	symbolizer_get_stats(s, &st2);
	assert_int_equal(st2.frame_hits, st1.frame_hits + 1);

	/* Not executable: -ENOENT; the maps are not read again while the
	 * process's executable memory stays the same (test_maps_change). */
	symbolizer_get_stats(s, &st1);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)p2, 0x10, &b), -ENOENT);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)p2, 0x10, &b), -ENOENT);
	usleep(250 * 1000);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)p2, 0x10, &b), -ENOENT);
	symbolizer_get_stats(s, &st2);
	assert_true(st2.maps_reads == st1.maps_reads);

	/* Exited processes keep their maps until forgotten. */
	addr2 = runtime_addr(p2, bin, ref.addr);
	kill_child(p2);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)p2, runtime_addr(p1, bin, 0) - 0x100000, &b), -ENOENT);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)p2, addr2, &b), 0);
	assert_ptr_equal(b.mod, a.mod);
	assert_true(b.addr == ref.addr);
	symbolizer_forget_process(s, (uint32_t)p2);
	symbolizer_get_stats(s, &st2);
	assert_int_equal(st2.processes, 1);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)p2, 0x1000, &b), -ESRCH);
	assert_null(symbolizer_main_module(s, (uint32_t)p2));
	kill_child(p1);
	symbolizer_free(s);
}

/* Deeper inline chains keep the innermost frames and the real function. */
static void test_deep_inline(void **state)
{
	struct symbolizer *s = new_symbolizer(kfix);
	const struct bin *b = &bins[0];
	const struct sym_module *mod;
	uint64_t addr, size;
	struct ref *refs;
	size_t deepest = 0, seen_d0 = 0;

	(void)state;
	nm_symbol(b->path, "deep", &addr, &size);
	refs = calloc(size, sizeof(*refs));
	assert_non_null(refs);
	for (size_t i = 0; i < size; i++)
		refs[i].addr = addr + i;
	addr2line(b->path, refs, size);
	assert_int_equal(symbolizer_module_from_file(s, b->path, &mod), 0);
	for (size_t i = 0; i < size; i++) {
		struct sym_frame fr[SYM_MAX_INLINE];
		const struct ref *r = &refs[i];
		size_t nf = 0, want;
		bool ok;

		assert_int_equal(symbolizer_frames(s, mod, r->addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
		want = r->n < SYM_MAX_INLINE ? (size_t)r->n : SYM_MAX_INLINE;
		assert_int_equal(nf, want);
		/* innermost frames as eu-addr2line, the last one its outermost */
		for (size_t k = 0; k + 1 < nf; k++) {
			assert_string_equal(fr[k].function, r->f[k].name);
			assert_int_equal(fr[k].line, r->f[k].line);
		}
		assert_string_equal(fr[nf - 1].function, r->f[r->n - 1].name);
		assert_int_equal(fr[nf - 1].line, r->f[r->n - 1].line);
	}
	for (size_t i = 0; i < size; i++) {
		struct sym_frame fr[SYM_MAX_INLINE];
		size_t nf = 0;
		bool ok;

		assert_int_equal(symbolizer_frames(s, mod, refs[i].addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
		assert_string_equal(fr[nf - 1].function, "deep");
		if (nf > deepest)
			deepest = nf;
		if (nf == SYM_MAX_INLINE && strcmp(fr[0].function, "d0") == 0) {
			/* d0 in d1 in ... d14, then (d15..d20 dropped) deep */
			for (size_t k = 0; k + 1 < nf; k++) {
				char want[24];

				snprintf(want, sizeof(want), "d%zu", k);
				assert_string_equal(fr[k].function, want);
			}
			assert_true(fr[nf - 1].line > 0);
			seen_d0++;
		}
	}
	assert_int_equal(deepest, SYM_MAX_INLINE);
	assert_true(seen_d0 > 0);
	free(refs);
	symbolizer_free(s);
}

static void test_live_process(void **state)
{
	(void)state;
	for (size_t i = 0; i < NBINS; i++)
		live_process(&bins[i]);
}

/* An address outside the maps reads them again once the process maps new
 * executable memory, and not before: a child that maps a page r-x when told. */
static void test_maps_change(void **state)
{
	struct symbolizer *s = new_symbolizer(kfix);
	struct symbolizer_stats st1, st2;
	struct sym_addr a;
	int go[2], back[2];
	uint64_t page = 0;
	pid_t pid;
	char c;

	(void)state;
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(back), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		void *p;

		if (write(back[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(1);
		p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		page = (uint64_t)(uintptr_t)p;
		if (p == MAP_FAILED || write(back[1], &page, sizeof(page)) != sizeof(page))
			_exit(1);
		pause();
		_exit(0);
	}
	assert_int_equal(read(back[0], &c, 1), 1);
	assert_int_equal(symbolizer_add_process(s, (uint32_t)pid), 0);
	symbolizer_get_stats(s, &st1);
	usleep(250 * 1000);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)pid, 0x10, &a), -ENOENT);
	symbolizer_get_stats(s, &st2);
	assert_true(st2.maps_reads == st1.maps_reads);
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(read(back[0], &page, sizeof(page)), (ssize_t)sizeof(page));
	usleep(250 * 1000);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)pid, page + 8, &a), 0);
	assert_int_equal(a.mod->kind, SYM_MOD_ANON);
	symbolizer_get_stats(s, &st2);
	assert_true(st2.maps_reads == st1.maps_reads + 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(go[0]); close(go[1]); close(back[0]); close(back[1]);
	symbolizer_free(s);
}

static void test_gone_process(void **state)
{
	struct symbolizer *s = new_symbolizer(kfix);
	struct symbolizer_stats st;
	struct sym_addr a;
	pid_t pid = fork();

	(void)state;
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)pid, 0x401000, &a), -ESRCH);
	/* Remembered: no second /proc lookup within the interval. */
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)pid, 0x401000, &a), -ESRCH);
	assert_null(symbolizer_main_module(s, (uint32_t)pid));
	symbolizer_get_stats(s, &st);
	assert_true(st.maps_reads == 1);
	assert_int_equal(st.processes, 0);
	/* An explicit add always looks again. */
	assert_int_equal(symbolizer_add_process(s, (uint32_t)pid), -ESRCH);
	symbolizer_get_stats(s, &st);
	assert_true(st.maps_reads == 2);
	symbolizer_forget_process(s, (uint32_t)pid);
	symbolizer_free(s);
	symbolizer_free(NULL);
}

static void expect_fallback(struct symbolizer *s, const struct sym_module *mod, uint64_t addr, const char *want)
{
	struct sym_frame fr[SYM_MAX_INLINE];
	size_t nf = 0;
	bool ok = true;

	assert_int_equal(symbolizer_frames(s, mod, addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
	assert_int_equal(nf, 1);
	assert_false(ok);
	assert_string_equal(fr[0].function, want);
	assert_null(fr[0].file);
	assert_int_equal(fr[0].line, 0);
}

static void test_stripped(void **state)
{
	struct symbolizer *s = new_symbolizer(kfix);
	const struct sym_module *mod;
	struct sym_frame fr[SYM_MAX_INLINE];
	uint64_t raddr, rsize;
	char want[PATH_MAX];
	size_t nf;
	bool ok;

	(void)state;
	for (size_t i = 0; i < NBINS; i++) {
		const struct bin *b = &bins[i];

		assert_int_equal(symbolizer_module_from_file(s, b->stripped, &mod), 0);
		assert_false(mod->has_dwarf);
		/* Addresses inside work() are one row, named after the start of its
		 * .eh_frame FDE (work's own address): not one row per address. */
		snprintf(want, sizeof(want), "%s_stripped+0x%" PRIx64, b->name,
			 b->work_addr - b->text_vaddr + b->text_offset);
		expect_fallback(s, mod, b->work_addr + 4, want);
		expect_fallback(s, mod, b->work_addr + 1, want);
		assert_false(mod->has_dwarf);
	}

	/* -rdynamic puts work() into .dynsym, which survives strip. */
	nm_symbol(rdyn, "work", &raddr, &rsize);
	assert_int_equal(symbolizer_module_from_file(s, rdyn_stripped, &mod), 0);
	assert_int_equal(symbolizer_frames(s, mod, raddr + 4, fr, SYM_MAX_INLINE, &nf, &ok), 0);
	assert_true(ok);
	assert_int_equal(nf, 1);
	assert_string_equal(fr[0].function, "work");
	assert_null(fr[0].file);

	assert_int_equal(symbolizer_module_from_file(s, "/nonexistent/x", &mod), -ENOENT);
	symbolizer_free(s);
}

/* Garbage and truncated "ELF" files mapped executable into this process. */
static void test_bad_files(void **state)
{
	struct symbolizer *s = new_symbolizer(kfix);
	const char *files[] = { garbage, trunc_elf };
	const char *names[] = { "garbage.bin+0x", "trunc.elf+0x" };

	(void)state;
	for (int i = 0; i < 2; i++) {
		struct sym_frame fr[SYM_MAX_INLINE];
		struct sym_addr a;
		size_t nf;
		bool ok;
		int fd = open(files[i], O_RDONLY);
		void *p;

		assert_true(fd >= 0);
		p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		close(fd);
		if (p == MAP_FAILED)
			skip(); /* noexec /tmp */
		/* The first lookup after the (rate-limited) initial read must find
		 * the new mapping via a re-read. */
		if (i == 0) {
			assert_int_equal(symbolizer_add_process(s, (uint32_t)getpid()), 0);
			usleep(210 * 1000);
		}
		assert_int_equal(symbolizer_resolve_user(s, (uint32_t)getpid(), (uint64_t)(uintptr_t)p + 0x123, &a), 0);
		assert_int_equal(a.mod->kind, SYM_MOD_ELF);
		assert_string_equal(a.mod->path, files[i]);
		if (i == 0) {
			char want[64];

			assert_true(a.addr == 0x123); /* not an ELF: normalized = file offset */
			assert_string_equal(a.mod->build_id, "");
			snprintf(want, sizeof(want), "%s%x", names[i], 0x123);
			expect_fallback(s, a.mod, a.addr, want);
		} else {
			assert_int_equal(symbolizer_frames(s, a.mod, a.addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
			assert_int_equal(nf, 1);
			assert_false(ok);
			assert_true(strncmp(fr[0].function, names[i], strlen(names[i])) == 0);
		}
		munmap(p, 4096);
		symbolizer_forget_process(s, (uint32_t)getpid());
	}
	symbolizer_free(s);
}

static void test_kernel(void **state)
{
	struct symbolizer *s = new_symbolizer(kfix);
	struct symbolizer_stats st;
	struct sym_frame fr[SYM_MAX_INLINE];
	struct sym_addr a;
	size_t nf;
	bool ok;

	(void)state;
	assert_int_equal(symbolizer_resolve_kernel(s, 0xffffffff81001234ull, &a), 0);
	assert_int_equal(a.mod->kind, SYM_MOD_KERNEL);
	assert_true(a.addr == 0xffffffff81001234ull);
	assert_int_equal(symbolizer_frames(s, a.mod, a.addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
	assert_true(ok);
	assert_int_equal(nf, 1);
	assert_string_equal(fr[0].function, "do_syscall_64");
	assert_null(fr[0].file);
	assert_int_equal(symbolizer_resolve_kernel(s, 0xffffffffc0a01010ull, &a), 0);
	assert_int_equal(symbolizer_frames(s, a.mod, a.addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
	assert_true(ok);
	assert_string_equal(fr[0].function, "nft_do_chain");
	assert_string_equal(fr[0].file, "[nf_tables]");
	assert_int_equal(symbolizer_resolve_kernel(s, 0xffffffff80000000ull, &a), 0);
	expect_fallback(s, a.mod, a.addr, "kernel+0xffffffff80000000");
	symbolizer_get_stats(s, &st);
	assert_false(st.kernel_addrs_hidden);
	symbolizer_free(s);

	s = new_symbolizer(kfix_hidden);
	assert_int_equal(symbolizer_resolve_kernel(s, 0xffffffff81001234ull, &a), 0);
	symbolizer_get_stats(s, &st);
	assert_true(st.kernel_addrs_hidden);
	expect_fallback(s, a.mod, a.addr, "kernel+0xffffffff81001234");
	symbolizer_free(s);

	s = new_symbolizer("/nonexistent/kallsyms");
	assert_int_equal(symbolizer_resolve_kernel(s, 0xffffffff81001234ull, &a), 0);
	expect_fallback(s, a.mod, a.addr, "kernel+0xffffffff81001234");
	symbolizer_free(s);
}

/* The vdso is read from /proc/PID/mem and symbolized from its .dynsym. */
static void test_vdso(void **state)
{
	struct symbolizer *s = new_symbolizer(kfix);
	uint64_t base = getauxval(AT_SYSINFO_EHDR), value = 0;
	struct sym_frame fr[SYM_MAX_INLINE];
	char path[PATH_MAX], line[512], name[256];
	unsigned long long v;
	struct sym_addr a;
	size_t nf;
	bool ok;
	FILE *f;

	(void)state;
	if (!base)
		skip();
	/* Dump the vdso and let nm find clock_gettime in it. */
	snprintf(path, sizeof(path), "%s/vdso.so", dir);
	write_file(path, (const void *)(uintptr_t)base, 8192);
	f = run_read("nm -D '%s' 2>/dev/null", path);
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %*c %255s", &v, name) == 2 && strstr(name, "clock_gettime"))
			value = v;
	pclose(f);
	if (!value)
		skip();
	assert_int_equal(symbolizer_resolve_user(s, (uint32_t)getpid(), base + value + 1, &a), 0);
	assert_int_equal(a.mod->kind, SYM_MOD_VDSO);
	assert_true(a.addr == value + 1);
	assert_int_equal(symbolizer_frames(s, a.mod, a.addr, fr, SYM_MAX_INLINE, &nf, &ok), 0);
	assert_true(ok);
	assert_non_null(strstr(fr[nf - 1].function, "clock_gettime"));
	symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sweep_vs_addr2line),
		cmocka_unit_test(test_deep_inline),
		cmocka_unit_test(test_live_process),
		cmocka_unit_test(test_maps_change),
		cmocka_unit_test(test_gone_process),
		cmocka_unit_test(test_stripped),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_kernel),
		cmocka_unit_test(test_vdso),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

/* test_inflate.c: elf_inflate_debug() on files built and compressed at test time by
 * gcc/objcopy/eu-elfcompress, checked with eu-readelf/eu-addr2line; hostile inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "inflate.h"
#include "testutil.h"

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2 /* glibc 2.36 <elf.h> lacks it */
#endif

static const char prog_src[] =
	"#include <stdio.h>\n"
	"struct point { int x, y; const char *name; };\n"
	"static volatile unsigned long sink;\n"
	"static inline __attribute__((always_inline)) unsigned long helper(unsigned long x)\n"
	"{\n"
	"\tunsigned long r = 0;\n"
	"\tfor (unsigned long i = 0; i < x; i++)\n"
	"\t\tr += (i * i) ^ (r >> 3);\n"
	"\treturn r;\n"
	"}\n"
	"__attribute__((noinline)) unsigned long work(unsigned long n)\n"
	"{\n"
	"\tunsigned long t = 0;\n"
	"\tfor (unsigned long k = 0; k < n; k++)\n"
	"\t\tt += helper(k + sink);\n"
	"\treturn t;\n"
	"}\n"
	"__attribute__((noinline)) int norm(const struct point *p) { return p->x * p->x + p->y * p->y; }\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"\tstruct point p = { argc, 2, argv[0] };\n"
	"\tprintf(\"%lu %d %s\\n\", work((unsigned long)argc), norm(&p), p.name);\n"
	"\treturn 0;\n"
	"}\n";

/* No #include: also builds with -m32 without a 32-bit libc. Enough functions
 * and types that objcopy finds compressing worthwhile. */
static const char obj_src[] =
	"struct node { struct node *next; long key; double weight; char tag[16]; };\n"
	"static volatile long sink;\n"
	"#define F(n) __attribute__((noinline)) long fn##n(struct node *p, long k) \\\n"
	"\t{ long s = 0; for (; p; p = p->next) s += p->key * k + n + (long)p->weight; sink = s; return s; }\n"
	"F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15)\n"
	"F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23) F(24) F(25) F(26) F(27) F(28) F(29)\n"
	"long all(struct node *p) { return fn0(p, 1) + fn7(p, 2) + fn29(p, 3); }\n";

static char workdir[] = "/tmp/prowl inflate test.XXXXXX"; /* a space on purpose */
static char prog[PATH_MAX], prog_z[PATH_MAX], prog_gz[PATH_MAX], obj64_z[PATH_MAX], obj32_z[PATH_MAX];
static char stripped[PATH_MAX], zlib_gnu[PATH_MAX], zstd[PATH_MAX], mixed[PATH_MAX], xnum[PATH_MAX];
static bool have_m32, have_zstd;

/* ---- helpers ---- */

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static uint8_t *read_fd(int fd, size_t *ret_len)
{
	struct stat st;
	uint8_t *b;

	assert_int_equal(fstat(fd, &st), 0);
	b = malloc((size_t)st.st_size + 1);
	assert_non_null(b);
	for (size_t off = 0; off < (size_t)st.st_size;) {
		ssize_t n = pread(fd, b + off, (size_t)st.st_size - off, (off_t)off);

		assert_true(n > 0);
		off += (size_t)n;
	}
	*ret_len = (size_t)st.st_size;
	return b;
}

static uint8_t *read_path(const char *path, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint8_t *b;

	assert_true(fd >= 0);
	b = read_fd(fd, ret_len);
	close(fd);
	return b;
}

/* The whole stdout of a shell command; *ret_status its exit status. */
static char *cmd_output(int *ret_status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *cmd_output(int *ret_status, const char *fmt, ...)
{
	char cmd[8192], buf[65536], *out = NULL;
	size_t len = 0, n;
	FILE *p, *m;
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	assert_non_null(p);
	m = open_memstream(&out, &len);
	assert_non_null(m);
	while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
		fwrite(buf, 1, n, m);
	fclose(m);
	st = pclose(p);
	*ret_status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

static bool dir_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool empty = true;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = false;
	closedir(d);
	return empty;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* elf_inflate_debug() on path with a fresh, empty directory odir as target;
 * checks that nothing is visible in odir afterwards, whatever the result. */
static int inflate_path(const char *path, uint64_t max, char odir[PATH_MAX])
{
	int src, r;

	snprintf(odir, PATH_MAX, "%s/out.XXXXXX", workdir);
	assert_non_null(mkdtemp(odir));
	src = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(src >= 0);
	r = elf_inflate_debug(src, odir, max);
	close(src);
	assert_true(dir_empty(odir));
	return r;
}

static void done_dir(const char *odir)
{
	assert_true(dir_empty(odir));
	assert_int_equal(rmdir(odir), 0);
}

static void fd_path(int fd, char buf[64])
{
	/* Our descriptors are O_CLOEXEC: tools open the file through our /proc entry. */
	snprintf(buf, 64, "/proc/%d/fd/%d", (int)getpid(), fd);
}

/* ---- eu-readelf -S -z ---- */

struct sec {
	char name[256], type[32], flags[16];
	unsigned long long addr, off, size, es, lk, inf, al;
	char comp[16];                /* "", "ZLIB" (ELF), "GNU", or eu-readelf's name of another type */
	unsigned long long csize, cal; /* inflated size and alignment of a compressed section */
};

static int read_sections(const char *path, struct sec *s, int max)
{
	char line[1024], cmd[PATH_MAX + 64];
	FILE *f;
	int n = 0;

	snprintf(cmd, sizeof(cmd), "eu-readelf -S -z '%s'", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *p = line + strspn(line, " "), *tok[12], *save = NULL;
		int idx, nt = 0, t = 0;

		if (strncmp(p, "[ELF ", 5) == 0) {
			struct sec *c = &s[n - 1];

			assert_true(n > 0);
			assert_int_equal(sscanf(p, "[ELF %15s (%*d) %llx %llu]", c->comp, &c->csize, &c->cal), 3);
			continue;
		}
		if (strncmp(p, "[GNU ZLIB ", 10) == 0) {
			assert_true(n > 0);
			strcpy(s[n - 1].comp, "GNU");
			continue;
		}
		if (sscanf(p, "[%d]", &idx) != 1 || strncmp(p, "[Nr]", 4) == 0)
			continue;
		assert_int_equal(idx, n);
		assert_true(n < max);
		p = strchr(p, ']') + 1;
		for (char *w = strtok_r(p, " \t\n", &save); w && nt < 12; w = strtok_r(NULL, " \t\n", &save))
			tok[nt++] = w;
		memset(&s[n], 0, sizeof(s[n]));
		if (idx > 0)
			snprintf(s[n].name, sizeof(s[n].name), "%s", tok[t++]);
		assert_true(nt - t == 8 || nt - t == 9);
		snprintf(s[n].type, sizeof(s[n].type), "%s", tok[t++]);
		s[n].addr = strtoull(tok[t++], NULL, 16);
		s[n].off = strtoull(tok[t++], NULL, 16);
		s[n].size = strtoull(tok[t++], NULL, 16);
		s[n].es = strtoull(tok[t++], NULL, 10);
		if (nt - t == 4)
			snprintf(s[n].flags, sizeof(s[n].flags), "%s", tok[t++]);
		s[n].lk = strtoull(tok[t++], NULL, 10);
		s[n].inf = strtoull(tok[t++], NULL, 10);
		s[n].al = strtoull(tok[t++], NULL, 10);
		n++;
	}
	assert_int_equal(pclose(f), 0);
	assert_true(n > 0);
	return n;
}

static void strip_flag(char *dst, const char *src, char c)
{
	for (; *src; src++)
		if (*src != c)
			*dst++ = *src;
	*dst = 0;
}

/* Compares the section tables of input and output; returns how many sections
 * were inflated (and adds their inflated sizes to *ret_bytes). */
static int check_sections(const char *in_path, const char *out_path, uint64_t *ret_bytes)
{
	static struct sec in[4096], out[4096];
	int n = read_sections(in_path, in, 4096), inflated = 0;
	uint64_t bytes = 0;

	assert_int_equal(read_sections(out_path, out, 4096), n);
	for (int i = 0; i < n; i++) {
		const struct sec *a = &in[i], *b = &out[i];

		assert_string_equal(a->name, b->name);
		assert_string_equal(a->type, b->type);
		assert_true(a->addr == b->addr && a->es == b->es && a->lk == b->lk && a->inf == b->inf);
		if (i > 0 && strcmp(a->comp, "ZLIB") == 0) {
			char want[16];

			strip_flag(want, a->flags, 'C');
			assert_string_equal(b->flags, want);
			assert_string_equal(b->comp, "");
			assert_true(b->size == a->csize);
			assert_true(b->al == (a->cal ? a->cal : 1));
			assert_true(b->al == 0 || b->off % b->al == 0);
			inflated++;
			bytes += a->csize;
		} else {
			assert_string_equal(a->flags, b->flags);
			assert_string_equal(a->comp, b->comp);
			assert_true(a->off == b->off && a->size == b->size && a->al == b->al);
		}
		/* Nothing zlib-compressed is left in the output. */
		assert_true(strcmp(b->comp, "ZLIB") != 0);
	}
	if (ret_bytes)
		*ret_bytes += bytes;
	return inflated;
}

/* The sum of the inflated sizes of the zlib-compressed sections, as eu-readelf sees it. */
static uint64_t zlib_bytes(const char *path)
{
	static struct sec s[4096];
	int n = read_sections(path, s, 4096);
	uint64_t sum = 0;

	for (int i = 1; i < n; i++)
		if (strcmp(s[i].comp, "ZLIB") == 0)
			sum += s[i].csize;
	return sum;
}

/* `eu-readelf -N --debug-dump=what` of both files, equal up to the file offsets
 * of the sections it names. */
static void check_dump(const char *in_path, const char *out_path, const char *what, const char *must)
{
	static const char filter[] = "sed 's/ at offset 0x[0-9a-f]*//'";
	int st;

	assert_int_equal(run_cmd("eu-readelf -N --debug-dump=%s '%s' 2>&1 | %s > '%s/dump.in'", what, in_path, filter,
				 workdir), 0);
	assert_int_equal(run_cmd("eu-readelf -N --debug-dump=%s '%s' 2>&1 | %s > '%s/dump.out'", what, out_path,
				 filter, workdir), 0);
	assert_int_equal(run_cmd("cmp -s '%s/dump.in' '%s/dump.out'", workdir, workdir), 0);
	/* Both dumps are real DWARF, not the same error message. */
	free(cmd_output(&st, "grep -qF -- '%s' '%s/dump.out'", must, workdir));
	assert_int_equal(st, 0);
}

/* Every uncompressed .debug section of the output equals the one eu-elfcompress
 * inflates independently (same section indexes). */
static void check_bytes(const char *in_path, int out_fd)
{
	char ref[PATH_MAX];
	Elf *er, *eo;
	size_t nr, no, shstrndx;
	int rfd, compared = 0;

	snprintf(ref, sizeof(ref), "%s/ref.elf", workdir);
	assert_int_equal(run_cmd("eu-elfcompress -q -t none -o '%s' '%s'", ref, in_path), 0);
	elf_version(EV_CURRENT);
	rfd = open(ref, O_RDONLY | O_CLOEXEC);
	assert_true(rfd >= 0);
	er = elf_begin(rfd, ELF_C_READ_MMAP, NULL);
	eo = elf_begin(out_fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(er);
	assert_non_null(eo);
	assert_int_equal(elf_getshdrnum(er, &nr), 0);
	assert_int_equal(elf_getshdrnum(eo, &no), 0);
	assert_int_equal(nr, no);
	assert_int_equal(elf_getshdrstrndx(eo, &shstrndx), 0);
	for (size_t i = 1; i < no; i++) {
		Elf_Scn *sr = elf_getscn(er, i), *so = elf_getscn(eo, i);
		GElf_Shdr hr, ho;
		Elf_Data *dr, *dout;
		const char *name;

		assert_non_null(gelf_getshdr(sr, &hr));
		assert_non_null(gelf_getshdr(so, &ho));
		name = elf_strptr(eo, shstrndx, ho.sh_name);
		assert_non_null(name);
		if (strncmp(name, ".debug", 6) != 0 || (ho.sh_flags & SHF_COMPRESSED) || ho.sh_type == SHT_NOBITS)
			continue;
		dr = elf_rawdata(sr, NULL);
		dout = elf_rawdata(so, NULL);
		assert_non_null(dr);
		assert_non_null(dout);
		assert_int_equal(dr->d_size, dout->d_size);
		assert_memory_equal(dr->d_buf, dout->d_buf, dout->d_size);
		compared++;
	}
	assert_true(compared > 0);
	elf_end(er);
	elf_end(eo);
	close(rfd);
	unlink(ref);
}

/* The output starts with the input verbatim but for e_shoff. */
static void check_prefix(const char *in_path, int out_fd)
{
	size_t il, ol;
	uint8_t *a = read_path(in_path, &il), *b = read_fd(out_fd, &ol);
	size_t ehsize = a[EI_CLASS] == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	size_t shoff_at = a[EI_CLASS] == ELFCLASS64 ? offsetof(Elf64_Ehdr, e_shoff) : offsetof(Elf32_Ehdr, e_shoff);
	size_t shoff_len = a[EI_CLASS] == ELFCLASS64 ? 8 : 4;

	assert_true(ol > il);
	assert_memory_equal(a, b, shoff_at);
	assert_memory_equal(a + shoff_at + shoff_len, b + shoff_at + shoff_len, ehsize - shoff_at - shoff_len);
	assert_memory_equal(a + ehsize, b + ehsize, il - ehsize);
	free(a);
	free(b);
}

/* Bytes of .debug section data libdw holds outside the file's mapping after
 * dwarf_begin_elf() (that is, sections it inflated on the heap), and the number
 * of CUs it then reads. Deterministic, unlike mallinfo2() with tcache. */
static size_t libdw_heap(const char *path, size_t *ret_cus)
{
	Dwarf_Off off = 0, next;
	size_t hsize, n = 0, heap = 0, maplen, shstrndx;
	Elf_Scn *scn = NULL;
	const char *map;
	Dwarf *dw;
	Elf *elf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(elf);
	dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	assert_non_null(dw);
	map = elf_rawfile(elf, &maplen);
	assert_non_null(map);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;

		assert_non_null(gelf_getshdr(scn, &sh));
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || (strncmp(name, ".debug", 6) && strncmp(name, ".zdebug", 7)) || sh.sh_type == SHT_NOBITS)
			continue;
		d = elf_getdata(scn, NULL);
		if (d && d->d_size && ((const char *)d->d_buf < map || (const char *)d->d_buf >= map + maplen))
			heap += d->d_size;
	}
	while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die die;

		assert_non_null(dwarf_offdie(dw, off + hsize, &die));
		n++;
		off = next;
	}
	dwarf_end(dw);
	elf_end(elf);
	close(fd);
	*ret_cus = n;
	return heap;
}

/* libdw reads the same CUs from both, and holds less (no: none) inflated data
 * of the output on the heap. */
static void check_libdw(const char *in_path, const char *out_path, bool none)
{
	size_t cin, cout, hin = libdw_heap(in_path, &cin), hout = libdw_heap(out_path, &cout);

	assert_true(cin > 0);
	assert_int_equal(cin, cout);
	print_message("  libdw's heap-held section data: %zu bytes for the input, %zu for the output\n", hin, hout);
	assert_true(hout < hin);
	if (none)
		assert_true(hout == 0);
}

static void check_addr2line(const char *in_path, const char *out_path, const char *sym)
{
	unsigned long long addr = 0, a;
	char line[512], n[256], t, *x, *y;
	bool found = false;
	int st;
	FILE *f;

	snprintf(line, sizeof(line), "nm '%s'", in_path);
	f = popen(line, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %255s", &a, &t, n) == 3 && strcmp(n, sym) == 0) {
			addr = a;
			found = true;
		}
	pclose(f);
	assert_true(found);
	/* An address inside the function (after its first instruction) too. */
	x = cmd_output(&st, "eu-addr2line -f -i -e '%s' 0x%llx 0x%llx", in_path, addr, addr + 4);
	assert_int_equal(st, 0);
	y = cmd_output(&st, "eu-addr2line -f -i -e '%s' 0x%llx 0x%llx", out_path, addr, addr + 4);
	assert_int_equal(st, 0);
	assert_string_equal(x, y);
	assert_non_null(strstr(y, sym));
	assert_null(strstr(y, "??"));
	free(x);
	free(y);
}

/* The whole comparison of an inflated copy with its input. */
static void check_inflated(const char *in_path, bool exec, const char *sym)
{
	char odir[PATH_MAX], out[64];
	uint64_t bytes = 0;
	int fd, n;
	void *map;
	struct stat st;

	fd = inflate_path(in_path, UINT64_MAX, odir);
	assert_true(fd >= 0);
	fd_path(fd, out);
	n = check_sections(in_path, out, &bytes);
	assert_true(n > 0);
	assert_true(bytes == zlib_bytes(in_path));
	check_prefix(in_path, fd);
	check_bytes(in_path, fd);
	check_dump(in_path, out, "info", "compile_unit");
	check_dump(in_path, out, "decodedline", "CU [");
	if (exec) {
		check_addr2line(in_path, out, sym);
		check_libdw(in_path, out, !strstr(in_path, "mixed"));
	}
	/* mmap-able, and nothing left to inflate in it. */
	assert_int_equal(fstat(fd, &st), 0);
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(map != MAP_FAILED);
	assert_memory_equal(map, ELFMAG, SELFMAG);
	munmap(map, (size_t)st.st_size);
	{
		char odir2[PATH_MAX];

		assert_int_equal(inflate_path(out, UINT64_MAX, odir2), -ENODATA);
		done_dir(odir2);
	}
	close(fd);
	done_dir(odir);
}

/* ---- 64-bit ELF surgery for hostile copies ---- */

static Elf64_Shdr shdr_get(const uint8_t *b, size_t i)
{
	Elf64_Ehdr eh;
	Elf64_Shdr sh;

	memcpy(&eh, b, sizeof(eh));
	memcpy(&sh, b + eh.e_shoff + i * sizeof(sh), sizeof(sh));
	return sh;
}

static void shdr_put(uint8_t *b, size_t i, const Elf64_Shdr *sh)
{
	Elf64_Ehdr eh;

	memcpy(&eh, b, sizeof(eh));
	memcpy(b + eh.e_shoff + i * sizeof(*sh), sh, sizeof(*sh));
}

static size_t find_section(const uint8_t *b, const char *name)
{
	Elf64_Ehdr eh;
	Elf64_Shdr str;

	memcpy(&eh, b, sizeof(eh));
	str = shdr_get(b, eh.e_shstrndx);
	for (size_t i = 1; i < eh.e_shnum; i++) {
		Elf64_Shdr sh = shdr_get(b, i);

		if (strcmp((const char *)b + str.sh_offset + sh.sh_name, name) == 0)
			return i;
	}
	fail_msg("no section %s", name);
	return 0;
}

static Elf64_Chdr chdr_get(const uint8_t *b, size_t i)
{
	Elf64_Shdr sh = shdr_get(b, i);
	Elf64_Chdr c;

	assert_true(sh.sh_flags & SHF_COMPRESSED);
	memcpy(&c, b + sh.sh_offset, sizeof(c));
	return c;
}

static void chdr_put(uint8_t *b, size_t i, const Elf64_Chdr *c)
{
	Elf64_Shdr sh = shdr_get(b, i);

	memcpy(b + sh.sh_offset, c, sizeof(*c));
}

/* Writes buf as a file and expects elf_inflate_debug() to fail with want. */
static void expect_error(const char *what, const uint8_t *buf, size_t len, uint64_t max, int want)
{
	char path[PATH_MAX], odir[PATH_MAX];
	int r;

	snprintf(path, sizeof(path), "%s/hostile.bin", workdir);
	write_file(path, buf, len);
	r = inflate_path(path, max, odir);
	if (r != want)
		fail_msg("%s: got %d (%s), want %d", what, r, r < 0 ? strerror(-r) : "a file", want);
	done_dir(odir);
	unlink(path);
}

/* ---- setup ---- */

static int setup(void **state)
{
	char src[PATH_MAX], osrc[PATH_MAX], obj64[PATH_MAX], obj32[PATH_MAX], tmp[PATH_MAX];

	(void)state;
	if (!mkdtemp(workdir))
		return -1;
#define P(var, name) snprintf(var, sizeof(var), "%s/" name, workdir)
	P(src, "prog.c");
	P(osrc, "obj.c");
	P(prog, "prog");
	P(prog_z, "prog_z");
	P(prog_gz, "prog_gz");
	P(obj64, "obj64.o");
	P(obj64_z, "obj64_z.o");
	P(obj32, "obj32.o");
	P(obj32_z, "obj32_z.o");
	P(stripped, "stripped");
	P(zlib_gnu, "prog_zlib_gnu");
	P(zstd, "prog_zstd");
	P(mixed, "prog_mixed");
	P(xnum, "prog_xnum");
	P(tmp, "tmp.elf");
#undef P
	write_file(src, prog_src, sizeof(prog_src) - 1);
	write_file(osrc, obj_src, sizeof(obj_src) - 1);
	if (run_cmd("cc -g -O2 -o '%s' '%s'", prog, src) ||
	    run_cmd("objcopy --compress-debug-sections=zlib-gabi '%s' '%s'", prog, prog_z) ||
	    run_cmd("cc -g -O2 -gz=zlib -o '%s' '%s'", prog_gz, src) ||
	    run_cmd("strip -o '%s' '%s'", stripped, prog) ||
	    run_cmd("objcopy --compress-debug-sections=zlib-gnu '%s' '%s'", prog, zlib_gnu) ||
	    run_cmd("cc -g -O2 -ffunction-sections -c -o '%s' '%s'", obj64, osrc) ||
	    run_cmd("objcopy --compress-debug-sections=zlib-gabi '%s' '%s'", obj64, obj64_z) ||
	    /* GNU-style .zdebug_line next to gABI-compressed sections */
	    run_cmd("eu-elfcompress -q -t zlib-gnu -n .debug_line -o '%s' '%s'", tmp, prog) ||
	    run_cmd("eu-elfcompress -q -t zlib -n '.debug_[ais]*' -o '%s' '%s'", mixed, tmp))
		return -1;
	have_m32 = run_cmd("cc -m32 -g -O2 -ffunction-sections -c -o '%s' '%s' 2>/dev/null", obj32, osrc) == 0 &&
		   run_cmd("objcopy --compress-debug-sections=zlib-gabi '%s' '%s'", obj32, obj32_z) == 0;
	have_zstd = run_cmd("objcopy --compress-debug-sections=zstd '%s' '%s' 2>/dev/null", prog, zstd) == 0;

	/* Extended numbering: e_shnum 0 (count in section 0's sh_size) and
	 * e_shstrndx SHN_XINDEX (index in section 0's sh_link). */
	{
		size_t len;
		uint8_t *b = read_path(prog_z, &len);
		Elf64_Ehdr eh;
		Elf64_Shdr s0;

		memcpy(&eh, b, sizeof(eh));
		s0 = shdr_get(b, 0);
		s0.sh_size = eh.e_shnum;
		s0.sh_link = eh.e_shstrndx;
		shdr_put(b, 0, &s0);
		eh.e_shnum = 0;
		eh.e_shstrndx = SHN_XINDEX;
		memcpy(b, &eh, sizeof(eh));
		write_file(xnum, b, len);
		free(b);
	}
	unlink(tmp);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	run_cmd("rm -rf '%s'", workdir);
	return 0;
}

/* ---- tests ---- */

static void test_executable(void **state)
{
	(void)state;
	check_inflated(prog_z, true, "work");
	check_addr2line(prog_z, prog_z, "norm"); /* sanity of the helper itself */
}

static void test_gcc_gz(void **state)
{
	(void)state;
	check_inflated(prog_gz, true, "norm");
}

static void test_relocatable(void **state)
{
	(void)state;
	check_inflated(obj64_z, false, NULL);
	if (!have_m32) {
		print_message("  (no cc -m32: ELFCLASS32 not tested)\n");
		return;
	}
	assert_int_equal(run_cmd("eu-readelf -h '%s' | grep -q 'ELF32'", obj32_z), 0);
	check_inflated(obj32_z, false, NULL);
}

static void test_extended_numbering(void **state)
{
	(void)state;
	/* eu-readelf shows the real values in parentheses. */
	assert_int_equal(run_cmd("eu-readelf -h '%s' | grep -q 'Number of section headers entries: *0 ('", xnum), 0);
	assert_int_equal(run_cmd("eu-readelf -h '%s' | grep -q 'Section header string table index: *XINDEX'", xnum), 0);
	check_inflated(xnum, true, "work");
}

/* .zdebug_* (GNU) and zstd sections stay as they are. */
static void test_left_alone(void **state)
{
	static struct sec in[256], o[256];
	char odir[PATH_MAX], out[64], path[PATH_MAX];
	size_t len, info, str;
	Elf64_Ehdr eh;
	Elf64_Chdr c;
	uint8_t *b;
	int fd, n;

	(void)state;
	check_inflated(mixed, true, "work");
	assert_int_equal(inflate_path(zlib_gnu, UINT64_MAX, odir), -ENODATA);
	done_dir(odir);
	if (have_zstd) {
		assert_int_equal(run_cmd("eu-readelf -S -z '%s' | grep -q 'ELF .* (2)'", zstd), 0);
		assert_int_equal(inflate_path(zstd, UINT64_MAX, odir), -ENODATA);
		done_dir(odir);
	}

	/* One section claiming ELFCOMPRESS_ZSTD among zlib ones: only it is kept. */
	b = read_path(prog_z, &len);
	info = find_section(b, ".debug_info");
	str = find_section(b, ".debug_str");
	c = chdr_get(b, info);
	c.ch_type = ELFCOMPRESS_ZSTD;
	chdr_put(b, info, &c);
	snprintf(path, sizeof(path), "%s/one_zstd", workdir);
	write_file(path, b, len);
	fd = inflate_path(path, UINT64_MAX, odir);
	assert_true(fd >= 0);
	fd_path(fd, out);
	assert_true(check_sections(path, out, NULL) > 0);
	n = read_sections(path, in, 256);
	assert_int_equal(read_sections(out, o, 256), n);
	assert_non_null(strchr(o[info].flags, 'C'));
	assert_true(o[info].off == in[info].off && o[info].size == in[info].size);
	assert_null(strchr(o[str].flags, 'C'));
	close(fd);
	done_dir(odir);
	unlink(path);

	/* All of them zstd: nothing to do. */
	memcpy(&eh, b, sizeof(eh));
	for (size_t i = 1; i < eh.e_shnum; i++) {
		if (!(shdr_get(b, i).sh_flags & SHF_COMPRESSED))
			continue;
		c = chdr_get(b, i);
		c.ch_type = ELFCOMPRESS_ZSTD;
		chdr_put(b, i, &c);
	}
	expect_error("all zstd", b, len, UINT64_MAX, -ENODATA);
	free(b);
}

static void test_nothing_to_do(void **state)
{
	char odir[PATH_MAX], path[PATH_MAX];
	uint8_t junk[8192];
	int src;

	(void)state;
	assert_int_equal(inflate_path(prog, UINT64_MAX, odir), -ENODATA);
	done_dir(odir);
	assert_int_equal(inflate_path(stripped, UINT64_MAX, odir), -ENODATA);
	done_dir(odir);
	srand(7);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	expect_error("random bytes", junk, sizeof(junk), UINT64_MAX, -ENOEXEC);
	expect_error("empty file", junk, 0, UINT64_MAX, -ENOEXEC);
	memcpy(junk, ELFMAG, SELFMAG);
	expect_error("ELF magic only", junk, 7, UINT64_MAX, -ENOEXEC);

	/* Not a regular file; no such directory. */
	src = open(workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(src >= 0);
	assert_int_equal(elf_inflate_debug(src, workdir, UINT64_MAX), -EINVAL);
	close(src);
	src = open(prog_z, O_RDONLY | O_CLOEXEC);
	assert_true(src >= 0);
	snprintf(path, sizeof(path), "%s/no such dir", workdir);
	assert_int_equal(elf_inflate_debug(src, path, UINT64_MAX), -ENOENT);
	assert_int_equal(elf_inflate_debug(src, NULL, UINT64_MAX), -EINVAL);
	close(src);
}

static void test_max_bytes(void **state)
{
	uint64_t need = zlib_bytes(prog_z);
	char odir[PATH_MAX];
	int fd;

	(void)state;
	assert_true(need > 0);
	assert_int_equal(inflate_path(prog_z, 1, odir), -EFBIG);
	done_dir(odir);
	assert_int_equal(inflate_path(prog_z, need - 1, odir), -EFBIG);
	done_dir(odir);
	fd = inflate_path(prog_z, need, odir);
	assert_true(fd >= 0);
	close(fd);
	done_dir(odir);
}

/* Damages 1 to 4 random bytes anywhere in a copy of path, iters times: any
 * result but a crash or a file left behind is fine. */
static void fuzz(const char *path, int iters, unsigned seed)
{
	char fpath[PATH_MAX], odir[PATH_MAX];
	size_t len;
	uint8_t *orig = read_path(path, &len), *b = malloc(len);
	int ok = 0;

	assert_non_null(b);
	snprintf(fpath, sizeof(fpath), "%s/fuzz.bin", workdir);
	srand(seed);
	for (int k = 0; k < iters; k++) {
		int r;

		memcpy(b, orig, len);
		for (int n = 1 + rand() % 4; n > 0; n--)
			b[(size_t)rand() % len] ^= (uint8_t)(1 + rand() % 255);
		write_file(fpath, b, len);
		r = inflate_path(fpath, UINT64_MAX, odir);
		if (r >= 0) {
			ok++;
			close(r);
		}
		done_dir(odir);
	}
	unlink(fpath);
	print_message("  %s: %d of %d damaged copies still inflated\n", path, ok, iters);
	free(b);
	free(orig);
}

static void test_hostile(void **state)
{
	size_t len, info;
	uint8_t *orig, *b;
	int fds = count_fds();
	Elf64_Ehdr eh;
	Elf64_Shdr sh;
	Elf64_Chdr c;

	(void)state;
	orig = read_path(prog_z, &len);
	b = malloc(len);
	assert_non_null(b);
	memcpy(&eh, orig, sizeof(eh));
	info = find_section(orig, ".debug_info");
#define RESET() memcpy(b, orig, len)

	/* Truncated files. */
	expect_error("truncated in the section table", orig, len - 10, UINT64_MAX, -ENOEXEC);
	expect_error("truncated before the section table", orig, eh.e_shoff, UINT64_MAX, -ENOEXEC);
	expect_error("truncated to the ELF header", orig, sizeof(eh), UINT64_MAX, -ENOEXEC);
	expect_error("truncated in the ELF header", orig, sizeof(eh) - 1, UINT64_MAX, -ENOEXEC);
	expect_error("truncated to 100 bytes", orig, 100, UINT64_MAX, -ENOEXEC);

	/* ELF header. */
#define EH(field, value, want)                                               \
	do {                                                                 \
		Elf64_Ehdr e = eh;                                           \
		RESET();                                                     \
		e.field = value;                                             \
		memcpy(b, &e, sizeof(e));                                    \
		expect_error(#field " = " #value, b, len, UINT64_MAX, want); \
	} while (0)
	EH(e_ident[EI_DATA], ELFDATA2MSB, -ENOEXEC);
	EH(e_ident[EI_CLASS], 3, -ENOEXEC);
	EH(e_ident[EI_CLASS], ELFCLASS32, -ENOEXEC); /* 64-bit table read as 32-bit: shentsize */
	EH(e_ident[EI_MAG1], 'X', -ENOEXEC);
	EH(e_ident[EI_VERSION], 2, -ENOEXEC);
	EH(e_shentsize, 63, -ENOEXEC);
	EH(e_shentsize, 0, -ENOEXEC);
	EH(e_shoff, len, -ENOEXEC);
	EH(e_shoff, UINT64_MAX - 8, -ENOEXEC);
	EH(e_shoff, 0, -ENODATA);
	EH(e_shnum, 0xffff, -ENOEXEC);
	EH(e_shnum, 0, -ENODATA); /* and section 0's sh_size is 0 */
	{
		Elf64_Ehdr e = eh;
		Elf64_Shdr s0 = shdr_get(orig, 0);

		RESET();
		e.e_shnum = 0;
		memcpy(b, &e, sizeof(e));
		s0.sh_size = UINT64_C(1) << 40;
		shdr_put(b, 0, &s0);
		expect_error("section 0 sh_size huge", b, len, UINT64_MAX, -ENOEXEC);
		s0.sh_size = eh.e_shnum + 1000;
		shdr_put(b, 0, &s0);
		expect_error("section 0 sh_size past EOF", b, len, UINT64_MAX, -ENOEXEC);
	}

	/* Section headers of a compressed section. */
#define SH(field, value, want)                                                \
	do {                                                                  \
		RESET();                                                      \
		sh = shdr_get(orig, info);                                    \
		sh.field = value;                                             \
		shdr_put(b, info, &sh);                                       \
		expect_error("sh." #field " = " #value, b, len, UINT64_MAX, want); \
	} while (0)
	SH(sh_offset, len + 16, -EINVAL);
	SH(sh_offset, len - 8, -EINVAL);
	SH(sh_offset, UINT64_MAX - 16, -EINVAL);
	SH(sh_size, len, -EINVAL);
	SH(sh_size, UINT64_MAX, -EINVAL);
	SH(sh_size, sizeof(Elf64_Chdr) - 1, -EINVAL); /* Chdr larger than the section */
	SH(sh_size, sizeof(Elf64_Chdr), -EINVAL);     /* no zlib stream at all */
	SH(sh_size, shdr_get(orig, info).sh_size - 8, -EINVAL); /* truncated stream */

	/* Compression headers. */
#define CH(field, value, want)                                                \
	do {                                                                  \
		RESET();                                                      \
		c = chdr_get(orig, info);                                     \
		c.field = value;                                              \
		chdr_put(b, info, &c);                                        \
		expect_error("ch." #field " = " #value, b, len, UINT64_MAX, want); \
	} while (0)
	CH(ch_size, UINT64_C(1) << 62, -EINVAL);
	CH(ch_size, UINT64_MAX, -EINVAL);
	CH(ch_size, chdr_get(orig, info).ch_size + 1, -EINVAL);
	CH(ch_size, chdr_get(orig, info).ch_size - 1, -EINVAL);
	CH(ch_size, 0, -EINVAL);
	CH(ch_addralign, 3, -EINVAL);
	CH(ch_addralign, UINT64_C(1) << 40, -EINVAL);
	CH(ch_addralign, UINT64_C(1) << 63, -EINVAL);
	/* A huge but plausible (under 1032:1) ch_size is over the budget. */
	RESET();
	c = chdr_get(orig, info);
	c.ch_size = (shdr_get(orig, info).sh_size - sizeof(c)) * 1000;
	chdr_put(b, info, &c);
	expect_error("ch_size 1000x", b, len, 100000, -EFBIG);
	expect_error("ch_size 1000x, no budget", b, len, UINT64_MAX, -EINVAL); /* stream ends early */

	/* Corrupt zlib streams. */
	sh = shdr_get(orig, info);
	RESET();
	for (size_t i = sizeof(Elf64_Chdr) + 2; i < sh.sh_size - 4; i += 3)
		b[sh.sh_offset + i] ^= 0x5a;
	expect_error("flipped deflate bytes", b, len, UINT64_MAX, -EINVAL);
	RESET();
	b[sh.sh_offset + sh.sh_size - 1] ^= 1; /* adler32 */
	expect_error("bad adler32", b, len, UINT64_MAX, -EINVAL);
	RESET();
	b[sh.sh_offset + sizeof(Elf64_Chdr)] = 0x00; /* zlib header */
	expect_error("bad zlib header", b, len, UINT64_MAX, -EINVAL);
	RESET();
	memset(b + sh.sh_offset + sizeof(Elf64_Chdr), 0, sh.sh_size - sizeof(Elf64_Chdr));
	expect_error("zeroed stream", b, len, UINT64_MAX, -EINVAL);
	RESET();
	{
		/* FDICT set (wants a preset dictionary), FCHECK fixed up. */
		uint8_t *z = b + sh.sh_offset + sizeof(Elf64_Chdr);

		z[1] = (uint8_t)((z[1] & 0xc0) | 0x20);
		z[1] = (uint8_t)(z[1] | (31 - (z[0] * 256 + z[1]) % 31) % 31);
		assert_int_equal((z[0] * 256 + z[1]) % 31, 0);
	}
	expect_error("preset dictionary", b, len, UINT64_MAX, -EINVAL);

	/* Random single-byte damage anywhere in the compressed sections or the
	 * headers: never a crash, never a file left behind. */
	srand(1234);
	for (int k = 0; k < 300; k++) {
		char path[PATH_MAX], odir[PATH_MAX];
		size_t at;
		int r;

		RESET();
		if (k % 3 == 0)
			at = (size_t)rand() % sizeof(eh);
		else if (k % 3 == 1)
			at = eh.e_shoff + (size_t)rand() % (len - eh.e_shoff);
		else
			at = sh.sh_offset + (size_t)rand() % sh.sh_size;
		b[at] ^= (uint8_t)(1 + rand() % 255);
		snprintf(path, sizeof(path), "%s/fuzz.bin", workdir);
		write_file(path, b, len);
		r = inflate_path(path, UINT64_MAX, odir);
		if (r >= 0)
			close(r);
		done_dir(odir);
		unlink(path);
	}
	free(b);
	free(orig);
#undef EH
#undef SH
#undef CH
#undef RESET
	fuzz(obj64_z, 150, 99);
	if (have_m32)
		fuzz(obj32_z, 150, 32);
	assert_int_equal(count_fds(), fds);
}

/* Where a distribution debug file with compressed sections is: libc6-dbg's, or
 * any with a zlib-compressed section. */
static bool find_debug_file(char *path, size_t size)
{
	static const char libc[] = "/usr/lib/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug";
	char line[PATH_MAX];
	bool found = false;
	FILE *f;

	if (access(libc, R_OK) == 0 && run_cmd("eu-readelf -S -z '%s' | grep -q 'ELF ZLIB'", libc) == 0) {
		snprintf(path, size, "%s", libc);
		return true;
	}
	f = popen("find /usr/lib/debug/.build-id -name '*.debug' -size +200k 2>/dev/null | head -200", "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (run_cmd("eu-readelf -S -z '%s' 2>/dev/null | grep -q 'ELF ZLIB'", line) == 0) {
			snprintf(path, size, "%s", line);
			found = true;
		}
	}
	pclose(f);
	return found;
}

static void test_distro_debug_file(void **state)
{
	char path[PATH_MAX], odir[PATH_MAX], out[64];
	static const char hash[] = "sed 's/ at offset 0x[0-9a-f]*//' | sha256sum";
	struct timespec t0, t1;
	uint64_t bytes = 0, need;
	char *x, *y;
	struct stat st;
	int fd, s1, s2;

	(void)state;
	if (!find_debug_file(path, sizeof(path))) {
		print_message("  no compressed debug file under /usr/lib/debug: skipped\n");
		skip();
	}
	need = zlib_bytes(path);
	assert_int_equal(inflate_path(path, need - 1, odir), -EFBIG);
	done_dir(odir);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	fd = inflate_path(path, need, odir);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	print_message("  %s: %" PRIu64 " inflated bytes, %lld-byte file, in %.3f s\n", path, need,
		      (long long)st.st_size, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	fd_path(fd, out);
	assert_true(check_sections(path, out, &bytes) > 0);
	assert_true(bytes == need);
	check_prefix(path, fd);
	check_bytes(path, fd);
	/* -N: without it eu-readelf looks up a symbol per address (minutes). */
	x = cmd_output(&s1, "eu-readelf -N --debug-dump=decodedline '%s' | %s", path, hash);
	y = cmd_output(&s2, "eu-readelf -N --debug-dump=decodedline '%s' | %s", out, hash);
	assert_true(s1 == 0 && s2 == 0);
	assert_string_equal(x, y);
	free(x);
	free(y);
	x = cmd_output(&s1, "eu-readelf -N --debug-dump=info '%s' | %s", path, hash);
	y = cmd_output(&s2, "eu-readelf -N --debug-dump=info '%s' | %s", out, hash);
	assert_true(s1 == 0 && s2 == 0);
	assert_string_equal(x, y);
	free(x);
	free(y);
	/* Source lines of 200 functions from the file's own symbol table. */
	assert_int_equal(run_cmd("nm '%s' | awk '$2 ~ /^[Tt]$/ && $1 !~ /^0+$/ { print \"0x\" $1 }' | "
				 "head -200 > '%s/addrs'", path, workdir), 0);
	x = cmd_output(&s1, "eu-addr2line -f -i -e '%s' $(cat '%s/addrs')", path, workdir);
	y = cmd_output(&s2, "eu-addr2line -f -i -e '%s' $(cat '%s/addrs')", out, workdir);
	assert_true(s1 == 0 && s2 == 0);
	assert_true(strlen(x) > 1000);
	assert_string_equal(x, y);
	free(x);
	free(y);
	check_libdw(path, out, true);
	close(fd);
	done_dir(odir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_executable),
		cmocka_unit_test(test_gcc_gz),
		cmocka_unit_test(test_relocatable),
		cmocka_unit_test(test_extended_numbering),
		cmocka_unit_test(test_left_alone),
		cmocka_unit_test(test_nothing_to_do),
		cmocka_unit_test(test_max_bytes),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_distro_debug_file),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

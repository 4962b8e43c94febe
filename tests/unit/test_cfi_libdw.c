/* test_cfi_libdw.c: prowl's unwind tables against libdw's own CFI reader. Every row of
 * an object's table is walked; at each stretch of addresses where neither prowl's row nor
 * libdw's frame changes, dwarf_cfi_addrframe() gives the CFA, return-address and rbp
 * rules, which (packed as prowl packs them, cfi_expect.h) must equal prowl's row.
 *
 * Differences allowed by name, and counted apart:
 *   padding    a gap under 16 bytes between two FDEs, which prowl covers with the
 *              previous rule (alignment padding: never executed, never returned to)
 *   plt-synth  PLT sections without CFI, whose rules prowl writes itself
 *   cfa-lost   DW_CFA_def_cfa_register (or _offset) right after a CFA expression,
 *              which DWARF calls invalid: libdw then has no CFA (or the self-referent
 *              "call_frame_cfa + N"), while prowl, like GDB, takes the register with
 *              the offset of the last register rule, which is what the assembler
 *              meant (libgcrypt's hand-written epilogues: pops, then ret)
 * A rule prowl cannot express (a PROWL_CFA_BAD row) matches when libdw's rule is one
 * that prowl's packing turns into BAD too; those rows are counted apart as well.
 *
 * Without arguments: the suite's capped sample (libc, ld.so, this binary, then other
 * objects of /usr/lib and /usr/bin for a few seconds), and the same of Debian's arm64
 * objects (/usr/lib/aarch64-linux-gnu). With --full [--seconds N]
 * [DIR...]: every ELF object under DIR (default /usr/lib /usr/bin) for at most N seconds
 * (default 1800); prints the figures, exits 1 on an unexplained mismatch (make check-cfi). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cfi_expect.h"
#include "unwind_table.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define LDSO "/lib64/ld-linux-x86-64.so.2"
#define SAMPLE_SECONDS 3.0
#define PADDING 16 /* prowl covers FDE gaps shorter than this with the previous rule */

struct figures {
	uint64_t objects;        /* ELF objects looked at */
	uint64_t with_cfi;       /* ... whose table has rows */
	uint64_t rows;           /* prowl rows walked */
	uint64_t compared;       /* stretches compared with libdw */
	uint64_t bad_both;       /* ... where both say: a rule prowl cannot express */
	uint64_t gaps;           /* prowl NONE rows where libdw has no FDE either */
	uint64_t padding, plt_synth, cfa_lost; /* allowed differences */
	uint64_t mismatches;
	uint64_t libdw_errors;   /* libdw failed otherwise than "no FDE here" */
	uint64_t not_compared;   /* objects whose tables libdw could not be asked about */
	uint64_t shown;          /* mismatches printed */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- libdw's view ---- */

struct libdw_cfi {
	Dwarf_CFI *eh, *dbg;
	Dwarf *dw;
	bool arm64;
};

/* libdw's frame at pc: .eh_frame first, as prowl reads it. NULL when no FDE
 * covers pc (or libdw failed: counted). */
static Dwarf_Frame *frame_at(const struct libdw_cfi *l, uint64_t pc, struct figures *fg)
{
	Dwarf_CFI *cfis[2] = { l->eh, l->dbg };

	for (int i = 0; i < 2; i++) {
		Dwarf_Frame *f = NULL;

		if (!cfis[i])
			continue;
		if (dwarf_cfi_addrframe(cfis[i], pc, &f) == 0)
			return f;
		if (strcmp(dwarf_errmsg(-1), "no matching address range") != 0)
			fg->libdw_errors++;
	}
	return NULL;
}

/* How libdw says register reg is recovered. */
static struct xrule reg_rule(Dwarf_Frame *f, int reg)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t n = 0;

	if (dwarf_frame_register(f, reg, mem, &ops, &n) != 0)
		return (struct xrule){ U_OTHER, 0 };
	if (n == 0)
		return (struct xrule){ ops ? U_UNDEF : U_SAME, 0 };
	if (ops[0].atom != DW_OP_call_frame_cfa)
		return (struct xrule){ U_OTHER, 0 };
	if (n == 1)
		return (struct xrule){ U_OFF, 0 };
	if (n == 2 && ops[1].atom == DW_OP_plus_uconst)
		return (struct xrule){ U_OFF, (long)(int64_t)ops[1].number };
	return (struct xrule){ U_OTHER, 0 }; /* val_offset, expression, register */
}

/* ld's PLT CFA expression, decoded: breg7 N; breg16 0; lit15; and; litK; ge;
 * lit3; shl; plus (prowl takes N up to 4096). */
static bool is_plt(const Dwarf_Op *o, size_t n, long *ret_n, long *ret_k)
{
	static const uint8_t shape[] = { DW_OP_breg7, DW_OP_breg16, DW_OP_lit15, DW_OP_and, 0,
					 DW_OP_ge, DW_OP_lit3, DW_OP_shl, DW_OP_plus };

	if (n != sizeof(shape))
		return false;
	for (size_t i = 0; i < n; i++)
		if (i != 4 && o[i].atom != shape[i])
			return false;
	if (o[4].atom < DW_OP_lit0 || o[4].atom > DW_OP_lit31 || o[1].number != 0 || (int64_t)o[0].number < 0 ||
	    (int64_t)o[0].number > 4096)
		return false;
	*ret_n = (long)o[0].number;
	*ret_k = o[4].atom - DW_OP_lit0;
	return true;
}

/* Fills st with libdw's rules at f; *cfa_lost when libdw has no CFA or one
 * defined by itself (what it makes of a register rule after an expression). */
static void libdw_state(Dwarf_Frame *f, bool arm64, struct xstate *st, bool *cfa_lost)
{
	Dwarf_Op *ops = NULL;
	size_t n = 0;

	memset(st, 0, sizeof(*st));
	dwarf_frame_info(f, NULL, NULL, &st->signal);
	st->ra = reg_rule(f, arm64 ? 30 : 16);   /* x30 / the return address column */
	st->rbp = reg_rule(f, arm64 ? 29 : 6);   /* x29 / rbp */
	*cfa_lost = dwarf_frame_cfa(f, &ops, &n) != 0 || n == 0 || ops[0].atom == DW_OP_call_frame_cfa;
	if (*cfa_lost) {
		st->cfa_expr = true; /* nothing prowl could use */
		return;
	}
	if (n == 1 && ops[0].atom == DW_OP_bregx) {
		st->cfa_reg = (int)ops[0].number;
		st->cfa_off = (long)(int64_t)ops[0].number2;
		return;
	}
	st->cfa_expr = true;
	st->plt = is_plt(ops, n, &st->plt_n, &st->plt_k);
}

/* ---- the walk ---- */

/* Whether [pc, pc + 1) lies in a PLT section (.plt, .plt.got, .plt.sec). */
static bool in_plt(Elf *elf, uint64_t pc)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || pc < sh.sh_addr || pc - sh.sh_addr >= sh.sh_size)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		return name && strncmp(name, ".plt", 4) == 0 && (!name[4] || name[4] == '.');
	}
	return false;
}

static void mismatch(struct figures *fg, const char *path, uint64_t pc, const struct prowl_unwind_row *r,
		     const struct xrow *want, const char *why)
{
	char got[64] = "(none)";

	fg->mismatches++;
	if (fg->shown++ >= 20)
		return;
	if (r)
		unwind_row_format(r, got, sizeof(got));
	fprintf(stderr, "mismatch: %s %#" PRIx64 ": prowl %s, libdw %s (cfa type %d off %ld rbp %d/%ld)\n", path,
		pc, got, why, want ? want->cfa_type : -1, want ? want->cfa_off : 0, want ? want->rbp_type : -1,
		want ? want->rbp_off : 0);
}

/* The first address in (pc, limit) where libdw has an FDE, or limit. */
static uint64_t next_fde(const struct libdw_cfi *l, uint64_t pc, uint64_t limit, struct figures *fg)
{
	for (uint64_t q = pc + 1; q < limit; q++) {
		Dwarf_Frame *f = frame_at(l, q, fg);

		if (f) {
			free(f);
			return q;
		}
	}
	return limit;
}

/* Compares the stretch [pc, hi) of prowl row r; returns where the next
 * stretch starts. */
static uint64_t compare_at(Elf *elf, const struct libdw_cfi *l, const char *path, const struct unwind_table *t,
			   const struct prowl_unwind_row *r, uint64_t pc, uint64_t hi, struct figures *fg)
{
	Dwarf_Frame *f = frame_at(l, pc, fg);
	Dwarf_Addr start, end;
	struct xstate st;
	struct xrow want;
	bool cfa_lost;
	uint64_t next;

	if (!f) {
		if (PROWL_ROW_CFA(r) == PROWL_CFA_NONE) {
			fg->gaps++;
			return hi;
		}
		next = next_fde(l, pc, hi < pc + PADDING ? hi : pc + PADDING, fg);
		if (next < hi || next - pc < PADDING) {
			fg->padding++;
			return next;
		}
		if (t->st.plt_synth && in_plt(elf, pc)) {
			fg->plt_synth++;
			return hi;
		}
		mismatch(fg, path, pc, r, NULL, "has no FDE");
		return hi;
	}
	dwarf_frame_info(f, &start, &end, NULL);
	libdw_state(f, l->arm64, &st, &cfa_lost);
	free(f);
	if (l->arm64)
		expect_row_arm64(&st, &want);
	else
		expect_row(&st, &want);
	fg->compared++;
	if (PROWL_ROW_CFA(r) == PROWL_CFA_NONE)
		mismatch(fg, path, pc, r, &want, "has an FDE");
	else if (row_matches(r, &want))
		fg->bad_both += want.cfa_type == PROWL_CFA_BAD;
	else if (cfa_lost && (PROWL_ROW_CFA(r) == PROWL_CFA_RSP || PROWL_ROW_CFA(r) == PROWL_CFA_RBP))
		fg->cfa_lost++;
	else
		mismatch(fg, path, pc, r, &want, "says");
	return end > pc && end < hi ? end : hi;
}

/* Walks every row of t (of elf, at path) against libdw. */
static void compare_table(Elf *elf, const char *path, const struct unwind_table *t, struct figures *fg,
			  double deadline)
{
	GElf_Ehdr eh;
	struct libdw_cfi l = { .eh = dwarf_getcfi_elf(elf),
			       .arm64 = gelf_getehdr(elf, &eh) && eh.e_machine == EM_AARCH64 };

	if (t->st.debug_frame) {
		l.dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
		l.dbg = l.dw ? dwarf_getcfi(l.dw) : NULL;
	}
	if (!l.eh && !l.dbg) {
		fg->not_compared++;
		goto out;
	}
	for (size_t i = 0; i + 1 < t->n && now_s() < deadline; i++) {
		const struct prowl_unwind_row *r = &t->rows[i];
		uint64_t pc = t->base + r->pc, hi = t->base + t->rows[i + 1].pc;

		fg->rows++;
		while (pc < hi)
			pc = compare_at(elf, &l, path, t, r, pc, hi, fg);
	}
out:
	if (l.eh)
		dwarf_cfi_end(l.eh);
	if (l.dw)
		dwarf_end(l.dw);
}

/* Builds path's table and compares it; mutate (tests only) changes one row
 * first. Returns false when path is not an ELF object with a table. */
static bool compare_file(const char *path, struct figures *fg, double deadline, void (*mutate)(struct unwind_table *))
{
	struct unwind_table t = {};
	unsigned char magic[4];
	bool ok = false;
	GElf_Ehdr eh;
	Elf *elf;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return false;
	if (pread(fd, magic, 4, 0) != 4 || memcmp(magic, ELFMAG, SELFMAG) != 0) {
		close(fd);
		return false;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && gelf_getehdr(elf, &eh) && (eh.e_type == ET_EXEC || eh.e_type == ET_DYN) &&
	    (eh.e_machine == EM_X86_64 || eh.e_machine == EM_AARCH64)) {
		fg->objects++;
		if (unwind_table_build(elf, &t) == 0 && t.n) {
			fg->with_cfi++;
			if (mutate)
				mutate(&t);
			compare_table(elf, path, &t, fg, deadline);
			ok = true;
		}
		unwind_table_free(&t);
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return ok;
}

/* Every regular ELF file under dirs (symlinks not followed, so each file
 * once), until deadline. */
static void compare_tree(char *const *dirs, struct figures *fg, double deadline)
{
	FTS *fts = fts_open(dirs, FTS_PHYSICAL | FTS_NOCHDIR | FTS_XDEV, NULL);
	FTSENT *e;

	if (!fts)
		return;
	while ((e = fts_read(fts)) && now_s() < deadline)
		if (e->fts_info == FTS_F && e->fts_statp->st_size >= 64)
			compare_file(e->fts_path, fg, deadline, NULL);
	fts_close(fts);
}

static void print_figures(const struct figures *fg, double secs, FILE *out)
{
	fprintf(out,
		"cfi vs libdw: %" PRIu64 " objects (%" PRIu64 " with CFI), %" PRIu64 " rows, %" PRIu64
		" stretches compared (%" PRIu64 " both BAD), %" PRIu64 " gaps; allowed: %" PRIu64 " padding, %" PRIu64
		" plt-synth, %" PRIu64 " cfa-lost; %" PRIu64 " mismatches; %" PRIu64 " libdw errors; %" PRIu64
		" objects not compared; %.1f s\n",
		fg->objects, fg->with_cfi, fg->rows, fg->compared, fg->bad_both, fg->gaps, fg->padding, fg->plt_synth,
		fg->cfa_lost, fg->mismatches, fg->libdw_errors, fg->not_compared, secs);
}

/* ---- the suite's sample ---- */

static void test_sample(void **state)
{
	/* libutil's PLT has PLT0 only: an FDE whose program ends by advancing
	 * to its very end (prowl once dropped that last row). */
	static const char *const fixed[] = { LIBC, LDSO, "/proc/self/exe", "/lib/x86_64-linux-gnu/libutil.so.1" };
	char *dirs[] = { "/usr/lib/x86_64-linux-gnu", "/usr/bin", NULL };
	double t0 = now_s(), deadline = t0 + SAMPLE_SECONDS;
	struct figures fg = {};

	(void)state;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		assert_true(compare_file(fixed[i], &fg, t0 + 600, NULL));
	compare_tree(dirs, &fg, deadline);
	print_figures(&fg, now_s() - t0, stderr);
	assert_int_equal(fg.mismatches, 0);
	assert_true(fg.compared >= 20000);
	assert_true(fg.with_cfi >= 3);
}

/* The same over Debian's arm64 objects (multiarch: packaging/install-deps.sh arm64),
 * built with return-address signing: the arm64 rules, x30 and negate_ra_state. */
#define ARM64_LIBC "/usr/lib/aarch64-linux-gnu/libc.so.6"
static void test_sample_arm64(void **state)
{
	char *dirs[] = { "/usr/lib/aarch64-linux-gnu", NULL };
	double t0 = now_s();
	struct figures fg = {};

	(void)state;
	if (access(ARM64_LIBC, R_OK) != 0)
		fail_msg("%s is missing: run packaging/install-deps.sh arm64", ARM64_LIBC);
	assert_true(compare_file(ARM64_LIBC, &fg, t0 + 600, NULL));
	compare_tree(dirs, &fg, t0 + SAMPLE_SECONDS);
	print_figures(&fg, now_s() - t0, stderr);
	assert_int_equal(fg.mismatches, 0);
	assert_true(fg.compared >= 20000);
	assert_true(fg.with_cfi >= 10);
}

/* A table with one wrong row is caught: the comparison can fail. */
static void shift_one_rsp_row(struct unwind_table *t)
{
	for (size_t i = t->n / 2; i < t->n; i++) {
		if (PROWL_ROW_CFA(&t->rows[i]) == PROWL_CFA_RSP) {
			t->rows[i].cfa_off++;
			return;
		}
	}
}

static void test_detects_a_wrong_row(void **state)
{
	struct figures fg = {};

	(void)state;
	assert_true(compare_file(LIBC, &fg, now_s() + 600, shift_one_rsp_row));
	assert_true(fg.mismatches >= 1);
}

/* On arm64, a return address taken from x30 where it was saved (or the reverse)
 * is caught as well. */
static void flip_one_lr_row(struct unwind_table *t)
{
	for (size_t i = t->n / 2; i < t->n; i++) {
		struct prowl_unwind_row *r = &t->rows[i];

		if (PROWL_ROW_CFA(r) == PROWL_CFA_RSP && PROWL_ROW_RA(r) == PROWL_RA_LR && r->cfa_off) {
			r->rule = (uint8_t)((r->rule & 0x3f) | PROWL_RA_CFA << 6);
			return;
		}
	}
}

static void test_detects_a_wrong_arm64_row(void **state)
{
	struct figures fg = {};

	(void)state;
	assert_true(compare_file(ARM64_LIBC, &fg, now_s() + 600, flip_one_lr_row));
	assert_true(fg.mismatches >= 1);
	fg = (struct figures){};
	assert_true(compare_file(ARM64_LIBC, &fg, now_s() + 600, shift_one_rsp_row));
	assert_true(fg.mismatches >= 1);
}

static int full(int argc, char **argv)
{
	char *defaults[] = { "/usr/lib", "/usr/bin", NULL };
	char **dirs = defaults;
	double secs = 1800, t0 = now_s();
	struct figures fg = {};
	int i = 2;

	if (i + 1 < argc && strcmp(argv[i], "--seconds") == 0) {
		secs = atof(argv[i + 1]);
		i += 2;
	}
	if (i < argc)
		dirs = argv + i;
	compare_tree(dirs, &fg, t0 + secs);
	print_figures(&fg, now_s() - t0, stdout);
	if (now_s() >= t0 + secs)
		printf("stopped at the time limit (%.0f s): not every object was compared\n", secs);
	return fg.mismatches ? 1 : 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample),
		cmocka_unit_test(test_detects_a_wrong_row),
		cmocka_unit_test(test_sample_arm64),
		cmocka_unit_test(test_detects_a_wrong_arm64_row),
	};

	elf_version(EV_CURRENT);
	if (argc > 1 && strcmp(argv[1], "--full") == 0)
		return full(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

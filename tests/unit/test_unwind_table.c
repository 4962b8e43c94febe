/* test_unwind_table.c: unwind tables checked against an independent reading of
 * the same CFI: `eu-readelf --debug-dump=frames` prints every CIE and FDE with
 * its CFA program; this test interprets that text itself and compares the rule
 * at every row boundary of every FDE with the table's row for that pc. Objects:
 * this test binary, Debian's libc and the dynamic loader. Also: PLT, signal
 * trampoline and outermost-frame rows in libc, and lookups outside the table.
 *
 * With arguments, prints build time and size of each file's table instead:
 *   build/tests/test_unwind_table /lib/x86_64-linux-gnu/libc.so.6 ... */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cfi_expect.h"
#include "testutil.h"
#include "unwind_table.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define LDSO "/lib64/ld-linux-x86-64.so.2"

/* ---- an interpreter of eu-readelf's text ---- */

struct xcie {
	long off;
	bool signal;
	struct xstate init;
};

struct checker {
	const struct unwind_table *t;
	struct xcie cies[64];
	int ncies;
	/* the FDE being read */
	bool in_fde, in_cie, bad_fde;
	struct xcie *cie;
	uint64_t loc, end;
	struct xstate st, stack[32];
	int depth;
	/* expression being read (def_cfa_expression) */
	bool in_cfa_expr;
	int expr_i;
	long expr_n, expr_k;
	bool expr_ok;
	/* results */
	long fdes, rows, mismatches, skipped_fdes;
};

static void check_at(struct checker *c, uint64_t pc)
{
	const struct prowl_unwind_row *r = unwind_table_find(c->t, pc);
	struct xrow x;

	c->st.signal = c->cie->signal;
	expect_row(&c->st, &x);
	c->rows++;
	if (!row_matches(r, &x)) {
		char got[64] = "(none)";

		if (r)
			unwind_row_format(r, got, sizeof(got));
		if (c->mismatches < 10)
			print_message("mismatch at %#" PRIx64 ": want cfa type %d off %ld rbp %d/%ld, got %s\n", pc,
				      x.cfa_type, x.cfa_off, x.rbp_type, x.rbp_off, got);
		c->mismatches++;
	}
}

/* The rule holds for [c->loc, next): check its first and last byte. */
static void fde_range_done(struct checker *c, uint64_t next)
{
	if (c->bad_fde || next <= c->loc)
		return;
	check_at(c, c->loc);
	if (next - 1 != c->loc)
		check_at(c, next - 1);
}

static struct xrule *reg_rule(struct xstate *st, int reg)
{
	return reg == 6 ? &st->rbp : reg == 16 ? &st->ra : NULL;
}

static void finish_expr(struct checker *c);

static void end_entry(struct checker *c)
{
	finish_expr(c);
	if (c->in_fde && !c->bad_fde) {
		fde_range_done(c, c->end);
		c->fdes++;
	} else if (c->in_fde) {
		c->skipped_fdes++;
	}
	if (c->in_cie)
		c->cie->init = c->st;
	c->in_fde = c->in_cie = false;
	c->in_cfa_expr = false;
}

static void finish_expr(struct checker *c)
{
	if (!c->in_cfa_expr)
		return;
	c->st.plt = c->expr_ok && c->expr_i == 9;
	c->st.plt_n = c->expr_n;
	c->st.plt_k = c->expr_k;
	c->in_cfa_expr = false;
}

/* One line of a DW_OP listing: "[ 0] breg7 8". PLT: breg7 N; breg16 0; lit15;
 * and; litK; ge; lit3; shl; plus. */
static void expr_line(struct checker *c, const char *op)
{
	static const char *const want[] = { "breg7", "breg16", "lit15", "and", "lit", "ge", "lit3", "shl", "plus" };
	char name[32];
	long arg = 0;
	int n = sscanf(op, "%31s %ld", name, &arg);

	if (n < 1 || c->expr_i >= 9) {
		c->expr_ok = false;
		return;
	}
	if (c->expr_i == 4) {
		if (strncmp(name, "lit", 3) != 0)
			c->expr_ok = false;
		else
			c->expr_k = atol(name + 3);
	} else if (strcmp(name, want[c->expr_i]) != 0) {
		c->expr_ok = false;
	} else if (c->expr_i == 0) {
		c->expr_n = arg;
	} else if (c->expr_i == 1 && arg != 0) {
		c->expr_ok = false;
	}
	c->expr_i++;
}

static void program_line(struct checker *c, const char *l)
{
	char op[48];
	int reg = -1, reg2;
	long v;
	const char *to;
	struct xrule *ru;

	if (sscanf(l, "%47s", op) != 1)
		return;
	if (l[0] == '[') { /* expression listing */
		const char *p = strchr(l, ']');

		if (c->in_cfa_expr && p)
			expr_line(c, p + 1);
		return;
	}
	finish_expr(c);
	if (strncmp(op, "advance_loc", 11) == 0 || strcmp(op, "set_loc") == 0) {
		to = strstr(l, " to 0x");
		if (!to) {
			c->bad_fde = true;
			return;
		}
		v = (long)strtoull(to + 6, NULL, 16);
		if (c->in_fde) {
			fde_range_done(c, (uint64_t)v);
			c->loc = (uint64_t)v;
		}
	} else if (strcmp(op, "def_cfa") == 0 || strcmp(op, "def_cfa_sf") == 0) {
		if (sscanf(l, "%*s r%d (%*[^)]) at offset %ld", &reg, &v) != 2)
			c->bad_fde = true;
		c->st.cfa_expr = false;
		c->st.cfa_reg = reg;
		c->st.cfa_off = v;
	} else if (strcmp(op, "def_cfa_register") == 0) {
		sscanf(l, "%*s r%d", &reg);
		c->st.cfa_expr = false;
		c->st.cfa_reg = reg;
	} else if (strcmp(op, "def_cfa_offset") == 0 || strcmp(op, "def_cfa_offset_sf") == 0) {
		sscanf(l, "%*s %ld", &v);
		c->st.cfa_off = v;
	} else if (strcmp(op, "def_cfa_expression") == 0) {
		c->st.cfa_expr = true;
		c->in_cfa_expr = true;
		c->expr_i = 0;
		c->expr_ok = true;
		c->st.plt = false;
	} else if (strncmp(op, "offset", 6) == 0) { /* offset, offset_extended, offset_extended_sf */
		if (sscanf(l, "%*s r%d (%*[^)]) at cfa%ld", &reg, &v) != 2) {
			c->bad_fde = true;
			return;
		}
		ru = reg_rule(&c->st, reg);
		if (ru)
			*ru = (struct xrule){ U_OFF, v };
	} else if (strcmp(op, "restore") == 0 || strcmp(op, "restore_extended") == 0) {
		sscanf(l, "%*s r%d", &reg);
		ru = reg_rule(&c->st, reg);
		if (ru && c->cie)
			*ru = *reg_rule(&c->cie->init, reg);
	} else if (strcmp(op, "undefined") == 0 || strcmp(op, "same_value") == 0) {
		sscanf(l, "%*s r%d", &reg);
		ru = reg_rule(&c->st, reg);
		if (ru)
			*ru = (struct xrule){ op[0] == 'u' ? U_UNDEF : U_SAME, 0 };
	} else if (strcmp(op, "register") == 0 || strcmp(op, "expression") == 0 || strcmp(op, "val_expression") == 0 ||
		   strncmp(op, "val_offset", 10) == 0) {
		sscanf(l, "%*s r%d", &reg);
		ru = reg_rule(&c->st, reg);
		if (ru)
			*ru = (struct xrule){ U_OTHER, 0 };
		(void)reg2;
	} else if (strcmp(op, "remember_state") == 0) {
		if (c->depth < 32)
			c->stack[c->depth] = c->st;
		c->depth++;
	} else if (strcmp(op, "restore_state") == 0) {
		if (c->depth > 0 && --c->depth < 32)
			c->st = c->stack[c->depth];
	} else if (strcmp(op, "nop") == 0 || strcmp(op, "args_size") == 0 || strcmp(op, "GNU_args_size") == 0) {
		/* nothing */
	} else {
		c->bad_fde = true; /* an opcode this reader does not model */
	}
}

static struct xcie *find_cie(struct checker *c, long off)
{
	for (int i = 0; i < c->ncies; i++)
		if (c->cies[i].off == off)
			return &c->cies[i];
	return NULL;
}

/* Runs eu-readelf on path and checks every FDE of .eh_frame against t. */
static void check_file(const char *path, const struct unwind_table *t, struct checker *c)
{
	char cmd[512], line[1024];
	bool in_eh = false;
	FILE *f;

	memset(c, 0, sizeof(*c));
	c->t = t;
	snprintf(cmd, sizeof(cmd), "eu-readelf --debug-dump=frames '%s' 2>/dev/null", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *l = line;
		long off, cieoff;

		line[strcspn(line, "\n")] = 0;
		if (strncmp(l, "Call frame information section", 30) == 0) {
			end_entry(c);
			in_eh = strstr(l, "'.eh_frame'") != NULL;
			continue;
		}
		if (!in_eh)
			continue;
		while (*l == ' ')
			l++;
		if (sscanf(l, "[%lx] CIE", &off) == 1 && strstr(l, "] CIE")) {
			end_entry(c);
			assert_true(c->ncies < 64);
			c->cie = &c->cies[c->ncies++];
			memset(c->cie, 0, sizeof(*c->cie));
			c->cie->off = off;
			memset(&c->st, 0, sizeof(c->st));
			c->in_cie = true;
			c->depth = 0;
			continue;
		}
		if (sscanf(l, "[%lx] FDE length=%*d cie=[%lx]", &off, &cieoff) == 2) {
			end_entry(c);
			c->cie = find_cie(c, cieoff);
			c->in_fde = true;
			c->bad_fde = c->cie == NULL;
			c->loc = c->end = 0;
			c->depth = 0;
			if (c->cie)
				c->st = c->cie->init;
			continue;
		}
		if (c->in_cie && strncmp(l, "augmentation:", 13) == 0) {
			char *q = strchr(l, '"');

			c->cie->signal = q && strchr(q, 'S') != NULL;
			continue;
		}
		if (c->in_fde && strncmp(l, "initial_location:", 17) == 0) {
			char *p = l + 17;

			while (*p == ' ' || *p == '+')
				p++;
			c->loc = strtoull(p, NULL, 16);
			continue;
		}
		if (c->in_fde && strncmp(l, "address_range:", 14) == 0) {
			c->end = c->loc + strtoull(l + 14, NULL, 16);
			continue;
		}
		if (c->in_fde || c->in_cie) {
			/* Program lines are indented deeper than the headers. */
			if (line[0] == ' ' && line[1] == ' ' && line[2] == ' ' && line[3] == ' ' && line[4] == ' ')
				program_line(c, l);
		}
	}
	end_entry(c);
	pclose(f);
}

static void check_object(const char *name, long min_fdes)
{
	struct unwind_table t;
	struct checker *c = calloc(1, sizeof(*c));
	char *path = realpath(name, NULL); /* not /proc/self/exe: eu-readelf is another process */

	assert_non_null(c);
	assert_non_null(path);
	assert_int_equal(unwind_table_build_file(path, &t), 0);
	assert_true(t.n > 0);
	check_file(path, &t, c);
	print_message("%s: %ld FDEs, %ld row boundaries compared, %ld FDEs not modelled, %ld mismatches\n", path,
		      c->fdes, c->rows, c->skipped_fdes, c->mismatches);
	assert_true(c->fdes >= min_fdes);
	assert_int_equal(c->mismatches, 0);
	assert_true(c->skipped_fdes * 100 <= c->fdes); /* nearly everything is modelled */
	unwind_table_free(&t);
	free(c);
	free(path);
}

static void test_self_against_eu_readelf(void **state)
{
	(void)state;
	check_object("/proc/self/exe", 100);
}

static void test_libc_against_eu_readelf(void **state)
{
	(void)state;
	check_object(LIBC, 3000);
}

static void test_ldso_against_eu_readelf(void **state)
{
	(void)state;
	check_object(LDSO, 200);
}

/* Rows BPF needs special cases for: PLT expressions, the signal trampoline,
 * the outermost frames (clone3, and _start in executables); gaps and bounds. */
static void test_libc_special_rows(void **state)
{
	struct unwind_table t;
	size_t plt = 0, sig = 0, end = 0, none = 0;

	(void)state;
	assert_int_equal(unwind_table_build_file(LIBC, &t), 0);
	for (size_t i = 0; i < t.n; i++) {
		plt += PROWL_ROW_CFA(&t.rows[i]) == PROWL_CFA_PLT;
		sig += PROWL_ROW_CFA(&t.rows[i]) == PROWL_CFA_SIGNAL;
		end += PROWL_ROW_CFA(&t.rows[i]) == PROWL_CFA_END;
		none += PROWL_ROW_CFA(&t.rows[i]) == PROWL_CFA_NONE;
		if (i)
			assert_true(t.rows[i].pc > t.rows[i - 1].pc); /* sorted, no duplicates */
	}
	assert_true(plt >= 1);
	assert_int_equal(sig, 1);    /* __restore_rt */
	assert_true(end >= 2);       /* clone, clone3 */
	assert_true(none >= 1);
	assert_int_equal(PROWL_ROW_CFA(&t.rows[t.n - 1]), PROWL_CFA_NONE);
	assert_null(unwind_table_find(&t, t.base + t.rows[0].pc - 1));
	assert_null(unwind_table_find(&t, t.base + t.rows[t.n - 1].pc));
	assert_non_null(unwind_table_find(&t, t.base + t.rows[t.n - 1].pc - 1));
	/* 8 bytes a row, and libc's whole .eh_frame fits in well under 512 KiB. */
	assert_int_equal(sizeof(struct prowl_unwind_row), 8);
	assert_true(unwind_table_bytes(&t) < 512 * 1024);
	unwind_table_free(&t);
}

/* Objects without a single FDE (no .eh_frame, or an empty one) give an empty
 * table, not an error; this once passed NULL to qsort(), which UBSan aborts on. */
static void test_no_fdes(void **state)
{
	static const char *const kinds[] = { "-static", "-shared -fPIC" };
	char dir[] = "/tmp/prowl-test-nofde.XXXXXX", obj[PATH_MAX];
	struct unwind_table t;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(run_cmd("printf 'void _start(void) { for (;;); }\\n' > %s/nofde.c", dir), 0);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(obj, sizeof(obj), "%s/nofde%zu", dir, i);
		assert_int_equal(run_cmd("cc -nostdlib %s -O1 -fno-asynchronous-unwind-tables -fno-unwind-tables "
					 "-o %s %s/nofde.c", kinds[i], obj, dir), 0);
		assert_int_equal(unwind_table_build_file(obj, &t), 0);
		assert_int_equal(t.n, 0);
		assert_int_equal(t.st.fdes, 0);
		assert_null(unwind_table_find(&t, t.base));
		unwind_table_free(&t);
	}
	assert_int_equal(run_cmd("rm -rf %s", dir), 0);
}

static void test_not_elf(void **state)
{
	struct unwind_table t;

	(void)state;
	assert_int_equal(unwind_table_build_file("/proc/self/status", &t), -EINVAL);
	assert_int_equal(t.n, 0);
	assert_true(unwind_table_build_file("/nonexistent/file", &t) < 0);
}

static int bench(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		struct unwind_table t;
		struct timespec a, b;
		double best = 1e30;
		int r = 0;

		for (int rep = 0; rep < 5; rep++) {
			clock_gettime(CLOCK_MONOTONIC, &a);
			r = unwind_table_build_file(argv[i], &t);
			clock_gettime(CLOCK_MONOTONIC, &b);
			if (r < 0)
				break;
			double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
			if (ms < best)
				best = ms;
			if (rep < 4)
				unwind_table_free(&t);
		}
		if (r < 0) {
			printf("%s: error %s\n", argv[i], strerror(-r));
			continue;
		}
		printf("%s: %zu rows, %.1f KiB, %u FDEs, %u rows BPF cannot use, build %.1f ms (best of 5)\n", argv[i],
		       t.n, unwind_table_bytes(&t) / 1024.0, t.st.fdes, t.st.rows_bad, best);
		unwind_table_free(&t);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self_against_eu_readelf),
		cmocka_unit_test(test_libc_against_eu_readelf),
		cmocka_unit_test(test_ldso_against_eu_readelf),
		cmocka_unit_test(test_libc_special_rows),
		cmocka_unit_test(test_not_elf),
		cmocka_unit_test(test_no_fdes),
	};

	if (argc > 1)
		return bench(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

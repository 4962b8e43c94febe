/* cfi_expect.h: the BPF unwind row a CFA rule must give (prowl's packing: 8-byte stack
 * slots, an s8 rbp slot), for the tests that read CFI with tools prowl does not use. */
#ifndef PROWL_CFI_EXPECT_H
#define PROWL_CFI_EXPECT_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"

/* How a register is recovered, as an independent reader of the CFI saw it. */
enum { U_UNSPEC, U_UNDEF, U_SAME, U_OFF, U_OTHER };

struct xrule {
	int how;
	long off; /* U_OFF: saved at CFA + off */
};

/* One row's rules. cfa_expr without plt: an expression prowl cannot evaluate. */
struct xstate {
	bool cfa_expr, plt;
	int cfa_reg;
	long cfa_off, plt_n, plt_k;
	struct xrule rbp, ra;
	bool signal; /* the CIE's 'S' */
};

struct xrow {
	int cfa_type, rbp_type;
	long cfa_off, rbp_off; /* bytes (the row holds slots) */
};

static inline void expect_row(const struct xstate *st, struct xrow *x)
{
	*x = (struct xrow){ .rbp_type = PROWL_RBP_SAME };
	if (st->ra.how == U_UNDEF) {
		x->cfa_type = PROWL_CFA_END;
		return;
	}
	if (st->signal) {
		x->cfa_type = PROWL_CFA_SIGNAL;
		return;
	}
	if (st->ra.how != U_OFF || st->ra.off != -8) {
		x->cfa_type = PROWL_CFA_BAD;
		return;
	}
	if (st->cfa_expr) {
		x->cfa_type = st->plt ? PROWL_CFA_PLT : PROWL_CFA_BAD;
		if (st->plt) {
			x->cfa_off = st->plt_n;
			x->rbp_off = st->plt_k;
		}
		return;
	}
	if ((st->cfa_reg != 7 && st->cfa_reg != 6) || st->cfa_off <= 0 || st->cfa_off % 8 || st->cfa_off / 8 > 65535) {
		x->cfa_type = PROWL_CFA_BAD;
		return;
	}
	x->cfa_type = st->cfa_reg == 7 ? PROWL_CFA_RSP : PROWL_CFA_RBP;
	x->cfa_off = st->cfa_off;
	if (st->rbp.how == U_OFF) {
		if (st->rbp.off % 8 == 0 && st->rbp.off / 8 >= -128 && st->rbp.off / 8 <= 127) {
			x->rbp_type = PROWL_RBP_CFA;
			x->rbp_off = st->rbp.off;
		} else {
			x->rbp_type = PROWL_RBP_UNKNOWN;
		}
	} else if (st->rbp.how != U_UNSPEC && st->rbp.how != U_SAME) {
		x->rbp_type = PROWL_RBP_UNKNOWN;
	}
}

/* Whether row r (NULL: none) is what x says. */
static inline bool row_matches(const struct prowl_unwind_row *r, const struct xrow *x)
{
	if (!r || PROWL_ROW_CFA(r) != x->cfa_type)
		return false;
	if (x->cfa_type == PROWL_CFA_RSP || x->cfa_type == PROWL_CFA_RBP)
		return r->cfa_off * 8 == x->cfa_off && PROWL_ROW_RBP(r) == x->rbp_type &&
		       (x->rbp_type != PROWL_RBP_CFA || r->rbp_off * 8 == x->rbp_off);
	if (x->cfa_type == PROWL_CFA_PLT)
		return r->cfa_off * 8 == x->cfa_off && r->rbp_off == x->rbp_off;
	return true;
}

#endif

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
	int cfa_type, rbp_type, ra_type;
	long cfa_off, rbp_off; /* bytes (the row holds slots); PROWL_RA_CFA_OFF: the ra's */
};

/* The outermost frame (return address undefined) or a signal frame: true, x set. */
static inline bool expect_end_or_signal(const struct xstate *st, struct xrow *x)
{
	*x = (struct xrow){ .rbp_type = PROWL_RBP_SAME, .ra_type = PROWL_RA_CFA };
	if (st->ra.how == U_UNDEF)
		x->cfa_type = PROWL_CFA_END;
	else if (st->signal)
		x->cfa_type = PROWL_CFA_SIGNAL;
	return st->ra.how == U_UNDEF || st->signal;
}

static inline void expect_row(const struct xstate *st, struct xrow *x)
{
	if (expect_end_or_signal(st, x))
		return;
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

/* The same for an arm64 object (DWARF registers: sp 31, x29, x30): the CFA from sp
 * or x29 (an offset of 0 is a leaf's), the return address in x30 when no rule moved
 * it, else saved next above x29 (stp x29, x30) or, x29 not saved, in a slot of its own. */
static inline void expect_row_arm64(const struct xstate *st, struct xrow *x)
{
	bool fp_saved = st->rbp.how == U_OFF, fp_lost = !fp_saved && st->rbp.how != U_UNSPEC && st->rbp.how != U_SAME;
	long slot;

	if (expect_end_or_signal(st, x))
		return;
	x->cfa_type = PROWL_CFA_BAD;
	if (st->cfa_expr || (st->cfa_reg != 31 && st->cfa_reg != 29) || st->cfa_off < 0 || st->cfa_off % 8 ||
	    st->cfa_off / 8 > 65535)
		return;
	if (st->ra.how == U_UNSPEC || st->ra.how == U_SAME) {
		x->ra_type = PROWL_RA_LR;
		slot = fp_saved ? st->rbp.off : 0;
	} else if (st->ra.how == U_OFF && fp_saved && st->ra.off == st->rbp.off + 8) {
		slot = st->rbp.off;
	} else if (st->ra.how == U_OFF && !fp_saved) {
		x->ra_type = PROWL_RA_CFA_OFF;
		slot = st->ra.off;
	} else {
		return;
	}
	if (slot % 8 || slot / 8 < -128 || slot / 8 + 1 > 127)
		return;
	x->cfa_type = st->cfa_reg == 31 ? PROWL_CFA_RSP : PROWL_CFA_RBP;
	x->cfa_off = st->cfa_off;
	x->rbp_type = fp_saved ? PROWL_RBP_CFA : fp_lost ? PROWL_RBP_UNKNOWN : PROWL_RBP_SAME;
	x->rbp_off = slot;
}

/* Whether row r (NULL: none) is what x says. */
static inline bool row_matches(const struct prowl_unwind_row *r, const struct xrow *x)
{
	if (!r || PROWL_ROW_CFA(r) != x->cfa_type)
		return false;
	if (x->cfa_type == PROWL_CFA_RSP || x->cfa_type == PROWL_CFA_RBP)
		return r->cfa_off * 8 == x->cfa_off && PROWL_ROW_RBP(r) == x->rbp_type &&
		       PROWL_ROW_RA(r) == x->ra_type &&
		       ((x->rbp_type != PROWL_RBP_CFA && x->ra_type != PROWL_RA_CFA_OFF) || r->rbp_off * 8 == x->rbp_off);
	if (x->cfa_type == PROWL_CFA_PLT)
		return r->cfa_off * 8 == x->cfa_off && r->rbp_off == x->rbp_off;
	return true;
}

#endif

/* unwind_table.c: an .eh_frame/.debug_frame parser and CFA program interpreter
 * that reduces x86_64 call frame information to the rules the BPF unwinder can
 * evaluate: CFA from rsp or rbp plus an offset, where rbp was saved, the PLT
 * expression, signal frames and the outermost frame. Everything else becomes a
 * PROWL_CFA_BAD row, so the unwinder stops there and says so. */
#include "unwind_table.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* DWARF register numbers on x86_64. */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA  16

#define DW_EH_PE_omit 0xff

/* ---- bounded little-endian reader ---- */

struct rd {
	const uint8_t *p, *end;
	bool err;
};

static uint64_t rd_n(struct rd *r, unsigned int n)
{
	uint64_t v = 0;

	if (r->err || (size_t)(r->end - r->p) < n) {
		r->err = true;
		return 0;
	}
	for (unsigned int i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

static uint64_t rd_uleb(struct rd *r)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	while (!r->err) {
		uint8_t b;

		if (r->p >= r->end) {
			r->err = true;
			break;
		}
		b = *r->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static int64_t rd_sleb(struct rd *r)
{
	int64_t v = 0;
	unsigned int shift = 0;
	uint8_t b = 0;

	while (!r->err) {
		if (r->p >= r->end) {
			r->err = true;
			return 0;
		}
		b = *r->p++;
		if (shift < 64)
			v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	if (shift < 64 && (b & 0x40))
		v |= -((int64_t)1 << shift);
	return v;
}

static void rd_skip(struct rd *r, uint64_t n)
{
	if (r->err || (uint64_t)(r->end - r->p) < n) {
		r->err = true;
		return;
	}
	r->p += n;
}

/* One section being parsed. */
struct sec {
	const uint8_t *data;
	size_t size;
	uint64_t vaddr;
	bool eh;           /* .eh_frame (else .debug_frame) */
	unsigned int addr_size;
};

/* Reads a pointer in DW_EH_PE encoding enc. apply=false reads only the value
 * format (FDE address ranges). Returns false for an unsupported encoding. */
static bool rd_encoded(struct rd *r, const struct sec *s, uint8_t enc, bool apply, uint64_t *ret)
{
	uint64_t field = s->vaddr + (uint64_t)(r->p - s->data);
	uint64_t v;

	if (enc == DW_EH_PE_omit)
		return false;
	switch (enc & 0x0f) {
	case 0x00: v = rd_n(r, s->addr_size); break;
	case 0x01: v = rd_uleb(r); break;
	case 0x02: v = rd_n(r, 2); break;
	case 0x03: v = rd_n(r, 4); break;
	case 0x04: v = rd_n(r, 8); break;
	case 0x09: v = (uint64_t)rd_sleb(r); break;
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd_n(r, 2); break;
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd_n(r, 4); break;
	case 0x0c: v = rd_n(r, 8); break;
	default: return false;
	}
	if (r->err)
		return false;
	if (!apply) {
		*ret = v;
		return true;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += field; break; /* pcrel */
	default: return false;        /* textrel/datarel/funcrel/aligned: not used for x86_64 FDEs */
	}
	if (enc & 0x80) /* indirect: would need the process's memory */
		return false;
	*ret = v;
	return true;
}

/* ---- CIEs ---- */

struct cie {
	uint64_t off;
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	bool has_z, signal, ok;
	const uint8_t *insns, *insns_end;
};

struct cie_cache {
	struct cie *v;  /* sorted by off */
	size_t n, cap;
};

static bool parse_cie(const struct sec *s, uint64_t off, struct cie *c)
{
	struct rd r = { s->data + off, s->data + s->size, false };
	uint64_t len, id;
	bool dwarf64 = false;
	const char *aug;
	uint8_t version;

	memset(c, 0, sizeof(*c));
	c->off = off;
	c->fde_enc = 0; /* absptr */
	if (off >= s->size)
		return false;
	len = rd_n(&r, 4);
	if (len == 0xffffffff) {
		len = rd_n(&r, 8);
		dwarf64 = true;
	}
	if (r.err || len > (uint64_t)(r.end - r.p))
		return false;
	r.end = r.p + len;
	id = rd_n(&r, dwarf64 ? 8 : 4);
	if (s->eh ? id != 0 : id != (dwarf64 ? UINT64_MAX : 0xffffffffu))
		return false;
	version = rd_n(&r, 1);
	if (version != 1 && version != 3 && version != 4)
		return false;
	aug = (const char *)r.p;
	while (r.p < r.end && *r.p)
		r.p++;
	rd_skip(&r, 1);
	if (r.err)
		return false;
	if (aug[0] && aug[0] != 'z')
		return false; /* "eh" and other pre-'z' augmentations: cannot find the instructions */
	if (version == 4) {
		uint8_t asz = rd_n(&r, 1);

		rd_n(&r, 1); /* segment selector size */
		if (asz != 4 && asz != 8)
			return false;
	}
	c->code_align = rd_uleb(&r);
	c->data_align = rd_sleb(&r);
	c->ra_reg = version == 1 ? rd_n(&r, 1) : rd_uleb(&r);
	if (aug[0] == 'z') {
		uint64_t alen = rd_uleb(&r);
		const uint8_t *aend = r.p + alen;

		if (r.err || alen > (uint64_t)(r.end - r.p))
			return false;
		c->has_z = true;
		for (const char *a = aug + 1; *a && !r.err; a++) {
			uint64_t dummy;

			switch (*a) {
			case 'L':
				rd_n(&r, 1);
				break;
			case 'P': {
				uint8_t penc = rd_n(&r, 1);

				/* Any encoding: only its size matters here. */
				if (!rd_encoded(&r, s, penc & 0x0f, false, &dummy))
					r.p = aend; /* unknown size: the length still bounds it */
				break;
			}
			case 'R':
				c->fde_enc = rd_n(&r, 1);
				break;
			case 'S':
				c->signal = true;
				break;
			default: /* 'B', 'G' and future letters carry no data we need */
				break;
			}
		}
		r.p = aend;
	}
	if (r.err || c->code_align == 0)
		return false;
	c->insns = r.p;
	c->insns_end = r.end;
	c->ok = true;
	return true;
}

static const struct cie *get_cie(struct cie_cache *cc, const struct sec *s, uint64_t off, int *err)
{
	size_t lo = 0, hi = cc->n;
	struct cie c;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (cc->v[mid].off == off)
			return &cc->v[mid];
		if (cc->v[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	parse_cie(s, off, &c);
	if (cc->n == cc->cap) {
		size_t cap = cc->cap ? cc->cap * 2 : 16;
		struct cie *v = realloc(cc->v, cap * sizeof(*v));

		if (!v) {
			*err = -ENOMEM;
			return NULL;
		}
		cc->v = v;
		cc->cap = cap;
	}
	memmove(&cc->v[lo + 1], &cc->v[lo], (cc->n - lo) * sizeof(*cc->v));
	cc->v[lo] = c;
	cc->n++;
	return &cc->v[lo];
}

/* ---- the CFA program interpreter ---- */

enum rule_how { R_UNSPEC = 0, R_UNDEF, R_SAME, R_OFFSET, R_OTHER };

struct rule {
	uint8_t how;
	int64_t off;
};

struct cfa_state {
	bool cfa_expr;
	uint64_t cfa_reg;
	int64_t cfa_off;
	const uint8_t *expr;
	uint64_t expr_len;
	struct rule rbp, ra;
};

#define STATE_STACK 16

/* Rows in the making, pc relative to base, plus one entry per FDE. */
struct fde_ent {
	uint64_t start, end;
	uint32_t first, n;   /* rows [first, first + n) of the builder's rows */
	uint32_t seq;        /* input order: .eh_frame before .debug_frame */
};

struct builder {
	struct unwind_table *t;
	uint64_t base, limit;   /* pcs must lie in [base, limit) */
	struct prowl_unwind_row *rows;
	size_t n, cap;
	struct fde_ent *fdes;
	size_t nfdes, capfdes;
	struct cie_cache cies;
	int err;
};

/* Matches ld's PLT CFA expression: breg7 N; breg16 0; lit15; and; litK; ge;
 * lit3; shl; plus, i.e. CFA = rsp + N + ((rip & 15) >= K ? 8 : 0). */
static bool match_plt(const uint8_t *e, uint64_t len, int32_t *ret_off, int16_t *ret_k)
{
	struct rd r = { e, e + len, false };
	int64_t n, z;
	uint8_t k;

	if (rd_n(&r, 1) != 0x77)
		return false;
	n = rd_sleb(&r);
	if (rd_n(&r, 1) != 0x80)
		return false;
	z = rd_sleb(&r);
	if (r.err || z != 0 || n < 0 || n > 4096 || (size_t)(r.end - r.p) != 7)
		return false;
	k = r.p[2];
	if (r.p[0] != 0x3f || r.p[1] != 0x1a || k < 0x30 || k > 0x4f || r.p[3] != 0x2a || r.p[4] != 0x33 ||
	    r.p[5] != 0x24 || r.p[6] != 0x22)
		return false;
	*ret_off = (int32_t)n;
	*ret_k = k - 0x30;
	return true;
}

/* Packs a rule into a row; offsets must be whole stack slots that fit. */
static void pack_row(struct prowl_unwind_row *row, int cfa_type, int64_t cfa_off, int rbp_type, int64_t rbp_off)
{
	memset(row, 0, sizeof(*row));
	if (cfa_type == PROWL_CFA_RSP || cfa_type == PROWL_CFA_RBP || cfa_type == PROWL_CFA_PLT) {
		if (cfa_off <= 0 || cfa_off % 8 || cfa_off / 8 > UINT16_MAX) {
			row->rule = PROWL_CFA_BAD;
			return;
		}
		row->cfa_off = (uint16_t)(cfa_off / 8);
	}
	if (cfa_type == PROWL_CFA_PLT) {
		row->rbp_off = (int8_t)rbp_off; /* K */
		rbp_type = PROWL_RBP_SAME;
	} else if (rbp_type == PROWL_RBP_CFA) {
		if (rbp_off % 8 || rbp_off / 8 < INT8_MIN || rbp_off / 8 > INT8_MAX)
			rbp_type = PROWL_RBP_UNKNOWN;
		else
			row->rbp_off = (int8_t)(rbp_off / 8);
	}
	row->rule = (uint8_t)(cfa_type | rbp_type << 4);
}

static void state_to_row(const struct cie *c, const struct cfa_state *st, struct prowl_unwind_row *row)
{
	int cfa_type, rbp_type = PROWL_RBP_SAME;
	int64_t cfa_off = 0, rbp_off = 0;

	if (st->ra.how == R_UNDEF) {
		pack_row(row, PROWL_CFA_END, 0, PROWL_RBP_SAME, 0);
		return;
	}
	if (c->signal) {
		pack_row(row, PROWL_CFA_SIGNAL, 0, PROWL_RBP_SAME, 0);
		return;
	}
	if (st->ra.how != R_OFFSET || st->ra.off != -8) {
		pack_row(row, PROWL_CFA_BAD, 0, PROWL_RBP_SAME, 0);
		return;
	}
	if (st->cfa_expr) {
		int32_t off;
		int16_t k;

		if (match_plt(st->expr, st->expr_len, &off, &k)) {
			pack_row(row, PROWL_CFA_PLT, off, PROWL_RBP_SAME, k);
			return;
		}
		pack_row(row, PROWL_CFA_BAD, 0, PROWL_RBP_SAME, 0);
		return;
	}
	if (st->cfa_reg == REG_RSP)
		cfa_type = PROWL_CFA_RSP;
	else if (st->cfa_reg == REG_RBP)
		cfa_type = PROWL_CFA_RBP;
	else
		cfa_type = PROWL_CFA_BAD;
	cfa_off = st->cfa_off;
	switch (st->rbp.how) {
	case R_UNSPEC:
	case R_SAME:
		break;
	case R_OFFSET:
		rbp_type = PROWL_RBP_CFA;
		rbp_off = st->rbp.off;
		break;
	default:
		rbp_type = PROWL_RBP_UNKNOWN;
		break;
	}
	pack_row(row, cfa_type, cfa_off, rbp_type, rbp_off);
}

static bool same_rule(const struct prowl_unwind_row *a, const struct prowl_unwind_row *b)
{
	return a->rule == b->rule && a->cfa_off == b->cfa_off && a->rbp_off == b->rbp_off;
}

static int push_row(struct builder *b, uint64_t pc, const struct prowl_unwind_row *row)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		struct prowl_unwind_row *v = realloc(b->rows, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		b->rows = v;
		b->cap = cap;
	}
	b->rows[b->n] = *row;
	b->rows[b->n].pc = (uint32_t)(pc - b->base);
	b->n++;
	return 0;
}

/* Emits the row for [loc, ...) unless it repeats the FDE's previous row. */
static int emit(struct builder *b, struct fde_ent *f, const struct cie *c, const struct cfa_state *st, uint64_t loc)
{
	struct prowl_unwind_row row;

	state_to_row(c, st, &row);
	b->t->st.rows_raw++;
	if (f->n && same_rule(&b->rows[f->first + f->n - 1], &row))
		return 0;
	if (push_row(b, loc, &row) < 0)
		return -ENOMEM;
	f->n++;
	return 0;
}

static struct rule *reg_rule(struct cfa_state *st, uint64_t reg)
{
	if (reg == REG_RBP)
		return &st->rbp;
	if (reg == REG_RA)
		return &st->ra;
	return NULL;
}

/* Runs one CFA program. With f == NULL it only computes the state (the CIE's
 * initial instructions); else it emits rows for [f->start, f->end). */
static int run_program(struct builder *b, const struct sec *s, const struct cie *c, const uint8_t *p,
		       const uint8_t *end, struct cfa_state *st, const struct cfa_state *init, struct fde_ent *f)
{
	struct cfa_state stack[STATE_STACK];
	unsigned int depth = 0;
	struct rd r = { p, end, false };
	uint64_t loc = f ? f->start : 0;
	int ret;

	while (r.p < r.end && !r.err) {
		uint8_t op = rd_n(&r, 1);
		uint64_t reg, newloc = loc;
		struct rule *ru;

		switch (op & 0xc0) {
		case 0x40: /* advance_loc */
			newloc = loc + (op & 0x3f) * c->code_align;
			goto advance;
		case 0x80: /* offset */
			reg = op & 0x3f;
			ru = reg_rule(st, reg);
			if (ru)
				*ru = (struct rule){ R_OFFSET, (int64_t)rd_uleb(&r) * c->data_align };
			else
				rd_uleb(&r);
			continue;
		case 0xc0: /* restore */
			ru = reg_rule(st, op & 0x3f);
			if (ru && init)
				*ru = *reg_rule((struct cfa_state *)init, op & 0x3f);
			continue;
		}
		switch (op) {
		case 0x00: /* nop */
			break;
		case 0x01: /* set_loc */
			if (!rd_encoded(&r, s, s->eh ? c->fde_enc : 0, true, &newloc))
				return 0; /* stop here: rows so far stand */
			goto advance;
		case 0x02:
			newloc = loc + rd_n(&r, 1) * c->code_align;
			goto advance;
		case 0x03:
			newloc = loc + rd_n(&r, 2) * c->code_align;
			goto advance;
		case 0x04:
			newloc = loc + rd_n(&r, 4) * c->code_align;
			goto advance;
		case 0x05: /* offset_extended */
			reg = rd_uleb(&r);
			ru = reg_rule(st, reg);
			if (ru)
				*ru = (struct rule){ R_OFFSET, (int64_t)rd_uleb(&r) * c->data_align };
			else
				rd_uleb(&r);
			break;
		case 0x06: /* restore_extended */
			reg = rd_uleb(&r);
			ru = reg_rule(st, reg);
			if (ru && init)
				*ru = *reg_rule((struct cfa_state *)init, reg);
			break;
		case 0x07: /* undefined */
			ru = reg_rule(st, rd_uleb(&r));
			if (ru)
				*ru = (struct rule){ R_UNDEF, 0 };
			break;
		case 0x08: /* same_value */
			ru = reg_rule(st, rd_uleb(&r));
			if (ru)
				*ru = (struct rule){ R_SAME, 0 };
			break;
		case 0x09: /* register */
			ru = reg_rule(st, rd_uleb(&r));
			rd_uleb(&r);
			if (ru)
				*ru = (struct rule){ R_OTHER, 0 };
			break;
		case 0x0a: /* remember_state */
			if (depth < STATE_STACK)
				stack[depth] = *st;
			depth++;
			break;
		case 0x0b: /* restore_state */
			if (depth == 0)
				break;
			depth--;
			if (depth < STATE_STACK) {
				/* The CFA is part of the remembered state (DWARF 5 6.4.2.4). */
				*st = stack[depth];
			} else {
				st->cfa_expr = true; /* lost: make the rows BAD */
				st->expr_len = 0;
			}
			break;
		case 0x0c: /* def_cfa */
			st->cfa_expr = false;
			st->cfa_reg = rd_uleb(&r);
			st->cfa_off = (int64_t)rd_uleb(&r);
			break;
		case 0x0d: /* def_cfa_register */
			st->cfa_expr = false;
			st->cfa_reg = rd_uleb(&r);
			break;
		case 0x0e: /* def_cfa_offset */
			st->cfa_off = (int64_t)rd_uleb(&r);
			break;
		case 0x0f: /* def_cfa_expression */
			st->cfa_expr = true;
			st->expr_len = rd_uleb(&r);
			st->expr = r.p;
			rd_skip(&r, st->expr_len);
			break;
		case 0x10: /* expression */
		case 0x16: /* val_expression */
			ru = reg_rule(st, rd_uleb(&r));
			rd_skip(&r, rd_uleb(&r));
			if (ru)
				*ru = (struct rule){ R_OTHER, 0 };
			break;
		case 0x11: /* offset_extended_sf */
			reg = rd_uleb(&r);
			ru = reg_rule(st, reg);
			if (ru)
				*ru = (struct rule){ R_OFFSET, rd_sleb(&r) * c->data_align };
			else
				rd_sleb(&r);
			break;
		case 0x12: /* def_cfa_sf */
			st->cfa_expr = false;
			st->cfa_reg = rd_uleb(&r);
			st->cfa_off = rd_sleb(&r) * c->data_align;
			break;
		case 0x13: /* def_cfa_offset_sf */
			st->cfa_off = rd_sleb(&r) * c->data_align;
			break;
		case 0x14: /* val_offset */
			ru = reg_rule(st, rd_uleb(&r));
			rd_uleb(&r);
			if (ru)
				*ru = (struct rule){ R_OTHER, 0 };
			break;
		case 0x15: /* val_offset_sf */
			ru = reg_rule(st, rd_uleb(&r));
			rd_sleb(&r);
			if (ru)
				*ru = (struct rule){ R_OTHER, 0 };
			break;
		case 0x2e: /* GNU_args_size */
			rd_uleb(&r);
			break;
		case 0x2f: /* GNU_negative_offset_extended */
			reg = rd_uleb(&r);
			ru = reg_rule(st, reg);
			if (ru)
				*ru = (struct rule){ R_OFFSET, -(int64_t)rd_uleb(&r) * c->data_align };
			else
				rd_uleb(&r);
			break;
		default:
			/* Unknown (vendor) opcode: its operands are unknown, so nothing
			 * after it can be trusted. Rows so far stand. */
			return 0;
		}
		continue;
advance:
		if (r.err)
			break;
		if (!f)
			continue; /* advance in a CIE: meaningless */
		if (newloc < loc || newloc >= f->end) {
			loc = newloc < loc ? loc : f->end;
			break;
		}
		if (newloc > loc) {
			ret = emit(b, f, c, st, loc);
			if (ret < 0)
				return ret;
			loc = newloc;
		}
	}
	if (f && loc < f->end)
		return emit(b, f, c, st, loc);
	return 0;
}

static int push_fde(struct builder *b, const struct fde_ent *f)
{
	if (b->nfdes == b->capfdes) {
		size_t cap = b->capfdes ? b->capfdes * 2 : 1024;
		struct fde_ent *v = realloc(b->fdes, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		b->fdes = v;
		b->capfdes = cap;
	}
	b->fdes[b->nfdes++] = *f;
	return 0;
}

static int parse_section(struct builder *b, const struct sec *s)
{
	uint64_t off = 0;

	b->cies.n = 0; /* CIE offsets are per section */
	while (off + 4 <= s->size) {
		struct rd r = { s->data + off, s->data + s->size, false };
		uint64_t len, id, id_pos, start, range, next;
		bool dwarf64 = false;
		const struct cie *c;
		struct cfa_state st, init;
		struct fde_ent f;
		int ret = 0;

		len = rd_n(&r, 4);
		if (len == 0xffffffff) {
			len = rd_n(&r, 8);
			dwarf64 = true;
		}
		if (len == 0) {
			if (s->eh)
				break; /* terminator */
			off += 4;
			continue;
		}
		if (r.err || len > (uint64_t)(r.end - r.p))
			break;
		next = (uint64_t)(r.p - s->data) + len;
		r.end = r.p + len;
		id_pos = (uint64_t)(r.p - s->data);
		id = rd_n(&r, dwarf64 ? 8 : 4);
		if (r.err)
			break;
		if (s->eh ? id == 0 : id == (dwarf64 ? UINT64_MAX : 0xffffffffu)) {
			b->t->st.cies++;
			off = next;
			continue;
		}
		b->t->st.fdes++;
		/* The FDE's CIE: .eh_frame counts back from the id field, .debug_frame
		 * from the section start. */
		if (s->eh && id > id_pos) {
			b->t->st.fdes_skipped++;
			off = next;
			continue;
		}
		c = get_cie(&b->cies, s, s->eh ? id_pos - id : id, &ret);
		if (!c) {
			if (ret < 0)
				return ret;
			off = next;
			continue;
		}
		if (!c->ok ||
		    !rd_encoded(&r, s, s->eh ? c->fde_enc : 0, true, &start) ||
		    !rd_encoded(&r, s, s->eh ? (c->fde_enc & 0x0f) : 0, false, &range)) {
			b->t->st.fdes_skipped++;
			off = next;
			continue;
		}
		if (c->has_z)
			rd_skip(&r, rd_uleb(&r));
		if (r.err || range == 0 || start < b->base || start >= b->limit || range > b->limit - start) {
			b->t->st.fdes_skipped++;
			off = next;
			continue;
		}
		/* The CIE's initial instructions give the state every FDE starts from. */
		memset(&init, 0, sizeof(init));
		ret = run_program(b, s, c, c->insns, c->insns_end, &init, NULL, NULL);
		if (ret < 0)
			return ret;
		st = init;
		f = (struct fde_ent){ .start = start, .end = start + range, .first = (uint32_t)b->n,
				      .seq = (uint32_t)b->nfdes };
		ret = run_program(b, s, c, r.p, r.end, &st, &init, &f);
		if (ret < 0)
			return ret;
		if (c->signal)
			b->t->st.signal_fdes++;
		ret = push_fde(b, &f);
		if (ret < 0)
			return ret;
		off = next;
	}
	return 0;
}

static int cmp_fde(const void *a, const void *b)
{
	const struct fde_ent *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Does any FDE overlap [lo, hi)? fdes sorted by start. */
static bool fdes_overlap(const struct builder *b, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < b->nfdes; i++) {
		if (b->fdes[i].start >= hi)
			break;
		if (b->fdes[i].end > lo)
			return true;
	}
	return false;
}

/* Older linkers (and --no-ld-generated-unwind-info) leave PLT sections without
 * CFI; their rules are known, so write them. */
static int synth_plt(struct builder *b, Elf *elf, size_t shstrndx)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	bool added = false;

	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		struct prowl_unwind_row row;
		struct fde_ent f;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) || sh.sh_size == 0)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strncmp(name, ".plt", 4) != 0 || (name[4] && name[4] != '.'))
			continue;
		if (sh.sh_addr < b->base || sh.sh_addr >= b->limit || sh.sh_size > b->limit - sh.sh_addr)
			continue;
		if (fdes_overlap(b, sh.sh_addr, sh.sh_addr + sh.sh_size))
			continue;
		f = (struct fde_ent){ .start = sh.sh_addr, .end = sh.sh_addr + sh.sh_size, .first = (uint32_t)b->n,
				      .seq = UINT32_MAX };
		pack_row(&row, PROWL_CFA_RSP, 8, PROWL_RBP_SAME, 0);
		if (strcmp(name, ".plt") == 0 && sh.sh_size >= 16) {
			/* PLT0: push GOT+8 (6 bytes), jmp *GOT+16; then 16-byte entries. */
			if (push_row(b, f.start, &row) < 0)
				return -ENOMEM;
			pack_row(&row, PROWL_CFA_RSP, 16, PROWL_RBP_SAME, 0);
			if (push_row(b, f.start + 6, &row) < 0)
				return -ENOMEM;
			pack_row(&row, PROWL_CFA_PLT, 8, PROWL_RBP_SAME, 11);
			if (push_row(b, f.start + 16, &row) < 0)
				return -ENOMEM;
			f.n = 3;
		} else {
			if (push_row(b, f.start, &row) < 0)
				return -ENOMEM;
			f.n = 1;
		}
		if (push_fde(b, &f) < 0)
			return -ENOMEM;
		added = true;
	}
	if (added) {
		b->t->st.plt_synth = true;
		qsort(b->fdes, b->nfdes, sizeof(*b->fdes), cmp_fde);
	}
	return 0;
}

/* Sorted FDEs -> the final table: overlapping FDEs dropped (the first wins),
 * gaps marked with NONE rows, identical neighbours merged. */
static int assemble(struct builder *b)
{
	struct unwind_table *t = b->t;
	uint64_t prev_end = 0;
	size_t cap = b->n + b->nfdes + 1;

	t->rows = malloc(cap * sizeof(*t->rows));
	if (!t->rows)
		return -ENOMEM;
	t->cap = cap;
	t->n = 0;
	for (size_t i = 0; i < b->nfdes; i++) {
		const struct fde_ent *f = &b->fdes[i];

		if (f->n == 0 || (t->n && f->start < prev_end)) {
			t->st.fdes_skipped++;
			continue;
		}
		/* A gap shorter than 16 bytes is alignment padding between functions:
		 * never executed, and no return address points into it (a call at a
		 * function's very end is looked up at its return address - 1). So the
		 * previous rule may cover it, which saves a row per function. */
		if (t->n && f->start - prev_end >= 16)
			t->rows[t->n++] = (struct prowl_unwind_row){ .pc = (uint32_t)(prev_end - b->base) };
		for (uint32_t j = 0; j < f->n; j++) {
			const struct prowl_unwind_row *r = &b->rows[f->first + j];

			if (t->n && same_rule(&t->rows[t->n - 1], r))
				continue;
			t->rows[t->n++] = *r;
		}
		prev_end = f->end;
	}
	if (t->n)
		t->rows[t->n++] = (struct prowl_unwind_row){ .pc = (uint32_t)(prev_end - b->base) };
	for (size_t i = 0; i < t->n; i++) {
		switch (PROWL_ROW_CFA(&t->rows[i])) {
		case PROWL_CFA_BAD: t->st.rows_bad++; break;
		case PROWL_CFA_PLT: t->st.plt_rows++; break;
		case PROWL_CFA_END: t->st.end_rows++; break;
		}
	}
	return 0;
}

static int section_data(Elf_Scn *scn, const GElf_Shdr *sh, struct sec *ret)
{
	Elf_Data *d;

	if (sh->sh_type == SHT_NOBITS)
		return -ENOENT;
	if ((sh->sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
		return -EINVAL;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size == 0)
		return -ENOENT;
	ret->data = d->d_buf;
	ret->size = d->d_size;
	ret->vaddr = sh->sh_addr;
	return 0;
}

int unwind_table_build(Elf *elf, struct unwind_table *ret)
{
	struct builder b = { .t = ret };
	GElf_Ehdr eh;
	Elf_Scn *scn = NULL;
	size_t phnum = 0, shstrndx;
	struct sec eh_frame = {}, debug_frame = {};
	bool have_load = false;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) || elf_getphdrnum(elf, &phnum) < 0 ||
	    elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -EINVAL;
	/* Rows hold 32-bit pcs relative to the lowest PT_LOAD address. */
	b.base = UINT64_MAX;
	b.limit = 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		have_load = true;
		if (ph.p_vaddr < b.base)
			b.base = ph.p_vaddr;
		if (ph.p_vaddr + ph.p_memsz > b.limit)
			b.limit = ph.p_vaddr + ph.p_memsz;
	}
	if (!have_load)
		return -EINVAL;
	if (b.limit - b.base > UINT32_MAX)
		b.limit = b.base + UINT32_MAX;
	ret->base = b.base;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (strcmp(name, ".eh_frame") == 0 && !eh_frame.data) {
			if (section_data(scn, &sh, &eh_frame) == 0)
				eh_frame.eh = true;
		} else if (strcmp(name, ".debug_frame") == 0 && !debug_frame.data) {
			section_data(scn, &sh, &debug_frame);
		}
	}
	eh_frame.addr_size = debug_frame.addr_size = eh.e_ident[EI_CLASS] == ELFCLASS32 ? 4 : 8;
	if (eh_frame.data) {
		ret->st.eh_frame = true;
		r = parse_section(&b, &eh_frame);
		if (r < 0)
			goto out;
	}
	if (debug_frame.data) {
		ret->st.debug_frame = true;
		r = parse_section(&b, &debug_frame);
		if (r < 0)
			goto out;
	}
	if (b.nfdes)
		qsort(b.fdes, b.nfdes, sizeof(*b.fdes), cmp_fde); /* fdes is NULL when there are none */
	if (b.nfdes) {
		r = synth_plt(&b, elf, shstrndx);
		if (r < 0)
			goto out;
	}
	r = assemble(&b);
out:
	free(b.rows);
	free(b.fdes);
	free(b.cies.v);
	if (r < 0)
		unwind_table_free(ret);
	return r;
}

int unwind_table_build_file(const char *path, struct unwind_table *ret)
{
	int fd, r;
	Elf *elf;

	memset(ret, 0, sizeof(*ret));
	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		close(fd);
		return -EINVAL;
	}
	r = unwind_table_build(elf, ret);
	elf_end(elf);
	close(fd);
	return r;
}

const struct prowl_unwind_row *unwind_table_find(const struct unwind_table *t, uint64_t pc)
{
	size_t lo = 0, hi = t->n;
	uint64_t rel;

	if (!t->n || pc < t->base || pc - t->base > UINT32_MAX)
		return NULL;
	rel = pc - t->base;
	if (rel < t->rows[0].pc || rel >= t->rows[t->n - 1].pc)
		return NULL;
	/* The last row with row.pc <= rel. */
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (t->rows[mid].pc <= rel)
			lo = mid;
		else
			hi = mid;
	}
	return &t->rows[lo];
}

size_t unwind_table_bytes(const struct unwind_table *t)
{
	return t->n * sizeof(*t->rows);
}

void unwind_table_free(struct unwind_table *t)
{
	free(t->rows);
	memset(t, 0, sizeof(*t));
}

void unwind_row_format(const struct prowl_unwind_row *r, char *buf, size_t len)
{
	char rbp[32] = "";

	if (PROWL_ROW_RBP(r) == PROWL_RBP_CFA)
		snprintf(rbp, sizeof(rbp), " rbp=cfa%+d", r->rbp_off * 8);
	else if (PROWL_ROW_RBP(r) == PROWL_RBP_UNKNOWN)
		snprintf(rbp, sizeof(rbp), " rbp=?");
	switch (PROWL_ROW_CFA(r)) {
	case PROWL_CFA_NONE: snprintf(buf, len, "none"); break;
	case PROWL_CFA_RSP: snprintf(buf, len, "rsp+%d%s", r->cfa_off * 8, rbp); break;
	case PROWL_CFA_RBP: snprintf(buf, len, "rbp+%d%s", r->cfa_off * 8, rbp); break;
	case PROWL_CFA_PLT: snprintf(buf, len, "plt rsp+%d k=%d", r->cfa_off * 8, r->rbp_off); break;
	case PROWL_CFA_SIGNAL: snprintf(buf, len, "signal"); break;
	case PROWL_CFA_END: snprintf(buf, len, "end"); break;
	default: snprintf(buf, len, "bad"); break;
	}
}

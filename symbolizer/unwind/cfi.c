/* cfi.c: a bounded reader of .eh_frame/.debug_frame entries (CIEs, FDEs, pointer
 * encodings) and an interpreter of their CFA programs for rsp, rbp and the return address. */
#include "cfi.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* Reads a pointer in DW_EH_PE encoding enc. apply=false reads only the value
 * format (FDE address ranges). Returns false for an unsupported encoding. */
static bool rd_encoded(struct rd *r, const struct cfi_section *s, uint8_t enc, bool apply, uint64_t *ret)
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

static bool parse_cie(const struct cfi_section *s, uint64_t off, struct cie *c)
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

static const struct cie *get_cie(struct cie_cache *cc, const struct cfi_section *s, uint64_t off, int *err)
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

#define STATE_STACK 16

bool cfi_match_plt(const uint8_t *e, uint64_t len, int32_t *ret_off, int16_t *ret_k)
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

static struct cfi_rule *reg_rule(struct cfi_state *st, uint64_t reg)
{
	if (reg == st->fp_reg)
		return &st->rbp;
	if (reg == st->ra_reg)
		return &st->ra;
	return NULL;
}

/* Sets reg's rule when it is one that is kept (rbp, the return address). */
/* a * b as the CPU computes it (wrapping): hostile CFI may make any product, and
 * an absurd offset is refused later, where rows are checked. */
static inline int64_t smul(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a * (uint64_t)b);
}

static void set_rule(struct cfi_state *st, uint64_t reg, uint8_t how, int64_t off)
{
	struct cfi_rule *ru = reg_rule(st, reg);

	if (ru)
		*ru = (struct cfi_rule){ how, off };
}

/* DW_CFA_restore: reg's rule as the CIE's initial instructions left it. */
static void restore_rule(struct cfi_state *st, const struct cfi_state *init, uint64_t reg)
{
	struct cfi_rule *ru = reg_rule(st, reg);

	if (ru && init)
		*ru = *reg_rule((struct cfi_state *)init, reg);
}

/* Runs one CFA program. With f == NULL it only computes the state (the CIE's
 * initial instructions); else it reports rows for [f->start, f->end). */
static int run_program(const struct cfi_section *s, const struct cie *c, const uint8_t *p, const uint8_t *end,
		       struct cfi_state *st, const struct cfi_state *init, const struct cfi_fde *f,
		       const struct cfi_ops *ops, void *ctx)
{
	struct cfi_state stack[STATE_STACK];
	unsigned int depth = 0;
	struct rd r = { p, end, false };
	uint64_t loc = f ? f->start : 0;
	int ret;

	while (r.p < r.end && !r.err) {
		uint8_t op = rd_n(&r, 1);
		uint64_t reg, newloc = loc;

		switch (op & 0xc0) {
		case 0x40: /* advance_loc */
			newloc = loc + (op & 0x3f) * c->code_align;
			goto advance;
		case 0x80: /* offset */
			set_rule(st, op & 0x3f, CFI_OFFSET, smul((int64_t)rd_uleb(&r), c->data_align));
			continue;
		case 0xc0: /* restore */
			restore_rule(st, init, op & 0x3f);
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
			set_rule(st, reg, CFI_OFFSET, smul((int64_t)rd_uleb(&r), c->data_align));
			break;
		case 0x06: /* restore_extended */
			restore_rule(st, init, rd_uleb(&r));
			break;
		case 0x07: /* undefined */
			set_rule(st, rd_uleb(&r), CFI_UNDEF, 0);
			break;
		case 0x08: /* same_value */
			set_rule(st, rd_uleb(&r), CFI_SAME, 0);
			break;
		case 0x09: /* register */
		case 0x14: /* val_offset */
			reg = rd_uleb(&r);
			rd_uleb(&r);
			set_rule(st, reg, CFI_OTHER, 0);
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
			reg = rd_uleb(&r);
			rd_skip(&r, rd_uleb(&r));
			set_rule(st, reg, CFI_OTHER, 0);
			break;
		case 0x11: /* offset_extended_sf */
			reg = rd_uleb(&r);
			set_rule(st, reg, CFI_OFFSET, smul(rd_sleb(&r), c->data_align));
			break;
		case 0x12: /* def_cfa_sf */
			st->cfa_expr = false;
			st->cfa_reg = rd_uleb(&r);
			st->cfa_off = smul(rd_sleb(&r), c->data_align);
			break;
		case 0x13: /* def_cfa_offset_sf */
			st->cfa_off = smul(rd_sleb(&r), c->data_align);
			break;
		case 0x15: /* val_offset_sf */
			reg = rd_uleb(&r);
			rd_sleb(&r);
			set_rule(st, reg, CFI_OTHER, 0);
			break;
		case 0x2e: /* GNU_args_size */
			rd_uleb(&r);
			break;
		case 0x2f: /* GNU_negative_offset_extended */
			reg = rd_uleb(&r);
			set_rule(st, reg, CFI_OFFSET, smul((int64_t)(0 - rd_uleb(&r)), c->data_align));
			break;
		case 0x2d: /* AArch64 negate_ra_state (SPARC's window_save elsewhere) */
			/* Return addresses are signed from here (PAC); the unwinder
			 * strips the signature of every one, so the rules stand. */
			if (!s->arm64)
				return 0;
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
		/* Past the FDE's end (the assembler's advance to the end is
		 * common: the PLT's), or backwards: nothing after it applies
		 * here, but the rules so far hold for [loc, end). */
		if (newloc < loc || newloc >= f->end)
			break;
		if (newloc > loc) {
			ret = ops->row(ctx, loc, st);
			if (ret < 0)
				return ret;
			loc = newloc;
		}
	}
	if (f && loc < f->end)
		return ops->row(ctx, loc, st);
	return 0;
}

int cfi_read_section(const struct cfi_section *s, uint64_t lo, uint64_t hi, const struct cfi_ops *ops, void *ctx,
		     struct cfi_counts *counts)
{
	struct cie_cache cies = {}; /* CIE offsets are per section */
	uint64_t off = 0;
	int ret = 0;

	while (off + 4 <= s->size) {
		struct rd r = { s->data + off, s->data + s->size, false };
		uint64_t len, id, id_pos, start, range, next;
		bool dwarf64 = false;
		const struct cie *c;
		struct cfi_state st, init;
		struct cfi_fde f;

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
			counts->cies++;
			off = next;
			continue;
		}
		counts->fdes++;
		/* The FDE's CIE: .eh_frame counts back from the id field, .debug_frame
		 * from the section start. */
		if (s->eh && id > id_pos) {
			counts->fdes_skipped++;
			off = next;
			continue;
		}
		c = get_cie(&cies, s, s->eh ? id_pos - id : id, &ret);
		if (!c) {
			if (ret < 0)
				break;
			off = next;
			continue;
		}
		if (!c->ok ||
		    !rd_encoded(&r, s, s->eh ? c->fde_enc : 0, true, &start) ||
		    !rd_encoded(&r, s, s->eh ? (c->fde_enc & 0x0f) : 0, false, &range)) {
			counts->fdes_skipped++;
			off = next;
			continue;
		}
		if (c->has_z)
			rd_skip(&r, rd_uleb(&r));
		if (r.err || range == 0 || start < lo || start >= hi || range > hi - start) {
			counts->fdes_skipped++;
			off = next;
			continue;
		}
		f = (struct cfi_fde){ .start = start, .end = start + range, .signal = c->signal };
		if (!ops->row) { /* only the FDEs' ranges are wanted */
			ret = ops->fde_begin(ctx, &f);
			if (ret < 0)
				break;
			off = next;
			continue;
		}
		/* The CIE's initial instructions give the state every FDE starts from. */
		memset(&init, 0, sizeof(init));
		init.signal = c->signal;
		init.fp_reg = s->arm64 ? CFI_REG_X29 : CFI_REG_RBP;
		init.ra_reg = c->ra_reg;
		ret = run_program(s, c, c->insns, c->insns_end, &init, NULL, NULL, ops, ctx);
		if (ret < 0)
			break;
		st = init;
		ret = ops->fde_begin(ctx, &f);
		if (ret == 0)
			ret = run_program(s, c, r.p, r.end, &st, &init, &f, ops, ctx);
		if (ret == 0)
			ret = ops->fde_end(ctx, &f);
		if (ret < 0)
			break;
		if (c->signal)
			counts->signal_fdes++;
		off = next;
	}
	free(cies.v);
	return ret;
}

/* unwind_table.c: builds a module's BPF unwind table from the rows cfi.c reads: each
 * rule reduced to what the BPF unwinder evaluates, FDEs sorted, gaps and PLTs filled.
 *
 * The BPF unwinder knows: CFA from rsp or rbp plus an offset, where rbp was saved,
 * the PLT expression, signal frames and the outermost frame. Everything else
 * becomes a PROWL_CFA_BAD row, so the unwinder stops there and says so. */
#include "unwind_table.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfi.h"
#include "object.h"

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
	struct fde_ent cur;     /* the FDE being read */
	bool arm64;             /* an AArch64 object's rules */
};

/* Packs a rule into a row; offsets must be whole stack slots that fit. An x86_64
 * CFA lies above rsp (the return address is below it); an arm64 leaf's may be sp. */
static void pack_row(struct prowl_unwind_row *row, int cfa_type, int64_t cfa_off, int rbp_type, int64_t rbp_off)
{
	memset(row, 0, sizeof(*row));
	if (cfa_type == PROWL_CFA_RSP || cfa_type == PROWL_CFA_RBP || cfa_type == PROWL_CFA_PLT) {
		if (cfa_off < (cfa_type == PROWL_CFA_PLT) || cfa_off % 8 || cfa_off / 8 > UINT16_MAX) {
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

static void state_to_row(const struct cfi_state *st, struct prowl_unwind_row *row)
{
	int cfa_type, rbp_type = PROWL_RBP_SAME;
	int64_t cfa_off = 0, rbp_off = 0;

	if (st->ra.how == CFI_UNDEF) {
		pack_row(row, PROWL_CFA_END, 0, PROWL_RBP_SAME, 0);
		return;
	}
	if (st->signal) {
		pack_row(row, PROWL_CFA_SIGNAL, 0, PROWL_RBP_SAME, 0);
		return;
	}
	if (st->ra.how != CFI_OFFSET || st->ra.off != -8) {
		pack_row(row, PROWL_CFA_BAD, 0, PROWL_RBP_SAME, 0);
		return;
	}
	if (st->cfa_expr) {
		int32_t off;
		int16_t k;

		if (cfi_match_plt(st->expr, st->expr_len, &off, &k)) {
			pack_row(row, PROWL_CFA_PLT, off, PROWL_RBP_SAME, k);
			return;
		}
		pack_row(row, PROWL_CFA_BAD, 0, PROWL_RBP_SAME, 0);
		return;
	}
	if (st->cfa_off <= 0) /* the return address at CFA - 8 would be below rsp */
		cfa_type = PROWL_CFA_BAD;
	else if (st->cfa_reg == CFI_REG_RSP)
		cfa_type = PROWL_CFA_RSP;
	else if (st->cfa_reg == CFI_REG_RBP)
		cfa_type = PROWL_CFA_RBP;
	else
		cfa_type = PROWL_CFA_BAD;
	cfa_off = st->cfa_off;
	switch (st->rbp.how) {
	case CFI_UNSPEC:
	case CFI_SAME:
		break;
	case CFI_OFFSET:
		rbp_type = PROWL_RBP_CFA;
		rbp_off = st->rbp.off;
		break;
	default:
		rbp_type = PROWL_RBP_UNKNOWN;
		break;
	}
	pack_row(row, cfa_type, cfa_off, rbp_type, rbp_off);
}

/* The arm64 row of st: CFA from sp or x29, x29 as on x86_64, and the return
 * address in x30 (no rule, or same_value: a leaf or a prologue), beside the saved
 * x29, or alone in its slot when x29 was not saved. */
static void state_to_row_arm64(const struct cfi_state *st, struct prowl_unwind_row *row)
{
	int cfa_type, rbp_type = PROWL_RBP_SAME, ra_type;
	int64_t rbp_off = 0;

	if (st->ra.how == CFI_UNDEF || st->signal) {
		pack_row(row, st->signal && st->ra.how != CFI_UNDEF ? PROWL_CFA_SIGNAL : PROWL_CFA_END, 0,
			 PROWL_RBP_SAME, 0);
		return;
	}
	if (st->cfa_expr || (st->cfa_reg != CFI_REG_SP && st->cfa_reg != CFI_REG_X29)) {
		pack_row(row, PROWL_CFA_BAD, 0, PROWL_RBP_SAME, 0);
		return;
	}
	cfa_type = st->cfa_reg == CFI_REG_SP ? PROWL_CFA_RSP : PROWL_CFA_RBP;
	if (st->rbp.how == CFI_OFFSET) {
		rbp_type = PROWL_RBP_CFA;
		rbp_off = st->rbp.off;
	} else if (st->rbp.how != CFI_UNSPEC && st->rbp.how != CFI_SAME) {
		rbp_type = PROWL_RBP_UNKNOWN;
	}
	switch (st->ra.how) {
	case CFI_UNSPEC:
	case CFI_SAME:
		ra_type = PROWL_RA_LR;
		break;
	case CFI_OFFSET:
		if (rbp_type == PROWL_RBP_CFA && st->ra.off == rbp_off + 8) {
			ra_type = PROWL_RA_CFA;
		} else if (rbp_type != PROWL_RBP_CFA) {
			ra_type = PROWL_RA_CFA_OFF;
			rbp_off = st->ra.off; /* the row's one slot offset holds the ra's */
		} else {
			ra_type = -1;
		}
		break;
	default:
		ra_type = -1;
		break;
	}
	if (ra_type < 0 || (ra_type != PROWL_RA_LR && (rbp_off % 8 || rbp_off / 8 < INT8_MIN || rbp_off / 8 + 1 > INT8_MAX))) {
		pack_row(row, PROWL_CFA_BAD, 0, PROWL_RBP_SAME, 0);
		return;
	}
	pack_row(row, cfa_type, st->cfa_off, ra_type == PROWL_RA_CFA_OFF ? PROWL_RBP_SAME : rbp_type, rbp_off);
	if (ra_type == PROWL_RA_CFA_OFF) {
		row->rbp_off = (int8_t)(rbp_off / 8);
		if (rbp_type == PROWL_RBP_UNKNOWN)
			row->rule |= PROWL_RBP_UNKNOWN << 4;
	}
	if (PROWL_ROW_CFA(row) != PROWL_CFA_BAD)
		row->rule |= (uint8_t)(ra_type << 6);
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

/* cfi_ops: an FDE's rows go to the builder's rows, each unless it repeats the
 * FDE's previous one; the FDE itself to the list that assemble() sorts. */
static int fde_begin(void *ctx, const struct cfi_fde *f)
{
	struct builder *b = ctx;

	b->cur = (struct fde_ent){ .start = f->start, .end = f->end, .first = (uint32_t)b->n,
				   .seq = (uint32_t)b->nfdes };
	return 0;
}

static int fde_row(void *ctx, uint64_t loc, const struct cfi_state *st)
{
	struct builder *b = ctx;
	struct fde_ent *f = &b->cur;
	struct prowl_unwind_row row;

	if (b->arm64)
		state_to_row_arm64(st, &row);
	else
		state_to_row(st, &row);
	b->t->st.rows_raw++;
	if (f->n && same_rule(&b->rows[f->first + f->n - 1], &row))
		return 0;
	if (push_row(b, loc, &row) < 0)
		return -ENOMEM;
	f->n++;
	return 0;
}

static int fde_end(void *ctx, const struct cfi_fde *f)
{
	struct builder *b = ctx;

	(void)f;
	return push_fde(b, &b->cur);
}

static const struct cfi_ops builder_ops = { .fde_begin = fde_begin, .row = fde_row, .fde_end = fde_end };

static int read_section(struct builder *b, const struct cfi_section *s)
{
	struct cfi_counts n = {};
	int r = cfi_read_section(s, b->base, b->limit, &builder_ops, b, &n);

	b->t->st.cies += n.cies;
	b->t->st.fdes += n.fdes;
	b->t->st.fdes_skipped += n.fdes_skipped;
	b->t->st.signal_fdes += n.signal_fdes;
	return r;
}

static int cmp_fde(const void *a, const void *b)
{
	const struct fde_ent *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorts the FDEs by (start, seq) in linear time: a check first (a linker writes
 * .eh_frame in .text order, so it is often sorted already), then a stable LSD
 * radix sort of start - base (under 2^32). The array is in
 * seq order when unsorted parts were appended (synth_plt's FDEs come last
 * with the largest seq), so a stable sort by start is a sort by (start, seq).
 * 8-bit digits; a pass where every key has the same digit is skipped.
 * qsort() only when the scratch array cannot be had. */
static void fdes_sort(struct builder *b)
{
	size_t n = b->nfdes, count[256];
	struct fde_ent *v = b->fdes, *tmp;
	bool sorted = true;

	for (size_t i = 1; i < n && sorted; i++)
		sorted = cmp_fde(&v[i - 1], &v[i]) <= 0;
	if (sorted)
		return;
	for (size_t i = 0; i < n; i++)
		if (v[i].start < b->base || v[i].start - b->base > UINT32_MAX)
			goto fallback;
	tmp = malloc(n * sizeof(*tmp));
	if (!tmp)
		goto fallback;
	for (unsigned shift = 0; shift < 32; shift += 8) {
		size_t sum = 0;

		memset(count, 0, sizeof(count));
		for (size_t i = 0; i < n; i++)
			count[((v[i].start - b->base) >> shift) & 0xff]++;
		if (count[((v[0].start - b->base) >> shift) & 0xff] == n)
			continue;
		for (size_t d = 0; d < 256; d++) {
			size_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[count[((v[i].start - b->base) >> shift) & 0xff]++] = v[i];
		memcpy(v, tmp, n * sizeof(*v));
	}
	free(tmp);
	return;
fallback:
	qsort(v, n, sizeof(*v), cmp_fde);
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
		pack_row(&row, PROWL_CFA_RSP, b->arm64 ? 0 : 8, PROWL_RBP_SAME, 0);
		if (b->arm64) {
			/* arm64 PLT entries branch through x16/x17: sp and x30 untouched. */
			row.rule |= PROWL_RA_LR << 6;
			if (push_row(b, f.start, &row) < 0)
				return -ENOMEM;
			f.n = 1;
		} else if (strcmp(name, ".plt") == 0 && sh.sh_size >= 16) {
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
		fdes_sort(b);
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
			struct prowl_unwind_row *last = t->n ? &t->rows[t->n - 1] : NULL;

			/* A hostile CFA program may put a row at or past its FDE's end, or
			 * (DW_CFA_set_loc) behind the row before: such rows cover nothing. */
			if ((uint64_t)r->pc + b->base >= f->end || (last && r->pc < last->pc))
				continue;
			if (last && r->pc == last->pc) {
				/* The later rule at one pc wins, as the lookup would pick it. */
				*last = *r;
				if (t->n > 1 && same_rule(&t->rows[t->n - 2], last))
					t->n--;
				continue;
			}
			if (last && same_rule(last, r))
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

static int section_data(Elf_Scn *scn, const GElf_Shdr *sh, struct cfi_section *ret)
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
	struct obj_load *loads;
	GElf_Ehdr eh;
	Elf_Scn *scn = NULL;
	size_t nloads, shstrndx;
	struct cfi_section eh_frame = {}, debug_frame = {};
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -EINVAL;
	/* Rows hold 32-bit pcs relative to the lowest PT_LOAD address. */
	r = obj_read_loads(elf, &loads, &nloads);
	if (r < 0)
		return r == -ENOMEM ? r : -EINVAL;
	obj_load_span(loads, nloads, &b.base, &b.limit);
	free(loads);
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
	b.arm64 = eh_frame.arm64 = debug_frame.arm64 = eh.e_machine == EM_AARCH64;
	if (eh_frame.data) {
		ret->st.eh_frame = true;
		r = read_section(&b, &eh_frame);
		if (r < 0)
			goto out;
	}
	if (debug_frame.data) {
		ret->st.debug_frame = true;
		r = read_section(&b, &debug_frame);
		if (r < 0)
			goto out;
	}
	if (b.nfdes) {
		fdes_sort(&b);
		r = synth_plt(&b, elf, shstrndx);
		if (r < 0)
			goto out;
	}
	r = assemble(&b);
out:
	free(b.rows);
	free(b.fdes);
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
	char rbp[48] = "";
	int n = 0;

	if (PROWL_ROW_RA(r) == PROWL_RA_CFA_OFF)
		n = snprintf(rbp, sizeof(rbp), " ra=cfa%+d", r->rbp_off * 8);
	else if (PROWL_ROW_RBP(r) == PROWL_RBP_CFA)
		n = snprintf(rbp, sizeof(rbp), " rbp=cfa%+d", r->rbp_off * 8);
	if (PROWL_ROW_RBP(r) == PROWL_RBP_UNKNOWN)
		n += snprintf(rbp + n, sizeof(rbp) - n, " rbp=?");
	if (PROWL_ROW_RA(r) == PROWL_RA_LR)
		snprintf(rbp + n, sizeof(rbp) - n, " ra=lr");
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

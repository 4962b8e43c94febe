/* cfi.h: the DWARF call frame information reader: walks the CIEs and FDEs of an
 * .eh_frame or .debug_frame section and runs their CFA programs, row by row. */
#ifndef PROWL_CFI_H
#define PROWL_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* DWARF register numbers on x86_64 ... */
#define CFI_REG_RBP 6
#define CFI_REG_RSP 7
#define CFI_REG_RA  16
/* ... and on arm64 (AArch64 DWARF ABI): the frame pointer, the link register, sp. */
#define CFI_REG_X29 29
#define CFI_REG_X30 30
#define CFI_REG_SP  31

/* One section's bytes as loaded at vaddr (for pc-relative pointers). */
struct cfi_section {
	const uint8_t *data;
	size_t size;
	uint64_t vaddr;
	bool eh;                  /* .eh_frame (else .debug_frame) */
	bool arm64;               /* an AArch64 object (else x86_64) */
	unsigned int addr_size;   /* 4 or 8 */
};

enum cfi_how { CFI_UNSPEC = 0, CFI_UNDEF, CFI_SAME, CFI_OFFSET, CFI_OTHER };

/* How a register is recovered: CFI_OFFSET means saved at CFA + off; CFI_OTHER
 * is any rule the BPF unwinder has no use for (register, expression, value). */
struct cfi_rule {
	uint8_t how;
	int64_t off;
};

/* The state of one row, kept only for what the BPF unwinder can use: the CFA,
 * the frame pointer (rbp, x29) and the return address (every other register is
 * skipped). */
struct cfi_state {
	uint64_t fp_reg, ra_reg;  /* which registers rbp and ra are (the CIE names ra's) */
	bool cfa_expr;            /* CFA = expr (else cfa_reg + cfa_off) */
	uint64_t cfa_reg;
	int64_t cfa_off;
	const uint8_t *expr;      /* into the section */
	uint64_t expr_len;
	struct cfi_rule rbp, ra;
	bool signal;              /* the CIE says 'S': a signal trampoline's frame */
};

/* An FDE's range: [start, end), ELF virtual addresses. */
struct cfi_fde {
	uint64_t start, end;
	bool signal;
};

/* What a reader's caller does with what it reads; each returns 0 or a negative
 * errno, which stops the read and is returned by cfi_read_section(). */
struct cfi_ops {
	int (*fde_begin)(void *ctx, const struct cfi_fde *f);
	/* The rules from loc (inclusive) to the next row's loc or the FDE's end. */
	int (*row)(void *ctx, uint64_t loc, const struct cfi_state *st);
	int (*fde_end)(void *ctx, const struct cfi_fde *f);
};

struct cfi_counts {
	uint32_t cies, fdes;      /* entries found */
	uint32_t fdes_skipped;    /* malformed, empty or outside [lo, hi) */
	uint32_t signal_fdes;
};

/* Reads every FDE of s whose range lies inside [lo, hi) and reports its rows in
 * order (no two with the same loc). Malformed entries are skipped and counted;
 * an unknown opcode or pointer encoding ends that FDE after the rows so far.
 * Without ops->row only fde_begin is called, and no program is run.
 * Adds to *counts. Returns 0 or the first error an op returned. */
int cfi_read_section(const struct cfi_section *s, uint64_t lo, uint64_t hi, const struct cfi_ops *ops, void *ctx,
		     struct cfi_counts *counts);

/* Whether expr is the CFA expression ld writes for x86_64 PLT entries:
 * breg7 N; breg16 0; lit15; and; litK; ge; lit3; shl; plus, i.e.
 * CFA = rsp + N + ((rip & 15) >= K ? 8 : 0). Sets N and K. */
bool cfi_match_plt(const uint8_t *expr, uint64_t len, int32_t *ret_off, int16_t *ret_k);

#endif

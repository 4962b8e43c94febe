/* fuzz_v8.c: what a node process controls: its binary's v8dbg_ constants (an input that
 * starts as an ELF file, read by symbolizer/node/v8meta.c) and its heap (any other input, as
 * memory: strings, functions, scripts, source position tables read by v8heap.c with Node 20's
 * layout, from pointers the input's first bytes pick; optimized code's inlined functions and
 * baseline code's bytecode, by v8inline.c and v8baseline.c; the input as JavaScript source,
 * by jsclass.c). */

#include "fuzz_common.h"
#include "jsclass.h"
#include "v8baseline.h"
#include "v8heap.h"
#include "v8inline.h"
#include "v8meta.h"
#include "../unit/v8node20.h"

#define BASE 0x10000ull

static int fuzz_meta(const uint8_t *data, size_t size)
{
	struct v8_meta m;
	char why[256];
	Elf *elf;
	int r;

	elf_version(EV_CURRENT);
	elf = elf_memory((char *)data, size);
	if (!elf)
		return 0;
	r = v8_meta_read(elf, &m);
	if (r == 0 && m.found &&
	    (m.v[V8_FP_FUNCTION] % 8 || m.v[V8_FP_FUNCTION] < -256 || m.v[V8_FP_FUNCTION] > 256 ||
	     m.v[V8_O_FN_SHARED] < 0 || m.v[V8_O_FN_SHARED] >= 1024 || m.v[V8_POINTER_SIZE] != 8))
		abort(); /* found promises values in their ranges */
	if (r == 0 && m.found != (m.nsyms > 0))
		abort();
	if (m.nsyms > V8_MAX_SYMS)
		abort();
	if (r < 0 && !*v8_meta_why(&m, r, why, sizeof(why)))
		abort(); /* every failure has words for its warning */
	elf_end(elf);
	return 0;
}

/* Optimized code's inlined functions: a pc and a function the input's bytes pick, and
 * its tables read as inlining positions. */
static void fuzz_inline(const struct v8_mem *mem, const uint8_t *data, size_t size)
{
	struct v8_inl_frame f[V8_INLINE_MAX];
	int32_t fid[V8_INLINE_MAX], pos[V8_INLINE_MAX];
	uint64_t hint = 0, pc, sfi;
	size_t n = 0;
	int r;
	struct prowl_v8_proc vp = node20_vp;

	if (size < 4)
		return;
	if (data[3] & 1) { /* V8 10's layout: the Code in code space (Node 18) */
		vp.t_code = vp.t_instruction_stream = 240;
		vp.o_is_start = 128;
	}
	if (data[3] & 2) { /* baseline code: bytecode sizes the input holds, V8 12's table place */
		vp.bc_sizes = BASE + 8 * (uint64_t)data[2];
		vp.bc_count = (__u16)(V8_BC_PREFIXES + 1 + data[1] % 252);
		vp.o_ba_spt = data[3] & 4 ? 24 : 0;
	}
	pc = BASE + (data[0] | (uint64_t)data[1] << 8 | (uint64_t)data[2] << 16);
	sfi = BASE + 8 * (uint64_t)(data[3] | data[1] << 8) + 1;
	r = v8_inline_frames(mem, &vp, pc, sfi, &hint, f, V8_INLINE_MAX, &n);
	if (r == 0 && (n == 0 || n > V8_INLINE_MAX || f[n - 1].sfi != sfi))
		abort(); /* the frame's own function is the outermost */
	if (size >= 8) { /* the offset table and the bytecodes, halves of the input */
		static uint8_t sizes[3 * 64];
		int32_t bco;

		for (size_t i = 0; i < sizeof(sizes); i++)
			sizes[i] = i % 64 < V8_BC_PREFIXES ? 1 : 1 + (uint8_t)(i % 7);
		if (v8_baseline_offset(data, size / 2, data + size / 2, size - size / 2, sizes, 64, data[4] | data[5] << 8,
				       &bco) == 0 &&
		    (bco < -1 || bco >= (int32_t)(size - size / 2)))
			abort(); /* an offset inside the bytecodes, or the entry */
	}
	r = v8_inline_chain(data, size, (uint64_t)v8_postab_raw(data, size, data[0]) | (uint64_t)data[1] << 31, fid,
			    pos, 1 + data[2] % V8_INLINE_MAX);
	if (r > V8_INLINE_MAX || (r > 0 && fid[r - 1] != -1))
		abort();
}

/* The classes found must be sane: bodies in order, members in their class, printable
 * ASCII names; js_class_at gives one of them or none. */
static void check_classes(const struct js_classes *c, const uint8_t *data, size_t size)
{
	if (c->ncls > JS_CLASSES_MAX || c->nmem > JS_MEMBERS_MAX)
		abort();
	for (uint32_t i = 0; i < c->ncls; i++) {
		if (c->cls[i].close && c->cls[i].close <= c->cls[i].open)
			abort();
		for (const char *q = c->cls[i].name; *q; q++)
			if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
				abort();
	}
	for (uint32_t i = 0; i < c->nmem; i++)
		if (c->mem[i].cls >= c->ncls || c->mem[i].close <= c->mem[i].open)
			abort();
	for (size_t k = 0; k < size && k < 8; k++) {
		const struct js_class *f = js_class_at(c, data[k] | (uint32_t)(k ? data[k - 1] : 0) << 8);

		if (f && (f < c->cls || f >= c->cls + c->ncls))
			abort();
	}
}

static void fuzz_lexer(const uint8_t *data, size_t size)
{
	static struct js_lexer lx;
	struct js_classes c;

	for (int two = 0; two < 2; two++) {
		size_t units = size >> two, first = units / 2;

		c = (struct js_classes){ 0 };
		js_lexer_init(&lx, &c);
		/* In two pieces: a token cut between them is lexed as one. */
		if (js_lexer_feed(&lx, data, first, two) == 0)
			js_lexer_feed(&lx, data + (first << two), units - first, two);
		check_classes(&c, data, size);
		js_classes_free(&c);
	}
}

static int fuzz_heap(const uint8_t *data, size_t size)
{
	struct fuzz_mem im = { data, size, BASE };
	const struct v8_mem mem = { fuzz_mem_read, &im };
	char out[V8_NAME_MAX];
	struct v8_script sc;
	int32_t start, pos;

	for (size_t k = 0; k + 2 <= size && k < 16; k += 2) {
		uint64_t p = BASE + 8 * (uint64_t)(data[k] | data[k + 1] << 8) + 1;
		int r = v8_string(&mem, &node20_vp, p, out, sizeof(out));

		if (r >= (int)sizeof(out) || (r >= 0 && strlen(out) != (size_t)r))
			abort(); /* the length said is the text's */
		for (int i = 0; r > 0 && i < r; i++)
			if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] >= 0x7f)
				abort(); /* names are printable ASCII */
		v8_sfi_name(&mem, &node20_vp, p, out, sizeof(out), &start);
		v8_bytecode_position(&mem, &node20_vp, p, data[k], &pos);
		if (v8_script_read(&mem, &node20_vp, p, &sc) == 0) {
			check_classes(&sc.cls, data, size);
			if (!sc.n || sc.n > V8_LINES_MAX || v8_line_of(sc.ends, sc.n, (int32_t)data[k]) > (int)sc.n)
				abort();
			v8_script_free(&sc);
		}
	}
	v8_postab_lookup(data, size, size ? data[0] : 0);
	fuzz_inline(&mem, data, size);
	fuzz_lexer(data, size);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_quiet();
	if (size >= 4 && memcmp(data, "\177ELF", 4) == 0)
		return fuzz_meta(data, size);
	return fuzz_heap(data, size);
}

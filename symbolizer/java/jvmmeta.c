/* jvmmeta.c: walks HotSpot's serviceability tables in a JVM's memory, bounded and
 * checked (strides, offsets, entry counts, name lengths), keeping the entries prowl needs. */
#include "jvmmeta.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "array_size.h"

/* Names as the tables spell them: "Type::field", types, constants. */
static const char *const field_names[JVM_F__N][2] = {
#define JVM_N(id, type, field) [JVM_F_##id] = { type, field },
	JVM_FIELDS(JVM_N)
#undef JVM_N
};
#define JVM_N(id, name) [JVM_##id] = name,
static const char *const type_names[JVM_T__N] = { JVM_TYPES(JVM_N) };
static const char *const int_names[JVM_I__N] = { JVM_INTS(JVM_N) };
#undef JVM_N

/* Reads go through a few cached pages: names sit together in .rodata and entries
 * in one array, so most reads cost no system call. */
#define PAGE      4096u
#define PAGE_SLOTS 16u

struct pcache {
	const struct jvm_mem *mem;
	uint64_t tag[PAGE_SLOTS]; /* page address + 1; 0 = empty */
	uint8_t page[PAGE_SLOTS][PAGE];
};

static int pc_byte(struct pcache *c, uint64_t addr, uint8_t *ret)
{
	uint64_t pg = addr & ~(uint64_t)(PAGE - 1);
	unsigned int s = (unsigned int)(pg / PAGE) % PAGE_SLOTS;

	if (c->tag[s] != pg + 1) {
		c->tag[s] = 0;
		if (c->mem->read(c->mem->ctx, pg, c->page[s], PAGE) < 0)
			return c->mem->read(c->mem->ctx, addr, ret, 1) < 0 ? -EFAULT : 0;
		c->tag[s] = pg + 1;
	}
	*ret = c->page[s][addr - pg];
	return 0;
}

static int pc_read(struct pcache *c, uint64_t addr, void *buf, size_t len)
{
	uint8_t *b = buf;

	if (addr + len < addr)
		return -EFAULT;
	for (size_t i = 0; i < len; i++)
		if (pc_byte(c, addr + i, &b[i]) < 0)
			return -EFAULT;
	return 0;
}

static int pc_u64(struct pcache *c, uint64_t addr, uint64_t *ret)
{
	return pc_read(c, addr, ret, sizeof(*ret));
}

/* A NUL-terminated name of at most JVM_NAME_MAX - 1 bytes; a longer one is cut
 * (and then matches nothing prowl looks for). */
static int pc_name(struct pcache *c, uint64_t addr, char out[JVM_NAME_MAX])
{
	for (unsigned int i = 0; i < JVM_NAME_MAX - 1; i++) {
		uint8_t ch;

		if (pc_byte(c, addr + i, &ch) < 0)
			return -EFAULT;
		out[i] = (char)ch;
		if (!ch)
			return 0;
	}
	out[JVM_NAME_MAX - 1] = 0;
	return 0;
}

/* An entry layout: stride, and the offsets of its fields, each inside the stride. */
static int layout(struct pcache *c, const struct jvm_elf *je, uint64_t bias, const enum jvm_sym *syms, size_t n,
		  uint64_t *ret)
{
	for (size_t i = 0; i < n; i++)
		if (pc_u64(c, je->sym[syms[i]] + bias, &ret[i]) < 0)
			return -EFAULT;
	if (ret[0] < 16 || ret[0] > 256 || (ret[0] & 7))
		return -EBADMSG;
	for (size_t i = 1; i < n; i++)
		if (ret[i] > ret[0] - 4)
			return -EBADMSG;
	return 0;
}

static int find_name(const char *const *names, size_t n, size_t stride, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(*(const char *const *)((const char *)names + i * stride), s) == 0)
			return (int)i;
	return -1;
}

/* The bytes of a field of C++ type t as the tables spell it; 0 when not a scalar. */
static uint8_t type_width(const char *t)
{
	static const struct {
		const char *name;
		uint8_t width;
	} known[] = {
		{ "int", 4 }, { "jint", 4 }, { "u4", 4 }, { "uint32_t", 4 }, { "int32_t", 4 }, { "unsigned int", 4 },
		{ "u2", 2 }, { "uint16_t", 2 }, { "int16_t", 2 }, { "jushort", 2 }, { "unsigned short", 2 },
		{ "u1", 1 }, { "uint8_t", 1 }, { "bool", 1 }, { "char", 1 }, { "int8_t", 1 },
		{ "address", 8 }, { "intptr_t", 8 }, { "uintptr_t", 8 }, { "size_t", 8 }, { "uint64_t", 8 },
		{ "int64_t", 8 }, { "u8", 8 },
	};
	size_t n = strlen(t);

	if (n && t[n - 1] == '*')
		return 8;
	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (strcmp(known[i].name, t) == 0)
			return known[i].width;
	return 0;
}

static int read_structs(struct pcache *c, const struct jvm_elf *je, uint64_t bias, struct jvm_meta *m,
			jvm_meta_visit_fn visit, void *vctx)
{
	static const enum jvm_sym syms[] = { JVM_SYM_S_STRIDE, JVM_SYM_S_TYPE, JVM_SYM_S_FIELD,
					     JVM_SYM_S_STATIC, JVM_SYM_S_OFFSET, JVM_SYM_S_ADDRESS,
					     JVM_SYM_S_TSTRING };
	uint64_t lo[ARRAY_SIZE(syms)], base;
	char type[JVM_NAME_MAX], field[JVM_NAME_MAX], tstr[JVM_NAME_MAX], full[2 * JVM_NAME_MAX + 2];
	int r = layout(c, je, bias, syms, ARRAY_SIZE(syms), lo);

	if (r < 0)
		return r;
	if (pc_u64(c, je->sym[JVM_SYM_STRUCTS] + bias, &base) < 0 || !base)
		return -EFAULT;
	for (uint32_t i = 0;; i++) {
		uint64_t e = base + (uint64_t)i * lo[0], tp, fp, off, addr, sp;
		int32_t is_static;

		if (i >= JVM_MAX_ENTRIES)
			return -EBADMSG;
		if (pc_u64(c, e + lo[1], &tp) < 0 || pc_u64(c, e + lo[2], &fp) < 0)
			return -EFAULT;
		if (!tp) /* the terminating entry */
			break;
		m->entries[0]++;
		if (!fp)
			continue;
		if (pc_read(c, e + lo[3], &is_static, 4) < 0 || pc_u64(c, e + lo[4], &off) < 0 ||
		    pc_u64(c, e + lo[5], &addr) < 0 || pc_name(c, tp, type) < 0 || pc_name(c, fp, field) < 0)
			return -EFAULT;
		snprintf(full, sizeof(full), "%s::%s", type, field);
		if (visit)
			visit(vctx, 0, full, is_static ? addr : off, is_static != 0);
		for (unsigned int k = 0; k < JVM_F__N; k++) {
			if (strcmp(field_names[k][0], type) || strcmp(field_names[k][1], field))
				continue;
			if (is_static && addr < bias)
				return -EBADMSG;
			tstr[0] = 0;
			if (pc_u64(c, e + lo[6], &sp) == 0 && sp && pc_name(c, sp, tstr) < 0)
				tstr[0] = 0;
			m->field[k] = is_static ? addr - bias : off;
			m->width[k] = type_width(tstr);
			m->has_field |= 1ull << k;
		}
	}
	return 0;
}

/* The types (kind 1), int (2) and long (3) constants: an entry is a name and a value. */
static int read_named(struct pcache *c, const struct jvm_elf *je, uint64_t bias, int kind, struct jvm_meta *m,
		      jvm_meta_visit_fn visit, void *vctx)
{
	static const enum jvm_sym syms[3][3] = {
		{ JVM_SYM_T_STRIDE, JVM_SYM_T_TYPE, JVM_SYM_T_SIZE },
		{ JVM_SYM_I_STRIDE, JVM_SYM_I_NAME, JVM_SYM_I_VALUE },
		{ JVM_SYM_L_STRIDE, JVM_SYM_L_NAME, JVM_SYM_L_VALUE },
	};
	static const enum jvm_sym tables[3] = { JVM_SYM_TYPES, JVM_SYM_INTS, JVM_SYM_LONGS };
	uint64_t lo[3], base;
	char name[JVM_NAME_MAX];
	int r = layout(c, je, bias, syms[kind - 1], 3, lo);

	if (r < 0)
		return r;
	if (pc_u64(c, je->sym[tables[kind - 1]] + bias, &base) < 0 || !base)
		return -EFAULT;
	for (uint32_t i = 0;; i++) {
		uint64_t e = base + (uint64_t)i * lo[0], np, v = 0;
		int k;

		if (i >= JVM_MAX_ENTRIES)
			return -EBADMSG;
		if (pc_u64(c, e + lo[1], &np) < 0)
			return -EFAULT;
		if (!np)
			break;
		m->entries[kind]++;
		if (pc_name(c, np, name) < 0)
			return -EFAULT;
		if (kind == 2) {
			int32_t iv;

			if (pc_read(c, e + lo[2], &iv, 4) < 0)
				return -EFAULT;
			v = (uint64_t)(int64_t)iv;
		} else if (pc_u64(c, e + lo[2], &v) < 0) {
			return -EFAULT;
		}
		if (visit)
			visit(vctx, kind, name, v, false);
		if (kind == 1 && (k = find_name(type_names, JVM_T__N, sizeof(type_names[0]), name)) >= 0) {
			m->type_size[k] = v;
			m->has_type |= 1ull << k;
		} else if (kind == 2 && (k = find_name(int_names, JVM_I__N, sizeof(int_names[0]), name)) >= 0) {
			m->int_value[k] = (int64_t)v;
			m->has_int |= 1ull << k;
		}
	}
	return 0;
}

int jvm_meta_read(const struct jvm_mem *mem, const struct jvm_elf *je, uint64_t bias, struct jvm_meta *ret,
		  jvm_meta_visit_fn visit, void *visit_ctx)
{
	static struct pcache cache; /* 64 KiB: one reader at a time (the symbolizer's thread) */
	struct pcache *c = &cache;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!je->found)
		return -EINVAL;
	memset(c->tag, 0, sizeof(c->tag));
	c->mem = mem;
	r = read_structs(c, je, bias, ret, visit, visit_ctx);
	for (int kind = 1; r == 0 && kind <= 3; kind++)
		r = read_named(c, je, bias, kind, ret, visit, visit_ctx);
	if (r == 0 && jvm_meta_missing(ret))
		r = -ENOENT;
	return r;
}

const char *jvm_meta_missing(const struct jvm_meta *m)
{
	static const enum jvm_field need[] = {
		JVM_F_CC_HEAPS, JVM_F_GA_DATA, JVM_F_CH_MEMORY, JVM_F_CH_SEGMAP, JVM_F_CH_LOG2_SEG,
		JVM_F_VS_LOW_BOUNDARY, JVM_F_VS_HIGH_BOUNDARY, JVM_F_CB_NAME, JVM_F_CB_SIZE,
		JVM_F_CB_FRAME_SIZE, JVM_F_CB_FRAME_COMPLETE, JVM_F_NM_COMPILE_ID,
		JVM_F_M_CONST_METHOD, JVM_F_CM_CONSTANTS, JVM_F_CM_NAME_INDEX, JVM_F_CM_SIG_INDEX,
		JVM_F_CM_CODE_SIZE, JVM_F_CP_HOLDER, JVM_F_K_NAME, JVM_F_SYM_LENGTH, JVM_F_SYM_BODY,
		JVM_F_AI_CODE, JVM_F_SQ_BUFFER, JVM_F_SQ_LIMIT,
	};
	static char buf[2 * JVM_NAME_MAX + 2];

	for (size_t i = 0; i < ARRAY_SIZE(need); i++)
		if (!jvm_has_field(m, need[i])) {
			snprintf(buf, sizeof(buf), "%s::%s", field_names[need[i]][0], field_names[need[i]][1]);
			return buf;
		}
	if (!jvm_has_field(m, JVM_F_GA_LEN) && !jvm_has_field(m, JVM_F_GA_LEN_OLD))
		return "GrowableArrayBase::_len";
	if (!jvm_has_field(m, JVM_F_NM_METHOD) && !jvm_has_field(m, JVM_F_NM_METHOD_OLD))
		return "nmethod::_method";
	if (!jvm_has_field(m, JVM_F_CB_CODE_BEGIN) && !jvm_has_field(m, JVM_F_CB_CODE_OFFSET))
		return "CodeBlob::_code_begin";
	for (unsigned int t = 0; t < JVM_T__N; t++)
		if (t != JVM_T_METHOD && t != JVM_T_PC_DESC && !((m->has_type >> t) & 1))
			return type_names[t];
	return NULL;
}

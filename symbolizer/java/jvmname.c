/* jvmname.c: reads a Java frame's method (ConstMethod, ConstantPool, holder Klass, Symbols,
 * line number table) with process_vm_readv(), every pointer and length checked, cached by
 * (process, registration, address, identity). */
#include "jvmname.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jvmimage.h"
#include "jvmscope.h"
#include "u64map.h"

#define SYMBOL_MAX   1024 /* bytes of a class or method name read */
#define LINES_MAX    4096 /* bytes of a line number table read */
#define CP_MAX_INDEX 65535

/* One frame's name; a cache entry holds n of them (inlined methods, innermost first). */
struct name_line {
	char *function, *file;
	int line;
};
struct name_entry {
	struct name_line *v;
	uint32_t n;
};

struct jvm_namer {
	const struct maps_io *io;
	struct u64map index; /* key -> entries index + 1 */
	struct name_entry *entries;
	uint32_t n;
	struct jvm_namer_stats st;
	uint32_t pid, gen; /* the registration of the last process looked up */
	struct prowl_java_proc proc;
};

int jvm_namer_new(struct jvm_namer **ret)
{
	*ret = calloc(1, sizeof(**ret));
	return *ret ? 0 : -ENOMEM;
}

static void lines_free(struct name_line *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		free(v[i].function);
		free(v[i].file);
	}
	free(v);
}

static void cache_clear(struct jvm_namer *r)
{
	for (uint32_t i = 0; i < r->n; i++)
		lines_free(r->entries[i].v, r->entries[i].n);
	r->n = 0;
	r->st.bytes = 0;
	u64map_free(&r->index);
}

void jvm_namer_free(struct jvm_namer *r)
{
	if (!r)
		return;
	cache_clear(r);
	free(r->entries);
	free(r);
}

void jvm_namer_set_io(struct jvm_namer *r, const struct maps_io *io)
{
	r->io = io && io->java_proc_get ? io : NULL;
	r->pid = 0;
}

void jvm_namer_stats(const struct jvm_namer *r, struct jvm_namer_stats *ret)
{
	*ret = r->st;
	ret->entries = r->n;
}

/* ---- the line number table ---- */

static int read_signed(const uint8_t *tab, size_t len, size_t *pos, unsigned int x, int32_t *ret)
{
	uint32_t v;

	if (jvm_u5_read(tab, len, pos, x, &v) < 0)
		return -1;
	*ret = (int32_t)((v >> 1) ^ -(v & 1));
	return 0;
}

int jvm_line_for_bci(const uint8_t *tab, size_t len, uint32_t bci, unsigned int jdk_major)
{
	unsigned int x = jvm_u5_x(jdk_major);
	int64_t cur_bci = 0, cur_line = 0;
	int best = 0;
	size_t pos = 0;

	while (pos < len) {
		uint8_t b = tab[pos++];

		if (b == 0)
			return best;
		if (b == 0xff) {
			int32_t db, dl;

			if (read_signed(tab, len, &pos, x, &db) < 0 || read_signed(tab, len, &pos, x, &dl) < 0)
				return 0;
			cur_bci += db;
			cur_line += dl;
		} else {
			cur_bci += b >> 3;
			cur_line += b & 7;
		}
		if (cur_bci < 0 || cur_bci > 0xffff || cur_line < 0 || cur_line > 0x7fffffff)
			return 0;
		if ((uint64_t)cur_bci <= bci)
			best = (int)cur_line;
		else
			return best;
	}
	return 0; /* no end: garbled, or read short */
}

/* ---- reading the method ---- */

static int peek(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct jvm_proc_mem pm = { .pid = pid };

	if (addr & 0xffff000000000000ull)
		return -EFAULT;
	return jvm_proc_read(&pm, addr, buf, len);
}

static int peek64(uint32_t pid, uint64_t addr, uint64_t *ret)
{
	if (addr & 7)
		return -EFAULT; /* HotSpot's metadata pointers are aligned */
	return peek(pid, addr, ret, 8);
}

static int peek16(uint32_t pid, uint64_t addr, uint16_t *ret)
{
	return peek(pid, addr, ret, 2);
}

/* A Symbol's text into out (NUL-terminated); printable ASCII only, or -EBADMSG:
 * a name must be one HotSpot could hold, never bytes that shape the output. */
static int read_symbol(uint32_t pid, const struct prowl_java_proc *jp, uint64_t sym, char *out, size_t cap)
{
	uint16_t len;

	if (!sym || (sym & 7) || peek16(pid, sym + jp->sym_length, &len) < 0)
		return -EFAULT;
	if (!len || len >= cap)
		return -EBADMSG;
	if (peek(pid, sym + jp->sym_body, out, len) < 0)
		return -EFAULT;
	out[len] = 0;
	for (uint16_t i = 0; i < len; i++)
		if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] > 0x7e || out[i] == ';')
			return -EBADMSG;
	return 0;
}

static int cp_symbol(uint32_t pid, const struct prowl_java_proc *jp, uint64_t cp, uint16_t index, char *out,
		     size_t cap)
{
	uint64_t sym;

	if (!index)
		return -EBADMSG;
	if (peek64(pid, cp + jp->cp_size + 8ull * index, &sym) < 0)
		return -EFAULT;
	return read_symbol(pid, jp, sym, out, cap);
}

/* A method's metadata, as far as its two names: the Symbol*s of its class name and
 * of its own name are its identity (metaspace is freed and reused when a class is
 * unloaded, often at the same addresses; a symbol of another name is another Symbol). */
struct msyms {
	uint64_t cm, cp, holder, ksym, nsym;
	uint16_t name_idx, code_size;
};

static int method_syms(uint32_t pid, const struct prowl_java_proc *jp, uint64_t method, struct msyms *s)
{
	uint8_t hdr[256];
	size_t n = jp->const_method_size;

	if (n > sizeof(hdr) || jp->cm_constants + 8u > n || jp->cm_name_index + 2u > n || jp->cm_code_size + 2u > n)
		return -EBADMSG;
	if (peek64(pid, method + jp->m_const_method, &s->cm) < 0 || !s->cm || peek(pid, s->cm, hdr, n) < 0)
		return -EFAULT;
	memcpy(&s->cp, hdr + jp->cm_constants, 8);
	memcpy(&s->name_idx, hdr + jp->cm_name_index, 2);
	memcpy(&s->code_size, hdr + jp->cm_code_size, 2);
	if (!s->name_idx || peek64(pid, s->cp + jp->cp_holder, &s->holder) < 0 ||
	    peek64(pid, s->holder + jp->k_name, &s->ksym) < 0 ||
	    peek64(pid, s->cp + jp->cp_size + 8ull * s->name_idx, &s->nsym) < 0)
		return -EFAULT;
	return 0;
}

/* The method's names, file and (bci != PROWL_JF_BCI_NONE) line into e. */
static int read_method(uint32_t pid, const struct prowl_java_proc *jp, uint64_t method, uint64_t cm_check,
		       uint32_t ident, uint32_t bci, bool check_cm, struct name_line *e, const char **why)
{
	char klass[SYMBOL_MAX], name[SYMBOL_MAX], src[SYMBOL_MAX], *fn = NULL, *file = NULL;
	struct msyms ms;
	uint64_t cm, cp, holder;
	uint16_t src_idx = 0, code_size, flags = 0;
	int r;

	*why = "[java: method unreadable]";
	if ((r = method_syms(pid, jp, method, &ms)) < 0)
		return r;
	if (check_cm && ((uint32_t)(ms.cm >> 3) != (uint32_t)cm_check || PROWL_JAVA_IDENT(ms.ksym, ms.nsym) != ident)) {
		*why = "[java: method unloaded or redefined since the sample]";
		return -ESTALE;
	}
	cm = ms.cm, cp = ms.cp, holder = ms.holder, code_size = ms.code_size;
	*why = "[java: method name not a JVM symbol]";
	if ((r = read_symbol(pid, jp, ms.ksym, klass, sizeof(klass))) < 0 ||
	    (r = read_symbol(pid, jp, ms.nsym, name, sizeof(name))) < 0)
		return r;
	if (jp->cp_source_file != PROWL_JAVA_NONE)
		peek16(pid, cp + jp->cp_source_file, &src_idx);
	else if (jp->ik_source_file != PROWL_JAVA_NONE)
		peek16(pid, holder + jp->ik_source_file, &src_idx);
	for (char *p = klass; *p; p++)
		if (*p == '/')
			*p = '.';
	if (asprintf(&fn, "%s.%s", klass, name) < 0)
		return -ENOMEM;
	if (src_idx && cp_symbol(pid, jp, cp, src_idx, src, sizeof(src)) == 0) {
		char *dot = strrchr(klass, '.');
		int len = dot ? (int)(dot - klass) : 0;

		for (int i = 0; i < len; i++)
			if (klass[i] == '.')
				klass[i] = '/';
		if (asprintf(&file, "%.*s%s%s", len, klass, len ? "/" : "", src) < 0) {
			free(fn);
			return -ENOMEM;
		}
	}
	e->line = 0;
	if (bci != PROWL_JF_BCI_NONE && jp->cm_flags != PROWL_JAVA_NONE && jp->has_lines &&
	    peek16(pid, cm + jp->cm_flags, &flags) == 0 && (flags & jp->has_lines)) {
		uint8_t tab[LINES_MAX];
		uint64_t at = cm + jp->const_method_size + code_size;

		for (size_t len = LINES_MAX; len >= 64; len /= 8)
			if (peek(pid, at, tab, len) == 0) {
				e->line = jvm_line_for_bci(tab, len, bci, jp->jdk_major);
				break;
			}
	}
	e->function = fn;
	e->file = file;
	return 0;
}

/* A stub's name: the code blob's own (StubRoutines, adapters), bounded and printable. */
static int read_stub(uint32_t pid, const struct prowl_java_proc *jp, uint64_t blob, struct name_line *e)
{
	char name[64];
	uint64_t p;

	if (peek64(pid, blob + jp->cb_name, &p) < 0 || peek(pid, p, name, sizeof(name) - 1) < 0)
		return -EFAULT;
	name[sizeof(name) - 1] = 0;
	for (char *c = name; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e || *c == ';')
			return -EBADMSG;
	if (!name[0] || asprintf(&e->function, "[jvm: %s]", name) < 0)
		return -EBADMSG;
	e->file = NULL;
	e->line = 0;
	return 0;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xbf58476d1ce4e5b9ull;
}

/* Whether nmethod nm is still the compilation BPF saw: its code heap block in use and
 * its compile id the same. A freed nmethod keeps its bytes, compile id included, while
 * its class's metadata is freed and reused by other classes (JDK 20+ free both in one
 * pause, with no state change in between): only the block's flag tells it is gone. */
static bool nmethod_current(uint32_t pid, const struct prowl_java_proc *jp, uint64_t nm, uint32_t check)
{
	uint32_t cid;
	uint8_t used = 1;

	if (jp->hb_used != PROWL_JAVA_NONE &&
	    (nm < jp->heap_block || peek(pid, nm - jp->heap_block + jp->hb_used, &used, 1) < 0))
		return false;
	return used == 1 && peek(pid, nm + jp->nm_compile_id, &cid, 4) == 0 && cid == check;
}

/* A compiled frame: the nmethod must be current (above) before and after the reads,
 * or code or metadata that was freed and reused would get another method's name. Its
 * scopes give the inlined methods and their lines; when they cannot be read, the
 * nmethod's own method stands alone, without a line. */
static int read_compiled(struct jvm_namer *r, uint32_t pid, const struct prowl_jframe *f, struct name_line *v,
			 uint32_t *ret_n, const char **why)
{
	const struct prowl_java_proc *jp = &r->proc;
	struct jvm_proc_mem pm = { .pid = pid };
	struct jvm_mem mem = { jvm_proc_read, &pm };
	struct jvm_scope sc[JVM_SCOPE_MAX];
	uint64_t method;
	size_t n = 0;
	int rc = 0;

	*why = "[java: compiled code freed or replaced since the sample]";
	if (!nmethod_current(pid, jp, f->ptr, f->check) || peek64(pid, f->ptr + jp->nm_method, &method) < 0 ||
	    !method)
		return -ESTALE;
	if (f->kind == PROWL_JF_COMPILED &&
	    (jvm_scope_chain(&mem, jp, f->ptr, f->off, f->idx == 0, sc, JVM_SCOPE_MAX, &n) < 0 ||
	     sc[n - 1].method != method)) {
		r->st.scope_failures += jp->flags & PROWL_JAVA_SCOPES ? 1 : 0;
		n = 0;
	}
	if (!n)
		sc[n++] = (struct jvm_scope){ method, JVM_SCOPE_BCI_NONE };
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint32_t bci = sc[i].bci < PROWL_JF_BCI_NONE ? sc[i].bci : PROWL_JF_BCI_NONE;

		rc = read_method(pid, jp, sc[i].method, 0, 0, bci, false, &v[i], why);
		*ret_n = (uint32_t)i + (rc == 0);
	}
	if (rc == 0 && !nmethod_current(pid, jp, f->ptr, f->check)) {
		*why = "[java: compiled code freed or replaced since the sample]";
		rc = -ESTALE;
	}
	return rc;
}

int jvm_namer_frame(struct jvm_namer *r, uint32_t pid, uint32_t gen, const struct prowl_jframe *f,
		    struct jvm_frame_name *ret, size_t cap, size_t *ret_n, uint64_t *ret_key, const char **ret_why)
{
	struct name_line v[JVM_SCOPE_MAX] = { { 0 } }, *kept;
	const struct name_entry *e;
	uint32_t n = 0;
	uint64_t key, idx, t0;
	int rc;

	*ret_n = 0;
	*ret_why = "[java: the process exited or re-registered before its frames were read]";
	if (r->pid != pid || r->gen != gen) {
		r->pid = 0;
		if (!r->io || r->io->java_proc_get(r->io->ctx, pid, &r->proc) < 0 || r->proc.gen != gen)
			return -ESRCH;
		r->pid = pid;
		r->gen = gen;
	}
	/* An interpreted frame's line is its bci's; a compiled frame's inlined methods
	 * and lines are its pc's (and whether the pc is the leaf's or a return). */
	key = mix(mix(mix(mix(mix((uint64_t)pid << 32 | gen, f->ptr), f->check), f->ident), f->kind),
		  f->kind == PROWL_JF_INTERP || f->kind == PROWL_JF_COMPILED ? f->off | (uint64_t)(f->idx == 0) << 32
									 : 0);
	key = key ? key : 1;
	if (u64map_get(&r->index, key, &idx)) {
		r->st.hits++;
		e = &r->entries[idx - 1];
		goto out;
	}
	r->st.misses++;
	t0 = clock_mono_ns();
	switch (f->kind) {
	case PROWL_JF_INTERP:
		rc = read_method(pid, &r->proc, f->ptr, f->check, f->ident, f->off, true, &v[0], ret_why);
		n = rc == 0;
		break;
	case PROWL_JF_COMPILED:
	case PROWL_JF_NATIVE:
		rc = read_compiled(r, pid, f, v, &n, ret_why);
		break;
	case PROWL_JF_BUILDING:
		*ret_why = "[java: interpreted frame being built or deoptimized]";
		rc = -EAGAIN;
		break;
	case PROWL_JF_STUB:
		*ret_why = "[java: stub unreadable]";
		rc = read_stub(pid, &r->proc, f->ptr, &v[0]);
		n = rc == 0;
		break;
	default:
		*ret_why = "[java: unknown frame kind]";
		rc = -EBADMSG;
	}
	r->st.miss_ns += clock_mono_ns() - t0;
	if (rc < 0) {
		for (uint32_t i = 0; i < n; i++) {
			free(v[i].function);
			free(v[i].file);
		}
		r->st.failures++;
		return rc;
	}
	if (r->n >= JVM_NAME_CACHE_MAX)
		cache_clear(r);
	if (!r->entries && !(r->entries = calloc(JVM_NAME_CACHE_MAX, sizeof(*r->entries))))
		rc = -ENOMEM;
	kept = rc == 0 ? malloc(n * sizeof(*kept)) : NULL;
	if (!kept) {
		for (uint32_t i = 0; i < n; i++) {
			free(v[i].function);
			free(v[i].file);
		}
		return -ENOMEM;
	}
	memcpy(kept, v, n * sizeof(*kept));
	r->entries[r->n++] = (struct name_entry){ kept, n };
	r->st.bytes += sizeof(struct name_entry) + n * sizeof(*kept);
	for (uint32_t i = 0; i < n; i++)
		r->st.bytes += strlen(v[i].function) + 1 + (v[i].file ? strlen(v[i].file) + 1 : 0);
	if (u64map_put(&r->index, key, r->n) < 0)
		return -ENOMEM;
	e = &r->entries[r->n - 1];
out:
	for (uint32_t i = 0; i < e->n && i < cap; i++)
		ret[i] = (struct jvm_frame_name){ e->v[i].function, e->v[i].file, e->v[i].line };
	*ret_n = e->n < cap ? e->n : cap;
	*ret_key = key;
	return 0;
}

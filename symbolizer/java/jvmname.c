/* jvmname.c: reads a Java frame's method (ConstMethod, ConstantPool, holder Klass, Symbols,
 * line number table) with process_vm_readv(), every pointer and length checked, cached by
 * (process, registration, address, identity). */
#include "jvmname.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jvmimage.h"
#include "namecache.h"

#define SYMBOL_MAX   1024 /* bytes of a class or method name read */
#define LINES_MAX    4096 /* bytes of a line number table read */
#define CP_MAX_INDEX 65535

struct jvm_namer {
	const struct maps_io *io;
	struct name_cache names;
	uint32_t pid, gen; /* the registration of the last process looked up */
	struct prowl_java_proc proc;
};

int jvm_namer_new(struct jvm_namer **ret)
{
	*ret = calloc(1, sizeof(**ret));
	if (!*ret)
		return -ENOMEM;
	(*ret)->names.max = JVM_NAME_CACHE_MAX;
	return 0;
}

void jvm_namer_free(struct jvm_namer *r)
{
	if (!r)
		return;
	name_cache_free(&r->names);
	free(r);
}

void jvm_namer_set_io(struct jvm_namer *r, const struct maps_io *io)
{
	r->io = io && io->java_proc_get ? io : NULL;
	r->pid = 0;
}

void jvm_namer_stats(const struct jvm_namer *r, struct name_cache_stats *ret)
{
	name_cache_stats(&r->names, 0, ret);
}

/* ---- the line number table ---- */

/* HotSpot's compressed integer (CompressedReadStream::read_int): each byte weighs
 * 64 times the one before, a byte below L ends it, at most 5 bytes. Since JDK 20
 * (UNSIGNED5) every byte is stored plus X = 1, so none is zero, and L is 191. */
#define U5_NEW_JDK 20

static int read_u5(const uint8_t *tab, size_t len, size_t *pos, unsigned int x, uint32_t *ret)
{
	uint32_t sum = 0, shift = 0, l = 192 - x;

	for (int i = 0; i < 5; i++) {
		uint32_t b;

		if (*pos >= len || tab[*pos] < x)
			return -1;
		b = tab[(*pos)++] - x;
		sum += b << shift;
		if (b < l)
			break;
		shift += 6;
	}
	*ret = sum;
	return 0;
}

static int read_signed(const uint8_t *tab, size_t len, size_t *pos, unsigned int x, int32_t *ret)
{
	uint32_t v;

	if (read_u5(tab, len, pos, x, &v) < 0)
		return -1;
	*ret = (int32_t)((v >> 1) ^ -(v & 1));
	return 0;
}

int jvm_line_for_bci(const uint8_t *tab, size_t len, uint32_t bci, unsigned int jdk_major)
{
	unsigned int x = jdk_major >= U5_NEW_JDK;
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

/* The method's names, file and (bci != PROWL_JF_BCI_NONE) line into e. */
static int read_method(uint32_t pid, const struct prowl_java_proc *jp, uint64_t method, uint64_t cm_check,
		       uint32_t bci, bool check_cm, struct name_entry *e, const char **why)
{
	char klass[SYMBOL_MAX], name[SYMBOL_MAX], src[SYMBOL_MAX], *fn = NULL, *file = NULL;
	uint64_t cm, cp, holder, ksym;
	uint16_t name_idx, src_idx = 0, code_size, flags = 0;
	int r;

	*why = "[java: method unreadable]";
	if (peek64(pid, method + jp->m_const_method, &cm) < 0 || !cm)
		return -EFAULT;
	if (check_cm && (uint32_t)(cm >> 3) != (uint32_t)cm_check) {
		*why = "[java: method unloaded or redefined since the sample]";
		return -ESTALE;
	}
	if (peek64(pid, cm + jp->cm_constants, &cp) < 0 || peek16(pid, cm + jp->cm_name_index, &name_idx) < 0 ||
	    peek16(pid, cm + jp->cm_code_size, &code_size) < 0 || peek64(pid, cp + jp->cp_holder, &holder) < 0 ||
	    peek64(pid, holder + jp->k_name, &ksym) < 0)
		return -EFAULT;
	*why = "[java: method name not a JVM symbol]";
	if ((r = read_symbol(pid, jp, ksym, klass, sizeof(klass))) < 0 ||
	    (r = cp_symbol(pid, jp, cp, name_idx, name, sizeof(name))) < 0)
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
static int read_stub(uint32_t pid, const struct prowl_java_proc *jp, uint64_t blob, struct name_entry *e)
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

int jvm_namer_frame(struct jvm_namer *r, uint32_t pid, uint32_t gen, const struct prowl_jframe *f,
		    struct frame_name *ret, uint64_t *ret_key, const char **ret_why)
{
	struct name_entry e = { 0 };
	const struct name_entry *ce;
	uint64_t key, method;
	uint32_t cid;
	int rc;

	*ret_why = "[java: the process exited or re-registered before its frames were read]";
	if (r->pid != pid || r->gen != gen) {
		r->pid = 0;
		if (!r->io || r->io->java_proc_get(r->io->ctx, pid, &r->proc) < 0 || r->proc.gen != gen)
			return -ESRCH;
		r->pid = pid;
		r->gen = gen;
	}
	key = name_key_mix(name_key_mix(name_key_mix(name_key_mix((uint64_t)pid << 32 | gen, f->ptr), f->check),
					f->kind),
			   f->kind == PROWL_JF_INTERP ? f->off : 0);
	key = key ? key : 1;
	if ((ce = name_cache_get(&r->names, key))) {
		*ret = (struct frame_name){ ce->function, ce->file, ce->line };
		*ret_key = key;
		return 0;
	}
	switch (f->kind) {
	case PROWL_JF_INTERP:
		rc = read_method(pid, &r->proc, f->ptr, f->check, f->off, true, &e, ret_why);
		break;
	case PROWL_JF_COMPILED:
	case PROWL_JF_NATIVE:
		/* The nmethod must still be the compilation BPF saw: code that was freed
		 * and reused gets a marker, never another method's name. */
		*ret_why = "[java: compiled code freed or replaced since the sample]";
		if (peek(pid, f->ptr + r->proc.nm_compile_id, &cid, 4) < 0 || cid != f->check ||
		    peek64(pid, f->ptr + r->proc.nm_method, &method) < 0 || !method) {
			rc = -ESTALE;
			break;
		}
		rc = read_method(pid, &r->proc, method, 0, PROWL_JF_BCI_NONE, false, &e, ret_why);
		break;
	case PROWL_JF_STUB:
		*ret_why = "[java: stub unreadable]";
		rc = read_stub(pid, &r->proc, f->ptr, &e);
		break;
	default:
		*ret_why = "[java: unknown frame kind]";
		rc = -EBADMSG;
	}
	if (rc < 0) {
		r->names.failures++;
		return rc;
	}
	if (!(ce = name_cache_put(&r->names, key, &e)))
		return -ENOMEM;
	*ret = (struct frame_name){ ce->function, ce->file, ce->line };
	*ret_key = key;
	return 0;
}

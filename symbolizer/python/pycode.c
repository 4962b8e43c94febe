/* pycode.c: reads CPython code objects with process_vm_readv(), checking every pointer
 * against the interpreter's own type objects, and decodes their line tables. */
#include "pycode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "pyproc.h"
#include "pyversions.h"
#include "u64map.h"

#define DEF_ENTRIES   16384u
#define DEF_BYTES     (16ull << 20)
#define MAX_NAME      512u            /* characters of a name or file kept */
#define MAX_LINETABLE (64u << 10)     /* bytes of a line table kept */

struct entry {
	/* The key, in full: a hash collision is a miss, never a wrong name. */
	uint32_t pid, gen;
	uint64_t code;
	int32_t firstlineno;
	bool used, referenced;  /* CLOCK eviction */
	struct pycode co;
	size_t bytes;
};

struct pycode_cache {
	struct entry *v;
	uint32_t max_entries, n, hand;
	uint64_t max_bytes, next_id;
	struct u64map index; /* key hash -> slot + 1 */
	struct pycode_stats st;
};

int pycode_cache_new(uint32_t max_entries, uint64_t max_bytes, struct pycode_cache **ret)
{
	struct pycode_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->max_entries = max_entries ? max_entries : DEF_ENTRIES;
	c->max_bytes = max_bytes ? max_bytes : DEF_BYTES;
	c->v = calloc(c->max_entries, sizeof(*c->v));
	if (!c->v) {
		free(c);
		return -ENOMEM;
	}
	c->next_id = 1;
	*ret = c;
	return 0;
}

static void entry_clear(struct pycode_cache *c, struct entry *e)
{
	free((char *)e->co.qualname);
	free((char *)e->co.filename);
	free((uint8_t *)e->co.linetable);
	c->st.bytes -= e->bytes;
	memset(e, 0, sizeof(*e));
}

void pycode_cache_free(struct pycode_cache *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->max_entries; i++)
		if (c->v[i].used)
			entry_clear(c, &c->v[i]);
	u64map_free(&c->index);
	free(c->v);
	free(c);
}

static uint64_t key_hash(uint32_t pid, uint32_t gen, uint64_t code, int32_t firstlineno)
{
	uint64_t h = code * 0x9e3779b97f4a7c15ull;

	h ^= ((uint64_t)pid << 32 | gen) + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
	h ^= (uint64_t)(uint32_t)firstlineno * 0xbf58476d1ce4e5b9ull;
	return h ? h : 1;
}

/* Reads exactly len bytes at addr of pid. */
static int peek(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (!addr)
		return -EFAULT;
	n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return errno == ESRCH ? -ESRCH : -EFAULT;
	return (size_t)n == len ? 0 : -EFAULT;
}

static int peek_u64(uint32_t pid, uint64_t addr, uint64_t *ret)
{
	return peek(pid, addr, ret, sizeof(*ret));
}

/* Appends code point cp as UTF-8; control characters and invalid code points
 * become '?', so a name can never carry a terminal escape or a newline. */
static size_t put_utf8(char *out, uint32_t cp)
{
	if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0) || (cp >= 0xd800 && cp < 0xe000) || cp > 0x10ffff) {
		out[0] = '?';
		return 1;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A compact str object at addr, as UTF-8 (at most MAX_NAME characters). */
static int read_str(uint32_t pid, const struct prowl_py_proc *pp, const struct py_layout *l, uint64_t addr,
		    char **ret)
{
	uint8_t raw[MAX_NAME * 4];
	uint64_t type, len;
	uint32_t state, kind;
	size_t off, n, w = 0;
	char *out;
	int r;

	if ((r = peek_u64(pid, addr + 8, &type)) < 0 || (r = peek_u64(pid, addr + 16, &len)) < 0 ||
	    (r = peek(pid, addr + 32, &state, sizeof(state))) < 0)
		return r;
	if (pp->unicode_type && type != pp->unicode_type)
		return -EBADMSG;
	kind = (state >> 2) & 7;
	if (!((state >> 5) & 1) || (kind != 1 && kind != 2 && kind != 4) || len > (1u << 30))
		return -EBADMSG; /* not compact, or no such kind: not a name CPython made */
	off = (state >> 6) & 1 ? l->ascii_data : l->compact_data;
	n = len < MAX_NAME ? len : MAX_NAME;
	if (n && (r = peek(pid, addr + off, raw, n * kind)) < 0)
		return r;
	out = malloc(n * 4 + 1);
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint32_t cp;

		if (kind == 1) {
			cp = raw[i];
		} else if (kind == 2) {
			uint16_t v;

			memcpy(&v, raw + 2 * i, 2);
			cp = v;
		} else {
			memcpy(&cp, raw + 4 * i, 4);
		}
		w += put_utf8(out + w, cp);
	}
	out[w] = '\0';
	*ret = out;
	return 0;
}

static int read_code(uint32_t pid, const struct prowl_py_proc *pp, uint64_t code,
		     int32_t firstlineno, struct entry *e)
{
	const struct py_layout *l = py_proc_layout(pp);
	uint64_t type, qual, file, table, tlen;
	int32_t first;
	int r;

	if (!l)
		return -EBADMSG;
	if ((r = peek_u64(pid, code + 8, &type)) < 0)
		return r;
	if (pp->code_type && type != pp->code_type)
		return -EBADMSG;
	if ((r = peek(pid, code + l->co_firstlineno, &first, sizeof(first))) < 0)
		return r;
	if (first != firstlineno)
		return -EBADMSG; /* freed and reused since the sample */
	if ((r = peek_u64(pid, code + l->co_qualname, &qual)) < 0 || (r = peek_u64(pid, code + l->co_filename, &file)) < 0 ||
	    (r = peek_u64(pid, code + l->co_linetable, &table)) < 0)
		return r;
	if ((r = read_str(pid, pp, l, qual, (char **)&e->co.qualname)) < 0)
		return r;
	if ((r = read_str(pid, pp, l, file, (char **)&e->co.filename)) < 0)
		return r;
	e->co.firstlineno = first;
	e->co.lines = l->lines;
	e->bytes = sizeof(*e) + strlen(e->co.qualname) + strlen(e->co.filename) + 2;
	/* The line table is a bytes object; without it the frames have no line. */
	if (peek_u64(pid, table + 8, &type) == 0 && (!pp->bytes_type || type == pp->bytes_type) &&
	    peek_u64(pid, table + 16, &tlen) == 0 && tlen && tlen <= MAX_LINETABLE) {
		uint8_t *buf = malloc(tlen);

		if (buf && peek(pid, table + l->bytes_data, buf, tlen) == 0) {
			e->co.linetable = buf;
			e->co.linetable_len = tlen;
			e->bytes += tlen;
		} else {
			free(buf);
		}
	}
	return 0;
}

/* Frees slots (CLOCK: a slot used since the hand last passed gets a second
 * chance) until one is free and the bytes fit; returns that slot. */
static struct entry *make_room(struct pycode_cache *c)
{
	for (uint32_t spins = 0; spins < 2 * c->max_entries + 2; spins++) {
		struct entry *e = &c->v[c->hand];

		c->hand = (c->hand + 1) % c->max_entries;
		if (!e->used) {
			if (c->st.bytes <= c->max_bytes)
				return e;
			continue;
		}
		if (e->referenced) {
			e->referenced = false;
			continue;
		}
		u64map_del(&c->index, key_hash(e->pid, e->gen, e->code, e->firstlineno));
		entry_clear(c, e);
		c->n--;
		c->st.evictions++;
		if (c->st.bytes <= c->max_bytes)
			return e;
	}
	return NULL;
}

int pycode_get(struct pycode_cache *c, uint32_t pid, uint32_t gen, const struct prowl_py_proc *pp, uint64_t code,
	       int32_t firstlineno, const struct pycode **ret)
{
	uint64_t h = key_hash(pid, gen, code, firstlineno), slot;
	struct entry *e;
	int r;

	if (u64map_get(&c->index, h, &slot)) {
		e = &c->v[slot - 1];
		if (e->used && e->pid == pid && e->gen == gen && e->code == code && e->firstlineno == firstlineno) {
			e->referenced = true;
			c->st.hits++;
			*ret = &e->co;
			return 0;
		}
		/* Another key with this hash: it makes room for this one. */
		if (!pp)
			return -EAGAIN;
		if (e->used) {
			entry_clear(c, e);
			c->n--;
			c->st.evictions++;
		}
		u64map_del(&c->index, h);
	}
	if (!pp)
		return -EAGAIN;
	c->st.misses++;
	e = make_room(c);
	if (!e)
		return -ENOMEM;
	r = read_code(pid, pp, code, firstlineno, e);
	c->st.bytes += e->bytes; /* entry_clear() takes them back on failure */
	if (r < 0) {
		entry_clear(c, e);
		c->st.read_errors++;
		return r;
	}
	slot = (uint64_t)(e - c->v) + 1;
	if (u64map_put(&c->index, h, slot) < 0) {
		entry_clear(c, e);
		return -ENOMEM;
	}
	e->used = true;
	e->pid = pid;
	e->gen = gen;
	e->code = code;
	e->firstlineno = firstlineno;
	e->co.id = c->next_id++;
	c->n++;
	*ret = &e->co;
	return 0;
}

/* ---- the location table (Objects/locations.md in CPython) ---- */

static bool varint(const uint8_t **p, const uint8_t *end, uint32_t *ret)
{
	uint32_t v = 0, shift = 0;
	uint8_t b;

	do {
		if (*p >= end || shift > 28)
			return false;
		b = *(*p)++;
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	*ret = v;
	return true;
}

static bool svarint(const uint8_t **p, const uint8_t *end, int32_t *ret)
{
	uint32_t v;

	if (!varint(p, end, &v))
		return false;
	*ret = v & 1 ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
	return true;
}

/* 3.6-3.9's co_lnotab (Objects/lnotab_notes.txt): (byte increment, signed line
 * increment) pairs; the line of byte offset addr is the one reached before the
 * offsets pass it. */
static int lnotab_line(const struct pycode *co, uint64_t addr)
{
	int64_t line = co->firstlineno;
	uint64_t at = 0;

	for (size_t i = 0; i + 1 < co->linetable_len; i += 2) {
		at += co->linetable[i];
		if (at > addr)
			break;
		line += (int8_t)co->linetable[i + 1];
	}
	return line <= 0 || line > INT32_MAX ? 0 : (int)line;
}

/* 3.10's co_linetable: (byte length, signed line delta) ranges; -128 is "no line". */
static int linetable310_line(const struct pycode *co, uint64_t addr)
{
	int64_t line = co->firstlineno, cur = 0;
	uint64_t end = 0;

	for (size_t i = 0; i + 1 < co->linetable_len; i += 2) {
		uint64_t start = end;
		int8_t d = (int8_t)co->linetable[i + 1];

		end += co->linetable[i];
		if (d == -128) {
			cur = 0;
		} else {
			line += d;
			cur = line;
		}
		if (addr >= start && addr < end)
			return cur <= 0 || cur > INT32_MAX ? 0 : (int)cur;
	}
	return 0;
}

int pycode_line(const struct pycode *co, uint32_t lasti)
{
	const uint8_t *p = co->linetable, *end = p ? p + co->linetable_len : NULL;
	int64_t line = co->firstlineno;
	uint64_t addr = 0;

	if (!p)
		return 0;
	/* lasti counts 2-byte code units; the older tables count bytes. */
	if (co->lines == PY_LINES_LNOTAB)
		return lnotab_line(co, (uint64_t)lasti * 2);
	if (co->lines == PY_LINES_310)
		return linetable310_line(co, (uint64_t)lasti * 2);
	while (p < end) {
		uint8_t b = *p++;
		uint32_t code = (b >> 3) & 15, len = (b & 7) + 1, skip;
		int32_t delta = 0;
		bool none = false;

		if (!(b & 0x80))
			return 0; /* not at an entry: a garbled table */
		switch (code) {
		case 15: /* no location */
			none = true;
			break;
		case 14: /* long form: line delta, end line delta, column, end column */
			if (!svarint(&p, end, &delta) || !varint(&p, end, &skip) || !varint(&p, end, &skip) ||
			    !varint(&p, end, &skip))
				return 0;
			break;
		case 13: /* no column */
			if (!svarint(&p, end, &delta))
				return 0;
			break;
		case 10: case 11: case 12: /* one-line form: two column bytes */
			delta = (int32_t)code - 10;
			p += 2;
			break;
		default: /* short form: one column byte */
			p += 1;
			break;
		}
		if (p > end)
			return 0;
		line += delta;
		if (lasti >= addr && lasti < addr + len)
			return none || line <= 0 || line > INT32_MAX ? 0 : (int)line;
		addr += len;
	}
	return 0;
}

void pycode_get_stats(const struct pycode_cache *c, struct pycode_stats *ret)
{
	*ret = c->st;
	ret->entries = c->n;
}

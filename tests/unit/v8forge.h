/* v8forge.h: builds V8 heap objects as Node 20 lays them out (map, sequential one-byte
 * string) in an array of words whose word i a process sees at base + 8 * i; for the heap
 * reader's unit test (an image) and the forged node workload (its own memory). */
#ifndef PROWL_V8FORGE_H
#define PROWL_V8FORGE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct v8forge {
	uint64_t *w;
	uint64_t base;
	size_t size; /* bytes of w (v8forge_read's bound) */
};

/* A v8_mem reader of the image (ctx: its struct v8forge): exactly len bytes, or -EFAULT. */
static inline int v8forge_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct v8forge *f = ctx;

	if (addr < f->base || addr - f->base > f->size || f->size - (addr - f->base) < len)
		return -EFAULT;
	memcpy(buf, (char *)f->w + (addr - f->base), len);
	return 0;
}

static inline uint64_t v8forge_tag(const struct v8forge *f, int i)
{
	return f->base + 8 * (uint64_t)i + 1;
}

static inline uint64_t v8forge_smi(int64_t v)
{
	return (uint64_t)v << 32;
}

/* A test's memory image: words img[n] seen at base, its forge, a reader of it (mem: a
 * struct v8_mem, v8heap.h), and TAG(i) / SMI(v) for words of it. */
#define V8FORGE_IMAGE(n, at)                                                   \
	static uint64_t img[n];                                                \
	static struct v8forge forge = { img, at, sizeof(img) };                \
	static const struct v8_mem mem = { v8forge_read, &forge };
#define TAG(i) v8forge_tag(&forge, i)
#define SMI(v) v8forge_smi(v)

/* A map of instance type `type` at word i (its own map: word 0). */
static inline void v8forge_map(struct v8forge *f, int i, uint16_t type)
{
	f->w[i] = v8forge_tag(f, 0);
	memcpy((char *)&f->w[i] + 12, &type, 2);
}

/* A sequential one-byte string s at word i, of the map at word map_i. */
static inline void v8forge_string(struct v8forge *f, int i, int map_i, const char *s)
{
	int32_t len = (int32_t)strlen(s);

	f->w[i] = v8forge_tag(f, map_i);
	memcpy((char *)&f->w[i] + 12, &len, 4);
	memcpy((char *)&f->w[i] + 16, s, (size_t)len);
}

#endif

/* kallsyms_cache.c: the kernel's symbol index in the on-disk cache (one entry per boot, kernel
 * and module set); every offset, index and the address order are checked on load. */
#include "kallsyms_cache.h"

#include <errno.h>
#include <fcntl.h>
/* The direct SHA-256 (deprecated, not gone, in OpenSSL 3): EVP's first digest
 * loads OpenSSL's providers and configuration, 1.8 MB of resident memory that
 * a steady agent kept for one hash per start. */
#define OPENSSL_API_COMPAT 10101
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const struct kallsyms_ident_paths kallsyms_ident_host = {
	.boot_id = "/proc/sys/kernel/random/boot_id",
	.notes = "/sys/kernel/notes",
	.modules = "/proc/modules",
};

/* The entry: this header, then the address array (4 or 8 bytes each), name[n],
 * mod[n], mods[nmods] and the name blob, each packed after the other. */
struct kc_header {
	uint64_t n, nmods, names_len, base;
	uint32_t wide, pad;
};

/* Feeds path's bytes (at most 1 MiB) to md; -errno when it cannot be read
 * and must be. */
static int digest_file(SHA256_CTX *md, const char *path, bool must)
{
	char buf[8192];
	size_t total = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return must ? -errno : 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0 && total < (1u << 20)) {
		SHA256_Update(md, buf, (size_t)n);
		total += (size_t)n;
	}
	close(fd);
	if (n < 0 || (must && total == 0))
		return must ? -EIO : 0;
	/* A separator, so that the files' bytes cannot shift between parts. */
	SHA256_Update(md, &total, sizeof(total));
	return 0;
}

int kallsyms_cache_key(const struct kallsyms_ident_paths *p, struct diskcache_key *ret)
{
	SHA256_CTX md;
	unsigned char h[SHA256_DIGEST_LENGTH];
	int r;

	r = SHA256_Init(&md) ? 0 : -EIO;
	if (r == 0)
		r = digest_file(&md, p->boot_id, true);
	if (r == 0)
		r = digest_file(&md, p->notes, true);
	if (r == 0)
		r = digest_file(&md, p->modules, false);
	if (r == 0 && !SHA256_Final(h, &md))
		r = -EIO;
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	ret->kind = DISKCACHE_KALLSYMS;
	ret->build_id_len = 32;
	memcpy(ret->build_id, h, 32);
	return 0;
}

/* Code the kernel makes at run time: its symbols come and go with no trace in
 * the key, so they are never kept. */
static bool runtime_code(const struct kallsyms *ks, size_t i)
{
	const char *m = ks->mod[i] ? ks->names + ks->mods[ks->mod[i] - 1] : NULL;

	return m && (strcmp(m, "bpf") == 0 || strncmp(m, "__builtin__", 11) == 0);
}

void kallsyms_keep(struct diskcache *dc, const struct diskcache_key *k, const struct kallsyms *ks)
{
	struct kc_header h = { .nmods = ks ? ks->nmods : 0, .names_len = ks ? ks->names_len : 0 };
	size_t asz, off;
	char *buf, *addr, *name, *mod;

	if (!dc || !ks || ks->hidden || !ks->n)
		return;
	for (size_t i = 0; i < ks->n; i++)
		h.n += !runtime_code(ks, i);
	h.wide = ks->addr64 != NULL;
	h.base = ks->base;
	asz = h.wide ? 8 : 4;
	buf = malloc(sizeof(h) + h.n * (asz + 4 + 2) + h.nmods * 4 + h.names_len);
	if (!buf)
		return;
	memcpy(buf, &h, sizeof(h));
	addr = buf + sizeof(h);
	name = addr + h.n * asz;
	mod = name + h.n * 4;
	off = 0;
	for (size_t i = 0; i < ks->n; i++) {
		if (runtime_code(ks, i))
			continue;
		memcpy(addr + off * asz, h.wide ? (const void *)&ks->addr64[i] : (const void *)&ks->addr32[i], asz);
		memcpy(name + off * 4, &ks->name[i], 4);
		memcpy(mod + off * 2, &ks->mod[i], 2);
		off++;
	}
	off = (size_t)(mod + h.n * 2 - buf);
	memcpy(buf + off, ks->mods, h.nmods * 4);
	memcpy(buf + off + h.nmods * 4, ks->names, h.names_len);
	diskcache_put(dc, k, buf, off + h.nmods * 4 + h.names_len);
	free(buf);
}

/* A copy of len bytes at p into *ret (NULL for none). */
static int take(void **ret, const char *p, size_t len)
{
	*ret = NULL;
	if (!len)
		return 0;
	*ret = malloc(len);
	if (!*ret)
		return -ENOMEM;
	memcpy(*ret, p, len);
	return 0;
}

/* Whether the index in ks can be used as kallsyms.c builds it. */
static bool index_ok(const struct kallsyms *ks)
{
	if (!ks->n || !ks->names_len || ks->names[ks->names_len - 1])
		return false;
	for (size_t j = 0; j < ks->nmods; j++)
		if (ks->mods[j] >= ks->names_len)
			return false;
	for (size_t i = 0; i < ks->n; i++) {
		if ((ks->name[i] & ~KSYM_NAME_PFX) >= ks->names_len || ks->mod[i] > ks->nmods)
			return false;
		if (i && kallsyms_addr(ks, i) < kallsyms_addr(ks, i - 1))
			return false;
	}
	return true;
}

int kallsyms_cached(struct diskcache *dc, const struct diskcache_key *k, struct kallsyms **ret)
{
	struct kc_header h;
	struct kallsyms *ks;
	char *data, *p;
	size_t len, asz;
	int r;

	if (!dc)
		return -ENOENT;
	r = diskcache_get(dc, k, (void **)&data, &len);
	if (r < 0)
		return r;
	r = -ENOENT;
	if (len < sizeof(h))
		goto out;
	memcpy(&h, data, sizeof(h));
	asz = h.wide ? 8 : 4;
	/* Bounds first, so that the sum below cannot overflow. */
	if (h.wide > 1 || h.n > UINT32_MAX || h.nmods > UINT16_MAX || h.names_len >= KSYM_NAME_PFX ||
	    len != sizeof(h) + h.n * (asz + 4 + 2) + h.nmods * 4 + h.names_len)
		goto out;
	ks = calloc(1, sizeof(*ks));
	if (!ks) {
		r = -ENOMEM;
		goto out;
	}
	ks->n = h.n;
	ks->nmods = h.nmods;
	ks->names_len = h.names_len;
	ks->base = h.base;
	p = data + sizeof(h);
	r = take(h.wide ? (void **)&ks->addr64 : (void **)&ks->addr32, p, h.n * asz);
	p += h.n * asz;
	if (r == 0)
		r = take((void **)&ks->name, p, h.n * 4);
	p += h.n * 4;
	if (r == 0)
		r = take((void **)&ks->mod, p, h.n * 2);
	p += h.n * 2;
	if (r == 0)
		r = take((void **)&ks->mods, p, h.nmods * 4);
	p += h.nmods * 4;
	if (r == 0)
		r = take((void **)&ks->names, p, h.names_len);
	if (r == 0 && !index_ok(ks))
		r = -ENOENT;
	if (r < 0) {
		kallsyms_free(ks);
		goto out;
	}
	*ret = ks;
out:
	free(data);
	return r;
}

/* kallsyms_cache.h: the kernel's symbol index (kallsyms.h) kept in the on-disk cache, keyed
 * by this boot, this kernel and its loaded modules, so a restart skips /proc/kallsyms. */
#ifndef PROWL_KALLSYMS_CACHE_H
#define PROWL_KALLSYMS_CACHE_H

#include "diskcache.h"
#include "kallsyms.h"

/* Where the key's parts are read; tests point them elsewhere. */
struct kallsyms_ident_paths {
	const char *boot_id; /* /proc/sys/kernel/random/boot_id: addresses move each boot (KASLR) */
	const char *notes;   /* /sys/kernel/notes: the kernel's build id */
	const char *modules; /* /proc/modules: names, sizes and load addresses (absent: none) */
};

extern const struct kallsyms_ident_paths kallsyms_ident_host;

/* The key of this kernel's index: a SHA-256 of the three files. -errno when the
 * boot id or the notes cannot be read (nothing is cached then). */
int kallsyms_cache_key(const struct kallsyms_ident_paths *p, struct diskcache_key *ret);
/* The index of k from the cache, checked in full (offsets, module indexes, order);
 * -ENOENT when there is none or it fails a check. */
int kallsyms_cached(struct diskcache *dc, const struct diskcache_key *k, struct kallsyms **ret);
/* Stores ks as k's entry, without the symbols of code the kernel makes at run time
 * (BPF programs, ftrace and kprobe trampolines: "[bpf]", "[__builtin__*]"), which
 * no key tells apart. Nothing when ks is hidden or empty. */
void kallsyms_keep(struct diskcache *dc, const struct diskcache_key *k, const struct kallsyms *ks);

#endif

/* kallsyms.h: kernel text symbols from /proc/kallsyms, sorted for address lookup.
 * Decision: a kernel frame's function is the bare symbol name; its file is NULL
 * for the core kernel and "[module]" for module symbols (e.g. "[ext4]"). */
#ifndef PROWL_KALLSYMS_H
#define PROWL_KALLSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A lookup result; the strings live as long as the table. */
struct ksym {
	uint64_t addr;
	const char *prefix; /* "__pfx_" inside a function's padding, else "" */
	const char *name;   /* the full name is prefix followed by name */
	const char *module; /* module name without brackets, NULL for the core kernel */
};

/* Entry i of n, in address order (equal addresses keep file order), is spread
 * over parallel arrays sized exactly; all strings are offsets into names. */
struct kallsyms {
	size_t n;
	bool hidden;      /* every address read as 0: kptr_restrict hides them */
	uint64_t base;    /* addresses are base + addr32[i], unless addr64 is set */
	uint32_t *addr32; /* while every address shares base's upper 32 bits */
	uint64_t *addr64; /* otherwise */
	uint32_t *name;   /* offset in names; KSYM_NAME_PFX: prefix "__pfx_" */
	uint16_t *mod;    /* 0 for the core kernel, else 1 + index in mods */
	uint32_t *mods;   /* offsets in names of module names */
	size_t nmods;
	char *names;      /* NUL-terminated names; a __pfx_ entry keeps only the
			   * padded function's name, usually that entry's own */
	size_t names_len;
};

/* The last symbol is assumed to extend at most this far. */
#define KSYM_LAST_MAX 0x10000u
/* The kernel's limit on a symbol name, NUL included. */
#define KSYM_NAME_LEN 512
#define KSYM_NAME_PFX 0x80000000u

/* Parses kallsyms text, keeping text symbols (types t, T, w, W). Returns 0,
 * -ENOMEM, -EIO, or -E2BIG past 2^32 symbols, 2 GiB of names or 65535 modules.
 * When every parsed address is zero, sets hidden and keeps no symbols. */
int kallsyms_parse(FILE *f, struct kallsyms **ret);
int kallsyms_load(const char *path, struct kallsyms **ret); /* -errno of fopen */
/* Symbol covering addr: the last one at or below it (first of an alias group).
 * False when addr is below the first symbol or KSYM_LAST_MAX or more past the
 * last one. */
bool kallsyms_find(const struct kallsyms *k, uint64_t addr, struct ksym *ret);
uint64_t kallsyms_addr(const struct kallsyms *k, size_t i); /* i < n */
size_t kallsyms_mem_bytes(const struct kallsyms *k);        /* accepts NULL */
void kallsyms_free(struct kallsyms *k);                     /* accepts NULL */

#endif

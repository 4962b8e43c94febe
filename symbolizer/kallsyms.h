/* kallsyms.h: kernel text symbols from /proc/kallsyms, sorted for address lookup.
 * Decision: a kernel frame's function is the bare symbol name; its file is NULL
 * for the core kernel and "[module]" for module symbols (e.g. "[ext4]"). */
#ifndef PROWL_KALLSYMS_H
#define PROWL_KALLSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct ksym {
	uint64_t addr;
	const char *name;   /* points into the table's string storage */
	const char *module; /* module name without brackets, NULL for the core kernel */
};

struct kallsyms {
	struct ksym *v; /* sorted by addr; equal addresses keep file order */
	size_t n;
	bool hidden;    /* every address read as 0: kptr_restrict hides them */
	char *strings;  /* name/module storage */
	size_t strings_len, strings_cap;
};

/* The last symbol is assumed to extend at most this far. */
#define KSYM_LAST_MAX 0x10000u

/* Parses kallsyms text, keeping text symbols (types t, T, w, W). Returns 0,
 * -ENOMEM or -EIO. When every parsed address is zero, sets hidden and keeps
 * no symbols. */
int kallsyms_parse(FILE *f, struct kallsyms **ret);
int kallsyms_load(const char *path, struct kallsyms **ret); /* -errno of fopen */
/* Symbol covering addr: the last one at or below it (first of an alias group),
 * or NULL when addr is below the first symbol or more than KSYM_LAST_MAX past
 * the last one. */
const struct ksym *kallsyms_find(const struct kallsyms *k, uint64_t addr);
void kallsyms_free(struct kallsyms *k); /* accepts NULL */

#endif

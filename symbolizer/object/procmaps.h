/* procmaps.h: parses /proc/PID/maps text into a sorted array of mappings, which name
 * the object files the object layer opens. Pure parsing over a FILE; no other /proc access. */
#ifndef PROWL_PROCMAPS_H
#define PROWL_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum pm_kind {
	PM_FILE = 0, /* path starts with '/', including "/memfd:x (deleted)" */
	PM_ANON,     /* no path */
	PM_VDSO,     /* "[vdso]" */
	PM_SPECIAL,  /* any other "[...]" name: [stack], [heap], [vsyscall], [anon:x] */
};

struct pm_entry {
	uint64_t start, end;  /* [start, end) */
	uint64_t offset;      /* file offset of start */
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	char perms[5];        /* "r-xp" */
	enum pm_kind kind;
	bool deleted;         /* path had a " (deleted)" suffix, now stripped */
	char *path;           /* owned; NULL for PM_ANON */
};

struct procmaps {
	struct pm_entry *v; /* sorted by start, non-overlapping */
	size_t n, cap;
};

#define PROCMAPS_EXEC_ONLY 1u /* keep only mappings with 'x' permission */

/* Parses one line (with or without trailing newline). On success returns 0
 * and fills *ret with path owned by the caller (free(ret->path)). Returns
 * -EINVAL for a malformed line, -ENOMEM. */
int procmaps_parse_line(const char *line, struct pm_entry *ret);
/* Parses every line of f into *ret (which must be zeroed or freed before).
 * Malformed lines are skipped and counted in *ret_bad when non-NULL.
 * Returns 0, -ENOMEM or -EIO (read error). */
int procmaps_parse(FILE *f, unsigned flags, struct procmaps *ret, size_t *ret_bad);
/* Same over a memory buffer. */
int procmaps_parse_buf(const char *buf, size_t len, unsigned flags, struct procmaps *ret, size_t *ret_bad);
/* Mapping containing addr, or NULL. O(log n). */
const struct pm_entry *procmaps_find(const struct procmaps *m, uint64_t addr);
void procmaps_free(struct procmaps *m);

#endif

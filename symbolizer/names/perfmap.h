/* perfmap.h: the perf map a JIT writes (/tmp/perf-PID.map, as the process sees it), read
 * incrementally as it grows, within a memory budget shared by all processes. */
#ifndef PROWL_PERFMAP_H
#define PROWL_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERFMAP_REFUSED_PIDS 256

/* Shared by every process's map; updated by the perfmap_* calls. */
struct perfmap_budget {
	uint64_t max_bytes;   /* 0: 32 MiB */
	uint64_t bytes;       /* held by all maps */
	uint64_t maps, symbols;
	uint64_t dropped;     /* entries not kept: over the budget */
	uint64_t bad_lines;   /* lines that are not START SIZE NAME */
	bool warned_full;
	/* The processes last warned about a map not read (a process's state may
	 * be dropped and made again while it lives: one warning, not one each time). */
	uint32_t refused_pids[PERFMAP_REFUSED_PIDS];
	unsigned refused_next;
};

struct perfmap;

/* Reads pid's perf map if it is new, grew or was replaced since *pm was read,
 * at most once per interval_ns (always when *pm is NULL and force). The file
 * is /tmp/perf-NSPID.map inside the process's root, NSPID its pid in its own
 * namespace; it is read only when it is a regular file of the process's own
 * user in that /tmp's own mount, and never through a symbolic link
 * (proc_open_own_file()): another file is one warning per process.
 * *pm stays NULL while there is no map. Returns 0 or -ENOMEM; every problem
 * of the file itself is one warning and a map with what could be read. A
 * refresh stops after the chunk in which an entry did not fit the budget. */
int perfmap_refresh(struct perfmap **pm, const char *proc_root, uint32_t pid, struct perfmap_budget *b,
		    uint64_t now_ns, uint64_t interval_ns);
/* The name of the JIT symbol covering addr (the latest written, when entries
 * overlap), or NULL. Valid until the next perfmap_refresh() or perfmap_free(). */
const char *perfmap_lookup(const struct perfmap *pm, uint64_t addr);
/* When pm was last checked (0 when never). */
uint64_t perfmap_checked_ns(const struct perfmap *pm);
/* Whether pm's last refresh stopped at its read limit with more of the file to read:
 * the next one need not wait for its interval. */
bool perfmap_more(const struct perfmap *pm);
void perfmap_free(struct perfmap *pm, struct perfmap_budget *b); /* accepts NULL */

/* Parses one map's text into pm (appending); for tests and benchmarks. Lines
 * past the last '\n' are not taken. Time linear in len plus a sort of the
 * entries added (and a merge when they go among the earlier ones). Returns the
 * bytes consumed or -ENOMEM. */
long perfmap_parse(struct perfmap **pm, const char *buf, size_t len, struct perfmap_budget *b);
size_t perfmap_count(const struct perfmap *pm);

#endif

/* fuzz_procmaps.c: /proc/PID/maps text, which a process shapes with the paths it maps:
 * the buffer parser, the line parser, and lookups in what they kept. */
#include "fuzz_common.h"
#include "procmaps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct procmaps m = {0};
	struct pm_entry e = {0};
	size_t bad = 0;
	char *s;

	fuzz_quiet();
	for (unsigned flags = 0; flags <= PROCMAPS_EXEC_ONLY; flags++) {
		if (procmaps_parse_buf((const char *)data, size, flags, &m, &bad) == 0) {
			for (size_t i = 0; i < m.n; i++) {
				if (m.v[i].start >= m.v[i].end)
					abort(); /* the parser promised non-empty, sorted mappings */
				if (i && m.v[i - 1].end > m.v[i].start)
					abort();
				if (procmaps_find(&m, m.v[i].start) != &m.v[i])
					abort();
			}
			procmaps_find(&m, 0);
			procmaps_find(&m, UINT64_MAX);
		}
		procmaps_free(&m);
	}
	s = fuzz_strdup(data, size);
	if (s && procmaps_parse_line(s, &e) == 0)
		free(e.path);
	free(s);
	return 0;
}

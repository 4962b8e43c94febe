/* fuzz_unwind.c: the unwind-table builder on an ELF file a user controls: its
 * .eh_frame, .eh_frame_hdr and .debug_frame, then lookups in the table it built. */
#include "fuzz_common.h"
#include "unwind_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct unwind_table t = {0};
	char path[64], buf[128];
	const struct prowl_unwind_row *r;
	int fd;

	fuzz_quiet();
	fd = fuzz_memfd(data, size, path);
	if (fd < 0)
		return 0;
	if (unwind_table_build_file(path, &t) == 0) {
		for (size_t i = 0; i < t.n; i++) {
			if (i && t.rows[i - 1].pc >= t.rows[i].pc)
				abort(); /* rows are sorted, one per pc: BPF bisects them */
			r = unwind_table_find(&t, t.base + t.rows[i].pc);
			if (i + 1 < t.n && r != &t.rows[i])
				abort(); /* every row but the end marker is the rule at its pc */
			if (r)
				unwind_row_format(r, buf, sizeof(buf));
		}
		unwind_table_find(&t, 0);
		unwind_table_find(&t, UINT64_MAX);
		unwind_table_bytes(&t);
	}
	unwind_table_free(&t);
	close(fd);
	return 0;
}

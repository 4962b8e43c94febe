/* fuzz_kallsyms.c: kallsyms text (a file the tests or a container's /proc may supply):
 * parsing, and lookups at every kept address and between them. */
#include "fuzz_common.h"
#include "kallsyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kallsyms *k = NULL;
	struct ksym sym;
	FILE *f;

	fuzz_quiet();
	f = fmemopen((void *)data, size ? size : 1, "r");
	if (!f)
		return 0;
	if (!size)
		fgetc(f); /* fmemopen wants size > 0: an empty file is one read at its end */
	if (kallsyms_parse(f, &k) == 0) {
		for (size_t i = 0; i < k->n && i < 4096; i++) {
			uint64_t a = kallsyms_addr(k, i);
			if (!kallsyms_find(k, a, &sym))
				abort(); /* every kept symbol's own address resolves */
			kallsyms_find(k, a + 1, &sym);
			kallsyms_find(k, a - 1, &sym);
		}
		kallsyms_find(k, 0, &sym);
		kallsyms_find(k, UINT64_MAX, &sym);
		kallsyms_mem_bytes(k);
	}
	kallsyms_free(k);
	fclose(f);
	return 0;
}

/* fuzz_perfmap.c: a perf map (/tmp/perf-PID.map, written by the process, so by any user):
 * parsing in pieces as it grows, within a small budget, and lookups around each entry. */
#include "escape.h"
#include "fuzz_common.h"
#include "perfmap.h"

static void check(const char *name)
{
	if (name && (!utf8_is_text(name) || strlen(name) > 4096))
		abort(); /* names go into profiles as they are */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct perfmap_budget b = {.max_bytes = 64 << 10};
	struct perfmap *pm = NULL;
	size_t half = size / 2, off = 0;
	long used;

	fuzz_quiet();
	/* In two reads, as a map that grows: the second starts where the first stopped. */
	used = perfmap_parse(&pm, (const char *)data, half, &b);
	if (used < 0 || (size_t)used > half)
		abort();
	off = (size_t)used;
	used = perfmap_parse(&pm, (const char *)data + off, size - off, &b);
	if (used < 0 || (size_t)used > size - off)
		abort();
	if (b.bytes > b.max_bytes + (1 << 12))
		abort(); /* the budget holds (a map's own header aside) */
	for (size_t i = 0; i + 16 <= size && i < 4096; i += 16) {
		uint64_t a;

		memcpy(&a, data + i, sizeof(a));
		check(perfmap_lookup(pm, a));
		check(perfmap_lookup(pm, a & 0xffffffffffffull));
	}
	check(perfmap_lookup(pm, 0));
	check(perfmap_lookup(pm, UINT64_MAX));
	perfmap_free(pm, &b);
	if (b.bytes || b.maps || b.symbols)
		abort(); /* everything given back */
	return 0;
}

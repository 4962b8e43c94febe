/* fuzz_v8heap.c: a node process's heap, which the process controls: the input as memory
 * (strings, functions, scripts, source position tables) read by symbolizer/node/v8heap.c
 * with Node 20's layout, from pointers the input's first bytes pick. */
#include <errno.h>

#include "fuzz_common.h"
#include "v8heap.h"
#include "../unit/v8node20.h"

#define BASE 0x10000ull

struct image {
	const uint8_t *p;
	size_t n;
};

static int img_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct image *im = ctx;

	if (addr < BASE || addr - BASE > im->n || im->n - (addr - BASE) < len)
		return -EFAULT;
	memcpy(buf, im->p + (addr - BASE), len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image im = { data, size };
	const struct v8_mem mem = { img_read, &im };
	char out[V8_NAME_MAX];
	uint32_t *ends;
	int32_t start, pos;
	size_t n;

	fuzz_quiet();
	for (size_t k = 0; k + 2 <= size && k < 16; k += 2) {
		uint64_t p = BASE + 8 * (uint64_t)(data[k] | data[k + 1] << 8) + 1;
		int r = v8_string(&mem, &node20_vp, p, out, sizeof(out));

		if (r >= (int)sizeof(out) || (r >= 0 && strlen(out) != (size_t)r))
			abort(); /* the length said is the text's */
		for (int i = 0; r > 0 && i < r; i++)
			if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] >= 0x7f)
				abort(); /* names are printable ASCII */
		v8_sfi_name(&mem, &node20_vp, p, out, sizeof(out), &start);
		v8_bytecode_position(&mem, &node20_vp, p, data[k], &pos);
		if (v8_script_lines(&mem, &node20_vp, p, &ends, &n) == 0) {
			if (n > V8_LINES_MAX || v8_line_of(ends, n, (int32_t)data[k]) > (int)n)
				abort();
			free(ends);
		}
	}
	v8_postab_lookup(data, size, size ? data[0] : 0);
	return 0;
}

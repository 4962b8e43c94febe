/* fuzz_v8meta.c: a node binary's v8dbg_ constants, which whoever wrote the file controls:
 * the input as an ELF object, read by the metadata reader (symbolizer/node/v8meta.c). */
#include "fuzz_common.h"
#include "v8meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct v8_meta m;
	char why[256];
	Elf *elf;
	int r;

	fuzz_quiet();
	elf_version(EV_CURRENT);
	elf = elf_memory((char *)data, size);
	if (!elf)
		return 0;
	r = v8_meta_read(elf, &m);
	if (r == 0 && m.found &&
	    (m.v[V8_FP_FUNCTION] % 8 || m.v[V8_FP_FUNCTION] < -256 || m.v[V8_FP_FUNCTION] > 256 ||
	     m.v[V8_O_FN_SHARED] < 0 || m.v[V8_O_FN_SHARED] >= 1024 || m.v[V8_POINTER_SIZE] != 8))
		abort(); /* found promises values in their ranges */
	if (r == 0 && m.found != (m.nsyms > 0))
		abort();
	if (m.nsyms > V8_MAX_SYMS)
		abort();
	if (r < 0 && !*v8_meta_why(&m, r, why, sizeof(why)))
		abort(); /* every failure has words for its warning */
	elf_end(elf);
	return 0;
}

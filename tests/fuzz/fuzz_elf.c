/* fuzz_elf.c: the symbolizer on an ELF file a user controls: headers, symbol tables, PLT
 * stubs and relocations, .eh_frame groups, build id, DWARF lines, inlines, at many addresses;
 * and the CPython detection every mapped object goes through (pydetect.h). */
#include <gelf.h>

#include "fuzz_common.h"
#include "objcache.h"
#include "pydetect.h"
#include "symbolizer.h"

/* py_detect_elf() on the same bytes: what it believes stays in its bounds. */
static void py_detect(const uint8_t *data, size_t size)
{
	Elf *elf = elf_memory((char *)data, size);
	struct py_elf pe;

	if (!elf)
		return;
	if (py_detect_elf(elf, "fuzz", &pe) == 0 && pe.pthread_size &&
	    (pe.pthread_size < PY_PTHREAD_SIZE_MIN || pe.pthread_size > PY_PTHREAD_SIZE_MAX))
		abort();
	elf_end(elf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct symbolizer_opts opts = {.max_cached_frames = 64, .max_modules = 2};
	struct sym_frame frames[SYM_MAX_INLINE];
	const struct sym_module *mod;
	struct symbolizer *s = NULL;
	struct objcache *c = NULL;
	bool symbolized;
	char path[64];
	size_t n;
	int fd;

	fuzz_quiet();
	fd = fuzz_memfd(data, size, path);
	if (fd < 0)
		return 0;
	/* A cache and a symbolizer per input: each memfd is a new file. */
	if (objcache_new(NULL, &c) < 0)
		goto out;
	opts.objects = c;
	if (symbolizer_new(&opts, &s) < 0)
		goto out;
	if (symbolizer_module_from_file(s, path, &mod) == 0) {
		uint64_t span = mod->limit > mod->start ? mod->limit - mod->start : 4096;
		for (unsigned i = 0; i <= 16; i++) {
			uint64_t a = mod->start + span / 16 * i;
			if (symbolizer_frames(s, mod, a, frames, SYM_MAX_INLINE, &n, &symbolized) < 0)
				continue;
			if (n < 1 || n > SYM_MAX_INLINE)
				abort(); /* at least one frame, at most max */
			for (size_t j = 0; j < n; j++)
				if (!frames[j].function)
					abort(); /* a function name is never NULL */
		}
	}
out:
	symbolizer_free(s);
	objcache_unref(c);
	close(fd);
	elf_version(EV_CURRENT);
	py_detect(data, size);
	return 0;
}

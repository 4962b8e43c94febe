/* fuzz_jvmmeta.c: a JVM's serviceability tables, which the process controls (its own
 * memory): an image file (jvmimage.h) read as its memory by the metadata parser. */
#include "fuzz_common.h"
#include "jvmimage.h"
#include "jvmmeta.h"

static struct jvm_image img;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jvm_mem mem = { jvm_image_read, &img };
	struct jvm_meta m;

	fuzz_quiet();
	if (jvm_image_parse(data, size, &img) < 0)
		return 0;
	if (jvm_meta_read(&mem, &img.elf, img.bias, &m, NULL, NULL) == 0 && jvm_meta_missing(&m))
		abort(); /* a success promises every field the walk needs */
	if (m.entries[0] > JVM_MAX_ENTRIES)
		abort();
	return 0;
}

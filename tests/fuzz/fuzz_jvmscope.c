/* fuzz_jvmscope.c: an nmethod's debug information, which the JVM process controls: the
 * input is the offsets (a prowl_java_proc), a pc offset, then the memory the blob is in. */
#include "fuzz_common.h"
#include "jvmscope.h"

#define BASE 0x7f0000100000ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prowl_java_proc jp;
	struct jvm_scope sc[JVM_SCOPE_MAX];
	struct fuzz_mem f;
	struct jvm_mem mem = { fuzz_mem_read, &f };
	uint32_t off;
	size_t n = 99;

	fuzz_quiet();
	if (size < sizeof(jp) + 5)
		return 0;
	memcpy(&jp, data, sizeof(jp));
	memcpy(&off, data + sizeof(jp), 4);
	jp.flags |= PROWL_JAVA_SCOPES;
	f = (struct fuzz_mem){ data + sizeof(jp) + 5, size - sizeof(jp) - 5, BASE };
	if (jvm_scope_chain(&mem, &jp, BASE, off, data[sizeof(jp) + 4] & 1, sc, JVM_SCOPE_MAX, &n) == 0) {
		if (n < 1 || n > JVM_SCOPE_MAX)
			abort();
		for (size_t i = 0; i < n; i++)
			if (!sc[i].method || (sc[i].method & 7))
				abort();
	} else if (n != 0) {
		abort();
	}
	return 0;
}

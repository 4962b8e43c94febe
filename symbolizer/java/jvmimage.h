/* jvmimage.h: a JVM's memory as captured pages (a file prowl's tests and fuzzer read the
 * metadata from), and the process reader that can record such a capture. */
#ifndef PROWL_JVMIMAGE_H
#define PROWL_JVMIMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "jvmdetect.h"
#include "jvmmeta.h"

/* The file: "PJVMIMG1", u64 bias, u64 sym[JVM_SYM__N] (ELF addresses), u32 count,
 * then count times { u64 address, u32 length, length bytes }; little-endian. */
#define JVM_IMAGE_MAGIC "PJVMIMG1"
#define JVM_IMAGE_MAX_SEGS 16384

struct jvm_image_seg {
	uint64_t addr;
	uint32_t len;
	const uint8_t *data;
};

struct jvm_image {
	struct jvm_elf elf;
	uint64_t bias;
	size_t nseg;
	struct jvm_image_seg seg[JVM_IMAGE_MAX_SEGS];
};

/* Parses buf (kept: segments point into it; they must be sorted and apart).
 * Returns 0 or -EBADMSG. */
int jvm_image_parse(const uint8_t *buf, size_t len, struct jvm_image *ret);
/* A struct jvm_mem reader over an image (ctx: the struct jvm_image). */
int jvm_image_read(void *ctx, uint64_t addr, void *buf, size_t len);

/* Reads pid's memory (ctx: a struct jvm_proc_mem). */
struct jvm_proc_mem {
	uint32_t pid;
};
int jvm_proc_read(void *ctx, uint64_t addr, void *buf, size_t len);

#endif

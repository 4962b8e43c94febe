/* jvmimage.c: reads JVM memory from a captured image (bounded, every segment checked
 * against the buffer) or from a live process with process_vm_readv(). */
#include "jvmimage.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

static int take(const uint8_t **p, const uint8_t *end, void *out, size_t n)
{
	if ((size_t)(end - *p) < n)
		return -EBADMSG;
	memcpy(out, *p, n);
	*p += n;
	return 0;
}

int jvm_image_parse(const uint8_t *buf, size_t len, struct jvm_image *ret)
{
	const uint8_t *p = buf, *end = buf + len;
	char magic[8];
	uint32_t n;

	memset(&ret->elf, 0, sizeof(ret->elf));
	ret->nseg = 0;
	if (take(&p, end, magic, 8) < 0 || memcmp(magic, JVM_IMAGE_MAGIC, 8) || take(&p, end, &ret->bias, 8) < 0 ||
	    take(&p, end, ret->elf.sym, sizeof(ret->elf.sym)) < 0 || take(&p, end, &n, 4) < 0 ||
	    n > JVM_IMAGE_MAX_SEGS)
		return -EBADMSG;
	ret->elf.found = true;
	for (uint32_t i = 0; i < n; i++) {
		struct jvm_image_seg *s = &ret->seg[i];

		if (take(&p, end, &s->addr, 8) < 0 || take(&p, end, &s->len, 4) < 0 || (size_t)(end - p) < s->len)
			return -EBADMSG;
		/* Sorted and apart, so that a read finds its segment by bisection. */
		if (i && (s->addr < ret->seg[i - 1].addr + ret->seg[i - 1].len || s->addr + s->len < s->addr))
			return -EBADMSG;
		s->data = p;
		p += s->len;
		ret->nseg++;
	}
	return 0;
}

int jvm_image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct jvm_image *im = ctx;
	const struct jvm_image_seg *s;
	size_t lo = 0, hi = im->nseg;

	while (hi - lo > 1) { /* the last segment at or below addr */
		size_t mid = lo + (hi - lo) / 2;

		if (im->seg[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	if (!im->nseg)
		return -EFAULT;
	s = &im->seg[lo];
	if (addr < s->addr || addr - s->addr > s->len || len > s->len - (addr - s->addr))
		return -EFAULT;
	memcpy(buf, s->data + (addr - s->addr), len);
	return 0;
}

int jvm_proc_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct jvm_proc_mem *pm = ctx;
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (!addr)
		return -EFAULT;
	n = process_vm_readv((pid_t)pm->pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return errno == ESRCH ? -ESRCH : -EFAULT;
	return (size_t)n == len ? 0 : -EFAULT;
}

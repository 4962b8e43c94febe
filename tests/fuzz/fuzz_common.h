/* fuzz_common.h: what every libFuzzer harness of tests/fuzz shares: the input as a
 * file (a memfd, for parsers that take paths), a NUL-terminated copy, the input as memory,
 * and quiet logs. */
#ifndef PROWL_FUZZ_COMMON_H
#define PROWL_FUZZ_COMMON_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input in a fresh memfd; *path names it ("/proc/self/fd/N"). Returns the fd or -1. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char path[64])
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);
	size_t off = 0;

	if (fd < 0)
		return -1;
	while (off < size) {
		ssize_t n = write(fd, data + off, size - off);
		if (n <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	snprintf(path, 64, "/proc/self/fd/%d", fd);
	return fd;
}

/* The input as a NUL-terminated string (caller frees); NULL when out of memory. */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (s) {
		memcpy(s, data, size);
		s[size] = '\0';
	}
	return s;
}

/* The input as a process's memory from base on, for readers that take a callback
 * (ctx, addr, buf, len): fuzz_mem_read copies what lies inside, -EFAULT otherwise. */
struct fuzz_mem {
	const uint8_t *p;
	size_t n;
	uint64_t base;
};

static inline int fuzz_mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct fuzz_mem *m = ctx;

	if (addr < m->base || addr - m->base > m->n || m->n - (addr - m->base) < len)
		return -EFAULT;
	memcpy(buf, m->p + (addr - m->base), len);
	return 0;
}

/* Errors are logged (the escaping of hostile text is under test too), below the
 * level that prints: the run stays readable; -close_fd_mask=2 hides the rest. */
static inline void fuzz_quiet(void)
{
	static int done;

	if (!done) {
		log_set_level(LOG_LVL_ERROR);
		done = 1;
	}
}

#endif

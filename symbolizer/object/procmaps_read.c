/* procmaps_read.c: executable mappings through PROCMAP_QUERY, written out as the maps lines
 * the kernel would print and parsed by procmaps.c, so both ways give the same entries. */
#include "procmaps_read.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* linux/fs.h of Linux 6.11 (Debian 12's headers are older). */
struct pm_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define PM_QUERY _IOWR('f', 17, struct pm_query)
#define PMQ_READABLE 0x01
#define PMQ_WRITABLE 0x02
#define PMQ_EXECUTABLE 0x04
#define PMQ_SHARED 0x08
#define PMQ_COVERING_OR_NEXT 0x10

/* Appends a maps line for q to the stream: a newline in the name is written as
 * the kernel's maps file writes it ("\012"), so that the line stays one line. */
static void put_line(FILE *out, const struct pm_query *q, const char *name)
{
	fprintf(out, "%" PRIx64 "-%" PRIx64 " %c%c%c%c %08" PRIx64 " %02x:%02x %" PRIu64 " ", q->vma_start,
		q->vma_end, q->vma_flags & PMQ_READABLE ? 'r' : '-', q->vma_flags & PMQ_WRITABLE ? 'w' : '-',
		q->vma_flags & PMQ_EXECUTABLE ? 'x' : '-', q->vma_flags & PMQ_SHARED ? 's' : 'p', q->vma_offset,
		q->dev_major, q->dev_minor, q->inode);
	for (const char *c = name; *c; c++)
		if (*c == '\n')
			fputs("\\012", out);
		else
			fputc(*c, out);
	fputc('\n', out);
}

/* The vsyscall page is no VMA of the process (the kernel's gate area): no query
 * gives it, but the maps text of every 64-bit process lists it. Its line, as
 * prowl's own maps have it ("" without one). */
static char vsyscall_line[128];
static pthread_once_t vsyscall_once = PTHREAD_ONCE_INIT;

static void find_vsyscall(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/maps", "re");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, " [vsyscall]\n") && strlen(line) < sizeof(vsyscall_line))
			memcpy(vsyscall_line, line, strlen(line) + 1);
	if (f)
		fclose(f);
}

/* The lines of fd's executable mappings into *buf; -ENOTTY when the kernel
 * cannot be asked (or refuses a question: the text then says it all). */
static int query_all(int fd, char **buf, size_t *len)
{
	static __thread char name[PATH_MAX + 64];
	FILE *out = open_memstream(buf, len);
	uint64_t addr = 0;
	int r = 0;

	if (!out)
		return -ENOMEM;
	for (;;) {
		struct pm_query q = {
			.size = sizeof(q), .query_flags = PMQ_COVERING_OR_NEXT | PMQ_EXECUTABLE, .query_addr = addr,
			.vma_name_size = sizeof(name), .vma_name_addr = (uint64_t)(uintptr_t)name,
		};

		if (ioctl(fd, PM_QUERY, &q) < 0) {
			/* ENOENT: no mapping past addr; ESRCH: the process has exited.
			 * Anything else (an older kernel, a name too long): the text. */
			if (errno != ENOENT && errno != ESRCH)
				r = -ENOTTY;
			break;
		}
		if (q.vma_end <= addr || q.vma_end <= q.vma_start) {
			r = -ENOTTY; /* no progress: never loop */
			break;
		}
		if (!q.vma_name_size)
			name[0] = 0;
		name[sizeof(name) - 1] = 0;
		put_line(out, &q, name);
		addr = q.vma_end;
	}
	pthread_once(&vsyscall_once, find_vsyscall);
	if (r == 0 && addr && vsyscall_line[0])
		fputs(vsyscall_line, out);
	if (fclose(out) != 0 && r == 0)
		r = -ENOMEM;
	if (r < 0) {
		free(*buf);
		*buf = NULL;
	}
	return r;
}

int procmaps_read_exec(const char *path, struct procmaps *ret)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	*ret = (struct procmaps){ 0 };
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	r = query_all(fd, &buf, &len);
	if (r == 0) {
		close(fd);
		r = procmaps_parse_buf(buf, len, PROCMAPS_EXEC_ONLY, ret, NULL);
		free(buf);
		return r;
	}
	if (r != -ENOTTY) {
		close(fd);
		return r;
	}
	f = fdopen(fd, "re");
	if (!f) {
		r = -errno;
		close(fd);
		return r;
	}
	r = procmaps_parse(f, PROCMAPS_EXEC_ONLY, ret, NULL);
	fclose(f);
	return r;
}

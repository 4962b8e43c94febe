/* jvm_capture.c: captures the memory prowl reads for a live JVM's serviceability tables
 * into an image file (jvmimage.h), for the unit test and the fuzzer's seed; --dump lists them.
 * Usage: jvm_capture PID OUT.img | jvm_capture --dump PID */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jvmimage.h"

/* The bytes the parser read: it reads single bytes when a page read fails, so
 * refusing page reads leaves exactly what it looked at, merged into runs on output. */
struct byte_at {
	uint64_t addr;
	uint8_t v;
};
static struct byte_at *bytes;
static size_t nbytes, capbytes;

static int rec_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	if (len > 8)
		return -EFAULT;
	if (jvm_proc_read(ctx, addr, buf, len) < 0)
		return -EFAULT;
	for (size_t i = 0; i < len; i++) {
		if (nbytes == capbytes) {
			capbytes = capbytes ? 2 * capbytes : 65536;
			bytes = realloc(bytes, capbytes * sizeof(*bytes));
			if (!bytes)
				abort();
		}
		bytes[nbytes++] = (struct byte_at){ addr + i, ((uint8_t *)buf)[i] };
	}
	return 0;
}

static int by_addr(const void *a, const void *b)
{
	const struct byte_at *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Writes the bytes read as runs of consecutive addresses (segments). */
static void write_runs(FILE *out)
{
	uint32_t n = 0;
	size_t u = 0;

	qsort(bytes, nbytes, sizeof(*bytes), by_addr);
	for (size_t i = 0; i < nbytes; i++)
		if (!u || bytes[u - 1].addr != bytes[i].addr)
			bytes[u++] = bytes[i];
	for (size_t i = 0; i < u; i++)
		n += !i || bytes[i].addr != bytes[i - 1].addr + 1;
	fwrite(&n, 4, 1, out);
	for (size_t i = 0; i < u;) {
		size_t j = i + 1;
		uint32_t len;

		while (j < u && bytes[j].addr == bytes[j - 1].addr + 1)
			j++;
		len = (uint32_t)(j - i);
		fwrite(&bytes[i].addr, 8, 1, out);
		fwrite(&len, 4, 1, out);
		for (size_t k = i; k < j; k++)
			fputc(bytes[k].v, out);
		i = j;
	}
}

static void dump(void *ctx, int kind, const char *name, uint64_t value, bool is_static)
{
	static const char *const kinds[] = { "field", "type", "int", "long" };

	(void)ctx;
	printf("%s %s %s0x%" PRIx64 "\n", kinds[kind], name, is_static ? "static " : "", value);
}

int main(int argc, char **argv)
{
	bool dumping = argc == 3 && strcmp(argv[1], "--dump") == 0;
	struct jvm_proc_mem pm = { 0 };
	struct jvm_mem mem = { dumping ? jvm_proc_read : rec_read, &pm };
	struct jvm_elf je;
	struct jvm_meta m;
	char path[64], line[4096], lib[4200] = "";
	uint64_t start = 0, bias;
	FILE *f;
	Elf *elf;
	int fd, r;

	if (argc != 3) {
		fprintf(stderr, "usage: jvm_capture PID OUT.img | jvm_capture --dump PID\n");
		return 2;
	}
	pm.pid = (uint32_t)atoi(argv[dumping ? 2 : 1]);
	snprintf(path, sizeof(path), "/proc/%u/maps", pm.pid);
	f = fopen(path, "r");
	if (!f) {
		perror(path);
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, off;
		char p[4096];

		if (sscanf(line, "%llx-%*x %*s %llx %*s %*s %4095s", &s, &off, p) == 3 && off == 0 &&
		    strstr(p, "/libjvm.so")) {
			start = s;
			snprintf(lib, sizeof(lib), "/proc/%u/root%s", pm.pid, p);
			break;
		}
	}
	fclose(f);
	if (!start) {
		fprintf(stderr, "jvm_capture: pid %u maps no libjvm.so\n", pm.pid);
		return 1;
	}
	elf_version(EV_CURRENT);
	fd = open(lib, O_RDONLY);
	elf = fd < 0 ? NULL : elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || jvm_detect_elf(elf, &je) < 0 || !je.found) {
		fprintf(stderr, "jvm_capture: %s exports no gHotSpotVMStructs\n", lib);
		return 1;
	}
	bias = start; /* libjvm's first PT_LOAD is at virtual address 0, file offset 0 */
	r = jvm_meta_read(&mem, &je, bias, &m, dumping ? dump : NULL, NULL);
	fprintf(stderr, "jvm_capture: %s (entries %u %u %u %u)%s%s\n", r ? strerror(-r) : "ok", m.entries[0],
		m.entries[1], m.entries[2], m.entries[3], r == -ENOENT ? ": missing " : "",
		r == -ENOENT ? jvm_meta_missing(&m) : "");
	if (!dumping) {
		FILE *out = fopen(argv[2], "wb");

		if (!out) {
			perror(argv[2]);
			return 1;
		}
		fwrite(JVM_IMAGE_MAGIC, 1, 8, out);
		fwrite(&bias, 8, 1, out);
		for (unsigned int i = 0; i < JVM_SYM__N; i++)
			fwrite(&je.sym[i], 8, 1, out);
		write_runs(out);
		fclose(out);
	}
	return r ? 1 : 0;
}

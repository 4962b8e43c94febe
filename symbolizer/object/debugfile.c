/* debugfile.c: finds an object's separate debug file by build id, .gnu_debuglink and
 * .gnu_debugaltlink, opening only trusted paths and checking the file is the one meant. */
#include "debugfile.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "trust.h"

/* Whether the open debug file f carries build id want (want_len bytes). */
static bool has_build_id(struct obj_file *f, const uint8_t *want, size_t want_len)
{
	const void *id = NULL;
	ssize_t len;

	if (obj_file_begin(f) < 0)
		return false;
	len = dwelf_elf_gnu_build_id(f->elf, &id);
	return len > 0 && (size_t)len == want_len && !memcmp(id, want, want_len);
}

/* The CRC-32 of the whole file, as .gnu_debuglink records it (zlib's CRC). */
static int file_crc(int fd, uint32_t *ret)
{
	uint8_t buf[64 * 1024];
	uLong crc = crc32(0, Z_NULL, 0);
	off_t off = 0;

	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		crc = crc32(crc, buf, (uInt)n);
		off += n;
	}
	*ret = (uint32_t)crc;
	return 0;
}

/* Takes f into *ret (and its path) when it is trusted and open; else closes it. */
static int take(int r, struct obj_file *f, struct obj_file *ret, const char *cand, char *path, size_t size)
{
	if (r < 0) {
		obj_file_close(f);
		return r;
	}
	/* libdwfl begins its own Elf on the descriptor. */
	if (f->elf) {
		elf_end(f->elf);
		f->elf = NULL;
	}
	*ret = *f;
	snprintf(path, size, "%s", cand);
	return 0;
}

int obj_debug_by_build_id(const char *root, const struct obj_facts *f, struct obj_file *ret, char *path,
			  size_t size)
{
	char cand[PATH_MAX];
	struct obj_file d;
	int r;

	*ret = OBJ_FILE_NONE;
	if (f->build_id_len < 2 || (size_t)snprintf(cand, sizeof(cand), "%s/.build-id/%.2s/%s.debug", root,
						       f->build_id_hex, f->build_id_hex + 2) >= sizeof(cand))
		return -ENOENT;
	r = obj_open_trusted(cand, &d);
	if (r == 0 && !has_build_id(&d, f->build_id, f->build_id_len))
		r = -ESTALE;
	return take(r, &d, ret, cand, path, size);
}

int obj_debug_by_link(const char *main_path, const char *link, uint32_t crc, const struct obj_facts *f,
		      struct obj_file *ret, char *path, size_t size)
{
	const char *slash = main_path ? strrchr(main_path, '/') : NULL;
	char cand[PATH_MAX];
	int dirlen;

	*ret = OBJ_FILE_NONE;
	/* A name, not a path: the link must not climb out of the directories. */
	if (!slash || main_path[0] != '/' || !link || !*link || strchr(link, '/'))
		return -ENOENT;
	dirlen = (int)(slash - main_path);
	for (int i = 0; i < 3; i++) {
		static const char *const fmt[] = { "%.*s/%s", "%.*s/.debug/%s", OBJ_DEBUG_ROOT "%.*s/%s" };
		struct obj_file d;
		uint32_t got;
		int r;

		if ((size_t)snprintf(cand, sizeof(cand), fmt[i], dirlen, main_path, link) >= sizeof(cand))
			continue;
		r = obj_open_trusted(cand, &d);
		if (r < 0)
			continue;
		if (f->build_id_len ? has_build_id(&d, f->build_id, f->build_id_len)
				    : file_crc(d.fd, &got) == 0 && got == crc)
			return take(0, &d, ret, cand, path, size);
		obj_file_close(&d);
	}
	return -ENOENT;
}

int obj_debug_alt(const char *altname, struct obj_file *ret)
{
	*ret = OBJ_FILE_NONE;
	if (!altname || altname[0] != '/')
		return -EINVAL;
	return obj_open_trusted(altname, ret);
}

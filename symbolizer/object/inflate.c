/* inflate.c: copies an ELF file verbatim into an unnamed temporary file, appends its
 * zlib SHF_COMPRESSED sections inflated and a section header table pointing at them. */
#include "inflate.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ELFDATA_NATIVE ELFDATA2LSB
#else
#define ELFDATA_NATIVE ELFDATA2MSB
#endif

#define CHUNK          (64 * 1024)   /* read, inflate and copy granule */
#define SHNUM_MAX      (1u << 20)    /* section headers we accept (64 MiB of table) */
#define ALIGN_MAX      (1u << 16)    /* largest ch_addralign we accept */
/* Deflate cannot expand more than 1032:1 (a 258-byte match in two 1-bit codes);
 * a ch_size beyond that (plus slack for tiny streams) is a lie. */
#define DEFLATE_RATIO_MAX 1032
#define DEFLATE_SLACK     1024

/* One zlib-compressed section to inflate. */
struct zsec {
	uint32_t idx;
	uint64_t in_off, in_len;   /* the zlib stream: after the Chdr, to the section's end */
	uint64_t size, align;      /* ch_size, ch_addralign (>= 1, a power of two) */
	uint64_t out_off;          /* where its inflated bytes go in the copy */
};

/* The input, read through libelf with ELF_C_READ: headers and each Chdr are
 * read with pread() when asked for, nothing is mapped and no section's data
 * is read whole. */
struct elf_in {
	Elf *elf;
	bool is64;
	union {
		Elf64_Ehdr e64;
		Elf32_Ehdr e32;
	} eh;
	uint64_t size;             /* of the file */
	uint64_t shoff;
	uint32_t shnum;            /* the real count (section 0's sh_size when e_shnum is 0) */
	size_t shentsize;          /* == sizeof(Elf64_Shdr) or sizeof(Elf32_Shdr) */
	uint8_t *shdrs;            /* shnum * shentsize bytes: the table to write */
	struct zsec *z;
	uint32_t nz, zalloc;
};

/* pread() or pwrite() of exactly len bytes at off. */
static int pio_full(int fd, void *buf, size_t len, uint64_t off, bool write)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write ? pwrite(fd, p, len, (off_t)off) : pread(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO; /* the file shrank under us */
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	return pio_full(fd, buf, len, off, false);
}

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	return pio_full(fd, (void *)buf, len, off, true);
}

/* *v rounded up to align (a power of two); false on overflow. */
static bool align_up(uint64_t *v, uint64_t align)
{
	uint64_t r;

	if (__builtin_add_overflow(*v, align - 1, &r))
		return false;
	*v = r & ~(align - 1);
	return true;
}

/* Section i's header. */
static int shdr_get(const struct elf_in *in, uint32_t i, GElf_Shdr *sh)
{
	return gelf_getshdr(elf_getscn(in->elf, i), sh) ? 0 : -ENOEXEC;
}

/* Rewrites section i's header for its inflated copy; the values fit (checked
 * by plan_layout() for 32-bit files). */
static void shdr_set_inflated(struct elf_in *in, const struct zsec *z)
{
	uint8_t *p = in->shdrs + (size_t)z->idx * in->shentsize;

	if (in->is64) {
		Elf64_Shdr s;

		memcpy(&s, p, sizeof(s));
		s.sh_flags &= ~(Elf64_Xword)SHF_COMPRESSED;
		s.sh_offset = z->out_off;
		s.sh_size = z->size;
		s.sh_addralign = z->align;
		memcpy(p, &s, sizeof(s));
	} else {
		Elf32_Shdr s;

		memcpy(&s, p, sizeof(s));
		s.sh_flags &= ~(Elf32_Word)SHF_COMPRESSED;
		s.sh_offset = (Elf32_Off)z->out_off;
		s.sh_size = (Elf32_Word)z->size;
		s.sh_addralign = (Elf32_Word)z->align;
		memcpy(p, &s, sizeof(s));
	}
}

/* The section count that section 0 holds when e_shnum is 0. */
static uint64_t section0_count(const struct elf_in *in)
{
	Elf_Data *d = elf_getdata_rawchunk(in->elf, (int64_t)in->shoff, in->shentsize, ELF_T_SHDR);

	if (!d || d->d_size < in->shentsize)
		return 0;
	return in->is64 ? ((const Elf64_Shdr *)d->d_buf)->sh_size : ((const Elf32_Shdr *)d->d_buf)->sh_size;
}

/* Checks the ELF header and copies it and the section header table (in the
 * file's byte order, which is the native one) for writing them back. */
static int read_headers(int fd, struct elf_in *in)
{
	const char *ident;
	size_t shnum, table;
	GElf_Ehdr eh;

	in->elf = elf_begin(fd, ELF_C_READ, NULL);
	/* libelf refuses (NULL) a section header table outside the file. */
	if (!in->elf || elf_kind(in->elf) != ELF_K_ELF || !gelf_getehdr(in->elf, &eh))
		return -ENOEXEC;
	ident = elf_getident(in->elf, NULL);
	if (!ident || ident[EI_DATA] != ELFDATA_NATIVE)
		return -ENOEXEC;
	in->is64 = gelf_getclass(in->elf) == ELFCLASS64;
	in->shoff = eh.e_shoff;
	in->shentsize = eh.e_shentsize;
	if (in->shentsize != (in->is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr)))
		return in->shoff ? -ENOEXEC : -ENODATA;
	if (in->shoff == 0)
		return -ENODATA; /* no section header table */
	if (in->shoff > in->size || in->size - in->shoff < in->shentsize)
		return -ENOEXEC;
	/* More than SHN_LORESERVE sections: libelf reads section 0's sh_size. A
	 * table it finds cut off by the end of the file counts 0 sections. */
	if (elf_getshdrnum(in->elf, &shnum) < 0)
		return -ENOEXEC;
	if (shnum == 0)
		return eh.e_shnum || section0_count(in) ? -ENOEXEC : -ENODATA;
	if (shnum > SHNUM_MAX)
		return -ENOEXEC;
	table = shnum * in->shentsize; /* no overflow: both are small */
	if (in->shoff > in->size || table > in->size - in->shoff)
		return -ENOEXEC;
	in->shnum = (uint32_t)shnum;
	in->shdrs = malloc(table);
	if (!in->shdrs)
		return -ENOMEM;
	if (in->is64) {
		Elf64_Ehdr *e = elf64_getehdr(in->elf);

		if (!e)
			return -ENOEXEC;
		in->eh.e64 = *e;
	} else {
		Elf32_Ehdr *e = elf32_getehdr(in->elf);

		if (!e)
			return -ENOEXEC;
		in->eh.e32 = *e;
	}
	for (uint32_t i = 0; i < in->shnum; i++) {
		Elf_Scn *scn = elf_getscn(in->elf, i);
		const void *sh = in->is64 ? (const void *)elf64_getshdr(scn) : (const void *)elf32_getshdr(scn);

		if (!sh)
			return -ENOEXEC;
		memcpy(in->shdrs + (size_t)i * in->shentsize, sh, in->shentsize);
	}
	return 0;
}

static int zsec_add(struct elf_in *in, const struct zsec *z)
{
	if (in->nz == in->zalloc) {
		uint32_t n = in->zalloc ? in->zalloc * 2 : 16;
		struct zsec *p;

		if (n > in->shnum)
			n = in->shnum; /* at most one per section */
		p = reallocarray(in->z, n, sizeof(*p));
		if (!p)
			return -ENOMEM;
		in->z = p;
		in->zalloc = n;
	}
	in->z[in->nz++] = *z;
	return 0;
}

/* Finds and checks the zlib-compressed sections; totals their inflated sizes. */
static int find_zlib_sections(struct elf_in *in, uint64_t max_bytes)
{
	size_t chdr_size = in->is64 ? sizeof(Elf64_Chdr) : sizeof(Elf32_Chdr);
	uint64_t total = 0;
	int r;

	/* Section 0 is never a real section (it may hold extended counts). */
	for (uint32_t i = 1; i < in->shnum; i++) {
		struct zsec z = { .idx = i };
		uint64_t type, bound;
		const void *chdr;
		GElf_Shdr sh;
		Elf_Data *d;

		r = shdr_get(in, i, &sh);
		if (r < 0)
			return r;
		/* gABI: SHF_COMPRESSED never goes with SHF_ALLOC; leave such oddities alone. */
		if (!(sh.sh_flags & SHF_COMPRESSED) || (sh.sh_flags & SHF_ALLOC) || sh.sh_type == SHT_NOBITS)
			continue;
		if (sh.sh_offset > in->size || sh.sh_size > in->size - sh.sh_offset || sh.sh_size < chdr_size)
			return -EINVAL;
		/* Only the Chdr, not the whole section (libelf's gelf_getchdr()
		 * would read it all); converted to the native layout. */
		d = elf_getdata_rawchunk(in->elf, (int64_t)sh.sh_offset, chdr_size, ELF_T_CHDR);
		if (!d || d->d_size < chdr_size)
			return -EINVAL;
		chdr = d->d_buf;
		type = in->is64 ? ((const Elf64_Chdr *)chdr)->ch_type : ((const Elf32_Chdr *)chdr)->ch_type;
		z.size = in->is64 ? ((const Elf64_Chdr *)chdr)->ch_size : ((const Elf32_Chdr *)chdr)->ch_size;
		z.align = in->is64 ? ((const Elf64_Chdr *)chdr)->ch_addralign : ((const Elf32_Chdr *)chdr)->ch_addralign;
		if (type != ELFCOMPRESS_ZLIB)
			continue; /* zstd or unknown: stays compressed */
		if (z.align == 0)
			z.align = 1;
		if ((z.align & (z.align - 1)) || z.align > ALIGN_MAX)
			return -EINVAL;
		z.in_off = sh.sh_offset + chdr_size;
		z.in_len = sh.sh_size - chdr_size;
		if (!__builtin_mul_overflow(z.in_len, DEFLATE_RATIO_MAX, &bound) &&
		    !__builtin_add_overflow(bound, DEFLATE_SLACK, &bound) && z.size > bound)
			return -EINVAL;
		if (__builtin_add_overflow(total, z.size, &total) || total > ELF_INFLATE_ABS_MAX || total > max_bytes)
			return -EFBIG;
		r = zsec_add(in, &z);
		if (r < 0)
			return r;
	}
	return in->nz ? 0 : -ENODATA;
}

/* Places the inflated sections after the copy, then the section header table
 * (aligned to 8); returns the table's offset in *ret_shoff. */
static int plan_layout(struct elf_in *in, uint64_t *ret_shoff)
{
	uint64_t cur = in->size, end, limit = in->is64 ? (uint64_t)INT64_MAX : UINT32_MAX;

	for (uint32_t i = 0; i < in->nz; i++) {
		struct zsec *z = &in->z[i];

		if (!align_up(&cur, z->align))
			return -EFBIG;
		z->out_off = cur;
		if (__builtin_add_overflow(cur, z->size, &cur))
			return -EFBIG;
	}
	if (!align_up(&cur, 8) ||
	    __builtin_add_overflow(cur, (uint64_t)in->shnum * in->shentsize, &end) || end > limit)
		return -EFBIG;
	*ret_shoff = cur;
	return 0;
}

/* An unnamed file in dir: O_TMPFILE, or mkstemp + unlink where the filesystem
 * (or kernel) lacks it. */
static int tmpfile_in(const char *dir)
{
	char path[PATH_MAX];
	int fd, r;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return -errno;
	r = snprintf(path, sizeof(path), "%s/.prowl-inflate.XXXXXX", dir);
	if (r < 0 || (size_t)r >= sizeof(path))
		return -ENAMETOOLONG;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (unlink(path) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Copies [0, len) of in to out with copy_file_range() (which may share extents),
 * else with pread()/pwrite(). */
static int copy_prefix(int in, int out, uint64_t len, uint8_t *buf)
{
	uint64_t done = 0;
	bool cfr = true;
	int r;

	while (done < len) {
		size_t n = len - done < (1u << 30) ? (size_t)(len - done) : (1u << 30);

		if (cfr) {
			loff_t ioff = (loff_t)done, ooff = (loff_t)done;
			ssize_t c = copy_file_range(in, &ioff, out, &ooff, n, 0);

			if (c > 0) {
				done += (uint64_t)c;
				continue;
			}
			if (c == 0)
				return -EIO; /* the file shrank under us */
			if (errno == EINTR)
				continue;
			if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
				return -errno;
			cfr = false;
		}
		if (n > CHUNK)
			n = CHUNK;
		r = pread_full(in, buf, n, done);
		if (r < 0)
			return r;
		r = pwrite_full(out, buf, n, done);
		if (r < 0)
			return r;
		done += n;
	}
	return 0;
}

/* Stream-inflates z's zlib data from src to its place in out; the stream must
 * end and give exactly ch_size bytes. ibuf holds CHUNK bytes, obuf CHUNK + 1. */
static int inflate_section(int src, int out, const struct zsec *z, uint8_t *ibuf, uint8_t *obuf)
{
	uint64_t in_done = 0, produced = 0;
	z_stream zs = {};
	int zr, r = 0;

	if (inflateInit(&zs) != Z_OK)
		return -ENOMEM;
	for (;;) {
		uint64_t room = z->size - produced;
		size_t want, got;

		if (zs.avail_in == 0 && in_done < z->in_len) {
			size_t n = z->in_len - in_done < CHUNK ? (size_t)(z->in_len - in_done) : CHUNK;

			r = pread_full(src, ibuf, n, z->in_off + in_done);
			if (r < 0)
				goto out;
			in_done += n;
			zs.next_in = ibuf;
			zs.avail_in = (uInt)n;
		}
		/* One byte more than may come, to catch a stream longer than ch_size. */
		want = room < CHUNK ? (size_t)room + 1 : CHUNK;
		zs.next_out = obuf;
		zs.avail_out = (uInt)want;
		zr = inflate(&zs, Z_NO_FLUSH);
		got = want - zs.avail_out;
		if (got > room) {
			r = -EINVAL;
			goto out;
		}
		if (got) {
			r = pwrite_full(out, obuf, got, z->out_off + produced);
			if (r < 0)
				goto out;
			produced += got;
		}
		if (zr == Z_STREAM_END)
			break;
		if (zr == Z_BUF_ERROR && zs.avail_in == 0 && in_done < z->in_len)
			continue; /* needs the next input chunk */
		if (zr != Z_OK) {
			/* Z_BUF_ERROR here: the stream is truncated. */
			r = zr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
			goto out;
		}
	}
	if (produced != z->size)
		r = -EINVAL;
out:
	inflateEnd(&zs);
	return r;
}

static int write_copy(int src_fd, int fd, struct elf_in *in, uint64_t shoff)
{
	uint8_t *buf = malloc(2 * CHUNK + 1);
	int r;

	if (!buf)
		return -ENOMEM;
	r = copy_prefix(src_fd, fd, in->size, buf);
	for (uint32_t i = 0; r >= 0 && i < in->nz; i++)
		r = inflate_section(src_fd, fd, &in->z[i], buf, buf + CHUNK);
	free(buf);
	if (r < 0)
		return r;

	for (uint32_t i = 0; i < in->nz; i++)
		shdr_set_inflated(in, &in->z[i]);
	r = pwrite_full(fd, in->shdrs, (size_t)in->shnum * in->shentsize, shoff);
	if (r < 0)
		return r;
	/* The header we checked (not whatever the copy got), with the new table. */
	if (in->is64) {
		in->eh.e64.e_shoff = shoff;
		r = pwrite_full(fd, &in->eh.e64, sizeof(in->eh.e64), 0);
	} else {
		in->eh.e32.e_shoff = (Elf32_Off)shoff;
		r = pwrite_full(fd, &in->eh.e32, sizeof(in->eh.e32), 0);
	}
	if (r < 0)
		return r;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	return 0;
}

int elf_inflate_debug(int src_fd, const char *dir, uint64_t max_bytes)
{
	struct elf_in in = {};
	uint64_t shoff;
	struct stat st;
	int fd = -1, r;

	if (!dir)
		return -EINVAL;
	if (fstat(src_fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size < 0)
		return -EINVAL;
	elf_version(EV_CURRENT);
	in.size = (uint64_t)st.st_size;

	r = read_headers(src_fd, &in);
	if (r < 0)
		goto out;
	r = find_zlib_sections(&in, max_bytes);
	if (r < 0)
		goto out;
	r = plan_layout(&in, &shoff);
	if (r < 0)
		goto out;

	fd = tmpfile_in(dir);
	if (fd < 0) {
		r = fd;
		goto out;
	}
	r = write_copy(src_fd, fd, &in, shoff);
	if (r < 0) {
		close(fd); /* unnamed: the blocks go with it */
		fd = -1;
	}
out:
	if (in.elf)
		elf_end(in.elf);
	free(in.shdrs);
	free(in.z);
	return r < 0 ? r : fd;
}

/* inflate.h: copies an object file into an unnamed temporary file with its zlib-compressed
 * (SHF_COMPRESSED) sections stored inflated, so libdw maps them instead of heap-copying. */
#ifndef PROWL_INFLATE_H
#define PROWL_INFLATE_H

#include <stdint.h>

/* Above this many inflated bytes per file the input is refused whatever
 * max_bytes says (-EFBIG): a sanity cap, not a budget. */
#define ELF_INFLATE_ABS_MAX (UINT64_C(1) << 36)

/* Writes an ELF file equal to the one open at src_fd (a regular file, read with
 * pread only) but with its zlib SHF_COMPRESSED sections (gABI Chdr, ch_type
 * ELFCOMPRESS_ZLIB) stored inflated, into an unnamed temporary file in dir
 * (O_TMPFILE, else mkstemp + unlink). The source bytes are copied verbatim, so
 * every existing offset stays valid; the inflated sections and a new section
 * header table (pointing at them, without SHF_COMPRESSED) are appended, and
 * e_shoff is patched. GNU .zdebug_* and non-zlib (zstd) sections stay as they
 * are. Handles native-endian ELFCLASS32 and ELFCLASS64.
 *
 * Returns a new O_RDWR|O_CLOEXEC descriptor positioned at 0 (the caller closes
 * it; the file vanishes with its last descriptor and mapping), or
 *   -ENODATA  no zlib-compressed section: nothing to do;
 *   -ENOEXEC  not an ELF file this handles (magic, class, byte order, e_shentsize,
 *             section header table outside the file);
 *   -EFBIG    the inflated sections would total more than max_bytes (or
 *             ELF_INFLATE_ABS_MAX), or a 32-bit file would outgrow 4 GiB;
 *   -EINVAL   a corrupt compressed section (outside the file, bad Chdr or
 *             alignment, a zlib stream that does not inflate to exactly
 *             ch_size bytes), or src_fd is not a regular file;
 *   another -errno (creating or writing the file: -ENOSPC, -EACCES, ...).
 * On error nothing is left on disk. */
int elf_inflate_debug(int src_fd, const char *dir, uint64_t max_bytes);

#endif

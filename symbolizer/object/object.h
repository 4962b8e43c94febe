/* object.h: the facts about one object file that every stage needs, read once: identity,
 * build id, load segments and bias, debug sources; and the one opener of mapped files. */
#ifndef PROWL_OBJECT_H
#define PROWL_OBJECT_H

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "obj_file.h"

#define OBJ_BUILD_ID_MAX 64 /* bytes; longer notes are ignored */
#define OBJ_BUILD_ID_HEX (2 * OBJ_BUILD_ID_MAX + 1)

/* One PT_LOAD segment. */
struct obj_load {
	uint64_t vaddr, memsz, offset, filesz;
	bool exec;
};

/* Which sources of names and unwind rules the file itself holds (a separate
 * debug file found through the build id or the debuglink may add more). */
enum {
	OBJ_SRC_SYMTAB       = 1u << 0,
	OBJ_SRC_DYNSYM       = 1u << 1,
	OBJ_SRC_DEBUG_INFO   = 1u << 2, /* .debug_info or .zdebug_info */
	OBJ_SRC_EH_FRAME     = 1u << 3,
	OBJ_SRC_DEBUG_FRAME  = 1u << 4,
	OBJ_SRC_DEBUGLINK    = 1u << 5, /* .gnu_debuglink */
	OBJ_SRC_DEBUGALTLINK = 1u << 6, /* .gnu_debugaltlink (dwz) */
	OBJ_SRC_MINIDEBUG    = 1u << 7, /* .gnu_debugdata (MiniDebugInfo) */
	OBJ_SRC_COMPRESSED   = 1u << 8, /* some SHF_COMPRESSED section */
	OBJ_SRC_GOPCLNTAB    = 1u << 9, /* Go's own symbol table */
};

/* What is read from an object's ELF image. Never changed once read. */
struct obj_facts {
	uint8_t build_id[OBJ_BUILD_ID_MAX];
	uint8_t build_id_len;             /* 0: none */
	char build_id_hex[OBJ_BUILD_ID_HEX]; /* lowercase, "" when none */
	uint16_t e_type;                  /* ET_EXEC or ET_DYN; 0: not a usable ELF */
	uint32_t sources;                 /* OBJ_SRC_* */
	struct obj_load *loads;           /* none when not a usable ELF */
	size_t nloads;
	/* Over the file's first and last 4 KiB and its length, as the OTel
	 * profiler's FileID does (an image's: over all of it). With the build id,
	 * it tells copies of one file from another file that claims the same
	 * build id. */
	uint64_t content_hash;
};

/* Opens the file of src: /proc/PID/map_files/START-END (the very file mapped:
 * it works across mount namespaces and for deleted files), then /proc/PID/exe
 * (the main executable, deleted or not, without CAP_CHECKPOINT_RESTORE), then
 * /proc/PID/root/PATH, then PATH if src allows. A candidate other than
 * map_files counts only if it is a regular file with the (dev, ino) the
 * mapping names: a file replaced since it was mapped is not the one mapped.
 * Sets ret->ident.trusted (obj_trusted_ident()). Returns 0 with ret->fd set
 * (elf NULL), -EPERM when map_files was refused (the capability is missing)
 * and no other route reached the file, or the error of the last candidate
 * (-ENOENT, -EACCES, -ESTALE for another file at the path, -ENOEXEC...). */
int obj_open(const struct obj_source *src, struct obj_file *ret);
/* Begins ret->elf on ret->fd: mapped (ELF_C_READ_MMAP) when the file is
 * trusted, else read with pread() as libelf needs it (ELF_C_READ), so that no
 * byte of a file another user controls is read through a mapping. Such an Elf
 * needs its descriptor while it lives. -EINVAL: libelf refused. */
int obj_file_begin(struct obj_file *f);
/* Closes what f still holds. */
void obj_file_close(struct obj_file *f);
/* 0 when the file open at fd still has the size and mtime of id, -ESTALE when
 * it changed (truncated, written), or fstat()'s error. Reads of an untrusted
 * file are checked with it afterwards: libelf's pread() of a truncated file
 * fails quietly, and what it read before and after a write do not match. */
int obj_file_unchanged(int fd, const struct obj_ident *id);

/* Reads the facts of elf (a file's or an image's). A file that is not a usable
 * ELF (kind, type, no or inconsistent PT_LOADs) gives e_type 0 and no loads,
 * but still its build id and sources. Returns 0 or -ENOMEM. */
int obj_facts_read(Elf *elf, struct obj_facts *ret);
/* The content hash of the open file fd of size bytes. -EIO when it is shorter. */
int obj_content_hash_fd(int fd, uint64_t size, uint64_t *ret);
void obj_facts_free(struct obj_facts *f);

/* The PT_LOAD segments of elf (only PT_LOAD; none is -EINVAL). *ret is malloc'ed. */
int obj_read_loads(Elf *elf, struct obj_load **ret, size_t *ret_n);
/* The address range [*lo, *hi) the segments cover. */
void obj_load_span(const struct obj_load *loads, size_t n, uint64_t *lo, uint64_t *hi);

/* The segment a mapping with file offset map_offset maps (the executable one
 * when two share the page), or NULL. */
const struct obj_load *obj_load_at(const struct obj_facts *f, uint64_t map_offset);
/* The executable segment, else the first; NULL when there are none. */
const struct obj_load *obj_text_load(const struct obj_facts *f);
/* The bias of a mapping at map_start with file offset map_offset that maps
 * segment l: ELF virtual address = runtime address - bias. */
static inline uint64_t obj_load_bias(const struct obj_load *l, uint64_t map_start, uint64_t map_offset)
{
	return map_start - map_offset + l->offset - l->vaddr;
}
/* File offset of ELF virtual address addr; false when no segment holds it. */
bool obj_file_offset(const struct obj_facts *f, uint64_t addr, uint64_t *ret);

/* len bytes of build id as lowercase hex into buf (2 * len + 1 bytes); len is
 * capped at OBJ_BUILD_ID_MAX. */
void build_id_to_hex(const uint8_t *id, size_t len, char *buf);

#endif

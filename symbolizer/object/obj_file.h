/* obj_file.h: an open object file and where it came from: its identity as fstat() sees
 * it, the mapping it was opened for; the types the opener and the trust rule share. */
#ifndef PROWL_OBJ_FILE_H
#define PROWL_OBJ_FILE_H

#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>

/* A file as fstat() sees it. (dev, ino) is what /proc/PID/maps names; size and
 * mtime tell a file rewritten in place; uid and mode who could have written it. */
struct obj_ident {
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	uint32_t uid, mode;
	/* Only root can change its bytes, and it is the file the host's root
	 * directory shows at its path (obj_trusted_ident()): it may be mapped
	 * (a truncation, which would turn reads of the mapping into SIGBUS,
	 * needs root) and shared with its copies. Other files are read with
	 * pread() (ELF_C_READ) and are objects of their own. */
	bool trusted;
};

/* Where a mapped file can be opened: the mapping of pid at [start, end) that
 * /proc/PID/maps shows with (dev, ino) and path. pid 0: no process, open path
 * itself (a file named on the command line; no identity to check). */
struct obj_source {
	const char *proc_root;   /* "/proc" */
	uint32_t pid;
	uint64_t start, end;
	uint64_t dev, ino;       /* makedev(major, minor) and inode from the maps line */
	const char *path;        /* as mapped, in pid's mount namespace; may be NULL */
	bool try_plain_path;     /* also path in prowl's own mount namespace */
};

/* An open file: the descriptor, and the Elf when it was begun. */
struct obj_file {
	int fd;                  /* -1: none */
	Elf *elf;                /* NULL: none; a taker sets it to NULL */
	struct obj_ident ident;
};

#define OBJ_FILE_NONE ((struct obj_file){ .fd = -1 })

#endif

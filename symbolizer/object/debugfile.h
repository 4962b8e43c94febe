/* debugfile.h: an object's separate debug file, taken only from where root alone can put
 * files (trust.h): by build id, by .gnu_debuglink name, and the dwz file it refers to. */
#ifndef PROWL_DEBUGFILE_H
#define PROWL_DEBUGFILE_H

#include <stdint.h>

#include "object.h"

/* The directory trees searched by build id (DIR/.build-id/xx/rest.debug), in
 * order. Another tree (the debuginfod cache in state_dir) is searched by
 * adding it here; every path is opened with obj_open_trusted(). */
#define OBJ_DEBUG_ROOT "/usr/lib/debug"

/* Opens the debug file of build id f->build_id under root (OBJ_DEBUG_ROOT or
 * another tree): DIR/.build-id/xx/rest.debug, with that build id. Returns 0
 * with ret open and its path in path (size bytes), -ENOENT when there is
 * none, -EPERM when the path is not trusted, -ESTALE when the file there
 * has another build id. */
int obj_debug_by_build_id(const char *root, const struct obj_facts *f, struct obj_file *ret, char *path,
			  size_t size);
/* Opens the debug file that main_path's .gnu_debuglink names (link, crc):
 * DIR/link, DIR/.debug/link and OBJ_DEBUG_ROOT/DIR/link, where DIR is
 * main_path's directory as prowl sees it. The first trusted one that matches
 * is taken: the same build id as f when f has one, else the CRC. Returns 0
 * with ret open and its path in path, or -ENOENT. */
int obj_debug_by_link(const char *main_path, const char *link, uint32_t crc, const struct obj_facts *f,
		      struct obj_file *ret, char *path, size_t size);
/* Opens a dwz file named by .gnu_debugaltlink when its absolute path is
 * trusted. 0, or -ENOENT/-EPERM/-EINVAL. */
int obj_debug_alt(const char *altname, struct obj_file *ret);

#endif

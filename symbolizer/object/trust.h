/* trust.h: the one rule for which files prowl, running as root, believes: who can change
 * a file's bytes, whether the host sees it, and a path walk for debug files. */
#ifndef PROWL_TRUST_H
#define PROWL_TRUST_H

#include <stdbool.h>
#include <stdint.h>

#include "object.h"

/* Whether a file with owner uid and mode bits can be changed by nobody but
 * root (or prowl's own user): owned by one of them, and neither group- nor
 * world-writable (with POSIX ACLs the group bits are the mask, so an ACL
 * that grants another user write shows as group-writable). */
bool obj_owner_trusted(uint32_t uid, uint32_t mode);
/* Whether the file id, opened through src, is trusted: its owner is
 * (obj_owner_trusted()) and, for a file a process maps, the host's root
 * directory (proc_root/1/root, or prowl's own root when it may not look at
 * init's) shows this very file at its path; a file that
 * only a container's mount namespace shows may belong to a container's root,
 * which the host does not trust. src->pid 0: the path in prowl's own view. */
bool obj_trusted_ident(const struct obj_source *src, const struct obj_ident *id);
/* Opens path when nobody but root (or prowl's user) can have put it there or
 * changed it: every directory walked from / (symbolic links included, and
 * their targets) is trusted by owner and not writable by others, unless it is
 * sticky and the entry in it is trusted by owner; the file is a trusted
 * regular file. For debug files found by build id or debug link, which libdw
 * maps. Returns 0 with ret open (elf NULL, ident.trusted set), -EPERM for a
 * path that fails the rule, or the error of opening it (-ENOENT...). */
int obj_open_trusted(const char *path, struct obj_file *ret);

#endif

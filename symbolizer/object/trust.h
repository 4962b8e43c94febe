/* trust.h: the one rule for which files prowl, running as root, believes or reads for a
 * process: who can change a file's bytes, who could read it, whether the host sees it. */
#ifndef PROWL_TRUST_H
#define PROWL_TRUST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "obj_file.h"

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
 * changed it, and every user could read it: every directory walked from /
 * (symbolic links included, and their targets) is trusted by owner, searchable
 * by others and not writable by them, unless it is sticky and the entry in it
 * is trusted by owner; the file is a trusted regular file that others may
 * read (a debug file serves every process that maps its object, whoever
 * named it: a user's .gnu_debugaltlink to a root-only file must not work). For debug files found by build id or debug link, which libdw
 * maps. Returns 0 with ret open (elf NULL, ident.trusted set), -EPERM for a
 * path that fails the rule, or the error of opening it (-ENOENT...). */
int obj_open_trusted(const char *path, struct obj_file *ret);

/* ---- files opened on a process's behalf ----
 * The rule: prowl, running as root, reads for a process only what the
 * process's own user could read and write itself, at the place named, in the
 * process's own view of it. */

/* Who a process runs as, on the host: its real and effective uid as prowl
 * reads them in /proc/PID/status (ids there are mapped to the reader's user
 * namespace, prowl's, so a user namespace's "root" shows as the host uid). */
struct proc_user {
	uint32_t ruid, euid;
};

/* The Uid line of proc_root/PID/status into *ret (and the pid in the
 * process's own namespace, the last NSpid field, into *ret_nspid when not
 * NULL). -ENOENT (gone), -EIO (no Uid line). */
int proc_user_read(const char *proc_root, uint32_t pid, struct proc_user *ret, uint32_t *ret_nspid);
/* Whether a file of owner uid is the process's own: owned by its real or
 * effective uid, and owned by root only when the process runs as root (both). */
bool proc_user_owns(const struct proc_user *u, uint32_t uid);
/* Opens name, one component in directory dirfd (the process's /tmp as its
 * mount namespace shows it), for reading on behalf of a process of user u:
 * the entry itself, never what a symbolic link there names (O_NOFOLLOW); on
 * the directory's own mount and device (a file bind-mounted over the name,
 * /etc/shadow or /proc/kmsg, is another mount); a regular file (a FIFO would
 * block, a device node's open has effects: the entry is checked through an
 * O_PATH descriptor first, which opens nothing, then reopened through it);
 * with one link (no second name of another file); owned by the process's
 * user (proc_user_owns()). Returns the descriptor (O_RDONLY | O_NONBLOCK)
 * with *st its fstat(), or: -ELOOP a symbolic link, -EXDEV another mount or
 * device, -EINVAL not a regular file, -EMLINK hard links, -EPERM another
 * owner (st->st_uid), or the error of the lookup (-ENOENT...). */
int proc_open_own_file(int dirfd, const char *name, const struct proc_user *u, struct stat *st);
/* What a refusal of proc_open_own_file() means, for a log line ("is a
 * symbolic link"); NULL for an error that is no refusal (-ENOENT...). */
const char *proc_open_refusal(int err);

#endif

/* export_file.h: atomic file output for record, the dir exporter and the spool: a
 * reader never sees a partial file, and a writer killed at any point leaves nothing. */
#ifndef PROWL_EXPORT_FILE_H
#define PROWL_EXPORT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct export_file;

/* Fail with -EEXIST instead of replacing an existing file. */
#define EXPORT_FILE_NOREPLACE 1u

/* Creates the file now, unnamed (O_TMPFILE) in the target's directory, so an
 * unwritable destination fails before any work is done; export_file_commit() links
 * it under its name. Where the file system refuses O_TMPFILE, a locked temporary
 * "<name>.prowl-tmp.XXXXXX" is used instead, and those of dead writers are removed.
 * export_file_begin: path relative to the working directory, mode 0644, replacing.
 * export_file_begin_at: name (no '/') in dirfd, which is duplicated, not taken.
 * Returns -errno (the caller names the path). */
int export_file_begin(const char *path, struct export_file **ret);
int export_file_begin_at(int dirfd, const char *name, mode_t mode, unsigned int flags, struct export_file **ret);
/* Writes buf, fsyncs, gives the file its name and fsyncs the directory. Always frees f. */
int export_file_commit(struct export_file *f, const void *buf, size_t len);
/* Drops the file and frees f; accepts NULL. */
void export_file_abort(struct export_file *f);
/* One-shot: begin + commit. */
int export_file_write(const char *path, const void *buf, size_t len);
int export_file_write_at(int dirfd, const char *name, mode_t mode, unsigned int flags, const void *buf, size_t len);

/* Tests: behave as on a file system without O_TMPFILE. */
void export_file_test_no_tmpfile(bool on);

#endif

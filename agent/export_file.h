/* export_file.h: the file exporter; writes a finished output atomically so a
 * reader never sees a partial file (temporary file in the same directory, then rename). */
#ifndef PROWL_EXPORT_FILE_H
#define PROWL_EXPORT_FILE_H

#include <stddef.h>

struct export_file;

/* Creates the temporary file now, so an unwritable destination fails before any
 * work is done. Returns -errno (the caller names the path). */
int export_file_begin(const char *path, struct export_file **ret);
/* Writes buf, fsyncs and renames over path. Always frees f. */
int export_file_commit(struct export_file *f, const void *buf, size_t len);
/* Removes the temporary file and frees f; accepts NULL. */
void export_file_abort(struct export_file *f);
/* One-shot: begin + commit. */
int export_file_write(const char *path, const void *buf, size_t len);

#endif

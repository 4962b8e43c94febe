/* test_export_dir.c: unit tests of the directory exporter's retention: files kept and
 * counted, the size cap (oldest first), the age cap, what a scan must not touch, and a
 * full disk (a small tmpfs in a private mount namespace). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "export.h"
#include "export_dir.h"
#include "log.h"
#include "testutil.h"

#define NS 1000000000LL

static const struct series_label svc_a[] = { { "service_name", "alpha" }, { "host_name", "h" } };
static const struct series_label svc_b[] = { { "service_name", "beta" }, { "host_name", "h" } };

struct window {
	struct profile *prof[2];
	struct export_series series[2];
	struct export_batch batch;
};

/* A window of two series (alpha, beta) starting at start_s (Unix seconds). */
static void window_init(struct window *w, int64_t start_s, int64_t samples)
{
	for (int i = 0; i < 2; i++)
		w->prof[i] = test_profile(samples + i);
	w->series[0] = (struct export_series){ svc_a, 2, w->prof[0] };
	w->series[1] = (struct export_series){ svc_b, 2, w->prof[1] };
	w->batch = (struct export_batch){ .series = w->series, .nseries = 2, .start_unix_ns = start_s * NS,
					  .end_unix_ns = (start_s + 10) * NS, .period_ns = 10000000 };
}

static void window_fini(struct window *w)
{
	profile_free(w->prof[0]);
	profile_free(w->prof[1]);
}

/* Submits one window starting at start_s; returns what submit returned. */
static int submit(struct exporter *e, int64_t start_s)
{
	struct window w;
	int r;

	window_init(&w, start_s, 3);
	r = e->ops->submit(e, &w.batch);
	window_fini(&w);
	return r;
}

struct tree {
	size_t files, tmp_files;
	uint64_t bytes;
};

/* What lies under dir, two levels deep as the exporter keeps it. */
static void walk(const char *dir, int depth, struct tree *t)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[4096];
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		assert_int_equal(lstat(path, &st), 0);
		if (S_ISDIR(st.st_mode) && depth == 0)
			walk(path, 1, t);
		else if (strstr(de->d_name, ".prowl-tmp."))
			t->tmp_files++;
		else if (S_ISREG(st.st_mode) && strstr(de->d_name, ".pb.gz")) {
			t->files++;
			t->bytes += (uint64_t)st.st_size;
		}
	}
	closedir(d);
}

static struct tree tree_of(const char *dir)
{
	struct tree t = {};

	walk(dir, 0, &t);
	return t;
}

static void make_file(const char *path, size_t size, int64_t age_s)
{
	struct timeval tv[2];
	char *buf = calloc(1, size);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_non_null(buf);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, size), (ssize_t)size);
	close(fd);
	free(buf);
	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= age_s;
	tv[1] = tv[0];
	assert_int_equal(utimes(path, tv), 0);
}

static char *new_dir(void)
{
	char *d = strdup("/tmp/prowl-test-dir.XXXXXX");

	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static void remove_dir(char *d)
{
	assert_int_equal(run_cmd("rm -rf '%s'", d), 0);
	free(d);
}

/* Files written and files removed add up to what is on disk, window after window. */
static void test_count(void **state)
{
	char *d = new_dir(), path[256];
	struct export_stats st;
	struct exporter *e;
	struct tree t;

	(void)state;
	snprintf(path, sizeof(path), "%s/alpha", d);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/alpha/19990101T000000.000Z-00000000.pb.gz", d);
	make_file(path, 100, 60); /* an earlier run's window, kept */
	assert_int_equal(exporter_dir_new(&(struct export_dir_opts){ .path = d, .max_age_ns = 3600 * NS }, &e), 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(submit(e, 1700000000 + 10 * i), 0);
		e->ops->get_stats(e, &st);
		t = tree_of(d);
		assert_int_equal(st.sent, 2 * (i + 1));
		assert_int_equal(st.removed, 0);
		assert_int_equal(t.files, 1 + st.sent - st.removed);
		assert_int_equal(st.kept_files, t.files);
		assert_int_equal(st.kept_bytes, t.bytes);
		assert_int_equal(st.queue_items, 0); /* written at once: nothing waits */
		assert_int_equal(t.tmp_files, 0);
	}
	/* Two windows in the same second still get a file each (milliseconds in the name). */
	assert_int_equal(submit(e, 1700000100), 0);
	{
		struct window w;

		window_init(&w, 1700000100, 3);
		w.batch.start_unix_ns += 250000000;
		assert_int_equal(e->ops->submit(e, &w.batch), 0);
		window_fini(&w);
	}
	assert_int_equal(tree_of(d).files, 1 + 14);
	e->ops->free(e);
	remove_dir(d);
}

/* Past max_bytes the oldest files go first, earlier runs' files included; the newest
 * window always stays, and what is on disk never exceeds the cap after a submit. */
static void test_bytes(void **state)
{
	char *d = new_dir(), path[256];
	struct export_stats st;
	struct exporter *e;
	struct tree t;
	uint64_t file_bytes;

	(void)state;
	/* Learn the size of one window's two files. */
	assert_int_equal(exporter_dir_new(&(struct export_dir_opts){ .path = d }, &e), 0);
	assert_int_equal(submit(e, 1600000000), 0);
	e->ops->free(e);
	file_bytes = tree_of(d).bytes;
	assert_true(file_bytes > 100);
	assert_int_equal(run_cmd("rm -rf '%s'/*", d), 0);

	snprintf(path, sizeof(path), "%s/old", d);
	assert_int_equal(mkdir(path, 0755), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/old/%d.pb.gz", d, i);
		make_file(path, (size_t)file_bytes, 300 - 100 * i); /* 300, 200, 100 s old */
	}
	/* Room for four windows' files: the three old files and one window fit at start. */
	assert_int_equal(exporter_dir_new(&(struct export_dir_opts){ .path = d, .max_bytes = 4 * file_bytes }, &e), 0);
	assert_int_equal(tree_of(d).files, 3);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(submit(e, 1700000000 + 10 * i), 0);
		t = tree_of(d);
		assert_true(t.bytes <= 4 * file_bytes);
		e->ops->get_stats(e, &st);
		assert_int_equal(t.files, 3 + st.sent - st.removed);
		assert_int_equal(st.kept_files, t.files);
		assert_int_equal(st.kept_bytes, t.bytes);
		/* Oldest first: old/0 before old/1 before old/2 before any new file. */
		for (int k = 0; k < 3; k++) {
			bool gone;

			snprintf(path, sizeof(path), "%s/old/%d.pb.gz", d, k);
			gone = access(path, F_OK) != 0;
			if (k > 0 && gone) {
				snprintf(path, sizeof(path), "%s/old/%d.pb.gz", d, k - 1);
				assert_true(access(path, F_OK) != 0);
			}
		}
	}
	/* Six windows of which four fit: the last four, each whole. */
	assert_true(tree_of(d).bytes >= 3 * file_bytes);
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/old/%d.pb.gz", d, i);
		assert_true(access(path, F_OK) != 0);
	}
	e->ops->free(e);
	remove_dir(d);
}

/* max_age: an earlier run's files past it go at start, newer ones only once they age
 * past it; a scan removes stale temporary files but never follows a symlink or touches
 * files that are not profiles. */
static void test_age_and_scan(void **state)
{
	char *d = new_dir(), path[256], outside[256], link[256];
	struct export_stats st;
	struct exporter *e;

	(void)state;
	snprintf(path, sizeof(path), "%s/svc", d);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/svc/old.pb.gz", d);
	make_file(path, 50, 3 * 86400);
	snprintf(path, sizeof(path), "%s/svc/young.pb.gz", d);
	make_file(path, 50, 1);
	snprintf(path, sizeof(path), "%s/svc/notes.txt", d);
	make_file(path, 50, 3 * 86400);
	snprintf(path, sizeof(path), "%s/svc/x.pb.gz.prowl-tmp.abc123", d);
	make_file(path, 50, 0);
	/* A symlink that an unprivileged user might plant, to a file of theirs. */
	snprintf(outside, sizeof(outside), "%s.victim", d);
	make_file(outside, 50, 3 * 86400);
	snprintf(link, sizeof(link), "%s/svc/evil.pb.gz", d);
	assert_int_equal(symlink(outside, link), 0);

	assert_int_equal(exporter_dir_new(&(struct export_dir_opts){ .path = d, .max_age_ns = 2 * NS }, &e), 0);
	snprintf(path, sizeof(path), "%s/svc/old.pb.gz", d);
	assert_true(access(path, F_OK) != 0);
	snprintf(path, sizeof(path), "%s/svc/young.pb.gz", d);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/svc/notes.txt", d);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/svc/x.pb.gz.prowl-tmp.abc123", d);
	assert_true(access(path, F_OK) != 0);
	assert_int_equal(access(outside, F_OK), 0);
	assert_int_equal(access(link, F_OK), 0);
	e->ops->get_stats(e, &st);
	assert_int_equal(st.removed, 1);
	/* young.pb.gz is 1 s old: 1.2 s later it is past the 2 s limit, this window's files are not. */
	nanosleep(&(struct timespec){ .tv_nsec = 1200000000 % NS, .tv_sec = 1 }, NULL);
	assert_int_equal(submit(e, 1700000000), 0);
	snprintf(path, sizeof(path), "%s/svc/young.pb.gz", d);
	assert_true(access(path, F_OK) != 0);
	assert_int_equal(tree_of(d).files, 2);
	e->ops->get_stats(e, &st);
	assert_int_equal(st.removed, 2);
	e->ops->free(e);
	unlink(outside);
	remove_dir(d);
}

/* A full disk: the window that does not fit fails with one error line per file and
 * leaves neither a partial profile nor a temporary file; what was there stays whole;
 * with a size cap below the disk's size, retention makes room and writes succeed. */
static void test_full_disk(void **state)
{
	char *d = new_dir(), *log, prof[300];
	struct export_stats st;
	struct exporter *e;
	struct tree t;
	int r = 0, i;

	(void)state;
	/* A private mount namespace: the tmpfs is seen by this process only and goes with it. */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail_msg("cannot make a private mount namespace (%s): run the unit tests as root", strerror(errno));
	assert_int_equal(mount("prowl-test", d, "tmpfs", 0, "size=64k,nr_inodes=64"), 0);
	snprintf(prof, sizeof(prof), "%s/profiles", d);
	assert_int_equal(exporter_dir_new(&(struct export_dir_opts){ .path = prof }, &e), 0);
	capture_begin();
	for (i = 0; i < 200 && r == 0; i++)
		r = submit(e, 1700000000 + 10 * i);
	log = capture_end();
	assert_true(r == -ENOSPC);
	e->ops->get_stats(e, &st);
	assert_true(st.failed >= 1 && st.failed <= 2);
	assert_non_null(strstr(log, "dir: cannot write "));
	assert_non_null(strstr(log, ": No space left on device\n"));
	assert_int_equal(count_lines_with(log, "prowl: error: "), st.failed);
	free(log);
	t = tree_of(prof);
	assert_int_equal(t.tmp_files, 0);
	assert_int_equal(t.files, st.sent);
	/* Every file there is a whole gzip stream (gunzip fails the test otherwise). */
	assert_int_equal(run_cmd("for f in '%s'/*/*.pb.gz; do gzip -t \"$f\" || exit 1; done", prof), 0);
	e->ops->free(e);

	/* Under a cap well below the disk's size, the exporter makes room before the disk
	 * is full. The cap counts file sizes, the disk 4 KiB blocks: 2 KiB of ~200-byte
	 * files fill at most 40 KiB of the 64. */
	assert_int_equal(exporter_dir_new(&(struct export_dir_opts){ .path = prof, .max_bytes = 2048 }, &e), 0);
	for (int k = 0; k < 100; k++)
		assert_int_equal(submit(e, 1800000000 + 10 * k), 0);
	e->ops->get_stats(e, &st);
	assert_int_equal(st.failed, 0);
	assert_true(tree_of(prof).bytes <= 2048);
	e->ops->free(e);
	assert_int_equal(umount2(d, MNT_DETACH), 0);
	remove_dir(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_count),
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_age_and_scan),
		cmocka_unit_test(test_full_disk),
	};

	log_set_prefix("prowl");
	log_set_format(LOG_FMT_PLAIN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

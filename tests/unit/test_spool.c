/* test_spool.c: unit tests of the spool of undelivered profiles (round trip, order,
 * caps, damaged files, modes, symlinks) and of the atomic file writer beneath it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "clock.h"
#include "export_file.h"
#include "sender.h"
#include "spool.h"

static char root[64];

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/prowl-test-spool-XXXXXX");
	assert_non_null(mkdtemp(root));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	run_cmd("rm -rf %s", root);
	return 0;
}

static struct sender_request *make(const char *path, const char *body, int64_t queued_ns)
{
	struct sender_request *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->path = strdup(path);
	r->content_type = strdup("application/x-protobuf");
	r->body = (uint8_t *)strdup(body);
	r->len = strlen(body);
	r->queued_unix_ns = queued_ns;
	return r;
}

static size_t count_files(const char *dir, const char *suffix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && strlen(de->d_name) >= strlen(suffix) &&
		    strcmp(de->d_name + strlen(de->d_name) - strlen(suffix), suffix) == 0)
			n++;
	closedir(d);
	return n;
}

/* The one spool file in <root>/spool (path in buf). */
static void the_file(char *buf, size_t size)
{
	char dir[128];
	DIR *d;
	struct dirent *de;

	snprintf(dir, sizeof(dir), "%s/spool", root);
	d = opendir(dir);
	assert_non_null(d);
	buf[0] = 0;
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".spool"))
			snprintf(buf, size, "%s/%s", dir, de->d_name);
	closedir(d);
	assert_true(buf[0]);
}

static struct spool *open_spool(uint64_t max_bytes, uint64_t max_age_s)
{
	struct spool_opts o = { .state_dir = root, .max_bytes = max_bytes, .max_age_ns = max_age_s * 1000000000ull };
	struct spool *sp;

	assert_int_equal(spool_open(&o, &sp), 0);
	return sp;
}

static void test_round_trip(void **state)
{
	struct sender_request *in[3], **out;
	struct spool_stats st;
	struct spool *sp;
	struct stat sb;
	char dir[128], file[512], *log;
	int64_t now = clock_wall_ns();
	size_t n;

	(void)state;
	sp = open_spool(64 << 20, 3600);
	in[0] = make("/a?name=x", "first", now - 3000);
	in[0]->content_encoding = strdup("gzip");
	in[0]->headers = calloc(3, sizeof(char *));
	in[0]->headers[0] = strdup("X-One: 1");
	in[0]->headers[1] = strdup("X-Two: 2");
	in[1] = make("/b", "second", now - 2000);
	in[2] = make("/c", "", now - 1000);
	capture_begin();
	assert_int_equal(spool_put(sp, "otlp", in, 3), 3);
	spool_free(sp);
	log = capture_end();
	assert_non_null(strstr(log, "otlp: 3 undelivered profiles (11 bytes) kept in the spool"));
	free(log);

	snprintf(dir, sizeof(dir), "%s/spool", root);
	assert_int_equal(lstat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);
	the_file(file, sizeof(file));
	assert_int_equal(lstat(file, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);

	/* The next start: another kind has nothing; this one gets all, in order. */
	sp = open_spool(64 << 20, 3600);
	assert_int_equal(spool_take(sp, "parca", &out, &n), 0);
	assert_int_equal(n, 0);
	free(out);
	capture_begin();
	assert_int_equal(spool_take(sp, "otlp", &out, &n), 0);
	free(capture_end());
	assert_int_equal(n, 3);
	assert_string_equal(out[0]->path, "/a?name=x");
	assert_string_equal(out[0]->content_type, "application/x-protobuf");
	assert_string_equal(out[0]->content_encoding, "gzip");
	assert_string_equal(out[0]->headers[0], "X-One: 1");
	assert_string_equal(out[0]->headers[1], "X-Two: 2");
	assert_null(out[0]->headers[2]);
	assert_int_equal(out[0]->len, 5);
	assert_memory_equal(out[0]->body, "first", 5);
	assert_int_equal(out[0]->queued_unix_ns, now - 3000);
	assert_string_equal(out[1]->path, "/b");
	assert_null(out[1]->content_encoding);
	assert_null(out[1]->headers);
	assert_int_equal(out[2]->len, 0);
	spool_get_stats(sp, &st);
	assert_int_equal(st.kinds[0].loaded, 3);
	assert_int_equal(st.files, 1);
	/* The file goes once every profile from it is finished with. */
	sender_request_free(out[0]);
	sender_request_free(out[1]);
	assert_int_equal(count_files(dir, ".spool"), 1);
	sender_request_free(out[2]);
	assert_int_equal(count_files(dir, ".spool"), 0);
	free(out);
	spool_get_stats(sp, &st);
	assert_int_equal(st.files, 0);
	assert_int_equal(st.bytes, 0);
	spool_free(sp);
}

/* Profiles read back and not delivered are written again at the next stop, with
 * the new ones after them, and the old file goes: nothing twice, nothing lost. */
static void test_put_again(void **state)
{
	struct sender_request *in[2], **out, *again[3];
	struct spool *sp;
	char dir[128];
	int64_t now = clock_wall_ns();
	size_t n;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/spool", root);
	capture_begin();
	sp = open_spool(64 << 20, 3600);
	in[0] = make("/1", "one", now - 5000);
	in[1] = make("/2", "two", now - 4000);
	assert_int_equal(spool_put(sp, "pyroscope", in, 2), 2);
	spool_free(sp);
	sp = open_spool(64 << 20, 3600);
	assert_int_equal(spool_take(sp, "pyroscope", &out, &n), 0);
	assert_int_equal(n, 2);
	sender_request_free(out[0]); /* delivered */
	again[0] = out[1];
	again[1] = make("/3", "three", now - 3000);
	again[2] = make("/4", "four", now - 2000);
	free(out);
	assert_int_equal(spool_put(sp, "pyroscope", again, 3), 3);
	assert_int_equal(count_files(dir, ".spool"), 1);
	spool_free(sp);
	sp = open_spool(64 << 20, 3600);
	assert_int_equal(spool_take(sp, "pyroscope", &out, &n), 0);
	free(capture_end());
	assert_int_equal(n, 3);
	assert_string_equal(out[0]->path, "/2");
	assert_string_equal(out[1]->path, "/3");
	assert_string_equal(out[2]->path, "/4");
	for (size_t i = 0; i < n; i++)
		sender_request_free(out[i]);
	free(out);
	assert_int_equal(count_files(dir, ".spool"), 0);
	spool_free(sp);
}

/* Writes one spool file of kind (one stop of the agent) holding the given paths,
 * queued at the given times. */
static void stop_with(const char *kind, const char *const *paths, const int64_t *queued, size_t n)
{
	struct sender_request *in[8];
	struct spool *sp;
	size_t kept;

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++)
		in[i] = make(paths[i], paths[i], queued[i]);
	capture_begin();
	sp = open_spool(64 << 20, 3600);
	kept = (size_t)spool_put(sp, kind, in, n);
	spool_free(sp);
	free(capture_end());
	assert_int_equal(kept, n);
}

/* Files written at several stops, each newer or older than the others, come back
 * after a restart oldest first, across files as within them: the backend gets a
 * service's windows in time order. A cap lowered since drops the oldest file. */
static void test_order_across_files(void **state)
{
	static const char *const want[] = { "/o1", "/o2", "/m1", "/m2", "/n1" };
	int64_t now = clock_wall_ns(), s = 1000000000;
	struct sender_request **out;
	char dir[128], *log;
	size_t n;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/spool", root);
	/* Written in neither time order nor its reverse; another kind in between. */
	stop_with("otlp", (const char *[]){ "/m1", "/m2" }, (int64_t[]){ now - 20 * s, now - 19 * s }, 2);
	stop_with("otlp", (const char *[]){ "/n1" }, (int64_t[]){ now - 10 * s }, 1);
	stop_with("parca", (const char *[]){ "/p1" }, (int64_t[]){ now - 25 * s }, 1);
	stop_with("otlp", (const char *[]){ "/o1", "/o2" }, (int64_t[]){ now - 30 * s, now - 29 * s }, 2);
	assert_int_equal(count_files(dir, ".spool"), 4);

	for (int pass = 0; pass < 2; pass++) {
		struct spool *sp;
		int r;

		capture_begin();
		sp = open_spool(64 << 20, 3600);
		r = spool_take(sp, "otlp", &out, &n);
		free(capture_end());
		assert_int_equal(r, 0);
		assert_int_equal(n, 5);
		for (size_t i = 0; i < n; i++) {
			if (strcmp(out[i]->path, want[i]) != 0) {
				print_error("profile %zu after a restart: %s, wanted %s (oldest first)\n", i, out[i]->path,
					    want[i]);
				fail();
			}
			if (i)
				assert_true(out[i]->queued_unix_ns > out[i - 1]->queued_unix_ns);
		}
		/* Not delivered: the next stop writes them again, in one file. */
		capture_begin();
		r = spool_put(sp, "otlp", out, n);
		spool_free(sp);
		free(capture_end());
		assert_int_equal(r, n);
		free(out);
	}
	assert_int_equal(count_files(dir, ".spool"), 2);

	/* A cap with room for two small files: the oldest file goes, the one of the five
	 * written again above (it is as old as its oldest profile, /o1), not the parca one
	 * nor the newest. */
	stop_with("otlp", (const char *[]){ "/x1" }, (int64_t[]){ now - 5 * s }, 1);
	{
		struct spool *sp;
		int r;

		capture_begin();
		sp = open_spool(300, 3600);
		r = spool_take(sp, "otlp", &out, &n);
		log = capture_end();
		assert_int_equal(r, 0);
		assert_int_equal(n, 1);
		assert_string_equal(out[0]->path, "/x1");
		sender_request_free(out[0]);
		free(out);
		capture_begin();
		r = spool_take(sp, "parca", &out, &n);
		free(capture_end());
		assert_int_equal(r, 0);
		assert_int_equal(n, 1);
		assert_string_equal(out[0]->path, "/p1");
		sender_request_free(out[0]);
		free(out);
		spool_free(sp);
	}
	assert_non_null(strstr(log, "spool: dropped 0 profiles older than spool.max_age and 5 past spool.max_size"));
	free(log);
}

static void test_caps(void **state)
{
	struct sender_request *in[4], **out;
	struct spool_stats st;
	struct spool *sp;
	char big[600], *log;
	int64_t now = clock_wall_ns();
	size_t n;

	(void)state;
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	sp = open_spool(1500, 60);
	in[0] = make("/old", "too old", now - 61ll * 1000000000);
	in[1] = make("/1", big, now - 3000);
	in[2] = make("/2", big, now - 2000);
	in[3] = make("/3", big, now - 1000);
	capture_begin();
	/* 1500 bytes hold two records of 600 bytes of body: the oldest goes. */
	assert_int_equal(spool_put(sp, "otlp", in, 4), 2);
	spool_get_stats(sp, &st);
	spool_free(sp);
	log = capture_end();
	assert_int_equal(st.dropped_age, 1);
	assert_int_equal(st.dropped_size, 1);
	assert_true(st.bytes <= 1500);
	assert_non_null(strstr(log, "otlp: spool: dropped the 2 oldest undelivered profiles: 1 older than spool.max_age, "
				    "1 past spool.max_size"));
	free(log);
	sp = open_spool(1500, 60);
	assert_int_equal(spool_take(sp, "otlp", &out, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(out[0]->path, "/2");
	assert_string_equal(out[1]->path, "/3");
	for (size_t i = 0; i < n; i++)
		sender_request_free(out[i]);
	free(out);
	spool_free(sp);
}

/* A spool file cut short or with a flipped bit: the good profiles before the damage
 * are read, the rest is skipped with one warning, and counted. */
static void test_damaged(void **state)
{
	struct sender_request *in[3], **out;
	struct spool_stats st;
	struct spool *sp;
	struct stat sb;
	char file[512], *log;
	int64_t now = clock_wall_ns();
	size_t n;
	int fd;

	(void)state;
	for (int mode = 0; mode < 3; mode++) {
		sp = open_spool(64 << 20, 3600);
		in[0] = make("/1", "one", now - 3000);
		in[1] = make("/2", "two", now - 2000);
		in[2] = make("/3", "three", now - 1000);
		capture_begin();
		assert_int_equal(spool_put(sp, "parca", in, 3), 3);
		spool_free(sp);
		the_file(file, sizeof(file));
		assert_int_equal(stat(file, &sb), 0);
		fd = open(file, O_RDWR);
		assert_true(fd >= 0);
		if (mode == 0) {
			assert_int_equal(ftruncate(fd, sb.st_size - 2), 0); /* cut in the last body */
		} else if (mode == 1) {
			assert_int_equal(pwrite(fd, "X", 1, sb.st_size - 1), 1); /* a flipped byte */
		} else {
			assert_int_equal(pwrite(fd, "garbage!", 8, 0), 8); /* not a spool file */
		}
		close(fd);
		sp = open_spool(64 << 20, 3600);
		assert_int_equal(spool_take(sp, "parca", &out, &n), 0);
		spool_get_stats(sp, &st);
		log = capture_end();
		assert_int_equal(count_substr(log, "skipping the rest of damaged file"), 1);
		if (mode < 2) {
			assert_int_equal(n, 2);
			assert_string_equal(out[1]->path, "/2");
			assert_int_equal(st.damaged, 1);
			assert_non_null(strstr(log, "2 profiles read, 1 lost"));
		} else {
			assert_int_equal(n, 0);
		}
		free(log);
		for (size_t i = 0; i < n; i++)
			sender_request_free(out[i]);
		free(out);
		spool_free(sp);
		run_cmd("rm -rf %s/spool", root);
	}
}

/* The spool directory must be ours and not a symlink; a symlinked file in it is
 * not followed. */
static void test_hostile_directory(void **state)
{
	struct spool_opts o = { .state_dir = root, .max_bytes = 1 << 20, .max_age_ns = 3600000000000ull };
	struct sender_request **out;
	struct spool *sp;
	char path[256], target[256], *log;
	size_t n;

	(void)state;
	snprintf(target, sizeof(target), "%s/elsewhere", root);
	assert_int_equal(mkdir(target, 0777), 0);
	snprintf(path, sizeof(path), "%s/spool", root);
	assert_int_equal(symlink(target, path), 0);
	capture_begin();
	assert_int_equal(spool_open(&o, &sp), -ENOTDIR);
	log = capture_end();
	assert_int_equal(count_substr(log, "spool: cannot use"), 1);
	free(log);
	unlink(path);

	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chown(path, 65534, 65534), 0);
	capture_begin();
	assert_int_equal(spool_open(&o, &sp), -EPERM);
	log = capture_end();
	assert_non_null(strstr(log, "belongs to uid 65534"));
	free(log);
	assert_int_equal(chown(path, getuid(), getgid()), 0);

	/* Too open a mode is fixed; a symlink named like a spool file is not read. */
	snprintf(target, sizeof(target), "%s/elsewhere/x", root);
	assert_int_equal(run_cmd("printf prowlsp1 > %s", target), 0);
	snprintf(path, sizeof(path), "%s/spool/00000000000000000001-otlp-1-0.spool", root);
	assert_int_equal(symlink(target, path), 0);
	sp = open_spool(1 << 20, 3600);
	snprintf(path, sizeof(path), "%s/spool", root);
	{
		struct stat sb;

		assert_int_equal(stat(path, &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0700);
	}
	capture_begin();
	assert_int_equal(spool_take(sp, "otlp", &out, &n), 0);
	free(capture_end());
	assert_int_equal(n, 0);
	free(out);
	spool_free(sp);
}

/* record's and the dir exporter's writer: no name until commit; replacing; never
 * replacing when told not to; the fallback without O_TMPFILE and its cleanup. */
static void test_export_file(void **state)
{
	struct export_file *f;
	struct stat sb;
	char path[128], stale[192], fresh[192], locked[192], other[192];
	int dirfd, lfd;

	(void)state;
	snprintf(path, sizeof(path), "%s/out.pb.gz", root);
	assert_int_equal(export_file_begin(path, &f), 0);
	assert_int_equal(count_files(root, ""), 0); /* nothing with a name yet */
	assert_int_equal(export_file_commit(f, "new", 3), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 3);
	assert_int_equal(sb.st_mode & 0777, 0644);
	assert_int_equal(export_file_write(path, "newer", 5), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 5);
	assert_int_equal(count_files(root, ""), 1);
	dirfd = open(root, O_RDONLY | O_DIRECTORY);
	assert_true(dirfd >= 0);
	assert_int_equal(export_file_write_at(dirfd, "out.pb.gz", 0600, EXPORT_FILE_NOREPLACE, "x", 1), -EEXIST);
	export_file_abort(NULL);
	assert_int_equal(export_file_begin(path, &f), 0);
	export_file_abort(f);
	assert_int_equal(count_files(root, ""), 1);

	/* Without O_TMPFILE: stale temporaries of this name go, live or other ones stay. */
	export_file_test_no_tmpfile(true);
	snprintf(stale, sizeof(stale), "%s.prowl-tmp.AAAAAA", path);
	snprintf(fresh, sizeof(fresh), "%s.prowl-tmp.BBBBBB", path);
	snprintf(locked, sizeof(locked), "%s.prowl-tmp.CCCCCC", path);
	snprintf(other, sizeof(other), "%s/other.prowl-tmp.DDDDDD", root);
	assert_int_equal(run_cmd("touch -d '1 hour ago' %s %s %s && touch %s", stale, locked, other, fresh), 0);
	lfd = open(locked, O_RDONLY);
	assert_true(lfd >= 0);
	assert_int_equal(flock(lfd, LOCK_EX), 0);
	assert_int_equal(export_file_begin(path, &f), 0);
	assert_int_equal(access(stale, F_OK), -1);
	assert_int_equal(access(fresh, F_OK), 0);
	assert_int_equal(access(locked, F_OK), 0);
	assert_int_equal(access(other, F_OK), 0);
	assert_int_equal(count_files(root, ""), 5); /* out.pb.gz, 3 kept and this one's */
	assert_int_equal(export_file_commit(f, "fallback", 8), 0);
	assert_int_equal(count_files(root, ""), 4);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 8);
	assert_int_equal(export_file_write_at(dirfd, "out.pb.gz", 0600, EXPORT_FILE_NOREPLACE, "x", 1), -EEXIST);
	assert_int_equal(export_file_write_at(dirfd, "new.pb.gz", 0600, EXPORT_FILE_NOREPLACE, "x", 1), 0);
	assert_int_equal(count_files(root, ""), 5);
	export_file_test_no_tmpfile(false);
	close(lfd);
	close(dirfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order_across_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_caps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_file, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

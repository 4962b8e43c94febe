/* test_diskcache.c: the on-disk cache of content-derived products: round trip, entries
 * that fail their checks (corrupt, truncated, another owner, a link), the size bound, and
 * that a file another user controls never gets a key, whatever build id it claims. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "diskcache.h"
#include "objcache.h"

static char dir[] = "/tmp/prowl-test-diskcache.XXXXXX";
static char cdir[sizeof(dir) + 8];

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(cdir, sizeof(cdir), "%s/cache", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	run_cmd("rm -rf %s", dir);
	return 0;
}

static struct diskcache_key key(uint64_t n)
{
	struct diskcache_key k = { .kind = DISKCACHE_UNWIND, .build_id_len = 4, .build_id = { 1, 2, 3, 4 },
				   .content_hash = n, .size = 1000 + n };

	return k;
}

static struct diskcache_stats stats(struct diskcache *c)
{
	struct diskcache_stats st;

	diskcache_get_stats(c, &st);
	return st;
}

/* The file of the one entry in cdir (there must be exactly one). */
static void only_entry(char *buf, size_t len)
{
	FILE *p;

	assert_int_equal(run_cmd("test $(ls %s | wc -l) = 1", cdir), 0);
	snprintf(buf, len, "ls -d %s/*.pc", cdir);
	p = popen(buf, "r");
	assert_non_null(p);
	assert_non_null(fgets(buf, (int)len, p));
	buf[strcspn(buf, "\n")] = 0;
	pclose(p);
}

static void test_round_trip_and_restart(void **state)
{
	struct diskcache *c;
	struct diskcache_key k = key(1), other = key(2);
	char data[5000];
	void *got;
	size_t len;
	struct stat st;

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7);
	assert_int_equal(diskcache_open(cdir, 1 << 20, &c), 0);
	assert_int_equal(stat(cdir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(diskcache_get(c, &k, &got, &len), -ENOENT);
	assert_int_equal(diskcache_put(c, &k, data, sizeof(data)), 0);
	diskcache_free(c);
	/* A new process (a restart) finds it. */
	assert_int_equal(diskcache_open(cdir, 1 << 20, &c), 0);
	assert_true(stats(c).bytes > sizeof(data));
	assert_int_equal(diskcache_get(c, &other, &got, &len), -ENOENT);
	assert_int_equal(diskcache_get(c, &k, &got, &len), 0);
	assert_int_equal(len, sizeof(data));
	assert_memory_equal(got, data, sizeof(data));
	free(got);
	assert_int_equal(stats(c).hits, 1);
	assert_int_equal(stats(c).misses, 1);
	assert_int_equal(stats(c).corrupt, 0);
	{
		char f[512];

		only_entry(f, sizeof(f));
		assert_int_equal(stat(f, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
	}
	diskcache_free(c);
	run_cmd("rm -rf %s", cdir);
}

/* Each way an entry can be damaged or planted: refused, removed, counted. */
static void test_bad_entries(void **state)
{
	static const char *damage[] = {
		"printf X | dd of=%s bs=1 seek=200 conv=notrunc status=none", /* payload byte */
		"printf X | dd of=%s bs=1 seek=20 conv=notrunc status=none",  /* header (key) */
		"truncate -s -1 %s",
		"truncate -s 10 %s",
		"chmod 0644 %s",
		"chown 1:1 %s",
		"printf 'prowlc02' | dd of=%s bs=1 seek=0 conv=notrunc status=none", /* another version */
	};
	struct diskcache_key k = key(3);
	char data[300] = { 1 }, f[512];
	struct diskcache *c;
	void *got;
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(damage) / sizeof(*damage); i++) {
		assert_int_equal(diskcache_open(cdir, 1 << 20, &c), 0);
		assert_int_equal(diskcache_put(c, &k, data, sizeof(data)), 0);
		only_entry(f, sizeof(f));
		assert_int_equal(run_cmd(damage[i], f), 0);
		assert_int_equal(diskcache_get(c, &k, &got, &len), -ENOENT);
		if (stats(c).corrupt != 1)
			fail_msg("damage %zu (%s): not counted as corrupt", i, damage[i]);
		assert_int_equal(access(f, F_OK), -1); /* removed */
		assert_int_equal(stats(c).hits, 0);
		diskcache_free(c);
	}
	/* An entry that is a symbolic link to a good entry is not followed. */
	assert_int_equal(diskcache_open(cdir, 1 << 20, &c), 0);
	assert_int_equal(diskcache_put(c, &k, data, sizeof(data)), 0);
	only_entry(f, sizeof(f));
	assert_int_equal(run_cmd("mv %s %s/good && ln -s good %s", f, dir, f), 0);
	assert_int_equal(run_cmd("mv %s/good %s/", dir, cdir), 0);
	assert_int_equal(diskcache_get(c, &k, &got, &len), -ENOENT);
	assert_int_equal(stats(c).hits, 0);
	diskcache_free(c);
	run_cmd("rm -rf %s", cdir);
	/* A cache directory that is a link, or someone else's: no cache. */
	assert_int_equal(run_cmd("mkdir -m 0700 %s/real && ln -s real %s", dir, cdir), 0);
	assert_int_equal(diskcache_open(cdir, 1 << 20, &c), -EPERM);
	assert_int_equal(run_cmd("rm %s && mkdir -m 0700 %s && chown 1:1 %s", cdir, cdir, cdir), 0);
	assert_int_equal(diskcache_open(cdir, 1 << 20, &c), -EPERM);
	run_cmd("rm -rf %s %s/real", cdir, dir);
}

static void test_size_bound(void **state)
{
	struct diskcache *c;
	char data[3000] = { 2 };
	void *got;
	size_t len;
	uint64_t max = 10000;

	(void)state;
	assert_int_equal(diskcache_open(cdir, max, &c), 0);
	for (uint64_t i = 0; i < 8; i++) {
		struct diskcache_key k = key(100 + i);

		assert_int_equal(diskcache_put(c, &k, data, sizeof(data)), 0);
		assert_true(stats(c).bytes <= max);
		usleep(2000); /* distinct mtimes */
	}
	assert_true(stats(c).evicted >= 5);
	assert_int_equal(run_cmd("test $(du -b --apparent-size -c %s/*.pc | tail -1 | cut -f1) -le %llu", cdir,
				 (unsigned long long)max), 0);
	{
		struct diskcache_key last = key(107), first = key(100);

		assert_int_equal(diskcache_get(c, &last, &got, &len), 0);
		free(got);
		assert_int_equal(diskcache_get(c, &first, &got, &len), -ENOENT);
	}
	/* Larger than the whole bound: not stored. */
	{
		static char big[20000];
		struct diskcache_key k = key(200);

		assert_int_equal(diskcache_put(c, &k, big, sizeof(big)), -EFBIG);
	}
	diskcache_free(c);
	run_cmd("rm -rf %s", cdir);
}

/* A file entry: an unnamed file kept, found again whole, refused once damaged. */
static void test_file_entries(void **state)
{
	struct diskcache *c;
	struct diskcache_key k = key(300);
	char data[70000], back[sizeof(data)], f[512];
	int fd, got;

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 13);
	assert_int_equal(diskcache_open(cdir, 1 << 20, &c), 0);
	assert_int_equal(diskcache_open_file(c, &k), -ENOENT);
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	assert_int_equal(diskcache_keep_file(c, &k, fd), 0);
	close(fd);
	/* Only an unnamed file can be kept. */
	only_entry(f, sizeof(f));
	fd = open(f, O_RDWR);
	assert_int_equal(diskcache_keep_file(c, &k, fd), -EINVAL);
	close(fd);
	diskcache_free(c);
	assert_int_equal(diskcache_open(cdir, 1 << 20, &c), 0);
	got = diskcache_open_file(c, &k);
	assert_true(got >= 0);
	assert_int_equal(pread(got, back, sizeof(back), 0), (ssize_t)sizeof(back));
	assert_memory_equal(back, data, sizeof(data));
	close(got);
	assert_int_equal(stats(c).hits, 1);
	assert_int_equal(run_cmd("printf X | dd of=%s bs=1 seek=60000 conv=notrunc status=none", f), 0);
	assert_int_equal(diskcache_open_file(c, &k), -ENOENT);
	assert_int_equal(stats(c).corrupt, 1);
	assert_int_equal(access(f, F_OK), -1);
	diskcache_free(c);
	run_cmd("rm -rf %s", cdir);
}

static char user_dir[sizeof(dir) + 8], user_copy[sizeof(dir) + 16];

static int user_copies_true(void *arg)
{
	(void)arg;
	/* The user's copy has /bin/true's build id and content hash. */
	if (run_cmd("cp /bin/true %s", user_copy) != 0)
		return 1;
	/* And the user cannot write into the cache. */
	if (open(cdir, O_RDONLY) >= 0 || run_cmd("touch %s/x.pc 2>/dev/null", cdir) == 0)
		return 2;
	return 0;
}

/* A file another user controls gets no key, even with the very identity of a
 * trusted one: it can neither plant an entry nor read one. */
static void test_user_file_has_no_key(void **state)
{
	struct objcache *oc;
	struct object *trusted = NULL, *user = NULL;
	struct obj_source a = { .path = "/bin/true" }, b = { .path = user_copy };
	struct diskcache_key ka, kb;
	struct diskcache *c;
	uid_t uid;
	gid_t gid;

	(void)state;
	test_user(&uid, &gid);
	snprintf(user_dir, sizeof(user_dir), "%s/user", dir);
	snprintf(user_copy, sizeof(user_copy), "%s/true", user_dir);
	assert_int_equal(diskcache_open(cdir, 1 << 20, &c), 0);
	assert_int_equal(run_cmd("chmod 0755 %s && mkdir %s && chown %u:%u %s", dir, user_dir, (unsigned)uid,
				 (unsigned)gid, user_dir), 0);
	assert_int_equal(run_unprivileged(user_copies_true, NULL), 0);
	assert_int_equal(objcache_new(NULL, &oc), 0);
	assert_int_equal(objcache_get(oc, &a, &trusted, NULL), 0);
	assert_int_equal(objcache_get(oc, &b, &user, NULL), 0);
	assert_ptr_not_equal(trusted, user);
	assert_true(trusted->f.build_id_len > 0);
	assert_memory_equal(trusted->f.build_id, user->f.build_id, trusted->f.build_id_len);
	assert_true(trusted->f.content_hash == user->f.content_hash);
	assert_true(object_disk_key(trusted, DISKCACHE_UNWIND, &ka));
	assert_false(object_disk_key(user, DISKCACHE_UNWIND, &kb));
	object_unref(oc, trusted);
	object_unref(oc, user);
	objcache_unref(oc);
	diskcache_free(c);
	run_cmd("rm -rf %s %s", cdir, user_dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_and_restart),
		cmocka_unit_test(test_bad_entries),
		cmocka_unit_test(test_size_bound),
		cmocka_unit_test(test_file_entries),
		cmocka_unit_test(test_user_file_has_no_key),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

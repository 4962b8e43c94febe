/* test_perfmap.c: unit tests of the perf map reader: parsing, lookups, growth, a file
 * replaced, the memory budget, the name length, and maps a hostile user places (owner,
 * device, FIFO, symbolic and hard links, a bind mount), and the out-of-order entries
 * that once made parsing quadratic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "escape.h"
#include "perfmap.h"
#include "prowl_limits.h"

#define PID 4242

static char dir[64];       /* the fake proc root: dir/4242/{status,root/tmp/} */
static char map_path[256]; /* dir/4242/root/tmp/perf-4242.map */

static void write_file(const char *path, const char *text, const char *mode)
{
	FILE *f = fopen(path, mode);

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void fake_proc(uint32_t uid)
{
	char path[256], text[128];

	snprintf(path, sizeof(path), "%s/%d/status", dir, PID);
	snprintf(text, sizeof(text), "Name:\tnode\nNSpid:\t%d\nUid:\t%u\t%u\t%u\t%u\n", PID, uid, uid, uid, uid);
	write_file(path, text, "w");
}

static int setup(void **state)
{
	char path[256];

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/prowl-perfmap-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/%d", dir, PID);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%d/root", dir, PID);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%d/root/tmp", dir, PID);
	assert_int_equal(mkdir(path, 01777), 0);
	snprintf(map_path, sizeof(map_path), "%s/%d/root/tmp/perf-%d.map", dir, PID, PID);
	fake_proc(0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void test_parse_and_lookup(void **state)
{
	static const char text[] = "7f0000001000 40 LazyCompile:*hotAlpha /app/a.js:1:18\n"
				   "0x7f0000001040 0x20 LazyCompile:*hotBeta /app/a.js:2:17\r\n"
				   "not a line at all\n"
				   "7f0000002000 0 zero-sized\n"
				   "7f0000003000 10\n"
				   "ffffffffffffffff 10 wraps\n"
				   "7f0000001000 8 LazyCompile:*hotAlpha (recompiled)\n"
				   "7f0000004000 10 bad\x01name\xff\n"
				   "7f0000005000 10 unfinished";
	struct perfmap_budget b = { 0 };
	struct perfmap *pm = NULL;
	const char *n;
	long used;

	(void)state;
	used = perfmap_parse(&pm, text, sizeof(text) - 1, &b);
	/* The last line has no '\n' yet: it is not taken. */
	assert_int_equal(used, (long)(strrchr(text, '\n') - text + 1));
	assert_int_equal(perfmap_count(pm), 4);
	assert_int_equal(b.bad_lines, 4);
	assert_string_equal(perfmap_lookup(pm, 0x7f0000001020), "LazyCompile:*hotAlpha /app/a.js:1:18");
	/* Entries overlap: the one written last wins where it covers. */
	assert_string_equal(perfmap_lookup(pm, 0x7f0000001004), "LazyCompile:*hotAlpha (recompiled)");
	assert_string_equal(perfmap_lookup(pm, 0x7f000000105f), "LazyCompile:*hotBeta /app/a.js:2:17");
	assert_null(perfmap_lookup(pm, 0x7f0000001060));
	assert_null(perfmap_lookup(pm, 0x7f0000000fff));
	/* Names reach profiles as text: no control characters, valid UTF-8. */
	n = perfmap_lookup(pm, 0x7f0000004000);
	assert_non_null(n);
	assert_true(utf8_is_text(n));
	assert_null(strchr(n, '\x01'));
	perfmap_free(pm, &b);
	assert_int_equal(b.bytes, 0);
	assert_int_equal(b.maps, 0);
	assert_int_equal(b.symbols, 0);
}

static void test_budget(void **state)
{
	struct perfmap_budget b = { .max_bytes = 1 << 20 };
	struct perfmap *pm = NULL;
	char line[128];
	size_t kept;

	(void)state;
	for (unsigned i = 0; i < 100000; i++) {
		int len = snprintf(line, sizeof(line), "%x 10 LazyCompile:*function_number_%u /srv/app.js:1:1\n",
				   0x10000000 + 16 * i, i);

		assert_true(perfmap_parse(&pm, line, (size_t)len, &b) == len);
	}
	kept = perfmap_count(pm);
	assert_true(b.bytes <= b.max_bytes);
	assert_true(kept > 1000 && kept < 100000);
	assert_int_equal(b.dropped, 100000 - kept);
	assert_true(b.warned_full);
	perfmap_free(pm, &b);
	assert_int_equal(b.bytes, 0);
}

static void test_refresh_grows_and_replaces(void **state)
{
	struct perfmap_budget b = { 0 };
	struct perfmap *pm = NULL;
	char tmp[300];

	(void)state;
	fake_proc(0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 1, 0), 0);
	assert_null(pm); /* no map yet */
	write_file(map_path, "1000 10 first\n2000 10 sec", "w");
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 2, 0), 0);
	assert_int_equal(perfmap_count(pm), 1);
	assert_null(perfmap_lookup(pm, 0x2000));
	/* The line being written is finished, and more come. */
	write_file(map_path, "ond\n3000 10 third\n", "a");
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 3, 0), 0);
	assert_int_equal(perfmap_count(pm), 3);
	assert_string_equal(perfmap_lookup(pm, 0x2004), "second");
	/* Not again within the interval. */
	write_file(map_path, "4000 10 fourth\n", "a");
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 4, 1000), 0);
	assert_int_equal(perfmap_count(pm), 3);
	/* A new file (a restart of the JIT's writer): what the old one said is gone. */
	snprintf(tmp, sizeof(tmp), "%s.new", map_path);
	write_file(tmp, "5000 10 fifth\n", "w");
	assert_int_equal(rename(tmp, map_path), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 5000, 1000), 0);
	assert_int_equal(perfmap_count(pm), 1);
	assert_null(perfmap_lookup(pm, 0x1000));
	assert_string_equal(perfmap_lookup(pm, 0x5000), "fifth");
	perfmap_free(pm, &b);
	unlink(map_path);
}

static void test_long_line_skipped(void **state)
{
	struct perfmap_budget b = { 0 };
	struct perfmap *pm = NULL;
	size_t big = 200 * 1024;
	char *text = malloc(big + 64);

	(void)state;
	assert_non_null(text);
	fake_proc(0);
	memset(text, 'x', big);
	strcpy(text + big, "\n6000 10 after\n");
	write_file(map_path, text, "w");
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 1, 0), 0);
	assert_int_equal(perfmap_count(pm), 1);
	assert_string_equal(perfmap_lookup(pm, 0x6000), "after");
	assert_int_equal(b.bad_lines, 1);
	perfmap_free(pm, &b);
	free(text);
	unlink(map_path);
}

/* What another user, or the process's own user, may put at the map's path. */
static void test_hostile_maps(void **state)
{
	struct perfmap_budget b = { 0 };
	struct perfmap *pm = NULL;
	char target[300];

	(void)state;
	/* Owned by somebody other than the process's user (or root): not believed. */
	fake_proc(1000);
	write_file(map_path, "1000 10 forged\n", "w");
	assert_int_equal(chown(map_path, 2000, 2000), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 1, 0), 0);
	assert_int_equal(perfmap_count(pm), 0);
	/* The process's own user: believed. */
	assert_int_equal(chown(map_path, 1000, 1000), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 2, 0), 0);
	assert_int_equal(perfmap_count(pm), 1);
	perfmap_free(pm, &b);
	pm = NULL;
	unlink(map_path);

	/* Owned by root, for a process of a user: never (root's file, bound or
	 * linked there, is no map of the user's). */
	write_file(map_path, "1000 10 TOPSECRET\n", "w");
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 3, 0), 0);
	assert_int_equal(perfmap_count(pm), 0);
	perfmap_free(pm, &b);
	pm = NULL;
	unlink(map_path);

	/* A FIFO: never read (a read would wait for a writer). */
	fake_proc(0);
	assert_int_equal(mkfifo(map_path, 0644), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 3, 0), 0);
	assert_int_equal(perfmap_count(pm), 0);
	unlink(map_path);
	/* A device node: never opened for real (opening some has effects). */
	assert_int_equal(mknod(map_path, S_IFCHR | 0644, makedev(1, 5)), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 4, 0), 0);
	assert_int_equal(perfmap_count(pm), 0);
	unlink(map_path);
	/* A symbolic link, here out of the process's root: not followed (it could
	 * lead to a file of root's that the user may not read). */
	snprintf(target, sizeof(target), "%s/outside.map", dir);
	write_file(target, "1000 10 outside\n", "w");
	assert_int_equal(symlink(target, map_path), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 5, 0), 0);
	assert_int_equal(perfmap_count(pm), 0);
	unlink(map_path);
	unlink(target);
	perfmap_free(pm, &b);
	assert_int_equal(b.maps, 0);
	assert_int_equal(b.bytes, 0);
}

/* A symbolic link at the map's path to a file that every other check would
 * accept (in the same /tmp, owned by the process's user): only O_NOFOLLOW
 * refuses it. A user who plants /tmp/perf-PID.map -> a file of root's for a
 * JIT that runs as root would otherwise have root read that file for them. */
static void test_symlink_never_followed(void **state)
{
	struct perfmap_budget b = { 0 };
	struct perfmap *pm = NULL;
	char target[300];

	(void)state;
	fake_proc(0);
	snprintf(target, sizeof(target), "%s/%d/root/tmp/root-secret", dir, PID);
	write_file(target, "1000 10 TOPSECRET_db_password=hunter2\n", "w");
	assert_int_equal(chmod(target, 0600), 0);
	assert_int_equal(symlink("root-secret", map_path), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 1, 0), 0);
	assert_int_equal(perfmap_count(pm), 0);
	assert_null(perfmap_lookup(pm, 0x1000));
	unlink(map_path);
	/* The control: the same file under the map's name is read. */
	assert_int_equal(rename(target, map_path), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 2, 0), 0);
	assert_int_equal(perfmap_count(pm), 1);
	perfmap_free(pm, &b);
	unlink(map_path);
}

/* A second name of another file (with protected_hardlinks off, a user can
 * link any file of the same file system): refused. */
static void test_hard_link_refused(void **state)
{
	struct perfmap_budget b = { 0 };
	struct perfmap *pm = NULL;
	char target[300];

	(void)state;
	fake_proc(0);
	snprintf(target, sizeof(target), "%s/shadow", dir);
	write_file(target, "1000 10 TOPSECRET\n", "w");
	assert_int_equal(link(target, map_path), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 1, 0), 0);
	assert_int_equal(perfmap_count(pm), 0);
	unlink(target);
	/* Its only name now: read. */
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 2, 0), 0);
	assert_int_equal(perfmap_count(pm), 1);
	perfmap_free(pm, &b);
	unlink(map_path);
}

/* In a mount namespace of its own (as `unshare -Urm` gives a user), a file
 * of root's bound over the map's path: same device (both under /tmp), another
 * mount. Runs in a child; returns what it found as its exit status. */
static int bind_child(const char *secret)
{
	struct perfmap_budget b = { 0 };
	struct perfmap *pm = NULL;
	size_t before, after;

	if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return 2;
	if (perfmap_refresh(&pm, dir, PID, &b, 1, 0) < 0)
		return 3;
	before = perfmap_count(pm); /* the map itself: 1 */
	if (mount(secret, map_path, NULL, MS_BIND, NULL) < 0)
		return 4;
	perfmap_free(pm, &b);
	pm = NULL;
	if (perfmap_refresh(&pm, dir, PID, &b, 2, 0) < 0)
		return 5;
	after = perfmap_count(pm);
	if (perfmap_lookup(pm, 0x9000))
		return 6; /* the secret was read */
	return before == 1 && after == 0 ? 0 : 7;
}

static void test_bind_mount_refused(void **state)
{
	char secret[300];
	int status;
	pid_t p;

	(void)state;
	fake_proc(0);
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	write_file(secret, "9000 10 TOPSECRET_db_password=hunter2\n", "w");
	assert_int_equal(chmod(secret, 0600), 0);
	write_file(map_path, "1000 10 mine\n", "w");
	p = fork();
	assert_true(p >= 0);
	if (p == 0)
		_exit(bind_child(secret));
	assert_int_equal(waitpid(p, &status, 0), p);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	unlink(map_path);
	unlink(secret);
}

/* Names are cut at PROWL_NAME_MAX bytes, never inside a UTF-8 character. */
static void test_name_length(void **state)
{
	struct perfmap_budget b = { 0 };
	struct perfmap *pm = NULL;
	size_t big = PROWL_NAME_MAX + 1000;
	char *text = malloc(big + 64);
	const char *n;
	int len;

	(void)state;
	assert_non_null(text);
	len = snprintf(text, 64, "1000 10 ");
	memset(text + len, 'a', big);
	/* A two-byte character across the cut. */
	memcpy(text + len + PROWL_NAME_MAX - 1, "\xc3\xa9", 2);
	strcpy(text + len + big, "\n2000 10 short\n");
	assert_true(perfmap_parse(&pm, text, strlen(text), &b) > 0);
	n = perfmap_lookup(pm, 0x1000);
	assert_non_null(n);
	assert_int_equal(strlen(n), PROWL_NAME_MAX - 1);
	assert_true(utf8_is_text(n));
	assert_string_equal(perfmap_lookup(pm, 0x2000), "short");
	perfmap_free(pm, &b);
	free(text);
}

/* What a lookup must give for addr: the entry written last among those that
 * cover it (within the 32 entries the lookup scans), by brute force. */
static const char *naive_lookup(const uint64_t *start, const uint32_t *size, size_t n, uint64_t addr, size_t *ret)
{
	for (size_t i = n; i > 0; i--) {
		if (addr - start[i - 1] < size[i - 1]) {
			*ret = i - 1;
			return "";
		}
	}
	return NULL;
}

/* A map shaped to make a sort per 64 KiB chunk quadratic: in order, but one
 * entry per chunk goes back before all the others, and some entries repeat
 * an address (the one written last must win). Read by perfmap_refresh() as
 * the agent reads it (in 64 KiB chunks), then every entry is looked up. */
static void test_out_of_order_chunks(void **state)
{
	enum { N = 60000 };
	struct perfmap_budget b = { 0 };
	struct perfmap *pm = NULL;
	uint64_t *start = calloc(N, sizeof(*start));
	uint32_t *size = calloc(N, sizeof(*size));
	size_t written = 0, idx = 0;
	char name[64];
	FILE *f;

	(void)state;
	assert_non_null(start);
	assert_non_null(size);
	fake_proc(0);
	f = fopen(map_path, "w");
	assert_non_null(f);
	for (size_t i = 0; i < N; i++) {
		start[i] = 0x40000000 + 0x100 * i;
		size[i] = 0x80;
		if (i % 1500 == 1499)
			start[i] = 0x100000 + 0x100 * i; /* about one per chunk, far back */
		if (i % 977 == 976)
			start[i] = start[i - 500]; /* the same address again, later */
		written += (size_t)fprintf(f, "%" PRIx64 " %x fn_%zu_with_a_name_long_enough_for_the_chunks\n", start[i],
					   size[i], i);
	}
	fclose(f);
	assert_true(written > 40 * 65536);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 1, 0), 0);
	assert_int_equal(perfmap_count(pm), N);
	for (size_t i = 0; i < N; i++) {
		const char *got = perfmap_lookup(pm, start[i] + 0x10);

		assert_non_null(naive_lookup(start, size, N, start[i] + 0x10, &idx));
		snprintf(name, sizeof(name), "fn_%zu_", idx);
		assert_non_null(got);
		assert_memory_equal(got, name, strlen(name));
	}
	/* Between entries: nothing. */
	assert_null(perfmap_lookup(pm, 0x40000000 + 0x90));
	perfmap_free(pm, &b);
	unlink(map_path);
	free(start);
	free(size);
}

/* Once the budget was spent, a map whose memory comes back lets the next
 * refresh read all the rest of another map at once (it once read one 64 KiB
 * chunk per refresh for the rest of the agent's life). */
static void test_budget_full_clears(void **state)
{
	enum { LINES = 6000 };
	struct perfmap_budget b = { .max_bytes = 8 << 20 };
	struct perfmap *hog = NULL, *pm = NULL;
	uint64_t d0, dropped;
	char line[128];
	FILE *f;

	(void)state;
	/* A map that holds all the budget: the cap is then set to what it holds. */
	for (unsigned i = 0; i < 20000; i++) {
		int len = snprintf(line, sizeof(line), "%x 10 hog_function_number_%u\n", 0x10000000 + 16 * i, i);

		assert_true(perfmap_parse(&hog, line, (size_t)len, &b) == len);
	}
	assert_int_equal(b.dropped, 0);
	b.max_bytes = b.bytes;
	fake_proc(0);
	f = fopen(map_path, "w");
	assert_non_null(f);
	for (unsigned i = 0; i < LINES; i++)
		fprintf(f, "%x 10 later_function_%u_%s\n", 0x20000000 + 16 * i, i, "padding_to_make_it_long");
	assert_true(ftell(f) > 4 * 65536);
	fclose(f);
	/* Over the budget: one chunk, whose entries are dropped, ends the refresh. */
	d0 = b.dropped;
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 1, 0), 0);
	dropped = b.dropped - d0;
	assert_true(dropped > 0);
	assert_true(perfmap_count(pm) + dropped < LINES / 2);
	/* Memory comes back: the next refresh reads all the rest. */
	perfmap_free(hog, &b);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 2, 0), 0);
	assert_int_equal(b.dropped - d0, dropped);
	assert_int_equal(perfmap_count(pm) + dropped, LINES);
	assert_string_equal(perfmap_lookup(pm, 0x20000000 + 16 * (LINES - 1)), "later_function_5999_padding_to_make_it_long");
	perfmap_free(pm, &b);
	assert_int_equal(b.bytes, 0);
	unlink(map_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_and_lookup),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_refresh_grows_and_replaces),
		cmocka_unit_test(test_long_line_skipped),
		cmocka_unit_test(test_hostile_maps),
		cmocka_unit_test(test_symlink_never_followed),
		cmocka_unit_test(test_hard_link_refused),
		cmocka_unit_test(test_bind_mount_refused),
		cmocka_unit_test(test_name_length),
		cmocka_unit_test(test_out_of_order_chunks),
		cmocka_unit_test(test_budget_full_clears),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

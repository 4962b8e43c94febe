/* test_perfmap.c: unit tests of the perf map reader: parsing, lookups, growth, a file
 * replaced, the memory budget, and maps a hostile user places (owner, device, FIFO). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "escape.h"
#include "perfmap.h"

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
	assert_null(pm);
	/* The process's own user: believed. */
	assert_int_equal(chown(map_path, 1000, 1000), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 2, 0), 0);
	assert_int_equal(perfmap_count(pm), 1);
	perfmap_free(pm, &b);
	pm = NULL;
	unlink(map_path);

	/* A FIFO: never read (a read would wait for a writer). */
	fake_proc(0);
	assert_int_equal(mkfifo(map_path, 0644), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 3, 0), 0);
	assert_null(pm);
	unlink(map_path);
	/* A device node: never opened for real (opening some has effects). */
	assert_int_equal(mknod(map_path, S_IFCHR | 0644, makedev(1, 5)), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 4, 0), 0);
	assert_null(pm);
	unlink(map_path);
	/* A symbolic link, here out of the process's root: not followed (it could
	 * lead to a file of root's that the user may not read). */
	snprintf(target, sizeof(target), "%s/outside.map", dir);
	write_file(target, "1000 10 outside\n", "w");
	assert_int_equal(symlink(target, map_path), 0);
	assert_int_equal(perfmap_refresh(&pm, dir, PID, &b, 5, 0), 0);
	assert_null(pm);
	unlink(map_path);
	unlink(target);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_and_lookup),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_refresh_grows_and_replaces),
		cmocka_unit_test(test_long_line_skipped),
		cmocka_unit_test(test_hostile_maps),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

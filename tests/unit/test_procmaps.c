/* test_procmaps.c: /proc/PID/maps parsing against fixed text (spaces, deleted,
 * vdso, anonymous, unsorted, malformed) and against this process's own maps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procmaps.h"

/* Out of order on purpose; includes one malformed line. */
static const char sample[] =
	"7f1000000000-7f1000010000 r-xp 00001000 08:02 99                         /tmp/lib gone.so (deleted)\n"
	"55d4c3a00000-55d4c3a02000 r--p 00000000 fd:01 1234567                    /usr/bin/my prog\n"
	"55d4c3a02000-55d4c3a05000 r-xp 00002000 fd:01 1234567                    /usr/bin/my prog\n"
	"55d4c3a05000-55d4c3a06000 r--p 00005000 fd:01 1234567                    /usr/bin/my prog\n"
	"7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n"
	"this is not a maps line\n"
	"7fff00000000-7fff00021000 rw-p 00000000 00:00 0                          [stack]\n"
	"7fff10000000-7fff10002000 r-xp 00000000 00:00 0                          [vdso]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
	"7f2000000000-7f2000001000 r-xp 00000000 00:05 4242                       /memfd:jit (deleted)";

static void test_parse_line(void **state)
{
	struct pm_entry e;

	(void)state;
	assert_int_equal(procmaps_parse_line("55d4c3a02000-55d4c3a05000 r-xp 00002000 fd:01 1234567"
					     "      /usr/bin/my prog\n", &e), 0);
	assert_true(e.start == 0x55d4c3a02000ull);
	assert_true(e.end == 0x55d4c3a05000ull);
	assert_true(e.offset == 0x2000);
	assert_int_equal(e.dev_major, 0xfd);
	assert_int_equal(e.dev_minor, 1);
	assert_true(e.inode == 1234567);
	assert_string_equal(e.perms, "r-xp");
	assert_int_equal(e.kind, PM_FILE);
	assert_false(e.deleted);
	assert_string_equal(e.path, "/usr/bin/my prog");
	free(e.path);

	assert_int_equal(procmaps_parse_line("7f0000000000-7f0000001000 rwxp 00000000 00:00 0", &e), 0);
	assert_int_equal(e.kind, PM_ANON);
	assert_null(e.path);

	assert_int_equal(procmaps_parse_line("7f0000000000-7f0000001000 rwxp 00000000 00:00", &e), -EINVAL);
	assert_int_equal(procmaps_parse_line("7f0000001000-7f0000000000 r-xp 00000000 00:00 0", &e), -EINVAL);
	assert_int_equal(procmaps_parse_line("zz-7f0000000000 r-xp 00000000 00:00 0", &e), -EINVAL);
	assert_int_equal(procmaps_parse_line("11111111111111111-2 r-xp 00000000 00:00 0", &e), -EINVAL);
	assert_int_equal(procmaps_parse_line("", &e), -EINVAL);
}

static void test_parse_sample(void **state)
{
	struct procmaps m;
	const struct pm_entry *e;
	size_t bad = 0;

	(void)state;
	assert_int_equal(procmaps_parse_buf(sample, sizeof(sample) - 1, 0, &m, &bad), 0);
	assert_int_equal(bad, 1);
	assert_int_equal(m.n, 9);
	for (size_t i = 1; i < m.n; i++)
		assert_true(m.v[i - 1].end <= m.v[i].start);
	procmaps_free(&m);
	assert_int_equal(m.n, 0);

	assert_int_equal(procmaps_parse_buf(sample, sizeof(sample) - 1, PROCMAPS_EXEC_ONLY, &m, &bad), 0);
	assert_int_equal(m.n, 6);
	/* sorted: prog text, anon rwx, deleted lib, memfd, vdso, vsyscall */
	assert_true(m.v[0].start == 0x55d4c3a02000ull);
	assert_string_equal(m.v[0].path, "/usr/bin/my prog");
	assert_int_equal(m.v[1].kind, PM_ANON);
	assert_null(m.v[1].path);
	assert_string_equal(m.v[2].path, "/tmp/lib gone.so");
	assert_true(m.v[2].deleted);
	assert_true(m.v[2].offset == 0x1000);
	assert_int_equal(m.v[2].dev_major, 8);
	assert_int_equal(m.v[2].dev_minor, 2);
	assert_string_equal(m.v[3].path, "/memfd:jit");
	assert_int_equal(m.v[3].kind, PM_FILE);
	assert_true(m.v[3].deleted);
	assert_int_equal(m.v[4].kind, PM_VDSO);
	assert_string_equal(m.v[4].path, "[vdso]");
	assert_int_equal(m.v[5].kind, PM_SPECIAL);
	assert_string_equal(m.v[5].path, "[vsyscall]");
	assert_string_equal(m.v[5].perms, "--xp");

	/* lookups: inside, first byte, last byte, end (exclusive), gaps, edges */
	e = procmaps_find(&m, 0x55d4c3a03456ull);
	assert_non_null(e);
	assert_true(e->start == 0x55d4c3a02000ull);
	assert_ptr_equal(procmaps_find(&m, 0x55d4c3a02000ull), e);
	assert_ptr_equal(procmaps_find(&m, 0x55d4c3a04fffull), e);
	assert_null(procmaps_find(&m, 0x55d4c3a05000ull)); /* r--p, filtered out */
	assert_null(procmaps_find(&m, 0x55d4c3a01fffull));
	assert_null(procmaps_find(&m, 0));
	assert_null(procmaps_find(&m, 0x7f0000001000ull));
	e = procmaps_find(&m, 0x7f100000ffffull);
	assert_non_null(e);
	assert_string_equal(e->path, "/tmp/lib gone.so");
	e = procmaps_find(&m, 0xffffffffff600010ull);
	assert_non_null(e);
	assert_int_equal(e->kind, PM_SPECIAL);
	assert_null(procmaps_find(&m, UINT64_MAX));
	procmaps_free(&m);

	/* empty input */
	assert_int_equal(procmaps_parse_buf("", 0, 0, &m, &bad), 0);
	assert_int_equal(m.n, 0);
	assert_null(procmaps_find(&m, 1234));
	procmaps_free(&m);
}

static void test_overlap_dropped(void **state)
{
	static const char text[] = "1000-3000 r-xp 00000000 00:00 0\n"
				   "2000-4000 r-xp 00000000 00:00 0\n"
				   "5000-6000 r-xp 00000000 00:00 0\n";
	struct procmaps m;
	size_t bad;

	(void)state;
	assert_int_equal(procmaps_parse_buf(text, sizeof(text) - 1, 0, &m, &bad), 0);
	assert_int_equal(m.n, 2);
	assert_int_equal(bad, 1);
	assert_null(procmaps_find(&m, 0x3800));
	assert_non_null(procmaps_find(&m, 0x5000));
	procmaps_free(&m);
}

static __attribute__((noinline)) int marker_function(int x)
{
	return x * 3 + 1;
}

static void test_self_maps(void **state)
{
	char exe[PATH_MAX];
	struct procmaps m;
	const struct pm_entry *e;
	ssize_t len;
	FILE *f;
	int (*volatile fp)(int) = marker_function;

	(void)state;
	assert_int_equal(fp(1), 4);
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(len > 0);
	exe[len] = 0;
	f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	assert_int_equal(procmaps_parse(f, PROCMAPS_EXEC_ONLY, &m, NULL), 0);
	fclose(f);
	assert_true(m.n > 2);
	e = procmaps_find(&m, (uint64_t)(uintptr_t)fp);
	assert_non_null(e);
	assert_int_equal(e->kind, PM_FILE);
	assert_string_equal(e->path, exe);
	assert_int_equal(e->perms[2], 'x');
	e = procmaps_find(&m, (uint64_t)(uintptr_t)&getppid);
	assert_non_null(e);
	assert_non_null(strstr(e->path, "libc"));
	/* a stack address is not executable */
	assert_null(procmaps_find(&m, (uint64_t)(uintptr_t)&e));
	procmaps_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_line),
		cmocka_unit_test(test_parse_sample),
		cmocka_unit_test(test_overlap_dropped),
		cmocka_unit_test(test_self_maps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

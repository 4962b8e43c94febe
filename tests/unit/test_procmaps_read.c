/* test_procmaps_read.c: PROCMAP_QUERY gives the executable mappings the maps text gives:
 * this process's (with a file whose name holds a newline, and a deleted one), the
 * host's processes, an exited process; and what each way costs. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "procmaps_read.h"

static int text_exec(const char *path, struct procmaps *ret)
{
	FILE *f = fopen(path, "re");
	int r;

	*ret = (struct procmaps){ 0 };
	if (!f)
		return -errno;
	r = procmaps_parse(f, PROCMAPS_EXEC_ONLY, ret, NULL);
	fclose(f);
	return r;
}

static bool same(const struct procmaps *a, const struct procmaps *b, bool print)
{
	if (a->n != b->n) {
		if (print)
			print_message("%zu mappings against %zu\n", a->n, b->n);
		return false;
	}
	for (size_t i = 0; i < a->n; i++) {
		const struct pm_entry *x = &a->v[i], *y = &b->v[i];

		if (x->start != y->start || x->end != y->end || x->offset != y->offset || x->inode != y->inode ||
		    x->dev_major != y->dev_major || x->dev_minor != y->dev_minor || strcmp(x->perms, y->perms) ||
		    x->kind != y->kind || x->deleted != y->deleted || !x->path != !y->path ||
		    (x->path && strcmp(x->path, y->path))) {
			if (print)
				print_message("%lx %s %s | %lx %s %s\n", (unsigned long)x->start, x->perms,
					      x->path ?: "-", (unsigned long)y->start, y->perms, y->path ?: "-");
			return false;
		}
	}
	return true;
}

/* This process, with two hostile names mapped executable: a newline inside
 * (the text writes it as \012) and a file deleted after its mapping. */
static void test_self(void **state)
{
	char odd[] = "/tmp/prowl-pmq\nfake 00000000 00:00 0 evil.XXXXXX";
	char gone[] = "/tmp/prowl-pmq-deleted.XXXXXX";
	struct procmaps a, b;
	void *m1, *m2;
	int fd1 = mkstemp(odd), fd2 = mkstemp(gone);
	bool found_nl = false, found_del = false;

	(void)state;
	assert_true(fd1 >= 0 && fd2 >= 0);
	assert_int_equal(ftruncate(fd1, 4096), 0);
	assert_int_equal(ftruncate(fd2, 4096), 0);
	m1 = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd1, 0);
	m2 = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd2, 0);
	assert_true(m1 != MAP_FAILED && m2 != MAP_FAILED);
	unlink(gone);
	assert_int_equal(procmaps_read_exec("/proc/self/maps", &a), 0);
	assert_int_equal(text_exec("/proc/self/maps", &b), 0);
	assert_true(same(&a, &b, true));
	for (size_t i = 0; i < a.n; i++) {
		found_nl |= a.v[i].path && strstr(a.v[i].path, "prowl-pmq\\012fake") != NULL;
		found_del |= a.v[i].deleted && a.v[i].path && strstr(a.v[i].path, "prowl-pmq-deleted") != NULL;
		assert_true(a.v[i].perms[2] == 'x');
	}
	assert_true(found_nl && found_del);
	procmaps_free(&a);
	procmaps_free(&b);
	munmap(m1, 4096);
	munmap(m2, 4096);
	close(fd1);
	close(fd2);
	unlink(odd);
}

/* The host's processes: the same entries, but for one that changed between the
 * two reads (retried once). A missing process is -ESRCH; an exited one that is
 * still a zombie has no mappings. */
static void test_host_and_exited(void **state)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	struct procmaps a, b;
	char path[300];
	int n = 0, differ = 0, st;
	pid_t child;

	(void)state;
	assert_non_null(d);
	while ((de = readdir(d)) && n < 300) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/maps", de->d_name);
		for (int t = 0; t < 2; t++) {
			if (procmaps_read_exec(path, &a) < 0)
				break;
			if (text_exec(path, &b) < 0) {
				procmaps_free(&a);
				break;
			}
			bool ok = same(&a, &b, t == 1);

			procmaps_free(&a);
			procmaps_free(&b);
			if (ok) {
				n++;
				break;
			}
			differ += t == 1;
		}
	}
	closedir(d);
	print_message("%d processes read alike, %d changed twice\n", n, differ);
	assert_true(n >= 20);
	assert_true(differ <= n / 20);
	assert_int_equal(procmaps_read_exec("/proc/999999999/maps", &a), -ESRCH);

	child = fork();
	if (child == 0)
		_exit(0);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)child);
	usleep(100 * 1000); /* a zombie now: no mm */
	assert_int_equal(procmaps_read_exec(path, &a), 0);
	assert_int_equal(a.n, 0);
	procmaps_free(&a);
	assert_int_equal(waitpid(child, &st, 0), child);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Not a timed test: prints what each way costs on this process's maps. */
static void test_cost(void **state)
{
	struct procmaps a;
	double t0, t1, t2;

	(void)state;
	t0 = now_s();
	for (int i = 0; i < 500; i++) {
		assert_int_equal(procmaps_read_exec("/proc/self/maps", &a), 0);
		procmaps_free(&a);
	}
	t1 = now_s();
	for (int i = 0; i < 500; i++) {
		assert_int_equal(text_exec("/proc/self/maps", &a), 0);
		procmaps_free(&a);
	}
	t2 = now_s();
	print_message("per read of this process's maps: PROCMAP_QUERY %.1f us, text %.1f us\n", (t1 - t0) * 2e3,
		      (t2 - t1) * 2e3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_host_and_exited),
		cmocka_unit_test(test_cost),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

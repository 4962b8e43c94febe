/* testutil.h: small helpers the unit tests share (gunzip a body, run a shell command,
 * capture stderr, a child that waits, run code as an unprivileged user); static inline,
 * header only. */
#ifndef PROWL_TESTUTIL_H
#define PROWL_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "aggregate.h"

/* Skips the running test, saying why: tests/run.sh lists every skip with the
 * "skipped: " line printed before cmocka's SKIPPED marker. */
#define skip_because(...)                             \
	do {                                          \
		print_message("skipped: " __VA_ARGS__); \
		print_message("\n");                  \
		skip();                               \
	} while (0)

/* Inflates the gzip stream in[0..len) into a malloc'ed buffer; fails the test on
 * anything but a complete, valid stream. */
static inline uint8_t *gunzip(const uint8_t *in, size_t len, size_t *ret_len)
{
	z_stream zs = {};
	size_t cap = 4096;
	uint8_t *out = malloc(cap);
	int rc;

	assert_non_null(out);
	assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)len;
	do {
		if (zs.total_out == cap) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		zs.next_out = out + zs.total_out;
		zs.avail_out = (uInt)(cap - zs.total_out);
		rc = inflate(&zs, Z_NO_FLUSH);
		assert_true(rc == Z_OK || rc == Z_STREAM_END);
	} while (rc != Z_STREAM_END);
	*ret_len = zs.total_out;
	inflateEnd(&zs);
	return out;
}

/* Runs the printf-formatted command with system(); returns its exit status, or -1
 * when it did not exit normally. */
/* Writes script to a new file under /tmp (its name into path) and starts "RUNNER FILE
 * ARGS" reading its output; the caller pcloses it and unlinks path. */
static inline FILE *popen_script(const char *runner, const char *script, const char *args, char path[32])
{
	char cmd[512];
	size_t len = strlen(script);
	int fd;

	strcpy(path, "/tmp/prowl-test-script.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, script, len), (ssize_t)len);
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s %s %s", runner, path, args);
	return popen(cmd, "r");
}

static inline int run_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int run_cmd(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* stderr capture, to check what a person would read: capture_end() returns what
 * was written since capture_begin() (malloc'ed) and echoes it to the real stderr. */
static int saved_stderr = -1;
static FILE *cap_file;

static inline void capture_begin(void)
{
	fflush(stderr);
	cap_file = tmpfile();
	assert_non_null(cap_file);
	saved_stderr = dup(2);
	assert_true(saved_stderr >= 0);
	assert_true(dup2(fileno(cap_file), 2) >= 0);
}

static inline char *capture_end(void)
{
	char *text;
	long n;

	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	saved_stderr = -1;
	n = ftell(cap_file);
	assert_true(n >= 0);
	text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	rewind(cap_file);
	assert_int_equal(fread(text, 1, (size_t)n, cap_file), (size_t)n);
	fclose(cap_file);
	fputs(text, stderr);
	return text;
}

static inline int count_substr(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* A child running `path wait`: it writes one byte to its stdout once in main(), then
 * reads its stdin until the test closes it. spawn_waiter() returns after that byte:
 * the exec is done and the dynamic loader has mapped every library, so /proc/PID/maps
 * holds the program's mappings and no others, whatever the load of the machine. Read
 * before, it shows the test's own libraries, and a [vdso] read across the exec
 * becomes a module of its own (test_process_churn: one module more, under load). */
struct child {
	pid_t pid;
	int fd; /* write end of its stdin: closing it ends the child */
};

static inline struct child spawn_waiter(const char *path)
{
	struct child c;
	int in[2], ready[2];
	ssize_t n;
	char b;

	/* O_CLOEXEC: later children must not hold this child's pipes open. */
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		dup2(in[0], 0);
		dup2(ready[1], 1);
		execl(path, path, "wait", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(ready[1]);
	do
		n = read(ready[0], &b, 1);
	while (n < 0 && errno == EINTR);
	close(ready[0]);
	if (n != 1)
		fail_msg("%s wait: exited before main() said it was ready", path);
	c.fd = in[1];
	return c;
}

static inline void reap_child(struct child *c)
{
	close(c->fd);
	assert_int_equal(waitpid(c->pid, NULL, 0), c->pid);
}

/* A profile of one stack (main in /bin/app) with count samples, or none when count
 * is 0: enough for the exporters' tests. Free it with profile_free(). */
static inline struct profile *test_profile(int64_t count)
{
	struct prof_frame fr = { .function = "main", .file = "app.c", .line = 3 };
	struct prof_label_in lab = { .key = "process_name", .str = "app" };
	struct profile *p = profile_new();
	uint32_t map, loc, ls;

	assert_non_null(p);
	profile_set_period(p, 10000000);
	profile_set_time(p, 1700000000000000000LL, 10000000000LL);
	if (!count)
		return p;
	assert_int_equal(profile_mapping(p, &(struct prof_mapping_in){ .key = 1, .start = 0x1000, .limit = 0x2000,
				.filename = "/bin/app", .is_main = true }, &map), 0);
	assert_int_equal(profile_add_location(p, map, 0x1100, &fr, 1, true, &loc), 0);
	assert_int_equal(profile_labelset(p, &lab, 1, &ls), 0);
	assert_int_equal(profile_add_sample(p, ls, &loc, 1, count), 0);
	return p;
}

/* Lines of text that contain needle. */
static inline size_t count_lines_with(const char *text, const char *needle)
{
	size_t n = 0;

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *hit = strstr(l, needle), *end = strchr(l, '\n');

		n += hit && (!end || hit < end);
	}
	return n;
}

/* The unprivileged user that tests act as ($PROWL_TEST_USER, default "prowltest"):
 * the same one the end-to-end tests' `unprivileged` fixture uses. Created (system
 * account, no home, no shell) when missing, and left in place. Sets *ret_uid and
 * *ret_gid; fails the test when there is no such user and it cannot be made. */
static inline void test_user(uid_t *ret_uid, gid_t *ret_gid)
{
	const char *name = getenv("PROWL_TEST_USER") ?: "prowltest";
	struct passwd *pw = getpwnam(name);

	if (!pw) {
		/* Two suites may race to create it: whichever loses finds it afterwards. */
		run_cmd("useradd --system --user-group --no-create-home --shell /usr/sbin/nologin '%s' 2>/dev/null",
			name);
		pw = getpwnam(name);
	}
	if (!pw)
		fail_msg("no user '%s' and useradd could not create it: run the tests as root", name);
	*ret_uid = pw->pw_uid;
	*ret_gid = pw->pw_gid;
}

/* Runs fn(arg) in a child process as test_user(): real, effective and saved ids,
 * no supplementary groups, and so no capabilities. fn must not use cmocka's
 * assertions (they would unwind into the child's copy of the runner): it returns
 * 0 for success or a small number saying what failed. Returns fn's result, or -1
 * when the child could not drop privileges or did not exit normally. */
static inline int run_unprivileged(int (*fn)(void *arg), void *arg)
{
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int st;

	test_user(&uid, &gid);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0 ||
		    geteuid() == 0)
			_exit(255);
		_exit(fn(arg) & 0xff);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) == 255)
		return -1;
	return WEXITSTATUS(st);
}

#endif

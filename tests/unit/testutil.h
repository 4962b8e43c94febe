/* testutil.h: small helpers the unit tests share (gunzip a body, run a shell command,
 * capture stderr, a child that waits); static inline, so each test includes only this header. */
#ifndef PROWL_TESTUTIL_H
#define PROWL_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

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

/* A child running `path wait`: it reads its stdin until the test closes it. */
struct child {
	pid_t pid;
	int fd; /* write end of its stdin: closing it ends the child */
};

static inline struct child spawn_waiter(const char *path)
{
	struct child c;
	int p[2];

	/* O_CLOEXEC: later children must not hold this child's stdin open. */
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		dup2(p[0], 0);
		close(p[1]);
		execl(path, path, "wait", (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	c.fd = p[1];
	return c;
}

static inline void reap_child(struct child *c)
{
	close(c->fd);
	assert_int_equal(waitpid(c->pid, NULL, 0), c->pid);
}

#endif

/* testutil.h: small helpers the unit tests share (gunzip a body, run a shell command,
 * a child that waits); static inline, so each test includes only this header. */
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

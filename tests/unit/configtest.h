/* configtest.h: what test_config.c and test_config_errors.c share: a temporary
 * directory with files in it, stderr captured, and agent_config_load() on given args. */
#ifndef PROWL_TEST_CONFIGTEST_H
#define PROWL_TEST_CONFIGTEST_H

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

static char tmpdir[64];
static char cert_path[128], key_path[128], ca_path[128];

/* Writes name in the temporary directory; returns its path (static until the next call). */
static inline const char *write_file(const char *name, const char *content)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, 0600), 0);
	return path;
}

/* Redirects fd (1 or 2) to a file until fd_capture_end, which returns what was written. */
struct capture {
	int fd, saved;
	char path[128];
};

static inline void fd_capture_begin(struct capture *c, int fd)
{
	int tmp;

	fflush(fd == 1 ? stdout : stderr);
	c->fd = fd;
	snprintf(c->path, sizeof(c->path), "%s/capture.%d", tmpdir, fd);
	tmp = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(tmp >= 0);
	c->saved = dup(fd);
	assert_true(c->saved >= 0);
	assert_true(dup2(tmp, fd) >= 0);
	close(tmp);
}

static inline char *fd_capture_end(struct capture *c)
{
	static char buf[8192];
	ssize_t n;
	int fd;

	fflush(c->fd == 1 ? stdout : stderr);
	assert_true(dup2(c->saved, c->fd) >= 0);
	close(c->saved);
	fd = open(c->path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = 0;
	return buf;
}

static inline size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Loads with argv = "agent" + args (NULL-terminated) and the given environment. */
static inline int load(struct agent_config *c, char **envp, const char *const *args)
{
	char *argv[32] = { "agent" };
	int argc = 1;
	static char *empty_env[] = { NULL };

	for (; args && *args; args++) {
		assert_true(argc < 31);
		argv[argc++] = (char *)*args;
	}
	return agent_config_load(argc, argv, envp ? envp : empty_env, c);
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static inline int group_setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/prowl-test-config.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(cert_path, sizeof(cert_path), "%s/client.crt", tmpdir);
	snprintf(key_path, sizeof(key_path), "%s/client.key", tmpdir);
	snprintf(ca_path, sizeof(ca_path), "%s/ca.crt", tmpdir);
	write_file("client.crt", "cert\n");
	write_file("client.key", "key\n");
	write_file("ca.crt", "ca\n");
	return 0;
}

static inline int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static inline int group_teardown(void **state)
{
	(void)state;
	return nftw(tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

#endif /* PROWL_TEST_CONFIGTEST_H */

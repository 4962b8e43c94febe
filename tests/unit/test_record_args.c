/* test_record_args.c: `prowl record`'s command line as record_main() takes it: the
 * bound of -o (one more than the outputs array holds is refused, before any file). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "record.h"
#include "testutil.h"

#define MAX_OUTPUTS 4 /* record --help: "may be given up to 4 times" */

static char dir[] = "/tmp/prowl-test-record-args.XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	run_cmd("rm -rf '%s'", dir);
	return 0;
}

/* A process id nobody has now. */
static int nonexistent_pid(void)
{
	for (int p = 4194303; p > 1; p--)
		if (kill(p, 0) < 0 && errno == ESRCH)
			return p;
	fail();
	return -1;
}

/* record -p PID -d 1s with n outputs (PID: one that does not exist), in a child
 * process: a crash or a hang there is reported, not fatal to the test. Returns the
 * exit code, or 128 + the signal that ended it; *ret_log is what it logged (static). */
static int record_with_outputs(int n, const char **ret_log)
{
	static char log[4096];
	char *argv[32], path[MAX_OUTPUTS + 2][128], pid[16], logpath[128];
	int argc = 0, status, fd;
	ssize_t len;
	pid_t child;

	assert_true(n <= MAX_OUTPUTS + 2);
	snprintf(pid, sizeof(pid), "%d", nonexistent_pid());
	argv[argc++] = "record";
	argv[argc++] = "-p";
	argv[argc++] = pid;
	argv[argc++] = "-d";
	argv[argc++] = "1s";
	for (int i = 0; i < n; i++) {
		/* Every format, and then pprof again: what someone asking for more might type. */
		snprintf(path[i], sizeof(path[i]), "%s/out%d.%s", dir, i,
			 (const char *[]){ "pb.gz", "folded", "html", "txt" }[i % 4]);
		argv[argc++] = "-o";
		argv[argc++] = path[i];
	}
	argv[argc] = NULL;
	snprintf(logpath, sizeof(logpath), "%s.log", dir);
	fflush(stderr);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(99);
		/* cmocka's handlers would carry a crash back into its runner, here. */
		for (int sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		alarm(20);
		_exit(record_main(argc, argv));
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	fd = open(logpath, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	len = read(fd, log, sizeof(log) - 1);
	close(fd);
	unlink(logpath);
	log[len > 0 ? len : 0] = 0;
	*ret_log = log;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* One -o more than the outputs array holds: exit 2, one line that says the bound,
 * and no file written. Under the sanitizer build an index past the array stops the
 * test too. */
static void test_one_output_too_many(void **state)
{
	const char *log;
	int r;

	(void)state;
	for (int n = MAX_OUTPUTS + 1; n <= MAX_OUTPUTS + 2; n++) {
		r = record_with_outputs(n, &log);
		if (r != 2 || strcmp(log, "prowl: error: too many -o options: give at most 4 outputs (see 'prowl record "
				     "--help')\n") != 0) {
			print_error("%d outputs: exit status %d%s, log:\n%s", n, r, r > 128 ? " (killed by a signal)" : "",
				    log);
			fail();
		}
		assert_int_equal(run_cmd("test -z \"$(ls -A '%s')\"", dir), 0);
	}
}

/* As many as it holds: the command line is taken (the capture then fails on the
 * missing process, not on -o). */
static void test_outputs_at_the_bound(void **state)
{
	const char *log;
	int r;

	(void)state;
	r = record_with_outputs(MAX_OUTPUTS, &log);
	if (r != 1 || strstr(log, "-o") || !strstr(log, "does not exist")) {
		print_error("%d outputs: exit %d, log:\n%s", MAX_OUTPUTS, r, log);
		fail();
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_output_too_many),
		cmocka_unit_test(test_outputs_at_the_bound),
	};

	log_set_prefix("prowl");
	log_set_format(LOG_FMT_PLAIN);
	return cmocka_run_group_tests(tests, setup, teardown);
}

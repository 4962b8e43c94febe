/* record.c: the `prowl record` command: parses its options, runs one capture
 * (sample -> resolve -> aggregate), then encodes, exports atomically and summarises. */
#include "record.h"
#include "record_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aggregate.h"
#include "profile_data.h"
#include "analyse/html.h"
#include "demangle.h"
#include "encode.h"
#include "export_file.h"
#include "ingest.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "sample.h"
#include "summary.h"
#include "debuginfod.h"

/* Disk for inflated debug sections at once: the agent's limits.debug_inflate_size default. */
#define RECORD_INFLATE_MAX (512ull << 20)
/* Where record caches fetched debug files (it runs as root, like the agent). */
#define RECORD_DEBUGINFOD_CACHE "/var/cache/prowl/debuginfod"
#include "jvmname.h"
#include "v8name.h"
#include "pyresolve.h"
#include "symbolizer.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

struct capture {
	struct record_opts *o;
	struct symbolizer *sym;
	struct profile *prof;
	struct ingest *ingest;
	struct sampler *sampler;
	struct export_file *out[RECORD_MAX_OUTPUTS];
	int *pidfds;
	bool *pid_alive;
	pid_t child;
	int child_status;
	bool child_done;
	int go_pipe[2];   /* parent -> child: start exec */
	int err_pipe[2];  /* child -> parent: errno of a failed exec */
	uint64_t samples;
	uint64_t ingest_errors;
};

static int on_sample(void *ctx, const struct prowl_sample *s, size_t size)
{
	struct capture *c = ctx;
	int r;

	(void)size;
	c->samples++;
	r = ingest_sample(c->ingest, s);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		c->ingest_errors++;
	return 0;
}

/* Forks COMMAND stopped before exec, so that its pid is in the BPF filter before
 * it runs a single instruction of its own. */
static int spawn_command(struct capture *c)
{
	if (pipe2(c->go_pipe, O_CLOEXEC) < 0 || pipe2(c->err_pipe, O_CLOEXEC) < 0)
		return log_error_errno(-errno, "cannot create a pipe");
	c->child = fork();
	if (c->child < 0)
		return log_error_errno(-errno, "cannot fork");
	if (c->child == 0) {
		char go;
		int e;

		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		close(c->go_pipe[1]);
		close(c->err_pipe[0]);
		if (read(c->go_pipe[0], &go, 1) != 1)
			_exit(127);
		execvp(c->o->cmd[0], c->o->cmd);
		e = errno;
		if (write(c->err_pipe[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(c->go_pipe[0]);
	close(c->err_pipe[1]);
	c->go_pipe[0] = c->err_pipe[1] = -1;
	return 0;
}

/* Lets the child exec; returns -errno if exec failed. */
static int release_command(struct capture *c)
{
	int e = 0;
	ssize_t n;

	if (write(c->go_pipe[1], "g", 1) != 1)
		return -EPIPE;
	close(c->go_pipe[1]);
	c->go_pipe[1] = -1;
	n = read(c->err_pipe[0], &e, sizeof(e)); /* EOF (0) = exec succeeded */
	close(c->err_pipe[0]);
	c->err_pipe[0] = -1;
	if (n == sizeof(e)) {
		waitpid(c->child, NULL, 0);
		c->child_done = true;
		return -e;
	}
	return 0;
}

static int open_targets(struct capture *c)
{
	struct record_opts *o = c->o;

	c->pidfds = calloc(o->npids ? o->npids : 1, sizeof(int));
	c->pid_alive = calloc(o->npids ? o->npids : 1, sizeof(bool));
	if (!c->pidfds || !c->pid_alive)
		return -ENOMEM;
	for (size_t i = 0; i < o->npids; i++) {
		struct pollfd pfd;
		int fd = syscall(SYS_pidfd_open, o->pids[i], 0);

		if (fd < 0) {
			if (errno == ESRCH) {
				log_error("process %" PRIu32 " does not exist: check the PID (ps -e, pgrep NAME)", o->pids[i]);
				return -ESRCH;
			}
			return log_error_errno(-errno, "cannot watch process %" PRIu32, o->pids[i]);
		}
		pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 0) > 0) {
			close(fd);
			log_error("process %" PRIu32 " has already exited: nothing to profile", o->pids[i]);
			return -ESRCH;
		}
		c->pidfds[i] = fd;
		c->pid_alive[i] = true;
	}
	return 0;
}

/* Returns true while at least one target is alive. */
static bool targets_alive(struct capture *c)
{
	bool any = false;

	if (c->o->cmd) {
		if (!c->child_done && waitpid(c->child, &c->child_status, WNOHANG) == c->child)
			c->child_done = true;
		return !c->child_done;
	}
	for (size_t i = 0; i < c->o->npids; i++) {
		struct pollfd pfd = { .fd = c->pidfds[i], .events = POLLIN };

		if (c->pid_alive[i] && poll(&pfd, 1, 0) > 0) {
			c->pid_alive[i] = false;
			if (!c->o->quiet)
				log_info("process %" PRIu32 " exited", c->o->pids[i]);
		}
		any |= c->pid_alive[i];
	}
	return any;
}

static void status_line(struct capture *c, uint64_t elapsed_ns, bool final)
{
	struct sampler_counters cnt;
	struct profile_stats st;

	sampler_get_counters(c->sampler, &cnt);
	profile_get_stats(c->prof, &st);
	if (c->o->duration_ns)
		fprintf(stderr, "\r\033[K[%5.1fs / %.1fs] samples %" PRIu64 "  lost %" PRIu64 "  stacks %u",
			elapsed_ns / 1e9, c->o->duration_ns / 1e9, c->samples, (uint64_t)cnt.v[PROWL_CNT_LOST], st.stacks);
	else
		fprintf(stderr, "\r\033[K[%5.1fs] samples %" PRIu64 "  lost %" PRIu64 "  stacks %u  (Ctrl-C to stop)",
			elapsed_ns / 1e9, c->samples, (uint64_t)cnt.v[PROWL_CNT_LOST], st.stacks);
	if (final)
		fputc('\n', stderr);
	fflush(stderr);
}

static int run_capture(struct capture *c, uint64_t *ret_start_wall, uint64_t *ret_elapsed)
{
	struct record_opts *o = c->o;
	bool tty = !o->quiet && isatty(STDERR_FILENO);
	uint64_t start, next_status, now;
	int r;

	start = clock_mono_ns();
	*ret_start_wall = (uint64_t)clock_wall_ns();
	next_status = start;
	if (!o->quiet && o->values == PROF_VALUES_OFFCPU)
		log_info("recording the off-CPU time of %s%s", o->all ? "the whole host" : o->cmd ? o->cmd[0] : "the given processes",
			 o->duration_ns ? "" : "; Ctrl-C to stop");
	else if (!o->quiet)
		log_info("sampling %s at %u Hz on %u CPUs%s%s", o->all ? "the whole host" : o->cmd ? o->cmd[0] : "the given processes",
			 o->freq, sampler_ncpus_active(c->sampler), o->values == PROF_VALUES_WALL ? ", and its off-CPU time" : "",
			 o->duration_ns ? "" : "; Ctrl-C to stop");
	for (;;) {
		r = sampler_poll(c->sampler, 100);
		if (r < 0)
			return log_error_errno(r, "reading samples failed");
		now = clock_mono_ns();
		if (stop_signal) {
			if (tty)
				fputc('\n', stderr);
			if (!o->quiet)
				log_info("%s: stopping and writing the profile", strsignal(stop_signal));
			break;
		}
		if (o->duration_ns && now - start >= o->duration_ns)
			break;
		if (!o->all && !targets_alive(c))
			break;
		if (tty && now >= next_status) {
			status_line(c, now - start, false);
			next_status = now + NSEC_PER_SEC;
		}
	}
	sampler_stop(c->sampler);
	r = sampler_drain(c->sampler, 0);
	if (r < 0)
		return log_error_errno(r, "reading samples failed");
	*ret_elapsed = clock_mono_ns() - start;
	if (tty && !stop_signal)
		status_line(c, *ret_elapsed, true);
	return 0;
}

/* The flame graph's title: what was profiled. */
static const char *record_title(const struct record_opts *o, char *buf, size_t n)
{
	size_t off = (size_t)snprintf(buf, n, "prowl record: %s", o->all ? "the whole host" : o->cmd ? "" : "pid");

	for (size_t i = 0; o->cmd && o->cmd[i] && off < n; i++)
		off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? " " : "", o->cmd[i]);
	for (size_t i = 0; i < o->npids && off < n; i++)
		off += (size_t)snprintf(buf + off, n - off, "%s%" PRIu32, i ? "," : " ", o->pids[i]);
	return buf;
}

/* Debug files still on their way get at most --debuginfod-timeout; the frames
 * of the modules whose files arrived are symbolized again. */
static void finish_debuginfod(struct capture *c)
{
	struct symbolizer_stats st;
	int r;

	symbolizer_get_stats(c->sym, &st);
	if (!st.debuginfod)
		return;
	if (st.debuginfod_pending && c->o->debuginfod_timeout_ns && !c->o->quiet)
		log_info("waiting up to %.1f s for %u debug files from debuginfod", c->o->debuginfod_timeout_ns / 1e9,
			 st.debuginfod_pending);
	r = symbolizer_debuginfod_wait(c->sym, c->o->debuginfod_timeout_ns);
	symbolizer_get_stats(c->sym, &st);
	if (st.debuginfod_pending)
		log_warn("debuginfod: %u debug files did not arrive within --debuginfod-timeout (%.1f s); their frames "
			 "stay addresses", st.debuginfod_pending, c->o->debuginfod_timeout_ns / 1e9);
	if (r > 0) {
		r = ingest_resymbolize(c->ingest);
		if (r < 0)
			log_error_errno(r, "cannot symbolize the frames of the fetched debug files");
	}
}

static int write_outputs(struct capture *c)
{
	char title[512];
	int ret = 0;

	for (size_t i = 0; i < c->o->noutputs; i++) {
		uint8_t *buf = NULL;
		size_t len = 0;
		int r;

		if (c->o->formats[i] == FMT_FOLDED)
			r = encode_folded(c->prof, (char **)&buf, &len);
		else if (c->o->formats[i] == FMT_HTML)
			r = html_write_profile(c->prof, record_title(c->o, title, sizeof(title)), NULL, 0, (char **)&buf, &len);
		else
			r = encode_pprof(c->prof, &buf, &len);
		if (r < 0) {
			ret = log_error_errno(r, "cannot encode the profile for '%s'", c->o->outputs[i]);
			continue;
		}
		r = export_file_commit(c->out[i], buf, len);
		c->out[i] = NULL;
		free(buf);
		if (r < 0)
			ret = log_error_errno(r, "cannot write '%s'", c->o->outputs[i]);
	}
	return ret;
}

int record_main(int argc, char **argv)
{
	struct record_opts o = {};
	struct capture c = { .o = &o, .go_pipe = { -1, -1 }, .err_pipe = { -1, -1 } };
	struct symbolizer_opts sopts = {};
	struct sampler_opts sampopts = {};
	struct ingest_opts iopts = {};
	uint64_t start_wall = 0, elapsed = 0;
	struct sigaction sa = { .sa_handler = on_signal };
	int r, ret = 1;

	o.debuginfod_timeout_ns = 10ull * NSEC_PER_SEC;
	r = record_parse_args(argc, argv, &o);
	if (r != 0) {
		free(o.pids);
		return r < 0 ? 0 : r;
	}
	if (o.verbose)
		log_set_level(LOG_LVL_DEBUG);
	/* Debug files by build id from DEBUGINFOD_URLS, fetched on a thread of
	 * their own (never by libdwfl, which would block on the network); the
	 * environment is set before any thread starts. */
	r = dbgd_setup_env(getenv("DEBUGINFOD_URLS"), RECORD_DEBUGINFOD_CACHE, 0, 0);
	if (r < 0) {
		log_error_errno(r, "cannot set up debuginfod");
		goto out;
	}

	if (sampler_preflight(!o.unwind_fp) < 0)
		goto out;
	if (open_targets(&c) < 0)
		goto out;
	for (size_t i = 0; i < o.noutputs; i++) {
		r = export_file_begin(o.outputs[i], &c.out[i]);
		if (r < 0) {
			log_error("cannot write output '%s': %s: choose a writable path with -o", o.outputs[i], strerror(-r));
			goto out;
		}
	}

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	sopts.demangle = o.demangle;
	sopts.debuginfod_cache = RECORD_DEBUGINFOD_CACHE;
	/* Compressed debug sections (libc6-dbg's, say) are inflated into unnamed
	 * files (O_TMPFILE: nothing is left behind, not even after SIGKILL), so
	 * their bytes are page cache that can be dropped, not heap: libc's alone
	 * is about 10 MiB. Where such a file can't be made, libdw inflates them in
	 * memory as before. */
	{
		const char *tmp = getenv("TMPDIR");

		sopts.inflate_dir = tmp && tmp[0] == '/' ? tmp : "/var/tmp";
		sopts.inflate_max_bytes = RECORD_INFLATE_MAX;
	}
	r = symbolizer_new(&sopts, &c.sym);
	if (r < 0) {
		log_error_errno(r, "cannot set up the symbolizer");
		goto out;
	}
	c.prof = profile_new();
	if (!c.prof) {
		log_error_errno(-ENOMEM, "cannot allocate the profile");
		goto out;
	}
	/* Off-CPU alone: a kept short wait weighs the threshold, its "period". */
	profile_set_period(c.prof, o.values == PROF_VALUES_OFFCPU ? (int64_t)o.offcpu_threshold_ns : NSEC_PER_SEC / o.freq);
	profile_set_values(c.prof, o.values);

	if (o.cmd && spawn_command(&c) < 0)
		goto out;

	iopts.per_thread = o.per_thread;
	iopts.main_pid = o.cmd ? (uint32_t)c.child : o.npids ? o.pids[0] : 0;
	if (o.python_fp)
		iopts.python_hint = "--unwind=fp reads no Python frames: they get native frames only; use "
				    "--unwind=dwarf for Python functions (or --python=off to silence this)";
	r = ingest_new(c.sym, c.prof, &iopts, &c.ingest);
	if (r < 0)
		goto out;

	sampopts = (struct sampler_opts){
		.freq = o.freq,
		.idle = o.idle,
		.include_self = o.include_self,
		.filter_pids = !o.all,
		.follow_children = o.cmd != NULL,
		.verbose = o.verbose,
		.unwind_dwarf = !o.unwind_fp,
		.unwind_max_rows = o.unwind_max_rows,
		.unwind_max_maps = o.unwind_max_maps,
		.unwind_max_procs = o.unwind_max_procs,
		.unwind_names = { "--unwind-max-rows", "--unwind-max-mappings", "--unwind-max-procs" },
		.python_off = o.python_off,
		.java_off = o.java_off,
		.node_off = o.node_off,
		.offcpu = o.values != PROF_VALUES_CPU,
		.no_oncpu = o.values == PROF_VALUES_OFFCPU,
		.offcpu_threshold_ns = o.offcpu_threshold_ns,
		.cb = on_sample,
		.cb_ctx = &c,
	};
	if (sampler_open(&sampopts, &c.sampler) < 0)
		goto out;
	py_resolver_set_io(symbolizer_python(c.sym), sampler_maps_io(c.sampler));
	jvm_namer_set_io(symbolizer_java(c.sym), sampler_maps_io(c.sampler));
	v8_namer_set_io(symbolizer_node(c.sym), sampler_maps_io(c.sampler));
	for (size_t i = 0; i < o.npids; i++) {
		sampler_add_pid(c.sampler, o.pids[i]);
		symbolizer_add_process(c.sym, o.pids[i]);
	}
	/* The whole host: every running process is loaded before the first
	 * sample, as -p loads its targets, so no capture starts with stacks
	 * marked "not loaded by the unwinder yet". */
	if (o.all && !o.unwind_fp)
		sampler_preload_all(c.sampler);
	if (o.cmd && sampler_add_pid(c.sampler, c.child) < 0) {
		log_error("cannot add the command's pid to the BPF filter");
		goto out;
	}
	if (sampler_start(c.sampler) < 0)
		goto out;
	if (o.cmd) {
		r = release_command(&c);
		if (r < 0) {
			log_error("cannot run '%s': %s", o.cmd[0], strerror(-r));
			goto out;
		}
	}

	if (run_capture(&c, &start_wall, &elapsed) < 0)
		goto out;
	if (o.cmd && !c.child_done) {
		kill(c.child, SIGTERM);
		waitpid(c.child, &c.child_status, 0);
		c.child_done = true;
	}

	finish_debuginfod(&c);
	profile_set_time(c.prof, start_wall, elapsed);
	if (write_outputs(&c) < 0)
		goto out;

	if (!o.quiet) {
		struct summary_info info = {
			.output = o.outputs[0],
			.elapsed_ns = elapsed,
			.samples_read = c.samples,
			.ingest_errors = c.ingest_errors,
		};
		struct sampler_counters cnt;
		struct symbolizer_stats sst;

		sampler_get_counters(c.sampler, &cnt);
		symbolizer_get_stats(c.sym, &sst);
		log_debug("symbolizer: %u modules (%u open, %.1f MiB of libdw heap), %" PRIu64 " reopened; %" PRIu64
			  " compressed debug files inflated into %s (%" PRIu64 " fell back to memory)",
			  sst.modules, sst.open_modules, sst.open_module_bytes / 1048576.0, sst.module_reopens,
			  sst.inflated_files, sopts.inflate_dir, sst.inflate_fallbacks);
		if (sst.py_code_hits + sst.py_code_misses)
			log_debug("python: %" PRIu64 " code objects cached (%.1f KiB), %" PRIu64 " lookups hit, %" PRIu64
				  " missed, %" PRIu64 " evicted, %" PRIu64 " unreadable",
				  sst.py_code_entries, sst.py_code_bytes / 1024.0, sst.py_code_hits, sst.py_code_misses,
				  sst.py_code_evictions, sst.py_code_read_errors);
		if (sst.java_names.hits + sst.java_names.misses)
			log_debug("java: %" PRIu64 " names cached (%.1f KiB), %" PRIu64 " lookups hit, %" PRIu64
				  " missed (%.1f us each), %" PRIu64 " markers",
				  sst.java_names.entries, sst.java_names.bytes / 1024.0, sst.java_names.hits, sst.java_names.misses,
				  sst.java_name_miss_ns / 1e3 / (double)(sst.java_names.misses ? sst.java_names.misses : 1),
				  sst.java_names.failures);
		if (sst.js_names.hits + sst.js_names.misses)
			log_debug("node: %" PRIu64 " names cached (%.1f KiB), %" PRIu64 " lookups hit, %" PRIu64
				  " missed, %" PRIu64 " markers",
				  sst.js_names.entries, sst.js_names.bytes / 1024.0, sst.js_names.hits, sst.js_names.misses,
				  sst.js_names.failures);
		info.lost = cnt.v[PROWL_CNT_LOST] + cnt.v[PROWL_CNT_OFFCPU_LOST];
		if (o.values != PROF_VALUES_CPU)
			log_info("off-CPU: %" PRIu64 " waits kept, %" PRIu64 " shorter ones sampled away (the kept ones "
				 "stand for them), %" PRIu64 " lost to a full ring buffer (%.3f s), %" PRIu64
				 " switches not seen (per-task map full)",
				 (uint64_t)cnt.v[PROWL_CNT_OFFCPU_SAMPLES], (uint64_t)cnt.v[PROWL_CNT_OFFCPU_SKIPPED],
				 (uint64_t)cnt.v[PROWL_CNT_OFFCPU_LOST], cnt.v[PROWL_CNT_OFFCPU_LOST_NS] / 1e9,
				 (uint64_t)cnt.v[PROWL_CNT_OFFCPU_FULL]);
		info.kernel_addrs_hidden = sst.kernel_addrs_hidden;
		info.max_samples = o.freq * (elapsed / 1e9) * (o.all ? sampler_ncpus_active(c.sampler) : 1);
		summary_print(stdout, c.prof, &info);
	}
	if (!c.samples && o.quiet)
		log_warn("no samples: " SUMMARY_NO_SAMPLES_HINT);
	if (o.cmd && c.child_done && WIFEXITED(c.child_status) && WEXITSTATUS(c.child_status) && !o.quiet)
		log_info("the command exited with status %d", WEXITSTATUS(c.child_status));
	ret = 0;
out:
	if (o.cmd && c.child > 0 && !c.child_done) {
		kill(c.child, SIGKILL);
		waitpid(c.child, NULL, 0);
	}
	for (size_t i = 0; i < RECORD_MAX_OUTPUTS; i++)
		export_file_abort(c.out[i]);
	sampler_free(c.sampler);
	ingest_free(c.ingest);
	profile_free(c.prof);
	symbolizer_free(c.sym);
	for (size_t i = 0; c.pidfds && i < o.npids; i++)
		if (c.pidfds[i] > 0)
			close(c.pidfds[i]);
	free(c.pidfds);
	free(c.pid_alive);
	for (int i = 0; i < 2; i++) {
		if (c.go_pipe[i] >= 0)
			close(c.go_pipe[i]);
		if (c.err_pipe[i] >= 0)
			close(c.err_pipe[i]);
	}
	free(o.pids);
	return ret;
}

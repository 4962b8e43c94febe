/* record.c: the `prowl record` command: parses its options, runs one capture
 * (sample -> resolve -> aggregate), then encodes, exports atomically and summarises. */
#include "record.h"

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
#include "pyresolve.h"
#include "symbolizer.h"

enum { FMT_PPROF, FMT_FOLDED, FMT_HTML };
#define RECORD_MAX_OUTPUTS 4
#define STR_(x) #x
#define STR(x)  STR_(x)

struct record_opts {
	uint32_t *pids;
	size_t npids;
	bool all;
	unsigned int freq;
	uint64_t duration_ns; /* 0 = until the targets exit or a signal */
	const char *outputs[RECORD_MAX_OUTPUTS];
	int formats[RECORD_MAX_OUTPUTS];
	size_t noutputs;
	int format;
	bool format_set;
	bool idle;
	bool include_self;
	bool per_thread;
	bool verbose;
	bool quiet;
	bool unwind_fp;   /* --unwind=fp */
	bool python_off;  /* --python=off */
	bool python_set;  /* --python was given */
	bool python_fp;   /* left at its default, off because of --unwind=fp */
	bool java_off;    /* --java=off (or --unwind=fp) */
	bool java_set;    /* --java was given */
	enum sym_demangle demangle; /* --demangle */
	uint64_t debuginfod_timeout_ns; /* --debuginfod-timeout */
	uint32_t unwind_max_rows, unwind_max_maps, unwind_max_procs; /* 0: defaults */
	char **cmd; /* argv after "--" */
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

static const char record_usage[] =
	"Usage: prowl record [OPTIONS] (-a | -p PID[,PID...] | -- COMMAND [ARGS...])\n"
	"\n"
	"Sample CPU stacks (kernel and user) and write one profile.\n"
	"\n"
	"What to profile:\n"
	"  -a, --all-cpus            the whole host (every process)\n"
	"  -p, --pid PID[,PID...]    these processes, all their threads\n"
	"  -- COMMAND [ARGS...]      start COMMAND, profile it and its children until it exits\n"
	"\n"
	"Options:\n"
	"  -F, --freq HZ             sampling frequency per CPU, 1-1000 (default 99)\n"
	"  -d, --duration TIME       stop after TIME: 10s, 500ms, 2m, 1h30m, or a bare number\n"
	"                            of seconds; default: until the targets exit or Ctrl-C\n"
	"  -o, --output FILE         output file (default prowl.pb.gz, or prowl.folded); may be\n"
	"                            given up to " STR(RECORD_MAX_OUTPUTS) " times to write several formats of one capture\n"
	"  -f, --format FMT          pprof (gzip'ed protobuf), folded or html (flame graph);\n"
	"                            default from each output's name (.folded/.txt -> folded,\n"
	"                            .html -> html), else pprof\n"
	"      --idle                keep samples of idle CPUs (dropped by default)\n"
	"      --include-self        keep samples of prowl itself (dropped by default)\n"
	"      --per-thread          label samples with tid and thread name too\n"
	"      --unwind MODE         user stacks: dwarf (default: DWARF call frame information,\n"
	"                            complete without frame pointers; x86_64, arm64) or fp\n"
	"                            (frame pointers only)\n"
	"      --python MODE         CPython 3.11-3.13 processes: on (default: Python functions\n"
	"                            with file and line in place of the interpreter's frames;\n"
	"                            needs --unwind=dwarf: with fp, on is refused and the\n"
	"                            default turns off with a warning) or off (native frames)\n"
	"      --java MODE           HotSpot JVMs (JDK 9+): on (default: Java methods, interpreted\n"
	"                            and compiled, with file and line, no JVM flags; needs\n"
	"                            --unwind=dwarf) or off (the JVM's code is [jit] frames)\n"
	"      --demangle MODE       C++ and Rust names: templates (default; std::vector<int>::\n"
	"                            push_back), full (with parameters) or none (linkage names)\n"
	"      --unwind-max-rows N   capacity of the unwind tables in rows of 8 bytes,\n"
	"                            65536-268435456 (default 2097152 = 16 MiB)\n"
	"      --unwind-max-mappings N  executable mappings the unwinder tracks,\n"
	"                            1024-16777216 (default 65536)\n"
	"      --unwind-max-procs N  processes the unwinder tracks, 64-4194304 (default 16384)\n"
	"      --debuginfod-timeout TIME  with DEBUGINFOD_URLS set, debug files of stripped\n"
	"                            binaries are fetched by build id while sampling (cached\n"
	"                            in /var/cache/prowl/debuginfod); at the end wait at most\n"
	"                            TIME for those still coming (default 10s; 0: not at all)\n"
	"  -q, --quiet               no status line and no summary\n"
	"  -v, --verbose             debug messages, libbpf and verifier output\n"
	"  -h, --help                this help\n"
	"\n"
	"Environment: DEBUGINFOD_URLS (above); TMPDIR (default /var/tmp): where compressed\n"
	"debug sections are inflated, into unnamed files that vanish with prowl.\n"
	"\n"
	"Examples:\n"
	"  sudo prowl record -p 1234 -d 10s -o app.pb.gz        # one process, all its threads\n"
	"  sudo prowl record -a -F 99 -d 30s -o host.pb.gz      # the whole host\n"
	"  sudo prowl record -p 1234 --format folded -o app.folded\n"
	"  sudo prowl record -o run.pb.gz -- ./myprog --flag    # profile a command until it exits\n"
	"  sudo prowl record -o run.html -o run.pb.gz -- ./myprog   # a flame graph and the pprof\n"
	"  sudo DEBUGINFOD_URLS=https://debuginfod.debian.net prowl record -p 1234 -d 30s\n"
	"  pprof -top app.pb.gz; pprof -http=: app.pb.gz         # look at the result\n";

static int usage_error(const char *fmt, const char *arg)
{
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, arg);
	log_error("%s (see 'prowl record --help')", msg);
	return 2;
}

/* The unwinder's capacities take the same range as the agent's limits.unwind_* keys. */
static int parse_unwind_limit(const char *arg, uint32_t min, uint32_t max, const char *flag, uint32_t *ret)
{
	char msg[160];
	uint64_t v;

	if (parse_u64_range(arg, min, max, &v) < 0) {
		snprintf(msg, sizeof(msg),
			 "option %s: invalid value '%%s': give a whole number from %" PRIu32 " to %" PRIu32, flag, min,
			 max);
		return usage_error(msg, arg);
	}
	*ret = (uint32_t)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct record_opts *o)
{
	static const struct option longopts[] = {
		{ "all-cpus", no_argument, NULL, 'a' },
		{ "pid", required_argument, NULL, 'p' },
		{ "freq", required_argument, NULL, 'F' },
		{ "duration", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "idle", no_argument, NULL, 'I' },
		{ "include-self", no_argument, NULL, 'S' },
		{ "per-thread", no_argument, NULL, 'T' },
		{ "unwind", required_argument, NULL, 'U' },
		{ "python", required_argument, NULL, 'Y' },
		{ "java", required_argument, NULL, 'J' },
		{ "demangle", required_argument, NULL, 'D' },
		{ "debuginfod-timeout", required_argument, NULL, 'W' },
		{ "unwind-max-rows", required_argument, NULL, 'R' },
		{ "unwind-max-mappings", required_argument, NULL, 'M' },
		{ "unwind-max-procs", required_argument, NULL, 'P' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	uint64_t v;
	int c, r;

	o->freq = 99;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+ap:F:d:o:f:qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			o->all = true;
			break;
		case 'p':
			r = parse_pid_list(optarg, &o->pids, &o->npids);
			if (r < 0)
				return usage_error("invalid PID list '%s': give process ids like 1234 or 1234,5678", optarg);
			break;
		case 'F':
			if (parse_u64_range(optarg, 1, 1000, &v) < 0)
				return usage_error("invalid frequency '%s': give a whole number of Hz from 1 to 1000", optarg);
			o->freq = v;
			break;
		case 'd':
			if (parse_duration_ns(optarg, &o->duration_ns) < 0 || o->duration_ns < 1000000)
				return usage_error("invalid duration '%s': use e.g. 10s, 500ms, 2m, 1h30m, or 10 for "
						   "seconds", optarg);
			break;
		case 'o':
			if (o->noutputs == RECORD_MAX_OUTPUTS)
				return usage_error("too many -o options: give at most %s outputs", STR(RECORD_MAX_OUTPUTS));
			o->outputs[o->noutputs++] = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "pprof") == 0)
				o->format = FMT_PPROF;
			else if (strcmp(optarg, "folded") == 0)
				o->format = FMT_FOLDED;
			else if (strcmp(optarg, "html") == 0)
				o->format = FMT_HTML;
			else
				return usage_error("unknown format '%s': use pprof, folded or html", optarg);
			o->format_set = true;
			break;
		case 'I':
			o->idle = true;
			break;
		case 'S':
			o->include_self = true;
			break;
		case 'T':
			o->per_thread = true;
			break;
		case 'D':
			if (sym_demangle_parse(optarg, &o->demangle) < 0)
				return usage_error("unknown demangling mode '%s': use templates, full or none", optarg);
			break;
		case 'W':
			if (parse_duration_ns(optarg, &o->debuginfod_timeout_ns) < 0 && strcmp(optarg, "0") != 0)
				return usage_error("invalid --debuginfod-timeout '%s': use e.g. 10s, 500ms, or 0 not to wait",
						   optarg);
			if (strcmp(optarg, "0") == 0)
				o->debuginfod_timeout_ns = 0;
			break;
		case 'U':
			if (strcmp(optarg, "fp") == 0)
				o->unwind_fp = true;
			else if (strcmp(optarg, "dwarf") == 0)
				o->unwind_fp = false;
			else
				return usage_error("unknown unwind mode '%s': use dwarf or fp", optarg);
			break;
		case 'Y':
			o->python_set = true;
			if (strcmp(optarg, "off") == 0)
				o->python_off = true;
			else if (strcmp(optarg, "on") == 0)
				o->python_off = false;
			else
				return usage_error("unknown --python mode '%s': use on or off", optarg);
			break;
		case 'J':
			o->java_set = true;
			if (strcmp(optarg, "off") == 0)
				o->java_off = true;
			else if (strcmp(optarg, "on") == 0)
				o->java_off = false;
			else
				return usage_error("unknown --java mode '%s': use on or off", optarg);
			break;
		case 'R':
			r = parse_unwind_limit(optarg, UNWIND_ROWS_MIN, UNWIND_ROWS_MAX, "--unwind-max-rows",
					       &o->unwind_max_rows);
			if (r)
				return r;
			break;
		case 'M':
			r = parse_unwind_limit(optarg, UNWIND_MAPS_MIN, UNWIND_MAPS_MAX, "--unwind-max-mappings",
					       &o->unwind_max_maps);
			if (r)
				return r;
			break;
		case 'P':
			r = parse_unwind_limit(optarg, UNWIND_PROCS_MIN, UNWIND_PROCS_MAX, "--unwind-max-procs",
					       &o->unwind_max_procs);
			if (r)
				return r;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			fputs(record_usage, stdout);
			return -1;
		case '?':
		default:
			if (optopt == 'U')
				return usage_error("option '%s' needs a value: dwarf or fp", "--unwind");
			if (optopt == 'D')
				return usage_error("option '%s' needs a value: templates, full or none", "--demangle");
			if (optopt == 'R' || optopt == 'M' || optopt == 'P' || optopt == 'W')
				return usage_error("option '%s' needs a number", argv[optind - 1]);
			if (optopt && strchr("pFdof", optopt))
				return usage_error("option '-%s' needs a value", (char[]){ (char)optopt, 0 });
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc) {
		if (strcmp(argv[optind - 1], "--") != 0)
			return usage_error("unexpected argument '%s': put a command after '--'", argv[optind]);
		o->cmd = &argv[optind];
	}
	if ((o->all ? 1 : 0) + (o->npids ? 1 : 0) + (o->cmd ? 1 : 0) != 1)
		return usage_error("%s", o->all || o->npids || o->cmd
						 ? "give only one of -a, -p PID or -- COMMAND"
						 : "nothing to profile: give -a, -p PID or -- COMMAND");
	/* Python frames come from the DWARF unwinder: --python=on cannot take effect with
	 * fp; the default gives way, said once if CPython is sampled (decisions.md). */
	if (o->unwind_fp && !o->python_off) {
		if (o->python_set)
			return usage_error("%s", "--python=on needs --unwind=dwarf (frame pointers alone read no Python "
						 "frames): drop one of the two");
		o->python_off = o->python_fp = true;
	}
	if (o->unwind_fp && !o->java_off) {
		if (o->java_set)
			return usage_error("%s", "--java=on needs --unwind=dwarf (frame pointers alone read no Java "
						 "frames): drop one of the two");
		o->java_off = true;
	}
	if (!o->noutputs)
		o->outputs[o->noutputs++] = o->format == FMT_FOLDED ? "prowl.folded" : "prowl.pb.gz";
	for (size_t i = 0; i < o->noutputs; i++) {
		const char *out = o->outputs[i];
		size_t n = strlen(out);

		o->formats[i] = o->format;
		if (!o->format_set && ((n > 7 && strcmp(out + n - 7, ".folded") == 0) ||
				       (n > 4 && strcmp(out + n - 4, ".txt") == 0)))
			o->formats[i] = FMT_FOLDED;
		if (!o->format_set && n > 5 && strcmp(out + n - 5, ".html") == 0)
			o->formats[i] = FMT_HTML;
	}
	return 0;
}

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
	if (!o->quiet)
		log_info("sampling %s at %u Hz on %u CPUs%s", o->all ? "the whole host" : o->cmd ? o->cmd[0] : "the given processes",
			 o->freq, sampler_ncpus_active(c->sampler), o->duration_ns ? "" : "; Ctrl-C to stop");
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
	r = parse_args(argc, argv, &o);
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
	profile_set_period(c.prof, NSEC_PER_SEC / o.freq);

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
		.cb = on_sample,
		.cb_ctx = &c,
	};
	if (sampler_open(&sampopts, &c.sampler) < 0)
		goto out;
	py_resolver_set_io(symbolizer_python(c.sym), sampler_maps_io(c.sampler));
	jvm_namer_set_io(symbolizer_java(c.sym), sampler_maps_io(c.sampler));
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
		info.lost = cnt.v[PROWL_CNT_LOST];
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

/* record_args.c: `prowl record`'s command line: its help text, and the parser that
 * turns flags into record_opts with one clear line for each mistake. */
#include "record_priv.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <linux/types.h>

#include "log.h"
#include "parse.h"
#include "prowl.h"
#include "unwinder.h"

#define STR_(x) #x
#define STR(x)  STR_(x)

static const char record_usage[] =
	"Usage: prowl record [OPTIONS] (-a | -p PID[,PID...] | -- COMMAND [ARGS...])\n"
	"\n"
	"Sample CPU stacks (kernel and user) and write one profile; with --off-cpu, where\n"
	"threads wait and for how long instead, and with --wall both.\n"
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
	"      --off-cpu             off-CPU time instead of CPU time: the stacks of threads\n"
	"                            back from a wait (lock, read, sleep), weighted by the wait\n"
	"      --wall                on-CPU and off-CPU time in one profile (pprof sample types\n"
	"                            cpu and off_cpu, in nanoseconds): a thread's wall time\n"
	"      --off-cpu-threshold TIME  waits this long or longer are all kept; a shorter one\n"
	"                            of d is kept with probability d/TIME and weighs TIME\n"
	"                            (default 1ms; 1us to 1s)\n"
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
	"      --node MODE           node (V8 with its v8dbg_ metadata): on (default: JavaScript\n"
	"                            functions, unwound through V8's frames, no node flags; needs\n"
	"                            --unwind=dwarf) or off (V8's code is [jit] frames)\n"
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
	"  sudo prowl record --off-cpu -p 1234 -d 10s -o wait.pb.gz   # where it waits\n"
	"  prowl report --sample-type off_cpu wait.pb.gz\n"
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

int record_parse_args(int argc, char **argv, struct record_opts *o)
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
		{ "node", required_argument, NULL, 'N' },
		{ "demangle", required_argument, NULL, 'D' },
		{ "debuginfod-timeout", required_argument, NULL, 'W' },
		{ "unwind-max-rows", required_argument, NULL, 'R' },
		{ "unwind-max-mappings", required_argument, NULL, 'M' },
		{ "unwind-max-procs", required_argument, NULL, 'P' },
		{ "off-cpu", no_argument, NULL, 'O' },
		{ "wall", no_argument, NULL, 'L' },
		{ "off-cpu-threshold", required_argument, NULL, 'H' },
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
		case 'N': {
			bool *off = c == 'J' ? &o->java_off : &o->node_off;

			*(c == 'J' ? &o->java_set : &o->node_set) = true;
			if (strcmp(optarg, "off") == 0)
				*off = true;
			else if (strcmp(optarg, "on") == 0)
				*off = false;
			else
				return usage_error(c == 'J' ? "unknown --java mode '%s': use on or off"
							    : "unknown --node mode '%s': use on or off", optarg);
			break;
		}
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
		case 'O':
			if (o->values == PROF_VALUES_WALL)
				return usage_error("%s", "give one of --off-cpu and --wall (--wall has off-CPU time already)");
			o->values = PROF_VALUES_OFFCPU;
			break;
		case 'L':
			if (o->values == PROF_VALUES_OFFCPU)
				return usage_error("%s", "give one of --off-cpu and --wall (--wall has off-CPU time already)");
			o->values = PROF_VALUES_WALL;
			break;
		case 'H':
			if (parse_duration_ns(optarg, &o->offcpu_threshold_ns) < 0 || o->offcpu_threshold_ns < 1000 ||
			    o->offcpu_threshold_ns > PROWL_OFFCPU_T_MAX)
				return usage_error("invalid --off-cpu-threshold '%s': give a time from 1us to 1s, e.g. 1ms",
						   optarg);
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
			if (optopt == 'H')
				return usage_error("option '%s' needs a value: a time like 1ms", "--off-cpu-threshold");
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
	if (o->unwind_fp && !o->node_off) {
		if (o->node_set)
			return usage_error("%s", "--node=on needs --unwind=dwarf (frame pointers alone read no "
						 "JavaScript frames): drop one of the two");
		o->node_off = true;
	}
	if (o->offcpu_threshold_ns && o->values == PROF_VALUES_CPU)
		return usage_error("%s", "--off-cpu-threshold needs --off-cpu or --wall");
	if (!o->offcpu_threshold_ns)
		o->offcpu_threshold_ns = PROWL_OFFCPU_T_DEFAULT;
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

/* main.c: the prowl command line entry point; dispatches to the subcommands
 * (record, agent, report, diff) and answers --help and --version. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "log.h"
#include "record.h"
#include "analyse/report.h"

static const char main_usage[] =
	"Usage: prowl COMMAND [OPTIONS]\n"
	"\n"
	"prowl is a whole-host eBPF sampling CPU profiler.\n"
	"\n"
	"Commands:\n"
	"  record     capture a profile of processes, a command or the whole host to a file\n"
	"  agent      profile the whole host continuously and export to backends or a directory\n"
	"  report     merge profiles (files or the agent's directory): top functions, flame graph\n"
	"  diff       compare two profiles function by function; a CI gate on share increases\n"
	"\n"
	"Options:\n"
	"  -h, --help       this help ('prowl COMMAND --help' for a command's options)\n"
	"  -V, --version    print the version\n"
	"\n"
	"Examples:\n"
	"  sudo prowl record -a -d 10s -o host.pb.gz     # whole host for 10 seconds\n"
	"  sudo prowl record -p 1234 -d 30s              # one process\n"
	"  sudo prowl record -o run.pb.gz -- ./myprog    # a command until it exits\n"
	"  prowl report -o host.html host.pb.gz          # a flame graph of the result\n"
	"  prowl diff base.pb.gz new.pb.gz --fail-on-increase 5   # CI regression gate\n"
	"  sudo prowl agent --pyroscope-url http://127.0.0.1:4040   # continuous profiling\n";

/* Memory is what a profiler on every host is judged by. One malloc arena for
 * all threads (the sender and HTTP threads allocate little, and an arena per
 * thread keeps its own free memory), and a fixed mmap threshold: by default
 * glibc raises it after big blocks are freed, so later big blocks (inflated
 * debug sections, encode buffers) land in the heap and fragment it instead of
 * going back to the system when freed. */
static void tune_malloc(void)
{
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	tune_malloc();

	log_set_prefix("prowl");
	if (!cmd) {
		fputs(main_usage, stderr);
		return 2;
	}
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		fputs(main_usage, stdout);
		return 0;
	}
	if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
		printf("prowl %s (%s)\n", PROWL_VERSION, PROWL_GIT_REV);
		return 0;
	}
	if (strcmp(cmd, "record") == 0)
		return record_main(argc - 1, argv + 1);
	if (strcmp(cmd, "agent") == 0)
		return agent_main(argc - 1, argv + 1);
	if (strcmp(cmd, "report") == 0)
		return report_main(argc - 1, argv + 1);
	if (strcmp(cmd, "diff") == 0)
		return diff_main(argc - 1, argv + 1);
	log_error("unknown command '%s' (see 'prowl --help')", cmd);
	return 2;
}

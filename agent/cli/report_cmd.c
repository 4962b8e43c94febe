/* report_cmd.c: the `prowl report` command: merges pprof files or a time range of
 * the agent's directory, then prints the top functions or writes html/pprof/folded/json. */
#include "analyse/report.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "analyse/cli.h"
#include "analyse/formats.h"
#include "analyse/html.h"
#include "analyse/inputs.h"
#include "analyse/timespec.h"
#include "analyse/view.h"
#include "array_size.h"
#include "clock.h"
#include "encode.h"
#include "log.h"
#include "summary.h"

enum report_format { RF_TEXT, RF_HTML, RF_PPROF, RF_FOLDED, RF_SPEEDSCOPE, RF_JSON };

static const char *const format_names[] = {
	[RF_TEXT] = "text", [RF_HTML] = "html", [RF_PPROF] = "pprof",
	[RF_FOLDED] = "folded", [RF_SPEEDSCOPE] = "speedscope", [RF_JSON] = "json",
};

static const char report_usage[] =
	"Usage: prowl report [OPTIONS] FILE...\n"
	"       prowl report --dir DIR [--service NAME] [--from TIME] [--to TIME] [OPTIONS]\n"
	"\n"
	"Merge CPU profiles (pprof: prowl's, the agent's or any with samples/count) and print\n"
	"the top functions by self and total time, or write the merged profile.\n"
	"\n"
	"Input:\n"
	"  FILE...                   pprof files, gzip'ed or not\n"
	"      --dir DIR             the agent's profile directory, DIR/<service>/<time>-<hash>.pb.gz\n"
	"                            (by default /var/lib/prowl/profiles)\n"
	"      --service NAME        only this service's windows (its sub-directory of DIR)\n"
	"      --from TIME           windows that start at TIME or later (default: the oldest)\n"
	"      --to TIME             windows that start before TIME (default: now)\n"
	"      --label NAME=VALUE    only files of this series (service_name, host_name, the\n"
	"                            agent's --label) or else samples with this label (pid,\n"
	"                            process_name, tid, thread_name); repeatable, all must match\n"
	"      --sample-type TYPE    the value to read: samples (default), cpu (nanoseconds) or\n"
	"                            off_cpu (nanoseconds waited; the default of an off-CPU\n"
	"                            profile, prowl record --off-cpu or --wall)\n"
	"\n"
	"Output:\n"
	"  -o, --output FILE         write the merged profile to FILE ('-' for stdout)\n"
	"  -f, --format FMT          html (flame graph), pprof, folded, speedscope or json; default\n"
	"                            from FILE's name: .html, .pb.gz/.pb, .folded/.txt,\n"
	"                            .speedscope.json, .json\n"
	"      --title TEXT          the HTML page's title\n"
	"  -q, --quiet               no summary line\n"
	"  -h, --help                this help\n"
	"\n"
	"TIME is RFC 3339 (2024-05-01T10:00:00Z), local time ('2024-05-01 10:00', or 10:00 for\n"
	"today), or relative to now (-1h, -30m, -1h30m, now).\n"
	"\n"
	"Exit status: 0 done, 1 unreadable or invalid input or nothing selected, 2 usage error.\n"
	"\n"
	"Examples:\n"
	"  prowl report app.pb.gz                              # top functions\n"
	"  prowl report -o app.html app.pb.gz                  # flame graph, one self-contained file\n"
	"  prowl report --dir /var/lib/prowl/profiles --service nginx --from -1h -o nginx.html\n"
	"  prowl report --dir /var/lib/prowl/profiles --from 09:00 --to 10:00 -o hour.pb.gz\n"
	"  prowl report --label process_name=postgres -f folded -o - host.pb.gz > pg.folded\n"
	"  prowl report --sample-type off_cpu wall.pb.gz      # where threads waited\n";

struct report_opts {
	struct input_opts in;
	struct pprof_filter labels[CLI_MAX_LABELS];
	const char *output, *title, *from, *to;
	enum report_format format;
	bool format_set, quiet;
	char **files;
	size_t nfiles;
};

static int usage_error(const char *fmt, const char *arg)
{
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, arg);
	log_error("%s (see 'prowl report --help')", msg);
	return 2;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n > m && strcmp(s + n - m, suffix) == 0;
}

static enum report_format format_from_name(const char *path)
{
	if (ends_with(path, ".html") || ends_with(path, ".htm"))
		return RF_HTML;
	if (ends_with(path, ".folded") || ends_with(path, ".txt"))
		return RF_FOLDED;
	if (ends_with(path, ".speedscope.json"))
		return RF_SPEEDSCOPE;
	if (ends_with(path, ".json"))
		return RF_JSON;
	return RF_PPROF;
}

/* --from (from_ns NULL) or --to (the end of the range from *from_ns). */
static int parse_time_opt(const char *arg, const char *name, const int64_t *from_ns, int64_t *ret)
{
	int64_t now = clock_wall_ns();
	char msg[160];

	if ((from_ns ? time_parse_end(arg, now, *from_ns, ret) : time_parse(arg, now, ret)) == 0)
		return 0;
	snprintf(msg, sizeof(msg), "invalid %s time '%%s': use RFC 3339 (2024-05-01T10:00:00Z), "
		 "local HH:MM or '2024-05-01 10:00', or -1h", name);
	return usage_error(msg, arg);
}

static int parse_args(int argc, char **argv, struct report_opts *o)
{
	static const struct option longopts[] = {
		CLI_INPUT_LONGOPTS,
		{ "from", required_argument, NULL, 'A' },
		{ "to", required_argument, NULL, 'B' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "title", required_argument, NULL, 't' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	int c, r;

	o->in.same_period = true;
	cli_input_init(&o->in, o->labels);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:f:qh", longopts, NULL)) != -1) {
		r = cli_input_option(c, optarg, &o->in, o->labels, "report");
		if (r < 0)
			return 2;
		if (r)
			continue;
		switch (c) {
		case 'A':
			o->from = optarg;
			break;
		case 'B':
			o->to = optarg;
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'f':
			for (c = 0; c < (int)ARRAY_SIZE(format_names); c++)
				if (strcmp(optarg, format_names[c]) == 0)
					break;
			if (c == (int)ARRAY_SIZE(format_names))
				return usage_error("unknown format '%s': use html, pprof, folded, speedscope, json or text", optarg);
			o->format = (enum report_format)c;
			o->format_set = true;
			break;
		case 't':
			o->title = optarg;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'h':
			fputs(report_usage, stdout);
			return -1;
		default:
			if (optopt)
				return usage_error("option '%s' needs a value", argv[optind - 1]);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	o->files = argv + optind;
	o->nfiles = (size_t)(argc - optind);
	if (o->in.dir && o->nfiles)
		return usage_error("give files or --dir, not both ('%s' after --dir)", o->files[0]);
	if (!o->in.dir && !o->nfiles)
		return usage_error("%s", "nothing to read: give pprof files or --dir DIR");
	if (!o->in.dir && (o->in.service || o->from || o->to))
		return usage_error("%s", "--service, --from and --to select windows of --dir DIR");
	if (o->from && (r = parse_time_opt(o->from, "--from", NULL, &o->in.from_ns)))
		return r;
	if (o->to && (r = parse_time_opt(o->to, "--to", &o->in.from_ns, &o->in.to_ns)))
		return r;
	if (o->in.from_ns >= o->in.to_ns)
		return usage_error("%s", "--from must be before --to");
	if (!o->format_set)
		o->format = o->output ? format_from_name(o->output) : RF_TEXT;
	if (o->format != RF_TEXT && !o->output)
		return usage_error("--format %s writes a file: give -o FILE (or -o - for stdout)", format_names[o->format]);
	return 0;
}

/* The page title: --title, else the service or the first file. */
static void make_title(const struct report_opts *o, const struct input_set *s, char *buf, size_t n)
{
	if (o->title)
		snprintf(buf, n, "%s", o->title);
	else if (o->in.service)
		snprintf(buf, n, "prowl: %s", o->in.service);
	else if (s->nfiles > 1)
		snprintf(buf, n, "prowl: %s and %zu more", s->first, s->nfiles - 1);
	else
		snprintf(buf, n, "prowl: %s", s->first);
}

static int encode(const struct report_opts *o, const struct input_set *s, char **buf, size_t *len)
{
	char title[512], labels[1024], files[64];
	const char *extra[2];
	size_t nextra = 0;
	struct view *v = NULL;
	int r;

	make_title(o, s, title, sizeof(title));
	switch (o->format) {
	case RF_PPROF:
		return encode_pprof(s->prof, (uint8_t **)buf, len);
	case RF_FOLDED:
		return encode_folded(s->prof, buf, len);
	case RF_HTML:
		cli_labels(s, labels, sizeof(labels));
		snprintf(files, sizeof(files), "%zu files", s->nfiles);
		if (s->nfiles > 1)
			extra[nextra++] = files;
		if (labels[0])
			extra[nextra++] = labels;
		return html_write_profile(s->prof, title, extra, nextra, buf, len);
	default:
		break;
	}
	r = view_new(view_profiles_multiprocess((const struct profile *const *)&s->prof, 1), &v);
	if (!r)
		r = view_add_profile(v, s->prof, VIEW_BASE);
	if (!r)
		r = view_finish(v);
	if (!r) {
		struct format_meta m = {
			.title = title,
			.start_ns = s->start_ns,
			.end_ns = s->end_ns,
			.period = s->period,
			.nfiles = s->nfiles,
			.labels = s->labels,
			.nlabels = s->nlabels,
		};

		r = o->format == RF_SPEEDSCOPE ? format_speedscope(v, &m, buf, len) : format_json(v, &m, buf, len);
	}
	view_free(v);
	return r;
}

int report_main(int argc, char **argv)
{
	struct report_opts o = {};
	struct input_set s = {};
	char line[512], labels[1024];
	char *buf = NULL;
	size_t len = 0;
	int r, ret = 1;

	r = parse_args(argc, argv, &o);
	if (r)
		return r < 0 ? 0 : r;
	r = o.in.dir ? inputs_load_dir(&s, &o.in) : inputs_load_files(&s, o.files, o.nfiles, &o.in);
	if (r < 0) {
		log_error("%s", s.err[0] ? s.err : strerror(-r));
		goto out;
	}
	if (!s.samples) {
		log_error("no samples in %s%s: nothing to report", s.first ? s.first : "the input",
			  o.in.nfilters ? " match --label" : (s.nfiles > 1 ? " and the other files" : ""));
		goto out;
	}
	cli_describe(&s, line, sizeof(line));
	cli_labels(&s, labels, sizeof(labels));
	if (o.format == RF_TEXT) {
		FILE *f = open_memstream(&buf, &len);

		if (!f) {
			log_error_errno(-errno, "cannot format the report");
			goto out;
		}
		fprintf(f, "%s\n", line);
		if (labels[0])
			fprintf(f, "Series labels: %s\n", labels);
		summary_print_top(f, s.prof);
		r = fclose(f) ? -ENOMEM : 0;
	} else {
		r = encode(&o, &s, &buf, &len);
	}
	if (r < 0) {
		log_error_errno(r, "cannot encode the merged profile as %s", format_names[o.format]);
		goto out;
	}
	r = cli_write(o.output, buf, len);
	if (r < 0) {
		log_error("cannot write '%s': %s: choose a writable path with -o", o.output, strerror(-r));
		goto out;
	}
	if (!o.quiet && o.format != RF_TEXT && strcmp(o.output, "-") != 0)
		printf("Wrote %s (%s, %zu bytes): %s\n", o.output, format_names[o.format], len, line);
	ret = 0;
out:
	free(buf);
	input_set_free(&s);
	return ret;
}

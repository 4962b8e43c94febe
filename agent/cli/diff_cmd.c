/* diff_cmd.c: the `prowl diff` command: reads a base and a new profile (files, or two
 * time ranges of the agent's directory), prints share deltas and runs the CI gate. */
#include "analyse/report.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyse/cli.h"
#include "analyse/diff.h"
#include "analyse/html.h"
#include "analyse/inputs.h"
#include "analyse/timespec.h"
#include "analyse/view.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "escape.h"
#include "regex_re2.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_REGRESSION = 3, EXIT_TOO_FEW = 4 };
enum diff_format { DF_TEXT, DF_JSON, DF_HTML };

static const char diff_usage[] =
	"Usage: prowl diff [OPTIONS] BASE NEW\n"
	"       prowl diff --dir DIR [--service NAME] --base FROM..TO --new FROM..TO [OPTIONS]\n"
	"\n"
	"Compare two CPU profiles function by function. A function's share is its samples\n"
	"over all samples of its side; delta = new share - base share, in percentage points\n"
	"(pp). Self counts samples in the function itself, total those with it on the stack.\n"
	"\n"
	"Input:\n"
	"  BASE NEW                  two pprof files, gzip'ed or not\n"
	"      --dir DIR             the agent's profile directory instead of files\n"
	"      --service NAME        only this service's windows (its sub-directory of DIR)\n"
	"      --base FROM..TO       the base: windows that start in [FROM, TO)\n"
	"      --new FROM..TO        the new side, likewise (TIME as in 'prowl report --help';\n"
	"                            an empty FROM is the oldest, an empty TO is now)\n"
	"      --label NAME=VALUE    only these series or samples, as in 'prowl report'\n"
	"      --sample-type TYPE    samples, cpu or off_cpu, as in 'prowl report': with a type in\n"
	"                            nanoseconds, shares are of time, N counts nanoseconds (the\n"
	"                            noise term vanishes: PP alone decides)\n"
	"\n"
	"Output:\n"
	"  -f, --format FMT          text (default), json, or html (a diff flame graph: red grew,\n"
	"                            blue shrank); default from -o's name (.json, .html)\n"
	"  -o, --output FILE         write to FILE instead of stdout\n"
	"  -n, --top N               text: show the N largest changes (default 30, 0 = all)\n"
	"      --title TEXT          the HTML page's title\n"
	"\n"
	"CI gate:\n"
	"      --fail-on-increase PP  exit 3 when the self or total share of a function grew by\n"
	"                            more than PP points beyond noise; one line per offender\n"
	"      --min-samples N       exit 4 when a side has fewer than N samples, none included\n"
	"                            (default 200 with the gate): too few for a verdict\n"
	"      --focus REGEX         judge only functions whose name matches REGEX (POSIX ERE;\n"
	"                            \\d \\w \\s translated as in the agent's rules)\n"
	"      --noise-sigmas K      the noise allowance in standard errors (default 3)\n"
	"\n"
	"Noise: a function with shares pb of Nb base samples and pn of Nn new samples fails\n"
	"only when pn - pb > PP + K * sqrt(pb(1-pb)/Nb + pn(1-pn)/Nn), the binomial standard\n"
	"error of the difference. Two captures of the same build pass at PP = 5.\n"
	"\n"
	"Prowl's marker frames ([truncated: ...], [unknown]+0x...) and the kernel's interrupts\n"
	"and return to user mode are listed apart and never fail the gate.\n"
	"\n"
	"Exit status: 0 no regression, 1 invalid input (without the gate or --min-samples: a\n"
	"side without samples), 2 usage error, 3 regression, 4 too few samples.\n"
	"\n"
	"Examples:\n"
	"  prowl diff base.pb.gz new.pb.gz                     # what changed, largest first\n"
	"  prowl diff base.pb.gz new.pb.gz --fail-on-increase 5    # CI: exit 3 on a regression\n"
	"  prowl diff base.pb.gz new.pb.gz -o diff.html        # diff flame graph\n"
	"  prowl diff --sample-type off_cpu --fail-on-increase 5 base.pb.gz new.pb.gz  # waiting time\n"
	"  prowl diff --dir /var/lib/prowl/profiles --service api --base -2h..-1h --new -1h.. -f json\n";

struct diff_opts {
	struct input_opts in;
	struct pprof_filter labels[CLI_MAX_LABELS];
	const char *output, *title, *base_range, *new_range, *focus;
	char *const *files;
	enum diff_format format;
	bool format_set, min_samples_set;
	uint64_t top, min_samples;
	struct diff_gate gate;
	regex_t focus_re;
	bool focus_compiled;
};

static int usage_error(const char *fmt, const char *arg)
{
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, arg);
	log_error("%s (see 'prowl diff --help')", msg);
	return EXIT_USAGE;
}

static int parse_number(const char *s, double max, double *ret)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < 0 || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_format(struct diff_opts *o, const char *s)
{
	if (strcmp(s, "text") == 0)
		o->format = DF_TEXT;
	else if (strcmp(s, "json") == 0)
		o->format = DF_JSON;
	else if (strcmp(s, "html") == 0)
		o->format = DF_HTML;
	else
		return usage_error("unknown format '%s': use text, json or html", s);
	o->format_set = true;
	return 0;
}

static int check_args(struct diff_opts *o, int nargs)
{
	size_t n;
	int r;

	if (o->in.dir) {
		if (nargs)
			return usage_error("give BASE NEW files or --dir, not both ('%s' after --dir)", o->files[0]);
		if (!o->base_range || !o->new_range)
			return usage_error("%s", "--dir needs --base FROM..TO and --new FROM..TO");
	} else {
		if (o->base_range || o->new_range || o->in.service)
			return usage_error("%s", "--base, --new and --service select windows of --dir DIR");
		if (nargs != 2)
			return usage_error("%s", nargs < 2 ? "give two profiles: BASE NEW" : "give exactly two profiles: BASE NEW");
	}
	if (o->focus) {
		char why[256], what[400];

		r = regex_re2_compile(o->focus, false, REG_NOSUB, &o->focus_re, why, sizeof(why));
		if (r == -ENOMEM)
			return log_error_errno(r, "cannot compile --focus"), EXIT_INPUT;
		if (r < 0) {
			snprintf(what, sizeof(what), "'%.100s': %s", o->focus, why);
			return usage_error("invalid --focus regular expression %s", what);
		}
		o->focus_compiled = true;
		o->gate.focus = &o->focus_re;
	}
	if (o->focus && !o->gate.on)
		return usage_error("%s", "--focus limits the gate: give --fail-on-increase PP too");
	if (!o->format_set && o->output) {
		n = strlen(o->output);
		if (n > 5 && strcmp(o->output + n - 5, ".json") == 0)
			o->format = DF_JSON;
		else if (n > 5 && strcmp(o->output + n - 5, ".html") == 0)
			o->format = DF_HTML;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct diff_opts *o)
{
	static const struct option longopts[] = {
		CLI_INPUT_LONGOPTS,
		{ "base", required_argument, NULL, 'b' },
		{ "new", required_argument, NULL, 'N' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "top", required_argument, NULL, 'n' },
		{ "title", required_argument, NULL, 't' },
		{ "fail-on-increase", required_argument, NULL, 'F' },
		{ "min-samples", required_argument, NULL, 'm' },
		{ "focus", required_argument, NULL, 'r' },
		{ "noise-sigmas", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	int c, r;

	o->top = 30;
	o->min_samples = 200;
	o->gate.sigmas = 3;
	cli_input_init(&o->in, o->labels);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:f:n:h", longopts, NULL)) != -1) {
		r = cli_input_option(c, optarg, &o->in, o->labels, "diff");
		if (r < 0)
			return 2;
		if (r)
			continue;
		switch (c) {
		case 'b':
			o->base_range = optarg;
			break;
		case 'N':
			o->new_range = optarg;
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'f':
			if ((r = parse_format(o, optarg)))
				return r;
			break;
		case 'n':
			if (parse_u64_range(optarg, 0, 1000000000, &o->top) < 0)
				return usage_error("invalid --top '%s': give a whole number (0 = all)", optarg);
			break;
		case 't':
			o->title = optarg;
			break;
		case 'F':
			if (parse_number(optarg, 100, &o->gate.max_pp) < 0)
				return usage_error("invalid --fail-on-increase '%s': give percentage points from 0 to 100, e.g. 5", optarg);
			o->gate.on = true;
			break;
		case 'm':
			if (parse_u64_range(optarg, 0, UINT64_C(1) << 60, &o->min_samples) < 0)
				return usage_error("invalid --min-samples '%s': give a whole number", optarg);
			o->min_samples_set = true;
			break;
		case 'r':
			o->focus = optarg;
			break;
		case 's':
			if (parse_number(optarg, 100, &o->gate.sigmas) < 0)
				return usage_error("invalid --noise-sigmas '%s': give a number from 0 to 100, e.g. 3", optarg);
			break;
		case 'h':
			fputs(diff_usage, stdout);
			return -1;
		default:
			if (optopt)
				return usage_error("option '%s' needs a value", argv[optind - 1]);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	o->files = argv + optind;
	return check_args(o, argc - optind);
}

/* Loads one side; returns 0 or an exit status. */
static int load_side(struct diff_opts *o, const char *what, const char *file, const char *range,
		     struct input_set *s, struct diff_side *side, char *src, size_t srclen)
{
	struct input_opts in = o->in;
	int r;

	if (range && time_range_parse(range, clock_wall_ns(), &in.from_ns, &in.to_ns) < 0) {
		char msg[200];

		snprintf(msg, sizeof(msg), "invalid --%s range '%%s': give FROM..TO, e.g. -2h..-1h, "
			 "09:00..10:00 or 2024-05-01T09:00:00Z..2024-05-01T10:00:00Z (FROM before TO)", what);
		return usage_error(msg, range);
	}
	r = range ? inputs_load_dir(s, &in) : inputs_load_files(s, (char *const[]){ (char *)file }, 1, &in);
	if (r < 0) {
		log_error("%s%s", range ? (strcmp(what, "base") ? "new side: " : "base side: ") : "",
			  s->err[0] ? s->err : strerror(-r));
		return EXIT_INPUT;
	}
	if (range)
		snprintf(src, srclen, "%s%s%s [%s]", o->in.dir, o->in.service ? "/" : "",
			 o->in.service ? o->in.service : "", range);
	else
		snprintf(src, srclen, "%s", file);
	*side = (struct diff_side){ .source = src, .samples = s->samples, .nfiles = s->nfiles,
				    .start_ns = s->start_ns, .end_ns = s->end_ns };
	return 0;
}

static int build_view(struct input_set *sides, struct view **ret)
{
	const struct profile *p[2] = { sides[0].prof, sides[1].prof };
	int r;

	r = view_new(view_profiles_multiprocess(p, 2), ret);
	if (!r)
		r = view_add_profile(*ret, p[0], VIEW_BASE);
	if (!r)
		r = view_add_profile(*ret, p[1], VIEW_NEW);
	if (!r)
		r = view_finish(*ret);
	return r;
}

static int render(const struct diff_opts *o, const struct view *v, const struct diff_row *rows, size_t n,
		  const struct diff_side *sd, char **buf, size_t *len)
{
	struct sbuf b = {};
	char lines[2][600], title[512];
	const char *lp[2] = { lines[0], lines[1] };
	int r;

	if (o->format == DF_HTML) {
		for (int i = 0; i < 2; i++) {
			char range[200];

			cli_time_range(sd[i].start_ns, sd[i].end_ns, range, sizeof(range));
			snprintf(lines[i], sizeof(lines[i]), "%s %s: %lu samples%s%s", i ? "new" : "base", sd[i].source,
				 (unsigned long)sd[i].samples, range[0] ? ", " : "", range);
		}
		snprintf(title, sizeof(title), "%s", o->title ? o->title : "prowl diff: base vs new");
		return html_write(v, &(struct html_meta){ .title = title, .lines = lp, .nlines = 2 }, buf, len);
	}
	r = o->format == DF_JSON ? diff_json(&b, v, rows, n, &sd[0], &sd[1], &o->gate)
				 : diff_text(&b, v, rows, n, (size_t)o->top, &sd[0], &sd[1]);
	if (!r)
		r = sbuf_take(&b, buf, len);
	sbuf_free(&b);
	return r;
}

int diff_main(int argc, char **argv)
{
	struct diff_opts o = {};
	struct input_set s[2] = {};
	struct diff_side sd[2];
	char src[2][4400];
	struct diff_row *rows = NULL;
	struct view *v = NULL;
	size_t n = 0, bad = 0;
	char *buf = NULL;
	size_t len = 0;
	int r, ret;

	ret = parse_args(argc, argv, &o);
	if (ret) {
		ret = ret < 0 ? 0 : ret;
		goto out;
	}
	ret = load_side(&o, "base", o.files[0], o.base_range, &s[0], &sd[0], src[0], sizeof(src[0]));
	if (!ret)
		ret = load_side(&o, "new", o.in.dir ? NULL : o.files[1], o.new_range, &s[1], &sd[1], src[1], sizeof(src[1]));
	if (ret)
		goto out;
	ret = EXIT_INPUT;
	/* The floor first: an empty side is the first thing a CI job meets, and it is
	 * too few samples for a verdict like any other count under the floor. */
	if ((o.gate.on || o.min_samples_set) && (s[0].samples < o.min_samples || s[1].samples < o.min_samples)) {
		log_error("too few samples for a verdict: base has %lu, new has %lu, --min-samples is %lu: "
			  "capture longer or at a higher frequency (-F)", (unsigned long)s[0].samples,
			  (unsigned long)s[1].samples, (unsigned long)o.min_samples);
		ret = EXIT_TOO_FEW;
		goto out;
	}
	for (int i = 0; i < 2; i++)
		if (!s[i].samples) {
			log_error("%s has no samples%s: nothing to compare", o.in.dir ? (i ? "new" : "base") : sd[i].source,
				  o.in.nfilters ? " that match --label" : "");
			goto out;
		}
	/* --sample-type read one type, by name, on both sides: the rest may differ. */
	if (!o.in.sample_type && strcmp(s[0].types, s[1].types) != 0) {
		char a[256], b[256];

		log_error("the two sides have different sample types (%s vs %s): compare profiles of one kind",
			  printable(s[0].types, a, sizeof(a)), printable(s[1].types, b, sizeof(b)));
		goto out;
	}
	r = build_view(s, &v);
	if (!r)
		r = diff_rows(v, o.gate.sigmas, &rows, &n);
	if (r < 0) {
		log_error_errno(r, "cannot compare the profiles");
		goto out;
	}
	bad = diff_judge(v, rows, n, &o.gate, stderr);
	r = render(&o, v, rows, n, sd, &buf, &len);
	if (r < 0) {
		log_error_errno(r, "cannot write the comparison");
		goto out;
	}
	r = cli_write(o.output, buf, len);
	if (r < 0) {
		log_error("cannot write '%s': %s: choose a writable path with -o", o.output ? o.output : "stdout",
			  strerror(-r));
		goto out;
	}
	ret = 0;
	if (o.gate.on && bad) {
		log_error("%zu function%s grew by more than %g pp beyond noise", bad, bad == 1 ? "" : "s", o.gate.max_pp);
		ret = EXIT_REGRESSION;
	} else if (o.gate.on) {
		log_info("no function grew by more than %g pp beyond noise (%g standard errors)", o.gate.max_pp,
			 o.gate.sigmas);
	}
out:
	if (o.focus_compiled)
		regfree(&o.focus_re);
	free(buf);
	free(rows);
	view_free(v);
	input_set_free(&s[0]);
	input_set_free(&s[1]);
	return ret;
}

/* cli.c: helpers for the report and diff commands: strict NAME=VALUE labels,
 * atomic output files, and one-line descriptions of what was read. */
#include "analyse/cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analyse/timespec.h"
#include "escape.h"
#include "export_file.h"
#include "log.h"

void cli_input_init(struct input_opts *in, struct pprof_filter *labels)
{
	in->filters = labels;
	in->from_ns = INT64_MIN;
	in->to_ns = INT64_MAX;
}

int cli_input_option(int c, char *arg, struct input_opts *in, struct pprof_filter *labels, const char *cmd)
{
	char *eq;

	switch (c) {
	case CLI_OPT_DIR:
		in->dir = arg;
		return 1;
	case CLI_OPT_SERVICE:
		in->service = arg;
		return 1;
	case CLI_OPT_SAMPLE_TYPE:
		in->sample_type = arg;
		return 1;
	case CLI_OPT_LABEL:
		eq = strchr(arg, '=');
		if (!eq || eq == arg || !eq[1]) {
			log_error("invalid label '%s': give NAME=VALUE, e.g. process_name=nginx (see 'prowl %s --help')",
				  arg, cmd);
			return -EINVAL;
		}
		if (in->nfilters >= CLI_MAX_LABELS) {
			log_error("too many --label options: at most %d (see 'prowl %s --help')", CLI_MAX_LABELS, cmd);
			return -EINVAL;
		}
		*eq = 0; /* the key ends where the value starts: argv strings are writable */
		labels[in->nfilters++] = (struct pprof_filter){ .key = arg, .value = eq + 1 };
		return 1;
	default:
		return 0;
	}
}

int cli_write(const char *path, const void *buf, size_t len)
{
	const char *p = buf;

	if (path && strcmp(path, "-") != 0)
		return export_file_write(path, buf, len);
	while (len) {
		ssize_t w = write(STDOUT_FILENO, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

void cli_time_range(int64_t start_ns, int64_t end_ns, char *buf, size_t n)
{
	char a[64], b[64];

	buf[0] = 0;
	if (!start_ns)
		return;
	time_format_local(start_ns, 0, a, sizeof(a));
	time_format_local(end_ns, 0, b, sizeof(b));
	/* The same day: the end without its date. */
	snprintf(buf, n, "%s to %s (%.1f s)", a, strncmp(a, b, 11) == 0 ? b + 11 : b,
		 (double)(end_ns - start_ns) / 1e9);
}

void cli_describe(const struct input_set *s, char *buf, size_t n)
{
	char range[200];
	int off;

	cli_time_range(s->start_ns, s->end_ns, range, sizeof(range));
	/* Any type but samples/count is in nanoseconds (prowl's cpu and off_cpu). */
	if (s->value_type[0] && strcmp(s->value_type, "samples") != 0) {
		char vt[64];

		off = snprintf(buf, n, "%.3f s of %s time", s->samples / 1e9, printable(s->value_type, vt, sizeof(vt)));
		if (s->nfiles > 1 && off > 0 && (size_t)off < n)
			off += snprintf(buf + off, n - off, " in %zu files", s->nfiles);
		if (range[0] && off > 0 && (size_t)off < n)
			snprintf(buf + off, n - off, ", %s", range);
		return;
	}
	off = snprintf(buf, n, "%" PRIu64 " samples", s->samples);
	if (s->nfiles > 1 && off > 0 && (size_t)off < n)
		off += snprintf(buf + off, n - off, " in %zu files", s->nfiles);
	if (range[0] && off > 0 && (size_t)off < n)
		off += snprintf(buf + off, n - off, ", %s", range);
	if (s->period > 0 && off > 0 && (size_t)off < n)
		snprintf(buf + off, n - off, ", one every %.1f ms (%.0f Hz)", s->period / 1e6, 1e9 / s->period);
}

void cli_labels(const struct input_set *s, char *buf, size_t n)
{
	size_t off = 0;

	buf[0] = 0;
	for (size_t i = 0; i < s->nlabels && off < n; i++) {
		int w = snprintf(buf + off, n - off, "%s%s", i ? " " : "", s->labels[i]);

		off += w > 0 ? (size_t)w : 0;
	}
}

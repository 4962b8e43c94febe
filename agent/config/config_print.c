/* config_print.c: prints the effective configuration for --check, as YAML that loads
 * back, each value with where it came from and secrets masked. */
#include "config_priv.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "escape.h"
#include "netaddr.h"
#include "labels/discover.h"
#include "parse.h"
#include "unwinder.h"
#include "url.h"


static void print_value(FILE *f, const struct agent_config *c, const struct key_def *k)
{
	const void *p = cfg_cfield(c, k);
	char buf[64];

	if (k->type != K_LABELS && k->type != K_RULES && k->type != K_RELABEL)
		fputc(' ', f);
	switch (k->type) {
	case K_BOOL:
		fputs(*(const bool *)p ? "true" : "false", f);
		break;
	case K_UINT:
		fprintf(f, "%" PRIu64, cfg_load_uint(p, k->size));
		break;
	case K_DURATION:
		cfg_format_duration(cfg_load_uint(p, k->size), buf, sizeof(buf));
		fputs(buf, f);
		break;
	case K_SIZE:
		cfg_format_size(cfg_load_uint(p, k->size), buf, sizeof(buf));
		fputs(buf, f);
		break;
	case K_ENUM:
		fputs(k->names[*(const int *)p], f);
		break;
	case K_SECRET:
		escape_json(f, *(char *const *)p ? "***" : "");
		break;
	case K_RULES:
		rules_config_print(&c->recording_rules, f);
		return;
	case K_RELABEL:
		relabel_config_print(&c->relabel, f);
		return;
	case K_LABELS:
		if (!c->nlabels)
			fputs(" {}", f);
		for (size_t i = 0; i < c->nlabels; i++) {
			fprintf(f, "\n  %s: ", c->labels[i].name);
			escape_json(f, c->labels[i].value);
		}
		return;
	default:
		escape_json(f, *(char *const *)p);
		break;
	}
}

static const char *section_comment(const struct agent_config *c, const char *path, size_t len)
{
	static const struct { const char *name; size_t off; } http[] = {
		{ "exporters.pyroscope", offsetof(struct agent_config, exporters.pyroscope.enabled) },
		{ "exporters.otlp", offsetof(struct agent_config, exporters.otlp.enabled) },
		{ "exporters.parca", offsetof(struct agent_config, exporters.parca.enabled) },
	};

	for (size_t i = 0; i < ARRAY_SIZE(http); i++)
		if (strlen(http[i].name) == len && strncmp(http[i].name, path, len) == 0)
			return *(const bool *)((const char *)c + http[i].off) ? "  # enabled" : "  # disabled: no url";
	if (len == 10 && strncmp(path, "kubernetes", 10) == 0)
		return c->kubernetes.on ? "  # on" : "  # off: no api_url, not in a cluster";
	return "";
}

void agent_config_print(const struct agent_config *c, FILE *f)
{
	const char *prev = "";

	fputs("# prowl agent: effective configuration (flags > environment > file > defaults)\n", f);
	if (c->config_path) {
		fputs("# config file: ", f);
		escape_json(f, c->config_path);
		fputc('\n', f);
	}
	for (size_t i = 0; i < cfg_nkeys; i++) {
		const char *path = cfg_keys[i].path, *leaf;
		size_t common = 0, depth = 0;

		/* Open the sections this key is in that the previous key was not. */
		for (size_t j = 0; path[j] && path[j] == prev[j]; j++)
			if (path[j] == '.')
				common = j + 1;
		for (size_t j = 0; j < common; j++)
			depth += path[j] == '.';
		for (const char *dot; (dot = strchr(path + common, '.')); common = (size_t)(dot - path) + 1) {
			fprintf(f, "%*s%.*s:%s\n", (int)depth * 2, "", (int)(dot - path - common), path + common,
				section_comment(c, path, (size_t)(dot - path)));
			depth++;
		}
		leaf = path + common;
		fprintf(f, "%*s%s:", (int)depth * 2, "", leaf);
		print_value(f, c, &cfg_keys[i]);
		fputc('\n', f);
		prev = path;
	}
}

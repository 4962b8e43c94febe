/* config.c: loads `prowl agent`'s configuration from defaults, a YAML file (libyaml),
 * PROWL_* variables and flags, in that order, validating every value against one key table. */
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
#include "unwind.h"
#include "url.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define MAX_FILE_BYTES   (1u << 20)
#define MAX_STRING_BYTES 4096
#define MAX_LABELS       64
#define MAX_LABEL_NAME   128
#define MAX_LABEL_VALUE  1024
#define MAX_KEY_PATH     128
#define MAX_DEPTH        64   /* nesting of mappings and lists in the file */
#define MAX_ANCHORS      256  /* anchors and aliases: libyaml looks each up in a list */

#define MS_PER_S ((uint64_t)1000)
#define MS_PER_M (60 * MS_PER_S)
#define MS_PER_H (60 * MS_PER_M)
#define KIB      ((uint64_t)1024)
#define MIB      (1024 * KIB)
#define GIB      (1024 * MIB)

enum key_type {
	K_BOOL,
	K_UINT,
	K_DURATION, /* stored in ms */
	K_SIZE,     /* stored in bytes */
	K_ENUM,     /* stored in an int-sized enum */
	K_STRING,
	K_SECRET,   /* a string never printed */
	K_URL,
	K_PATH,
	K_FILE,     /* a path that must be readable when its exporter is enabled */
	K_ADDRESS,
	K_LABELS,
	K_RULES,    /* recording_rules: a list, from the file only */
	K_RELABEL,  /* relabel_configs: a list, from the file only */
};

struct key_def {
	const char *path;         /* dotted, as in the file: "exporters.pyroscope.timeout" */
	enum key_type type;
	size_t off, size;         /* of the field in struct agent_config */
	const char *def;          /* default, parsed like any other value */
	uint64_t min, max;        /* K_UINT: value; K_DURATION: ms; K_SIZE: bytes */
	const char *what;         /* K_UINT, K_ENUM: noun for messages */
	const char *unit;         /* K_UINT: e.g. "Hz" */
	const char *const *names; /* K_ENUM: NULL-terminated, index = value */
	bool zero_ok;             /* K_DURATION, K_SIZE: "0" means no limit */
};

static const char *const unwind_names[] = { "fp", "dwarf", NULL };
static const char *const level_names[] = {
	[LOG_LVL_ERROR] = "error", [LOG_LVL_WARN] = "warn", [LOG_LVL_INFO] = "info", [LOG_LVL_DEBUG] = "debug", NULL
};
static const char *const format_names[] = {
	[LOG_FMT_PLAIN] = "plain", [LOG_FMT_LOGFMT] = "logfmt", [LOG_FMT_JSON] = "json", NULL
};
static const char *const api_names[] = { [PYRO_API_INGEST] = "ingest", [PYRO_API_PUSH] = "push", NULL };
static const char *const kube_names[] = { [KUBE_AUTO] = "auto", [KUBE_ON] = "true", [KUBE_OFF] = "false", NULL };

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

#define FIELD(m) offsetof(struct agent_config, m), sizeof(((struct agent_config *)0)->m)

#define HTTP_URL(x) { "exporters." #x ".url", K_URL, FIELD(exporters.x.target.url), "" }
#define HTTP_OPTIONS(x)                                                                                \
	{ "exporters." #x ".basic_user", K_STRING, FIELD(exporters.x.target.basic_user), "" },         \
	{ "exporters." #x ".basic_password", K_SECRET, FIELD(exporters.x.target.basic_password), "" }, \
	{ "exporters." #x ".bearer_token", K_SECRET, FIELD(exporters.x.target.bearer_token), "" },     \
	{ "exporters." #x ".tenant", K_STRING, FIELD(exporters.x.target.tenant), "" },                 \
	{ "exporters." #x ".ca_file", K_FILE, FIELD(exporters.x.target.ca_file), "" },                 \
	{ "exporters." #x ".cert_file", K_FILE, FIELD(exporters.x.target.cert_file), "" },             \
	{ "exporters." #x ".key_file", K_FILE, FIELD(exporters.x.target.key_file), "" },               \
	{ "exporters." #x ".insecure_skip_verify", K_BOOL,                                             \
	  FIELD(exporters.x.target.insecure_skip_verify), "false" },                                   \
	{ "exporters." #x ".timeout", K_DURATION, FIELD(exporters.x.target.timeout_ms), "10s",         \
	  100, 10 * MS_PER_M },                                                                        \
	{ "exporters." #x ".buffer_size", K_SIZE, FIELD(exporters.x.target.buffer_bytes), "64MiB",     \
	  MIB, 16 * GIB },                                                                             \
	{ "exporters." #x ".max_retries", K_UINT, FIELD(exporters.x.target.max_retries), "0",          \
	  0, 1000000, "retry count" }

/* The schema. Its order is the order of --check's output. */
static const struct key_def keys[] = {
	{ "frequency", K_UINT, FIELD(frequency), "19", 1, 1000, "frequency", "Hz" },
	{ "interval", K_DURATION, FIELD(interval_ms), "10s", MS_PER_S, MS_PER_H },
	{ "idle", K_BOOL, FIELD(idle), "false" },
	{ "per_thread", K_BOOL, FIELD(per_thread), "false" },
	{ "unwind", K_ENUM, FIELD(unwind), "dwarf", .what = "unwind mode", .names = unwind_names },
	{ "hostname", K_STRING, FIELD(hostname), "" },
	{ "labels", K_LABELS, 0, 0, "" },
	{ "state_dir", K_PATH, FIELD(state_dir), "/var/lib/prowl" },
	{ "shutdown_timeout", K_DURATION, FIELD(shutdown_timeout_ms), "10s", 100, 10 * MS_PER_M },
	{ "spool.max_size", K_SIZE, FIELD(spool.max_bytes), "64MiB", MIB, 16 * GIB },
	{ "spool.max_age", K_DURATION, FIELD(spool.max_age_ms), "1h", MS_PER_M, 168 * MS_PER_H },
	{ "log.level", K_ENUM, FIELD(log.level), "info", .what = "log level", .names = level_names },
	{ "log.format", K_ENUM, FIELD(log.format), "logfmt", .what = "log format", .names = format_names },
	{ "metrics.enabled", K_BOOL, FIELD(metrics.enabled), "true" },
	{ "metrics.address", K_ADDRESS, FIELD(metrics.address), "127.0.0.1:9464" },
	{ "limits.max_series", K_UINT, FIELD(limits.max_series), "1000", 1, 1000000, "series limit" },
	{ "limits.recording_series", K_UINT, FIELD(limits.recording_series), "1000", 1, 1000000, "series limit" },
	{ "limits.max_stacks_per_window", K_UINT, FIELD(limits.max_stacks_per_window), "200000",
	  1000, 100000000, "stack limit" },
	{ "limits.symbol_cache_entries", K_UINT, FIELD(limits.symbol_cache_entries), "100000",
	  1000, 100000000, "cache size" },
	{ "limits.max_processes", K_UINT, FIELD(limits.max_processes), "32768", 16, 4194304,
	  "process limit" },
	{ "limits.unwind_table_rows", K_UINT, FIELD(limits.unwind_table_rows), "2097152",
	  UNWIND_ROWS_MIN, UNWIND_ROWS_MAX, "row limit" },
	{ "limits.unwind_mappings", K_UINT, FIELD(limits.unwind_mappings), "65536",
	  UNWIND_MAPS_MIN, UNWIND_MAPS_MAX, "mapping limit" },
	{ "limits.unwind_processes", K_UINT, FIELD(limits.unwind_processes), "16384",
	  UNWIND_PROCS_MIN, UNWIND_PROCS_MAX, "process limit" },
	{ "limits.module_memory", K_SIZE, FIELD(limits.module_memory_bytes), "16MiB", MIB, 64 * GIB },
	{ "limits.debug_inflate_size", K_SIZE, FIELD(limits.debug_inflate_bytes), "512MiB", MIB, 1024 * GIB,
	  .zero_ok = true },
	{ "kubernetes.enabled", K_ENUM, FIELD(kubernetes.enabled), "auto", .what = "setting", .names = kube_names },
	{ "kubernetes.api_url", K_URL, FIELD(kubernetes.api_url), "" },
	{ "kubernetes.token_file", K_PATH, FIELD(kubernetes.token_file), SA_DIR "/token" },
	{ "kubernetes.ca_file", K_PATH, FIELD(kubernetes.ca_file), SA_DIR "/ca.crt" },
	{ "kubernetes.node_name", K_STRING, FIELD(kubernetes.node_name), "" },
	{ "exporters.dir.enabled", K_BOOL, FIELD(exporters.dir.enabled), "true" },
	{ "exporters.dir.path", K_PATH, FIELD(exporters.dir.path), "" },
	{ "exporters.dir.max_age", K_DURATION, FIELD(exporters.dir.max_age_ms), "24h",
	  MS_PER_M, 87600 * MS_PER_H, .zero_ok = true },
	{ "exporters.dir.max_size", K_SIZE, FIELD(exporters.dir.max_size_bytes), "1GiB", MIB, 1024 * GIB,
	  .zero_ok = true },
	HTTP_URL(pyroscope),
	{ "exporters.pyroscope.api", K_ENUM, FIELD(exporters.pyroscope_api), "ingest", .what = "API",
	  .names = api_names },
	HTTP_OPTIONS(pyroscope),
	HTTP_URL(otlp),
	HTTP_OPTIONS(otlp),
	HTTP_URL(parca),
	HTTP_OPTIONS(parca),
	{ "relabel_configs", K_RELABEL, 0, 0, "" },
	{ "recording_rules", K_RULES, 0, 0, "" },
};

#define NKEYS ARRAY_SIZE(keys)

/* Keys that were replaced: a file that still has one is told the new name. */
static const struct {
	const char *old, *now;
} renamed[] = {
	{ "limits.shutdown_flush", "shutdown_timeout" },
};

enum origin_kind { ORIGIN_DEFAULT = 0, ORIGIN_FILE, ORIGIN_ENV, ORIGIN_FLAG };

/* Where a value came from, for messages. Strings point into argv, envp or the YAML
 * document, which outlive the load. */
struct origin {
	enum origin_kind kind;
	unsigned long line;  /* ORIGIN_FILE */
	const char *env;     /* ORIGIN_ENV: the whole "NAME=value" entry */
	const char *flag;    /* ORIGIN_FLAG: "--frequency" */
};

struct load {
	struct agent_config *cfg;
	const char *path;               /* the config file, for messages */
	struct origin origins[NKEYS];   /* of each key's current value */
	bool secret_in_file;
	char **envp;
};

/* A flag's setting, applied after the file and the environment. */
struct pending {
	const struct key_def *key;
	const char *value;
	const char *flag;
};

const char agent_config_usage[] =
	"Usage: prowl agent [OPTIONS]\n"
	"\n"
	"Profile the whole host continuously and export a profile every interval to a local\n"
	"directory, Pyroscope, an OTLP/HTTP endpoint and/or Parca.\n"
	"\n"
	"Settings come from these options, PROWL_* environment variables and a YAML file, in\n"
	"that order of precedence (see docs/configuration.md). Secrets (basic_password,\n"
	"bearer_token) are not options, so that they never show in ps: set them in the file\n"
	"or as PROWL_PYROSCOPE_BASIC_PASSWORD, PROWL_OTLP_BEARER_TOKEN, ...\n"
	"\n"
	"Series carry the process's container id, and in Kubernetes its namespace, pod,\n"
	"container and node (on by itself in a pod; kubernetes.* in the file). The file's\n"
	"relabel_configs rewrite them and can leave processes out (see docs/agent.md).\n"
	"\n"
	"Options:\n"
	"      --config FILE          YAML configuration file (env PROWL_CONFIG)\n"
	"      --check                validate, print the effective configuration with secrets\n"
	"                             masked, and exit\n"
	"  -F, --frequency HZ         samples per second per CPU, 1-1000 (default 19)\n"
	"      --interval TIME        export window, 1s-1h (default 10s)\n"
	"      --label NAME=VALUE     static label on every series; repeatable\n"
	"      --hostname NAME        host_name label (default: the system's host name)\n"
	"      --state-dir DIR        state directory (default /var/lib/prowl)\n"
	"      --dir PATH             write profiles to PATH (enables the directory exporter)\n"
	"      --pyroscope-url URL    export to Pyroscope at URL\n"
	"      --otlp-url URL         export to an OTLP/HTTP endpoint at URL\n"
	"      --parca-url URL        export to Parca at URL\n"
	"      --metrics-address ADDR serve Prometheus metrics on host:port (default\n"
	"                             127.0.0.1:9464; :PORT is every interface, IPv6 and IPv4)\n"
	"      --no-metrics           no metrics endpoint\n"
	"      --log-level LEVEL      error, warn, info or debug (default info)\n"
	"      --log-format FMT       logfmt, json or plain (default logfmt)\n"
	"      --unwind MODE          fp (frame pointers) or dwarf (default dwarf)\n"
	"      --per-thread           label samples with tid and thread name\n"
	"      --idle                 keep samples of idle CPUs\n"
	"  -v, --verbose              same as --log-level debug\n"
	"  -h, --help                 this help\n"
	"\n"
	"Examples:\n"
	"  sudo prowl agent --dir /tmp/profiles -F 49              # local files only\n"
	"  sudo prowl agent --pyroscope-url http://127.0.0.1:4040 --label env=prod\n"
	"  sudo PROWL_OTLP_BEARER_TOKEN=... prowl agent --otlp-url https://otlp.example.com\n"
	"  sudo prowl agent --config /etc/prowl/agent.yaml\n"
	"  prowl agent --config /etc/prowl/agent.yaml --check      # validate, show settings\n"
	"  sudo PROWL_KUBERNETES_API_URL=http://127.0.0.1:8001 NODE_NAME=$(hostname) \\\n"
	"      prowl agent --dir /tmp/profiles                     # pod labels via kubectl proxy\n";

static const struct key_def *find_key(const char *path)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].path, path) == 0)
			return &keys[i];
	return NULL;
}

/* Whether path names a mapping of the schema ("log", "exporters.otlp"). */
static bool is_section(const char *path)
{
	size_t n = strlen(path);

	for (size_t i = 0; i < NKEYS; i++)
		if (strncmp(keys[i].path, path, n) == 0 && keys[i].path[n] == '.')
			return true;
	return false;
}

/* PROWL_ + the path without "exporters.", upper-cased, dots as underscores. */
static void env_name(const struct key_def *k, char *buf, size_t size)
{
	const char *p = k->path;
	size_t n;

	if (strncmp(p, "exporters.", 10) == 0)
		p += 10;
	n = (size_t)snprintf(buf, size, "PROWL_");
	for (; *p && n + 1 < size; p++, n++)
		buf[n] = *p == '.' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
	buf[n] = 0;
}

static void *field(struct agent_config *c, const struct key_def *k)
{
	return (char *)c + k->off;
}

static const void *cfield(const struct agent_config *c, const struct key_def *k)
{
	return (const char *)c + k->off;
}

static uint64_t load_uint(const void *p, size_t size)
{
	return size == sizeof(uint64_t) ? *(const uint64_t *)p : *(const uint32_t *)p;
}

static void store_uint(void *p, size_t size, uint64_t v)
{
	if (size == sizeof(uint64_t))
		*(uint64_t *)p = v;
	else
		*(uint32_t *)p = (uint32_t)v;
}

_Static_assert(sizeof(enum unwind_mode) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum log_level) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum log_format) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum pyroscope_api) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum kube_enabled) == sizeof(int), "enums are stored as int");

/* Logs one line "<where>: <message>" and returns -EINVAL. key may be NULL. */
static int __attribute__((format(printf, 5, 6)))
cfg_error(const struct load *l, const struct origin *o, const char *key, bool secret, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	switch (o->kind) {
	case ORIGIN_FILE:
		if (key)
			log_error("%s:%lu: %s: %s", l->path, o->line, key, msg);
		else
			log_error("%s:%lu: %s", l->path, o->line, msg);
		break;
	case ORIGIN_ENV:
		if (secret)
			log_error("%.*s=***: %s", (int)strcspn(o->env, "="), o->env, msg);
		else
			log_error("%s: %s", o->env, msg);
		break;
	case ORIGIN_FLAG:
		log_error("option %s: %s (see 'prowl agent --help')", o->flag, msg);
		break;
	default:
		log_error("%s: %s", key ? key : "configuration", msg);
		break;
	}
	return -EINVAL;
}

static const char *enum_choices(const char *const *names, char *buf, size_t size)
{
	size_t n = 0, count = 0;

	while (names[count])
		count++;
	buf[0] = 0;
	for (size_t i = 0; i < count && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s", i == 0 ? "" : i + 1 == count ? " or " : ", ",
				      names[i]);
	return buf;
}

/* "1h30m", "10s", "500ms": the shortest text parse_duration_ns reads back. */
static void format_duration(uint64_t ms, char *buf, size_t size)
{
	static const struct { uint64_t ms; const char *unit; } units[] = {
		{ MS_PER_H, "h" }, { MS_PER_M, "m" }, { MS_PER_S, "s" }, { 1, "ms" },
	};
	size_t n = 0;

	buf[0] = 0;
	if (ms == 0) {
		snprintf(buf, size, "0");
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(units) && n < size; i++) {
		if (ms >= units[i].ms) {
			n += (size_t)snprintf(buf + n, size - n, "%" PRIu64 "%s", ms / units[i].ms, units[i].unit);
			ms %= units[i].ms;
		}
	}
}

static void format_size(uint64_t v, char *buf, size_t size)
{
	if (v && v % GIB == 0)
		snprintf(buf, size, "%" PRIu64 "GiB", v / GIB);
	else if (v && v % MIB == 0)
		snprintf(buf, size, "%" PRIu64 "MiB", v / MIB);
	else if (v && v % KIB == 0)
		snprintf(buf, size, "%" PRIu64 "KiB", v / KIB);
	else
		snprintf(buf, size, "%" PRIu64, v);
}

static bool parse_bool(const char *s, bool *ret)
{
	static const char *const yes[] = { "true", "yes", "on", "1" }, *const no[] = { "false", "no", "off", "0" };

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*ret = true;
			return true;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*ret = false;
			return true;
		}
	}
	return false;
}

/* Adds one static label, or replaces the value of one of that name. */
static int label_set(struct load *l, const struct origin *o, const char *name, const char *value)
{
	struct agent_config *c = l->cfg;
	char key[MAX_KEY_PATH];
	char *n = NULL, *v = NULL;
	size_t i;

	snprintf(key, sizeof(key), "labels.%s", name);
	if (!*name)
		return cfg_error(l, o, "labels", false, "empty label name: use NAME=VALUE");
	if (strlen(name) > MAX_LABEL_NAME || !valid_label_name(name))
		return cfg_error(l, o, key, false,
				 "invalid label name '%s': use letters, digits and '_', not starting with a digit",
				 name);
	if (strcmp(name, "service_name") == 0 || strcmp(name, "host_name") == 0 || strncmp(name, "__", 2) == 0)
		return cfg_error(l, o, key, false,
				 "label name '%s' is reserved (prowl sets service_name and host_name; "
				 "names starting with '__' are internal): choose another name", name);
	if (!*value)
		return cfg_error(l, o, key, false, "label '%s' has an empty value", name);
	if (strlen(value) > MAX_LABEL_VALUE || has_control(value))
		return cfg_error(l, o, key, false,
				 "invalid value for label '%s': at most %d bytes, no control characters",
				 name, MAX_LABEL_VALUE);
	for (i = 0; i < c->nlabels; i++)
		if (strcmp(c->labels[i].name, name) == 0)
			break;
	if (i == c->nlabels && c->nlabels == MAX_LABELS)
		return cfg_error(l, o, key, false, "too many labels: at most %d", MAX_LABELS);
	v = strdup(value);
	if (!v)
		goto oom;
	if (i < c->nlabels) {
		free(c->labels[i].value);
		c->labels[i].value = v;
		return 0;
	}
	n = strdup(name);
	if (!n)
		goto oom;
	{
		struct config_label *nl = realloc(c->labels, (c->nlabels + 1) * sizeof(*nl));

		if (!nl)
			goto oom;
		c->labels = nl;
	}
	c->labels[c->nlabels++] = (struct config_label){ n, v };
	return 0;
oom:
	free(n);
	free(v);
	return log_error_errno(-ENOMEM, "cannot load the configuration");
}

/* "NAME=VALUE"; list: several separated by commas (PROWL_LABELS). */
static int labels_parse(struct load *l, const struct origin *o, const char *s, bool list)
{
	char *copy = strdup(s), *p, *save = NULL;
	int r = 0;

	if (!copy)
		return log_error_errno(-ENOMEM, "cannot load the configuration");
	for (p = list ? strtok_r(copy, ",", &save) : copy; p; p = list ? strtok_r(NULL, ",", &save) : NULL) {
		char *eq, *end;

		p += strspn(p, " \t");
		end = p + strlen(p);
		while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = 0;
		if (!*p && list)
			continue;
		eq = strchr(p, '=');
		if (!eq) {
			r = cfg_error(l, o, "labels", false, "invalid label '%s': use NAME=VALUE%s", p,
				      list ? "[,NAME=VALUE...]" : "");
			break;
		}
		*eq = 0;
		r = label_set(l, o, p, eq + 1);
		if (r < 0)
			break;
	}
	free(copy);
	return r;
}

/* Parses s as key k's value and stores it, recording where it came from. */
static int set_value(struct load *l, const struct key_def *k, const char *s, const struct origin *o)
{
	void *p = field(l->cfg, k);
	char choices[128], lo[32], hi[32];
	uint64_t v;
	bool b;
	int r;

	switch (k->type) {
	case K_BOOL:
		if (!parse_bool(s, &b))
			return cfg_error(l, o, k->path, false, "invalid boolean '%s': use true or false", s);
		*(bool *)p = b;
		break;
	case K_UINT:
		if (parse_u64_range(s, k->min, k->max, &v) < 0)
			return cfg_error(l, o, k->path, false,
					 "invalid %s '%s': give a whole number%s%s from %" PRIu64 " to %" PRIu64,
					 k->what, s, k->unit ? " of " : "", k->unit ? k->unit : "", k->min, k->max);
		store_uint(p, k->size, v);
		break;
	case K_DURATION:
		if (k->zero_ok && strcmp(s, "0") == 0) {
			store_uint(p, k->size, 0);
			break;
		}
		r = parse_duration_ns(s, &v);
		format_duration(k->min, lo, sizeof(lo));
		format_duration(k->max, hi, sizeof(hi));
		if (r == -EINVAL)
			return cfg_error(l, o, k->path, false,
					 "invalid duration '%s': use e.g. 10s, 500ms, 2m or 1h30m", s);
		v /= 1000000;
		if (r < 0 || v < k->min || v > k->max)
			return cfg_error(l, o, k->path, false, "duration '%s' out of range: use %s to %s%s", s, lo,
					 hi, k->zero_ok ? ", or 0 for no limit" : "");
		store_uint(p, k->size, v);
		break;
	case K_SIZE:
		r = parse_size_bytes(s, &v);
		format_size(k->min, lo, sizeof(lo));
		format_size(k->max, hi, sizeof(hi));
		if (r == -EINVAL)
			return cfg_error(l, o, k->path, false, "invalid size '%s': use e.g. 512KiB, 64MiB or 1GiB", s);
		if (r < 0 || (v < k->min && !(k->zero_ok && v == 0)) || v > k->max)
			return cfg_error(l, o, k->path, false, "size '%s' out of range: use %s to %s%s", s, lo, hi,
					 k->zero_ok ? ", or 0 for no limit" : "");
		store_uint(p, k->size, v);
		break;
	case K_ENUM:
		for (v = 0; k->names[v]; v++)
			if (strcmp(k->names[v], s) == 0)
				break;
		if (!k->names[v])
			return cfg_error(l, o, k->path, false, "invalid %s '%s': use %s", k->what, s,
					 enum_choices(k->names, choices, sizeof(choices)));
		*(int *)p = (int)v;
		break;
	case K_LABELS:
		return labels_parse(l, o, s, true);
	case K_RULES:
	case K_RELABEL:
		if (o->kind != ORIGIN_DEFAULT)
			return cfg_error(l, o, k->path, false, "%s can be set only in the config file",
					 k->type == K_RULES ? "recording rules" : "relabel rules");
		return 0;
	default: { /* the string types */
		char **sp = p, *copy = NULL;
		size_t len = strlen(s);
		bool secret = k->type == K_SECRET;

		if (len > MAX_STRING_BYTES || has_control(s))
			return cfg_error(l, o, k->path, secret,
					 "invalid value: at most %d bytes, without control characters or newlines",
					 MAX_STRING_BYTES);
		if (k->type == K_URL && len) {
			const char *why;
			int r = url_check_base(s, &why);

			if (r == -ENOMEM)
				return log_error_errno(r, "cannot load the configuration");
			/* A URL with credentials in it is not echoed back. */
			if (r < 0 && strchr(s, '@'))
				return cfg_error(l, o, k->path, true, "invalid URL: %s", why);
			if (r < 0)
				return cfg_error(l, o, k->path, false, "invalid URL '%s': %s", s, why);
			while (len > 0 && s[len - 1] == '/')
				len--;
		}
		if (k->type == K_ADDRESS) {
			struct netaddr na;
			const char *why;

			if (netaddr_parse(s, &na, &why) < 0)
				return cfg_error(l, o, k->path, false, "invalid address '%s': %s", s, why);
		}
		if (k == find_key("state_dir") && !len)
			return cfg_error(l, o, k->path, false, "the state directory must not be empty");
		if (len) {
			copy = strndup(s, len);
			if (!copy)
				return log_error_errno(-ENOMEM, "cannot load the configuration");
		}
		free(*sp);
		*sp = copy;
		if (secret && o->kind == ORIGIN_FILE && len)
			l->secret_in_file = true;
		break;
	}
	}
	l->origins[k - keys] = *o;
	return 0;
}

static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE: return "a mapping";
	case YAML_SEQUENCE_NODE: return "a list";
	default: return "a single value";
	}
}

static const char *type_noun(const struct key_def *k)
{
	switch (k->type) {
	case K_BOOL: return "true or false";
	case K_UINT: return "a number";
	case K_DURATION: return "a duration";
	case K_SIZE: return "a size";
	case K_ENUM: return "a word";
	case K_URL: return "a URL";
	case K_PATH: case K_FILE: return "a path";
	case K_ADDRESS: return "host:port";
	case K_LABELS: return "a mapping of name: value";
	case K_RULES: case K_RELABEL: return "a list of rules";
	default: return "a string";
	}
}

/* A plain ~, null or empty value. */
static bool is_null(const yaml_node_t *n)
{
	const char *s = (const char *)n->data.scalar.value;

	return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
		strcmp(s, "NULL") == 0);
}

static struct origin file_origin(const yaml_node_t *n)
{
	return (struct origin){ .kind = ORIGIN_FILE, .line = (unsigned long)n->start_mark.line + 1 };
}

/* The names a mapping at prefix may hold, for the unknown-key message. */
static void known_keys(const char *prefix, char *buf, size_t size)
{
	size_t plen = strlen(prefix), n = 0;

	buf[0] = 0;
	for (size_t i = 0; i < NKEYS && n < size; i++) {
		const char *name = keys[i].path;
		size_t len;
		bool seen = false;

		if (plen) {
			if (strncmp(name, prefix, plen) != 0 || name[plen] != '.')
				continue;
			name += plen + 1;
		}
		len = strcspn(name, ".");
		for (size_t j = 0; j < i && !seen; j++) {
			const char *other = keys[j].path;

			if (plen) {
				if (strncmp(other, prefix, plen) != 0 || other[plen] != '.')
					continue;
				other += plen + 1;
			}
			seen = strncmp(other, name, len) == 0 && (other[len] == '.' || !other[len]);
		}
		if (!seen)
			n += (size_t)snprintf(buf + n, size - n, "%s%.*s", n ? ", " : "", (int)len, name);
	}
}

static int walk_labels(struct load *l, yaml_document_t *d, yaml_node_t *map)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(d, p->key), *vn = yaml_document_get_node(d, p->value);
		struct origin o = file_origin(kn);
		const char *name;
		int r;

		if (kn->type != YAML_SCALAR_NODE)
			return cfg_error(l, &o, "labels", false, "a label name must be a single word, not %s",
					 node_kind(kn));
		name = (const char *)kn->data.scalar.value;
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *prev = yaml_document_get_node(d, q->key);

			if (prev->type == YAML_SCALAR_NODE && strcmp((const char *)prev->data.scalar.value, name) == 0)
				return cfg_error(l, &o, "labels", false, "duplicate label '%s' (first at line %lu)",
						 name, (unsigned long)prev->start_mark.line + 1);
		}
		if (vn->type != YAML_SCALAR_NODE) {
			char key[MAX_KEY_PATH];

			snprintf(key, sizeof(key), "labels.%s", name);
			o = file_origin(vn);
			return cfg_error(l, &o, key, false, "expected a string, got %s", node_kind(vn));
		}
		r = label_set(l, &o, name, is_null(vn) ? "" : (const char *)vn->data.scalar.value);
		if (r < 0)
			return r;
	}
	return 0;
}

static int walk_mapping(struct load *l, yaml_document_t *d, yaml_node_t *map, const char *prefix)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(d, p->key), *vn = yaml_document_get_node(d, p->value);
		struct origin o = file_origin(kn);
		const struct key_def *k = NULL;
		char path[MAX_KEY_PATH], known[512];
		const char *name;
		int r, len;

		if (kn->type != YAML_SCALAR_NODE)
			return cfg_error(l, &o, NULL, false, "a key must be a single word, not %s", node_kind(kn));
		name = (const char *)kn->data.scalar.value;
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *prev = yaml_document_get_node(d, q->key);

			if (prev->type == YAML_SCALAR_NODE && strcmp((const char *)prev->data.scalar.value, name) == 0)
				return cfg_error(l, &o, NULL, false, "duplicate key '%s%s%s' (first at line %lu)",
						 prefix, *prefix ? "." : "", name,
						 (unsigned long)prev->start_mark.line + 1);
		}
		len = snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", name);
		if (len > 0 && (size_t)len < sizeof(path) && !strchr(name, '.') && *name)
			k = find_key(path);
		if (k && k->type == K_RULES) {
			r = rules_config_parse(l->path, d, vn, &l->cfg->recording_rules);
		} else if (k && k->type == K_RELABEL) {
			r = relabel_config_parse(l->path, d, vn, &l->cfg->relabel);
		} else if (k && k->type == K_LABELS) {
			if (is_null(vn))
				continue;
			if (vn->type != YAML_MAPPING_NODE) {
				o = file_origin(vn);
				return cfg_error(l, &o, path, false, "expected %s, got %s", type_noun(k), node_kind(vn));
			}
			r = walk_labels(l, d, vn);
		} else if (k) {
			o = file_origin(vn);
			if (vn->type != YAML_SCALAR_NODE)
				return cfg_error(l, &o, path, false, "expected %s, got %s", type_noun(k), node_kind(vn));
			r = set_value(l, k, is_null(vn) ? "" : (const char *)vn->data.scalar.value, &o);
		} else if (len > 0 && (size_t)len < sizeof(path) && *name && !strchr(name, '.') && is_section(path)) {
			if (is_null(vn))
				continue;
			if (vn->type != YAML_MAPPING_NODE) {
				o = file_origin(vn);
				return cfg_error(l, &o, path, false, "expected a mapping of settings, got %s",
						 node_kind(vn));
			}
			r = walk_mapping(l, d, vn, path);
		} else {
			for (size_t i = 0; i < ARRAY_SIZE(renamed); i++)
				if (strcmp(renamed[i].old, path) == 0)
					return cfg_error(l, &o, NULL, false, "'%s' was replaced by '%s' (top level): "
							 "rename it", path, renamed[i].now);
			known_keys(prefix, known, sizeof(known));
			return cfg_error(l, &o, NULL, false, "unknown key '%s%s%s' (known: %s)", prefix,
					 *prefix ? "." : "", name, known);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static unsigned long line_of_offset(const char *buf, size_t len, size_t off)
{
	unsigned long line = 1;

	for (size_t i = 0; i < off && i < len; i++)
		line += buf[i] == '\n';
	return line;
}

static int yaml_error(const struct load *l, yaml_parser_t *p, const char *buf, size_t len)
{
	unsigned long line = (unsigned long)p->problem_mark.line + 1;

	if (p->error == YAML_MEMORY_ERROR)
		return log_error_errno(-ENOMEM, "%s: cannot parse", l->path);
	if (p->error == YAML_READER_ERROR)
		line = line_of_offset(buf, len, p->problem_offset);
	/* A problem found at the end of the file belongs to its last line. */
	else if (p->problem_mark.index >= len && len && buf[len - 1] == '\n' && line > 1)
		line--;
	if (p->context)
		log_error("%s:%lu: invalid YAML: %s (%s started at line %lu)", l->path, line,
			  p->problem ? p->problem : "syntax error", p->context,
			  (unsigned long)p->context_mark.line + 1);
	else
		log_error("%s:%lu: invalid YAML: %s", l->path, line, p->problem ? p->problem : "syntax error");
	return -EINVAL;
}

static int read_file(const char *path, char **ret_buf, size_t *ret_len, mode_t *ret_mode)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, r = 0;

	/* O_NONBLOCK: a FIFO named as the config file must not hang the agent. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto out;
	}
	if (st.st_size > MAX_FILE_BYTES) {
		r = -EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = 0;
	*ret_buf = buf;
	*ret_len = len;
	*ret_mode = st.st_mode;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return r;
}

/* Walks the file's events once before libyaml builds the document, and refuses a
 * file nested deeper than MAX_DEPTH or with more than MAX_ANCHORS anchors and
 * aliases: building such a document costs time that grows with their square (5 s
 * for 40,000 levels). Syntax errors are left to the load, which meets them as soon. */
static int check_shape(const struct load *l, const char *buf, size_t len)
{
	yaml_parser_t p;
	yaml_event_t ev;
	unsigned int depth = 0, anchors = 0;
	int r = 0;

	if (!yaml_parser_initialize(&p))
		return log_error_errno(-ENOMEM, "cannot load the configuration");
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	while (r == 0 && yaml_parser_parse(&p, &ev)) {
		yaml_event_type_t type = ev.type;
		unsigned long line = (unsigned long)ev.start_mark.line + 1;

		if (type == YAML_MAPPING_START_EVENT || type == YAML_SEQUENCE_START_EVENT) {
			anchors += (type == YAML_MAPPING_START_EVENT ? ev.data.mapping_start.anchor
								      : ev.data.sequence_start.anchor) != NULL;
			if (++depth > MAX_DEPTH) {
				log_error("%s:%lu: nested more than %d levels deep: a configuration needs at most 4",
					  l->path, line, MAX_DEPTH);
				r = -EINVAL;
			}
		} else if (type == YAML_MAPPING_END_EVENT || type == YAML_SEQUENCE_END_EVENT) {
			depth--;
		} else if (type == YAML_ALIAS_EVENT || (type == YAML_SCALAR_EVENT && ev.data.scalar.anchor)) {
			anchors++;
		}
		if (r == 0 && anchors > MAX_ANCHORS) {
			log_error("%s:%lu: more than %d anchors and aliases (&name, *name): write the values out",
				  l->path, line, MAX_ANCHORS);
			r = -EINVAL;
		}
		yaml_event_delete(&ev);
		if (type == YAML_STREAM_END_EVENT)
			break;
	}
	yaml_parser_delete(&p);
	return r;
}

static int load_file(struct load *l)
{
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	yaml_node_t *root;
	bool have_doc = false;
	char *buf = NULL;
	size_t len = 0;
	mode_t mode = 0;
	int r;

	r = read_file(l->path, &buf, &len, &mode);
	if (r < 0) {
		log_error("cannot read config file '%s': %s", l->path,
			  r == -EFBIG ? "larger than 1 MiB" : r == -EINVAL ? "not a regular file" : strerror(-r));
		return r == -ENOMEM ? r : -EINVAL;
	}
	r = check_shape(l, buf, len);
	if (r < 0) {
		free(buf);
		return r;
	}
	if (!yaml_parser_initialize(&parser)) {
		free(buf);
		return log_error_errno(-ENOMEM, "cannot load the configuration");
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&parser, &doc)) {
		r = yaml_error(l, &parser, buf, len);
		goto out;
	}
	have_doc = true;
	root = yaml_document_get_root_node(&doc);
	if (root) {
		/* Only one document: a second one is most likely a mistake. */
		if (!yaml_parser_load(&parser, &extra)) {
			r = yaml_error(l, &parser, buf, len);
			goto out;
		}
		if (yaml_document_get_root_node(&extra)) {
			unsigned long line = (unsigned long)extra.start_mark.line + 1;

			yaml_document_delete(&extra);
			log_error("%s:%lu: invalid YAML: only one document is allowed", l->path, line);
			r = -EINVAL;
			goto out;
		}
		yaml_document_delete(&extra);
	}
	if (root && !is_null(root)) {
		if (root->type != YAML_MAPPING_NODE) {
			struct origin o = file_origin(root);

			r = cfg_error(l, &o, NULL, false, "expected a mapping of settings (key: value), got %s",
				      node_kind(root));
			goto out;
		}
		r = walk_mapping(l, &doc, root, "");
		if (r < 0)
			goto out;
	}
	if (l->secret_in_file && (mode & S_IROTH))
		log_warn("%s holds secrets but every user can read it: chmod o-r %s", l->path, l->path);
	r = 0;
out:
	if (have_doc)
		yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	free(buf);
	return r;
}

static const char *env_lookup(char **envp, const char *name)
{
	size_t n = strlen(name);

	for (char **e = envp; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* The variable that replaced the one named e[0..n), in buf; NULL if none did. */
static const char *renamed_env(const char *e, size_t n, char *buf, size_t size)
{
	char old[MAX_KEY_PATH];

	for (size_t i = 0; i < ARRAY_SIZE(renamed); i++) {
		env_name(&(struct key_def){ .path = renamed[i].old }, old, sizeof(old));
		if (strlen(old) == n && strncmp(old, e, n) == 0) {
			env_name(find_key(renamed[i].now), buf, size);
			return buf;
		}
	}
	return NULL;
}

static int load_env(struct load *l, char **envp)
{
	char name[MAX_KEY_PATH];

	for (char **e = envp; *e; e++) {
		const struct origin o = { .kind = ORIGIN_ENV, .env = *e };
		const char *eq = strchr(*e, '=');
		const struct key_def *k = NULL;
		size_t n;
		int r;

		if (strncmp(*e, "PROWL_", 6) != 0 || !eq)
			continue;
		n = (size_t)(eq - *e);
		if (n == 12 && strncmp(*e, "PROWL_CONFIG", 12) == 0)
			continue;
		/* PROWL_TEST_* belong to the test suite, not to the configuration. */
		if (strncmp(*e, "PROWL_TEST_", 11) == 0)
			continue;
		for (size_t i = 0; i < NKEYS && !k; i++) {
			env_name(&keys[i], name, sizeof(name));
			if (strlen(name) == n && strncmp(name, *e, n) == 0)
				k = &keys[i];
		}
		if (!k) {
			if (renamed_env(*e, n, name, sizeof(name)))
				log_warn("environment variable %.*s ignored: it was replaced by %s", (int)n, *e, name);
			else
				log_warn("unknown environment variable %.*s ignored (see docs/configuration.md for the "
					 "PROWL_* variables)", (int)n, *e);
			continue;
		}
		r = set_value(l, k, eq + 1, &o);
		if (r < 0)
			return r;
	}
	return 0;
}

enum {
	OPT_CONFIG = 256,
	OPT_CHECK,
	OPT_INTERVAL,
	OPT_LABEL,
	OPT_HOSTNAME,
	OPT_STATE_DIR,
	OPT_DIR,
	OPT_PYROSCOPE_URL,
	OPT_OTLP_URL,
	OPT_PARCA_URL,
	OPT_METRICS_ADDRESS,
	OPT_NO_METRICS,
	OPT_LOG_LEVEL,
	OPT_LOG_FORMAT,
	OPT_UNWIND,
	OPT_PER_THREAD,
	OPT_IDLE,
};

static const struct option longopts[] = {
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "check", no_argument, NULL, OPT_CHECK },
	{ "frequency", required_argument, NULL, 'F' },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{ "label", required_argument, NULL, OPT_LABEL },
	{ "hostname", required_argument, NULL, OPT_HOSTNAME },
	{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
	{ "dir", required_argument, NULL, OPT_DIR },
	{ "pyroscope-url", required_argument, NULL, OPT_PYROSCOPE_URL },
	{ "otlp-url", required_argument, NULL, OPT_OTLP_URL },
	{ "parca-url", required_argument, NULL, OPT_PARCA_URL },
	{ "metrics-address", required_argument, NULL, OPT_METRICS_ADDRESS },
	{ "no-metrics", no_argument, NULL, OPT_NO_METRICS },
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
	{ "log-format", required_argument, NULL, OPT_LOG_FORMAT },
	{ "unwind", required_argument, NULL, OPT_UNWIND },
	{ "per-thread", no_argument, NULL, OPT_PER_THREAD },
	{ "idle", no_argument, NULL, OPT_IDLE },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{}
};

/* The key an option sets (NULL for --label) and, for switches, the value. */
static const struct {
	int opt;
	const char *flag;
	const char *key;
	const char *value;
} opt_keys[] = {
	{ 'F', "--frequency", "frequency" },
	{ OPT_INTERVAL, "--interval", "interval" },
	{ OPT_LABEL, "--label", NULL },
	{ OPT_HOSTNAME, "--hostname", "hostname" },
	{ OPT_STATE_DIR, "--state-dir", "state_dir" },
	{ OPT_DIR, "--dir", "exporters.dir.path" },
	{ OPT_DIR, "--dir", "exporters.dir.enabled", "true" },
	{ OPT_PYROSCOPE_URL, "--pyroscope-url", "exporters.pyroscope.url" },
	{ OPT_OTLP_URL, "--otlp-url", "exporters.otlp.url" },
	{ OPT_PARCA_URL, "--parca-url", "exporters.parca.url" },
	{ OPT_METRICS_ADDRESS, "--metrics-address", "metrics.address" },
	{ OPT_METRICS_ADDRESS, "--metrics-address", "metrics.enabled", "true" },
	{ OPT_NO_METRICS, "--no-metrics", "metrics.enabled", "false" },
	{ OPT_LOG_LEVEL, "--log-level", "log.level" },
	{ OPT_LOG_FORMAT, "--log-format", "log.format" },
	{ OPT_UNWIND, "--unwind", "unwind" },
	{ OPT_PER_THREAD, "--per-thread", "per_thread", "true" },
	{ OPT_IDLE, "--idle", "idle", "true" },
	{ 'v', "--verbose", "log.level", "debug" },
};

static const char *option_name(int c)
{
	if (c == 'h')
		return "--help";
	for (size_t i = 0; i < ARRAY_SIZE(longopts) - 1; i++)
		if (longopts[i].val == c)
			return longopts[i].name;
	return NULL;
}

/* Reads argv; flag settings go to pend (applied last). 1: --help printed. */
static int parse_flags(int argc, char **argv, struct agent_config *c, struct pending *pend, size_t *npend)
{
	int ch;

	optind = 0; /* glibc: full reset, so a reload parses argv afresh */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:F:vh", longopts, NULL)) != -1) {
		bool known = false;

		switch (ch) {
		case 'h':
			fputs(agent_config_usage, stdout);
			return 1;
		case OPT_CHECK:
			c->check = true;
			continue;
		case OPT_CONFIG:
			if (!*optarg)
				return cfg_error(NULL, &(struct origin){ .kind = ORIGIN_FLAG, .flag = "--config" },
						 NULL, false, "empty file name");
			free(c->config_path);
			c->config_path = strdup(optarg);
			if (!c->config_path)
				return log_error_errno(-ENOMEM, "cannot load the configuration");
			continue;
		case ':': {
			const char *name = option_name(optopt);

			log_error("option %s%s needs a value (see 'prowl agent --help')", name ? "--" : "",
				  name ? name : argv[optind - 1]);
			return -EINVAL;
		}
		case '?':
			if (optopt && optopt < 256 && !option_name(optopt))
				log_error("unknown option '-%c' (see 'prowl agent --help')", optopt);
			else if (optopt)
				log_error("option --%s takes no value (see 'prowl agent --help')", option_name(optopt));
			else
				log_error("unknown option '%s' (see 'prowl agent --help')", argv[optind - 1]);
			return -EINVAL;
		default:
			break;
		}
		for (size_t i = 0; i < ARRAY_SIZE(opt_keys); i++) {
			if (opt_keys[i].opt != ch)
				continue;
			pend[(*npend)++] = (struct pending){
				.key = opt_keys[i].key ? find_key(opt_keys[i].key) : NULL,
				.value = opt_keys[i].value ? opt_keys[i].value : optarg,
				.flag = opt_keys[i].flag,
			};
			known = true;
		}
		if (!known) {
			log_error("unhandled option '%s'", argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s' (see 'prowl agent --help')", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

static int check_file(struct load *l, const struct key_def *k)
{
	const char *path = *(char *const *)field(l->cfg, k);
	struct stat st;

	if (!path)
		return 0;
	if (stat(path, &st) < 0 || access(path, R_OK) < 0)
		return cfg_error(l, &l->origins[k - keys], k->path, false, "cannot read '%s': %s", path,
				 strerror(errno));
	if (!S_ISREG(st.st_mode))
		return cfg_error(l, &l->origins[k - keys], k->path, false, "'%s' is not a regular file", path);
	return 0;
}

static const struct key_def *http_key(const char *exporter, const char *name)
{
	char path[MAX_KEY_PATH];

	snprintf(path, sizeof(path), "exporters.%s.%s", exporter, name);
	return find_key(path);
}

/* Cross-field rules of one HTTP exporter, checked only when it is enabled. */
static int check_http(struct load *l, const char *name, struct http_exporter_config *e)
{
	const struct http_target *t = &e->target;
	const struct key_def *user = http_key(name, "basic_user"), *pass = http_key(name, "basic_password"),
			     *token = http_key(name, "bearer_token"), *cert = http_key(name, "cert_file"),
			     *key = http_key(name, "key_file");
	int r;

	e->enabled = t->url != NULL;
	if (!e->enabled)
		return 0;
	if (t->basic_user && !t->basic_password)
		return cfg_error(l, &l->origins[user - keys], user->path, false,
				 "basic_user is set without basic_password: set both (the password in the "
				 "file or the environment)");
	if (t->basic_password && !t->basic_user)
		return cfg_error(l, &l->origins[pass - keys], pass->path, true,
				 "basic_password is set without basic_user: set both");
	if (t->bearer_token && t->basic_user)
		return cfg_error(l, &l->origins[token - keys], token->path, true,
				 "bearer_token and basic_user/basic_password exclude each other: use one");
	if (t->cert_file && !t->key_file)
		return cfg_error(l, &l->origins[cert - keys], cert->path, false,
				 "cert_file is set without key_file: a client certificate needs both");
	if (t->key_file && !t->cert_file)
		return cfg_error(l, &l->origins[key - keys], key->path, false,
				 "key_file is set without cert_file: a client certificate needs both");
	for (size_t i = 0; i < NKEYS; i++) {
		if (keys[i].type != K_FILE || strncmp(keys[i].path + 10, name, strlen(name)) != 0 ||
		    keys[i].path[10 + strlen(name)] != '.')
			continue;
		r = check_file(l, &keys[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Whether the Kubernetes client runs: kubernetes.enabled, or (auto) an api_url
 * or the in-cluster KUBERNETES_SERVICE_HOST; then the URL, node name and files. */
static int check_kubernetes(struct load *l)
{
	struct agent_config *c = l->cfg;
	const struct key_def *en = find_key("kubernetes.enabled"), *url = find_key("kubernetes.api_url"),
			     *node = find_key("kubernetes.node_name");
	const char *host = env_lookup(l->envp, "KUBERNETES_SERVICE_HOST");
	const char *port = env_lookup(l->envp, "KUBERNETES_SERVICE_PORT");
	const char *node_env = env_lookup(l->envp, "NODE_NAME");
	int r;

	if (c->kubernetes.enabled == KUBE_OFF)
		return 0;
	if (!c->kubernetes.api_url && host && *host) {
		bool v6 = strchr(host, ':') != NULL;
		const char *why = NULL;

		if (asprintf(&c->kubernetes.api_url, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
			     port && *port ? port : "443") < 0) {
			c->kubernetes.api_url = NULL;
			return log_error_errno(-ENOMEM, "cannot load the configuration");
		}
		if (url_check_base(c->kubernetes.api_url, &why) == -EINVAL)
			return cfg_error(l, &l->origins[url - keys], url->path, false,
					 "KUBERNETES_SERVICE_HOST/PORT do not make a URL (%s: %s): set kubernetes.api_url",
					 c->kubernetes.api_url, why);
	}
	if (!c->kubernetes.api_url) {
		if (c->kubernetes.enabled == KUBE_ON)
			return cfg_error(l, &l->origins[en - keys], en->path, false,
					 "Kubernetes is on but there is no API server: set kubernetes.api_url, or run "
					 "in a pod (KUBERNETES_SERVICE_HOST)");
		return 0;
	}
	c->kubernetes.on = true;
	if (!c->kubernetes.node_name && node_env && *node_env) {
		r = set_value(l, node, node_env, &(struct origin){ .kind = ORIGIN_ENV, .env = node_env - strlen("NODE_NAME=") });
		if (r < 0)
			return r;
	}
	if (!c->kubernetes.node_name)
		return cfg_error(l, &l->origins[node - keys], node->path, false,
				 "the node's name is unknown: set kubernetes.node_name or NODE_NAME (the DaemonSet "
				 "sets it from spec.nodeName), so that only this node's pods are listed");
	/* Files named on purpose must be readable now; the service account
	 * defaults may be missing outside a cluster: then no token is sent and the
	 * system's CAs verify the server. */
	for (size_t i = 0; i < NKEYS; i++) {
		char **file = field(c, &keys[i]);

		if (strncmp(keys[i].path, "kubernetes.", 11) != 0 || !strstr(keys[i].path, "_file"))
			continue;
		if (l->origins[i].kind != ORIGIN_DEFAULT && (r = check_file(l, &keys[i])) < 0)
			return r;
		if (l->origins[i].kind == ORIGIN_DEFAULT && *file && access(*file, R_OK) < 0) {
			free(*file);
			*file = NULL;
		}
	}
	return 0;
}

/* Defaults that depend on other settings, and rules across keys. */
static int finalize(struct load *l)
{
	struct agent_config *c = l->cfg;
	const struct key_def *enabled = find_key("exporters.dir.enabled"), *dpath = find_key("exporters.dir.path");
	bool any_http;
	int r;

	if (!c->hostname) {
		char host[HOST_NAME_MAX + 1] = "";

		if (gethostname(host, sizeof(host) - 1) < 0 || !*host)
			strcpy(host, "localhost");
		c->hostname = strdup(host);
		if (!c->hostname)
			return log_error_errno(-ENOMEM, "cannot load the configuration");
	}
	if (!c->exporters.dir.path) {
		if (asprintf(&c->exporters.dir.path, "%s/profiles", c->state_dir) < 0) {
			c->exporters.dir.path = NULL;
			return log_error_errno(-ENOMEM, "cannot load the configuration");
		}
	}
	r = check_http(l, "pyroscope", &c->exporters.pyroscope);
	if (r < 0)
		return r;
	r = check_http(l, "otlp", &c->exporters.otlp);
	if (r < 0)
		return r;
	r = check_http(l, "parca", &c->exporters.parca);
	if (r < 0)
		return r;
	r = check_kubernetes(l);
	if (r < 0)
		return r;
	if (c->recording_rules.n) {
		const char *names[MAX_LABELS + 7 + RELABEL_MAX_RULES];
		size_t n = agent_config_series_labels(c, names, ARRAY_SIZE(names));

		r = rules_config_check(l->path, &c->recording_rules, names, n);
		if (r < 0)
			return r;
	}
	any_http = c->exporters.pyroscope.enabled || c->exporters.otlp.enabled || c->exporters.parca.enabled;
	/* The embedded default: the directory exporter runs when nothing else is
	 * configured, or when its path was given, unless enabled says otherwise. */
	if (l->origins[enabled - keys].kind == ORIGIN_DEFAULT)
		c->exporters.dir.enabled = !any_http || l->origins[dpath - keys].kind != ORIGIN_DEFAULT;
	if (!c->exporters.dir.enabled && !any_http)
		return cfg_error(l, &l->origins[enabled - keys], enabled->path, false,
				 "no exporter is enabled: enable the directory exporter or set the url of "
				 "pyroscope, otlp or parca");
	return 0;
}

int agent_config_load(int argc, char **argv, char **envp, struct agent_config *ret)
{
	struct agent_config c = {};
	struct pending *pend = NULL;
	struct load *l = NULL;
	size_t npend = 0;
	const char *env_config;
	int r;

	if (!envp)
		envp = environ;
	l = calloc(1, sizeof(*l));
	pend = calloc((size_t)argc * 2 + 1, sizeof(*pend));
	if (!l || !pend) {
		r = log_error_errno(-ENOMEM, "cannot load the configuration");
		goto fail;
	}
	l->cfg = &c;
	l->envp = envp;
	for (size_t i = 0; i < NKEYS; i++) {
		r = set_value(l, &keys[i], keys[i].def, &(struct origin){ .kind = ORIGIN_DEFAULT });
		if (r < 0)
			goto fail;
	}
	r = parse_flags(argc, argv, &c, pend, &npend);
	if (r != 0)
		goto fail;
	env_config = env_lookup(envp, "PROWL_CONFIG");
	if (!c.config_path && env_config && *env_config) {
		c.config_path = strdup(env_config);
		if (!c.config_path) {
			r = log_error_errno(-ENOMEM, "cannot load the configuration");
			goto fail;
		}
	}
	if (c.config_path) {
		l->path = c.config_path;
		r = load_file(l);
		if (r < 0)
			goto fail;
	}
	r = load_env(l, envp);
	if (r < 0)
		goto fail;
	for (size_t i = 0; i < npend; i++) {
		const struct origin o = { .kind = ORIGIN_FLAG, .flag = pend[i].flag };

		if (pend[i].key)
			r = set_value(l, pend[i].key, pend[i].value, &o);
		else
			r = labels_parse(l, &o, pend[i].value, false);
		if (r < 0)
			goto fail;
	}
	r = finalize(l);
	if (r < 0)
		goto fail;
	*ret = c;
	free(pend);
	free(l);
	return 0;
fail:
	agent_config_free(&c);
	*ret = (struct agent_config){};
	free(pend);
	free(l);
	return r;
}

static void print_value(FILE *f, const struct agent_config *c, const struct key_def *k)
{
	const void *p = cfield(c, k);
	char buf[64];

	if (k->type != K_LABELS && k->type != K_RULES && k->type != K_RELABEL)
		fputc(' ', f);
	switch (k->type) {
	case K_BOOL:
		fputs(*(const bool *)p ? "true" : "false", f);
		break;
	case K_UINT:
		fprintf(f, "%" PRIu64, load_uint(p, k->size));
		break;
	case K_DURATION:
		format_duration(load_uint(p, k->size), buf, sizeof(buf));
		fputs(buf, f);
		break;
	case K_SIZE:
		format_size(load_uint(p, k->size), buf, sizeof(buf));
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
	for (size_t i = 0; i < NKEYS; i++) {
		const char *path = keys[i].path, *leaf;
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
		print_value(f, c, &keys[i]);
		fputc('\n', f);
		prev = path;
	}
}

static void http_target_free(struct http_target *t)
{
	free(t->url);
	free(t->basic_user);
	free(t->basic_password);
	free(t->bearer_token);
	free(t->tenant);
	free(t->ca_file);
	free(t->cert_file);
	free(t->key_file);
}

size_t agent_config_series_labels(const struct agent_config *c, const char **ret, size_t max)
{
	size_t n = 0;

	if (n < max)
		ret[n++] = "service_name";
	if (n < max)
		ret[n++] = "host_name";
	for (size_t i = 0; i < c->nlabels && n < max; i++)
		ret[n++] = c->labels[i].name;
	n += discover_label_names(ret + n, max - n);
	n += relabel_config_targets(&c->relabel, ret + n, max - n);
	/* Without duplicates (a static label may share a name with the others). */
	for (size_t i = 1; i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(ret[i], ret[j]) == 0) {
				memmove(&ret[i], &ret[i + 1], (n - i - 1) * sizeof(*ret));
				n--;
				i--;
				break;
			}
	return n;
}

void agent_config_free(struct agent_config *c)
{
	if (!c)
		return;
	free(c->hostname);
	for (size_t i = 0; i < c->nlabels; i++) {
		free(c->labels[i].name);
		free(c->labels[i].value);
	}
	free(c->labels);
	rules_config_free(&c->recording_rules);
	relabel_config_free(&c->relabel);
	free(c->kubernetes.api_url);
	free(c->kubernetes.token_file);
	free(c->kubernetes.ca_file);
	free(c->kubernetes.node_name);
	free(c->state_dir);
	free(c->metrics.address);
	free(c->exporters.dir.path);
	http_target_free(&c->exporters.pyroscope.target);
	http_target_free(&c->exporters.otlp.target);
	http_target_free(&c->exporters.parca.target);
	free(c->config_path);
	*c = (struct agent_config){};
}

/* config_schema.c: the agent's key schema (name, type, default, bounds of every setting)
 * and the parsing of one value against it, shared by the file, the environment and flags. */
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
#include "label_names.h"
#include "netaddr.h"
#include "labels/discover.h"
#include "parse.h"
#include "unwinder.h"
#include "url.h"


static const char *const unwind_names[] = { "fp", "dwarf", NULL };
/* In the order of enum sym_demangle. */
static const char *const demangle_names[] = { "templates", "full", "none", NULL };
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
const struct key_def cfg_keys[] = {
	{ "frequency", K_UINT, FIELD(frequency), "19", 1, 1000, "frequency", "Hz" },
	{ "interval", K_DURATION, FIELD(interval_ms), "10s", MS_PER_S, MS_PER_H },
	{ "idle", K_BOOL, FIELD(idle), "false" },
	{ "include_self", K_BOOL, FIELD(include_self), "false" },
	{ "per_thread", K_BOOL, FIELD(per_thread), "false" },
	{ "unwind", K_ENUM, FIELD(unwind), "dwarf", .what = "unwind mode", .names = unwind_names },
	{ "python", K_BOOL, FIELD(python), "true" },
	{ "java", K_BOOL, FIELD(java), "true" },
	{ "node", K_BOOL, FIELD(node), "true" },
	{ "off_cpu", K_BOOL, FIELD(off_cpu), "false" },
	{ "off_cpu_threshold", K_DURATION, FIELD(off_cpu_threshold_ms), "1ms", 1, MS_PER_S },
	{ "bpf_pin", K_BOOL, FIELD(bpf_pin), "true" },
	{ "demangle", K_ENUM, FIELD(demangle), "templates", .what = "demangling mode", .names = demangle_names },
	{ "hostname", K_STRING, FIELD(hostname), "" },
	{ "symbols.debuginfod_urls", K_STRING, FIELD(symbols.debuginfod_urls), "" },
	{ "symbols.debuginfod_timeout", K_DURATION, FIELD(symbols.debuginfod_timeout_ms), "60s", MS_PER_S,
	  MS_PER_H },
	{ "symbols.debuginfod_cache_size", K_SIZE, FIELD(symbols.debuginfod_cache_bytes), "1GiB", MIB, TIB },
	{ "symbols.debuginfod_miss_ttl", K_DURATION, FIELD(symbols.debuginfod_miss_ttl_ms), "10m", MS_PER_S,
	  168 * MS_PER_H },
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
	{ "limits.perfmap_memory", K_SIZE, FIELD(limits.perfmap_memory_bytes), "32MiB", MIB, 16 * GIB },
	{ "limits.debug_inflate_size", K_SIZE, FIELD(limits.debug_inflate_bytes), "512MiB", MIB, TIB,
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
	{ "exporters.dir.max_size", K_SIZE, FIELD(exporters.dir.max_size_bytes), "1GiB", MIB, TIB,
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

/* Keys that were replaced: a file that still has one is told the new name. */
const struct renamed_key cfg_renamed[] = {
	{ "limits.shutdown_flush", "shutdown_timeout" },
};

const size_t cfg_nkeys = ARRAY_SIZE(cfg_keys);
const size_t cfg_nrenamed = ARRAY_SIZE(cfg_renamed);
_Static_assert(ARRAY_SIZE(cfg_keys) <= MAX_KEYS, "raise MAX_KEYS in config_priv.h");

const struct key_def *cfg_find_key(const char *path)
{
	for (size_t i = 0; i < cfg_nkeys; i++)
		if (strcmp(cfg_keys[i].path, path) == 0)
			return &cfg_keys[i];
	return NULL;
}

/* Whether path names a mapping of the schema ("log", "exporters.otlp"). */
bool cfg_is_section(const char *path)
{
	size_t n = strlen(path);

	for (size_t i = 0; i < cfg_nkeys; i++)
		if (strncmp(cfg_keys[i].path, path, n) == 0 && cfg_keys[i].path[n] == '.')
			return true;
	return false;
}

/* PROWL_ + the path without "exporters.", upper-cased, dots as underscores. */
void cfg_env_name(const struct key_def *k, char *buf, size_t size)
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

void *cfg_field(struct agent_config *c, const struct key_def *k)
{
	return (char *)c + k->off;
}

const void *cfg_cfield(const struct agent_config *c, const struct key_def *k)
{
	return (const char *)c + k->off;
}

uint64_t cfg_load_uint(const void *p, size_t size)
{
	return size == sizeof(uint64_t) ? *(const uint64_t *)p : *(const uint32_t *)p;
}

void cfg_store_uint(void *p, size_t size, uint64_t v)
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
int __attribute__((format(printf, 5, 6)))
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

const char *cfg_enum_choices(const char *const *names, char *buf, size_t size)
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
void cfg_format_duration(uint64_t ms, char *buf, size_t size)
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

void cfg_format_size(uint64_t v, char *buf, size_t size)
{
	if (v && v % TIB == 0)
		snprintf(buf, size, "%" PRIu64 "TiB", v / TIB);
	else if (v && v % GIB == 0)
		snprintf(buf, size, "%" PRIu64 "GiB", v / GIB);
	else if (v && v % MIB == 0)
		snprintf(buf, size, "%" PRIu64 "MiB", v / MIB);
	else if (v && v % KIB == 0)
		snprintf(buf, size, "%" PRIu64 "KiB", v / KIB);
	else
		snprintf(buf, size, "%" PRIu64, v);
}

bool cfg_parse_bool(const char *s, bool *ret)
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
int cfg_label_set(struct load *l, const struct origin *o, const char *name, const char *value)
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
	if (strcmp(name, LABEL_SERVICE_NAME) == 0 || strcmp(name, LABEL_HOST_NAME) == 0 || strncmp(name, "__", 2) == 0)
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
int cfg_labels_parse(struct load *l, const struct origin *o, const char *s, bool list)
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
		r = cfg_label_set(l, o, p, eq + 1);
		if (r < 0)
			break;
	}
	free(copy);
	return r;
}

/* Parses s as key k's value and stores it, recording where it came from. */
int cfg_set_value(struct load *l, const struct key_def *k, const char *s, const struct origin *o)
{
	void *p = cfg_field(l->cfg, k);
	char choices[128], lo[32], hi[32];
	uint64_t v;
	bool b;
	int r;

	switch (k->type) {
	case K_BOOL:
		if (!cfg_parse_bool(s, &b))
			return cfg_error(l, o, k->path, false, "invalid boolean '%s': use true or false", s);
		*(bool *)p = b;
		break;
	case K_UINT:
		if (parse_u64_range(s, k->min, k->max, &v) < 0)
			return cfg_error(l, o, k->path, false,
					 "invalid %s '%s': give a whole number%s%s from %" PRIu64 " to %" PRIu64,
					 k->what, s, k->unit ? " of " : "", k->unit ? k->unit : "", k->min, k->max);
		cfg_store_uint(p, k->size, v);
		break;
	case K_DURATION:
		if (k->zero_ok && strcmp(s, "0") == 0) {
			cfg_store_uint(p, k->size, 0);
			break;
		}
		r = parse_duration_ns(s, &v);
		cfg_format_duration(k->min, lo, sizeof(lo));
		cfg_format_duration(k->max, hi, sizeof(hi));
		if (r == -EINVAL)
			return cfg_error(l, o, k->path, false,
					 "invalid duration '%s': use e.g. 10s, 500ms, 2m or 1h30m", s);
		v /= 1000000;
		if (r < 0 || v < k->min || v > k->max)
			return cfg_error(l, o, k->path, false, "duration '%s' out of range: use %s to %s%s", s, lo,
					 hi, k->zero_ok ? ", or 0 for no limit" : "");
		cfg_store_uint(p, k->size, v);
		break;
	case K_SIZE:
		r = parse_size_bytes(s, &v);
		cfg_format_size(k->min, lo, sizeof(lo));
		cfg_format_size(k->max, hi, sizeof(hi));
		if (r == -EINVAL)
			return cfg_error(l, o, k->path, false, "invalid size '%s': use e.g. 512KiB, 64MiB or 1GiB", s);
		if (r < 0 || (v < k->min && !(k->zero_ok && v == 0)) || v > k->max)
			return cfg_error(l, o, k->path, false, "size '%s' out of range: use %s to %s%s", s, lo, hi,
					 k->zero_ok ? ", or 0 for no limit" : "");
		cfg_store_uint(p, k->size, v);
		break;
	case K_ENUM:
		for (v = 0; k->names[v]; v++)
			if (strcmp(k->names[v], s) == 0)
				break;
		if (!k->names[v])
			return cfg_error(l, o, k->path, false, "invalid %s '%s': use %s", k->what, s,
					 cfg_enum_choices(k->names, choices, sizeof(choices)));
		*(int *)p = (int)v;
		break;
	case K_LABELS:
		return cfg_labels_parse(l, o, s, true);
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
		if (k == cfg_find_key("state_dir") && !len)
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
	l->origins[k - cfg_keys] = *o;
	return 0;
}

/* test_config_errors.c: unit tests of `prowl agent`'s configuration refused: one precise
 * error line per invalid input, bounded sizes, unreadable and hostile files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_priv.h"
#include "testutil.h"
#include "configtest.h"

static void test_unknown_env_warns(void **state)
{
	struct agent_config c;
	struct capture cap;
	char *env[] = { "PROWL_FREQUNCY=5", "PROWL_PER_THREAD=on", "OTHER=1", NULL };
	char *err;
	int r;

	(void)state;
	fd_capture_begin(&cap, 2);
	r = load(&c, env, NULL);
	err = fd_capture_end(&cap);
	assert_int_equal(r, 0);
	assert_true(c.per_thread);
	assert_non_null(strstr(err, "warning: unknown environment variable PROWL_FREQUNCY ignored"));
	assert_int_equal(count_lines(err), 1);
	agent_config_free(&c);
}

struct bad_case {
	const char *name;
	const char *yaml;       /* written to a file given with --config, or NULL */
	const char *expect;     /* in the one error line; a leading ':' follows the file name */
	const char *args[6];
	char *env[4];
	const char *absent;     /* must not be in the output (a secret) */
};

static const struct bad_case bad_cases[] = {
	{ "unknown key", "frequency: 19\nfrequncy: 20\n",
	  ":2: unknown key 'frequncy' (known: frequency, interval, idle, include_self, per_thread, unwind, python, java, node, off_cpu, off_cpu_threshold, bpf_pin, demangle, hostname, symbols, labels, "
	  "state_dir, shutdown_timeout, spool, log, metrics, limits, kubernetes, exporters, relabel_configs, "
	  "recording_rules)" },
	{ "unknown nested key", "exporters:\n  pyroscope:\n    timout: 5s\n",
	  ":3: unknown key 'exporters.pyroscope.timout' (known: url, api, basic_user, basic_password," },
	{ "unknown exporter", "exporters:\n  jaeger: {}\n", ":2: unknown key 'exporters.jaeger' (known: dir, pyroscope, otlp, parca)" },
	{ "dotted key", "log.level: debug\n", ":1: unknown key 'log.level'" },
	{ "frequency 0", "frequency: 0\n",
	  ":1: frequency: invalid frequency '0': give a whole number of Hz from 1 to 1000" },
	{ "frequency 1001", "idle: false\nfrequency: 1001\n", ":2: frequency: invalid frequency '1001'" },
	{ "frequency abc", "frequency: abc\n", ":1: frequency: invalid frequency 'abc'" },
	{ "frequency float", "frequency: 19.5\n", ":1: frequency: invalid frequency '19.5'" },
	{ "frequency empty", "frequency:\n", ":1: frequency: invalid frequency ''" },
	{ "bad interval", "interval: soon\n", ":1: interval: invalid duration 'soon': use e.g. 10s, 500ms" },
	{ "interval too long", "interval: 2h\n", ":1: interval: duration '2h' out of range: use 1s to 1h" },
	{ "interval too short", "interval: 500ms\n", ":1: interval: duration '500ms' out of range" },
	{ "microseconds", "shutdown_timeout: 500us\n", ":1: shutdown_timeout: invalid duration '500us'" },
	{ "bad timeout", "exporters:\n  pyroscope:\n    url: http://p\n    timeout: soon\n",
	  ":4: exporters.pyroscope.timeout: invalid duration 'soon': use e.g. 10s, 500ms" },
	{ "bad size", "exporters:\n  dir:\n    max_size: 1XB\n",
	  ":3: exporters.dir.max_size: invalid size '1XB': use e.g. 512KiB, 64MiB or 1GiB" },
	{ "size too small", "exporters:\n  otlp:\n    buffer_size: 1k\n",
	  ":3: exporters.otlp.buffer_size: size '1k' out of range: use 1MiB to 16GiB" },
	{ "size past 1TiB", "limits:\n  debug_inflate_size: 1025GiB\n",
	  ":2: limits.debug_inflate_size: size '1025GiB' out of range: use 1MiB to 1TiB, or 0 for no limit" },
	{ "size past 64 bits", "symbols:\n  debuginfod_cache_size: 16777216TiB\n",
	  ":2: symbols.debuginfod_cache_size: size '16777216TiB' out of range: use 1MiB to 1TiB" },
	{ "max_age too short", "exporters:\n  dir: {max_age: 30s}\n",
	  ":2: exporters.dir.max_age: duration '30s' out of range: use 1m to 87600h, or 0 for no limit" },
	{ "bad bool", "idle: maybe\n", ":1: idle: invalid boolean 'maybe': use true or false" },
	{ "bad enum", "unwind: lbr\n", ":1: unwind: invalid unwind mode 'lbr': use fp or dwarf" },
	{ "bad log level", "log:\n  level: verbose\n",
	  ":2: log.level: invalid log level 'verbose': use error, warn, info or debug" },
	{ "bad api", "exporters:\n  pyroscope:\n    api: grpc\n",
	  ":3: exporters.pyroscope.api: invalid API 'grpc': use ingest or push" },
	{ "bad url scheme", "exporters:\n  pyroscope:\n    url: ftp://p:4040\n",
	  ":3: exporters.pyroscope.url: invalid URL 'ftp://p:4040': use http:// or https://" },
	{ "url without host", "exporters:\n  otlp:\n    url: 'http://'\n",
	  ":3: exporters.otlp.url: invalid URL 'http://': the URL has no host" },
	{ "url with credentials", "exporters:\n  parca:\n    url: 'https://u:pw@h'\n",
	  ":3: exporters.parca.url: invalid URL: do not put credentials in the URL" },
	{ "url bad port", "exporters:\n  parca:\n    url: 'https://h:99999'\n",
	  ":3: exporters.parca.url: invalid URL 'https://h:99999': the port must be a number" },
	{ "url with query", "exporters:\n  parca:\n    url: 'https://h/?a=b'\n",
	  ":3: exporters.parca.url: invalid URL 'https://h/?a=b': give the base URL" },
	{ "bad metrics address", "metrics:\n  address: localhost\n",
	  ":2: metrics.address: invalid address 'localhost': use host:port" },
	{ "missing key_file", "exporters:\n  otlp:\n    url: https://o\n    cert_file: /etc/hostname\n"
			      "    key_file: /nonexistent/client.key\n",
	  ":5: exporters.otlp.key_file: cannot read '/nonexistent/client.key': No such file or directory" },
	{ "ca_file a directory", "exporters:\n  otlp:\n    url: https://o\n    ca_file: /tmp\n",
	  ":4: exporters.otlp.ca_file: '/tmp' is not a regular file" },
	{ "cert without key", "exporters:\n  otlp:\n    url: https://o\n    cert_file: /etc/hostname\n",
	  ":4: exporters.otlp.cert_file: cert_file is set without key_file" },
	{ "basic without password", "exporters:\n  pyroscope:\n    url: http://p\n    basic_user: bob\n",
	  ":4: exporters.pyroscope.basic_user: basic_user is set without basic_password: set both" },
	{ "password without basic", "exporters:\n  pyroscope:\n    url: http://p\n    basic_password: s3cret\n",
	  ":4: exporters.pyroscope.basic_password: basic_password is set without basic_user", .absent = "s3cret" },
	{ "basic and bearer", "exporters:\n  otlp:\n    url: http://o\n    basic_user: a\n    basic_password: b\n"
			      "    bearer_token: t0ken\n",
	  ":6: exporters.otlp.bearer_token: bearer_token and basic_user/basic_password exclude each other",
	  .absent = "t0ken" },
	{ "reserved label service_name", "labels:\n  env: prod\n  service_name: x\n",
	  ":3: labels.service_name: label name 'service_name' is reserved" },
	{ "reserved label host_name", "labels: {host_name: x}\n", ":1: labels.host_name: label name 'host_name' is reserved" },
	{ "reserved label __name__", "labels:\n  __name__: x\n", ":2: labels.__name__: label name '__name__' is reserved" },
	{ "bad label name", "labels:\n  1env: x\n", ":2: labels.1env: invalid label name '1env'" },
	{ "bad label name dash", "labels:\n  my-env: x\n", ":2: labels.my-env: invalid label name 'my-env'" },
	{ "empty label value", "labels:\n  env: ''\n", ":2: labels.env: label 'env' has an empty value" },
	{ "label value list", "labels:\n  env: [a]\n", ":2: labels.env: expected a string, got a list" },
	{ "labels a list", "labels: [a, b]\n", ":1: labels: expected a mapping of name: value, got a list" },
	{ "list for frequency", "frequency: [1, 2]\n", ":1: frequency: expected a number, got a list" },
	{ "mapping for interval", "interval:\n  every: 10s\n", ":2: interval: expected a duration, got a mapping" },
	{ "scalar for section", "log: info\n", ":1: log: expected a mapping of settings, got a single value" },
	{ "list at top", "- frequency: 19\n", ":1: expected a mapping of settings (key: value), got a list" },
	{ "duplicate key", "frequency: 19\nidle: true\nfrequency: 20\n",
	  ":3: duplicate key 'frequency' (first at line 1)" },
	{ "malformed YAML", "frequency: 19\nlog:\n  level: [info\n", ":3: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence started at line 3)" },
	{ "malformed YAML indent", "frequency: 19\n  interval: 10s\n", ":2: invalid YAML: mapping values are not allowed" },
	{ "tab indent", "log:\n\tlevel: info\n", ":2: invalid YAML: found character that cannot start any token" },
	{ "two documents", "frequency: 19\n---\nfrequency: 20\n", ":2: invalid YAML: only one document is allowed" },
	{ "no exporter", "exporters:\n  dir:\n    enabled: false\n", ":3: exporters.dir.enabled: no exporter is enabled" },
	{ "empty state_dir", "state_dir: ''\n", ":1: state_dir: the state directory must not be empty" },
	{ "control character", "hostname: \"a\\nb\"\n", ":1: hostname: invalid value: at most 4096 bytes, without control" },
	{ "kubernetes on without a server", "kubernetes:\n  enabled: true\n",
	  ":2: kubernetes.enabled: Kubernetes is on but there is no API server: set kubernetes.api_url" },
	{ "kubernetes enabled yes", "kubernetes:\n  enabled: yes\n",
	  ":2: kubernetes.enabled: invalid setting 'yes': use auto, true or false" },
	{ "kubernetes token file missing",
	  "kubernetes:\n  api_url: https://k:6443\n  node_name: n1\n  token_file: /nonexistent/token\n",
	  ":4: kubernetes.token_file: cannot read '/nonexistent/token': No such file or directory" },
	{ "kubernetes bad url", "kubernetes:\n  api_url: k8s:6443\n", ":2: kubernetes.api_url: invalid URL 'k8s:6443'" },
	{ "relabel bad action", "relabel_configs:\n  - source_labels: [a]\n    action: rename\n",
	  ":3: relabel_configs[0].action: unknown action 'rename'" },
	{ "relabel not a list", "relabel_configs: {action: keep}\n",
	  ":1: relabel_configs: expected a list of rules (- source_labels: [...] ...), got a mapping" },
	{ "rule on an unknown label", "recording_rules:\n  - metric: a_total\n    match: {tean: x}\n",
	  ":3: recording_rules[0].match.tean: unknown label 'tean'" },
	/* Not files. */
	{ "kubernetes without a node name", NULL,
	  "prowl: error: kubernetes.node_name: the node's name is unknown: set kubernetes.node_name or NODE_NAME",
	  .env = { "PROWL_KUBERNETES_API_URL=https://k:6443" } },
	{ "relabel from the environment", NULL,
	  "prowl: error: PROWL_RELABEL_CONFIGS=x: relabel rules can be set only in the config file",
	  .env = { "PROWL_RELABEL_CONFIGS=x" } },
	{ "env frequency", NULL, "prowl: error: PROWL_FREQUENCY=abc: invalid frequency 'abc': give a whole number of Hz",
	  .env = { "PROWL_FREQUENCY=abc" } },
	{ "env bool", NULL, "prowl: error: PROWL_METRICS_ENABLED=nah: invalid boolean 'nah'",
	  .env = { "PROWL_METRICS_ENABLED=nah" } },
	{ "env labels", NULL, "prowl: error: PROWL_LABELS=env: invalid label 'env': use NAME=VALUE[,NAME=VALUE...]",
	  .env = { "PROWL_LABELS=env" } },
	{ "env secret masked", NULL,
	  "prowl: error: PROWL_PYROSCOPE_BASIC_PASSWORD=***: basic_password is set without basic_user",
	  .env = { "PROWL_PYROSCOPE_URL=http://p", "PROWL_PYROSCOPE_BASIC_PASSWORD=topsecret" }, .absent = "topsecret" },
	{ "flag interval", NULL, "prowl: error: option --interval: invalid duration '5x': use e.g. 10s",
	  .args = { "--interval", "5x" } },
	{ "flag frequency", NULL, "prowl: error: option --frequency: invalid frequency '0'", .args = { "-F0" } },
	{ "flag label", NULL, "prowl: error: option --label: invalid label 'env': use NAME=VALUE (see",
	  .args = { "--label", "env" } },
	{ "flag reserved label", NULL, "prowl: error: option --label: label name 'host_name' is reserved",
	  .args = { "--label", "host_name=x" } },
	{ "flag unwind", NULL, "prowl: error: option --unwind: invalid unwind mode 'lbr': use fp or dwarf",
	  .args = { "--unwind", "lbr" } },
	{ "flag missing value", NULL, "prowl: error: option --interval needs a value", .args = { "--interval" } },
	{ "unknown flag", NULL, "prowl: error: unknown option '--frequncy'", .args = { "--frequncy", "5" } },
	{ "flag takes no value", NULL, "prowl: error: option --idle takes no value", .args = { "--idle=yes" } },
	{ "positional", NULL, "prowl: error: unexpected argument 'extra'", .args = { "extra" } },
	{ "flag no exporter", NULL, "prowl: error: PROWL_DIR_ENABLED=false: no exporter is enabled",
	  .env = { "PROWL_DIR_ENABLED=false" } },
	{ "missing config file", NULL,
	  "prowl: error: cannot read config file '/nonexistent/prowl.yaml': No such file or directory",
	  .args = { "--config", "/nonexistent/prowl.yaml" } },
	{ "config file a directory", NULL, "prowl: error: cannot read config file '/tmp': Is a directory",
	  .args = { "--config", "/tmp" } },
	{ "missing config file env", NULL,
	  "prowl: error: cannot read config file '/nonexistent/env.yaml': No such file or directory",
	  .env = { "PROWL_CONFIG=/nonexistent/env.yaml" } },
};

static void test_invalid(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *b = &bad_cases[i];
		const char *args[10] = {};
		char expect[1024], file[64], *err, *env[5] = {};
		struct agent_config c;
		struct capture cap;
		size_t n = 0;
		int r;

		if (b->yaml) {
			snprintf(file, sizeof(file), "bad%zu.yaml", i);
			args[n++] = "--config";
			args[n++] = write_file(file, b->yaml);
			snprintf(expect, sizeof(expect), "prowl: error: %s%s", args[1], b->expect);
		} else {
			snprintf(expect, sizeof(expect), "%s", b->expect);
		}
		for (size_t j = 0; b->args[j]; j++)
			args[n++] = b->args[j];
		for (size_t j = 0; b->env[j]; j++)
			env[j] = b->env[j];
		fd_capture_begin(&cap, 2);
		r = load(&c, env, args);
		err = fd_capture_end(&cap);
		if (r != -EINVAL || !strstr(err, expect) || count_lines(err) != 1 || strncmp(err, expect, 14) ||
		    (b->absent && strstr(err, b->absent))) {
			print_error("case '%s': returned %d\n  got:    %s  wanted: %s\n", b->name, r, err, expect);
			fail();
		}
		assert_null(c.hostname);
		assert_null(c.config_path);
	}
}

/* Loads key = value from a file (nested as the dotted key says) or, with env, from
 * the key's environment variable. Returns what load() did; *ret_err is what was
 * logged (static), *ret_line the file line the value is on. */
static int load_one(struct agent_config *c, const struct key_def *k, const char *value, bool env, char **ret_err,
		    unsigned *ret_line)
{
	char yaml[512], var[MAX_KEY_PATH + 64], name[MAX_KEY_PATH + 16];
	char *envp[2] = { NULL, NULL };
	const char *p = k->path;
	struct capture cap;
	size_t n = 0;
	unsigned depth = 0;
	int r;

	if (env) {
		cfg_env_name(k, name, sizeof(name));
		snprintf(var, sizeof(var), "%s=%s", name, value);
		envp[0] = var;
	} else {
		for (const char *dot; (dot = strchr(p, '.')); p = dot + 1, depth++)
			n += (size_t)snprintf(yaml + n, sizeof(yaml) - n, "%*s%.*s:\n", 2 * (int)depth, "",
					      (int)(dot - p), p);
		snprintf(yaml + n, sizeof(yaml) - n, "%*s%s: %s\n", 2 * (int)depth, "", p, value);
	}
	*ret_line = depth + 1;
	fd_capture_begin(&cap, 2);
	r = env ? load(c, envp, NULL) : load(c, NULL, ARGS("--config", write_file("size.yaml", yaml)));
	*ret_err = fd_capture_end(&cap);
	return r;
}

/* Every size key of the schema, whatever keys it gains: its largest value is taken
 * and stored as given, one byte more is refused with one line naming the key and
 * its range, from the file and from the environment alike. The bound itself is no
 * more than 1TiB: each is memory or disk of one host. */
static void test_size_keys_bounded(void **state)
{
	size_t nsize = 0;

	(void)state;
	for (size_t i = 0; i < cfg_nkeys; i++) {
		const struct key_def *k = &cfg_keys[i];
		char max[32], past[32], lo[32], hi[32], want[512], *err;
		struct agent_config c;
		unsigned line;

		if (k->type != K_SIZE)
			continue;
		nsize++;
		assert_true(k->max > k->min);
		if (k->max > 1024 * GIB) {
			print_error("%s: its upper bound %" PRIu64 " is past 1TiB\n", k->path, k->max);
			fail();
		}
		cfg_format_size(k->min, lo, sizeof(lo));
		cfg_format_size(k->max, hi, sizeof(hi));
		snprintf(past, sizeof(past), "%" PRIu64, k->max + 1);
		for (int env = 0; env <= 1; env++) {
			/* The bound itself, in the unit --check prints it with. */
			cfg_format_size(k->max, max, sizeof(max));
			if (load_one(&c, k, max, env, &err, &line) != 0 ||
			    cfg_load_uint(cfg_cfield(&c, k), k->size) != k->max) {
				print_error("%s = %s (%s): refused or not stored as given: %s\n", k->path, max,
					    env ? "environment" : "file", err);
				fail();
			}
			agent_config_free(&c);
			/* One byte more. */
			if (env) {
				char name[MAX_KEY_PATH + 16];

				cfg_env_name(k, name, sizeof(name));
				snprintf(want, sizeof(want), "prowl: error: %s=%s: size '%s' out of range: use %s to %s",
					 name, past, past, lo, hi);
			} else {
				snprintf(want, sizeof(want), ":%u: %s: size '%s' out of range: use %s to %s", line, k->path,
					 past, lo, hi);
			}
			if (load_one(&c, k, past, env, &err, &line) != -EINVAL || !strstr(err, want) ||
			    count_lines(err) != 1) {
				print_error("%s = %s (%s), one byte past its bound: not refused as it should be\n"
					    "  got:    %s  wanted: %s\n", k->path, past, env ? "environment" : "file", err,
					    want);
				fail();
			}
		}
	}
	assert_true(nsize >= 9); /* 6 and a buffer_size per HTTP exporter, today */
}

/* What an unprivileged user's agent_config_load() made of --config PATH. */
struct unreadable_case {
	const char *path;
	FILE *err; /* the child's stderr */
	int want;  /* the return value expected */
};

static int load_as_user(void *arg)
{
	struct unreadable_case *u = arg;
	struct agent_config c;
	static char *env[] = { NULL };
	char *argv[] = { "agent", "--config", (char *)u->path, NULL };

	dup2(fileno(u->err), 2);
	return agent_config_load(3, argv, env, &c) == u->want ? 0 : 1;
}

/* A config file its reader may not read: one line naming the file and the reason.
 * Run as an unprivileged user, since root reads anything. */
static void test_unreadable_file(void **state)
{
	struct unreadable_case u;
	char expect[512], got[512] = "";
	size_t n;

	(void)state;
	assert_int_equal(chmod(tmpdir, 0711), 0); /* the user may reach the file, not read it */
	u.path = write_file("secret.yaml", "frequency: 19\n");
	u.err = tmpfile();
	assert_non_null(u.err);
	/* The same file made readable loads for the same user: the user is set up right. */
	assert_int_equal(chmod(u.path, 0644), 0);
	u.want = 0;
	assert_int_equal(run_unprivileged(load_as_user, &u), 0);
	assert_int_equal(chmod(u.path, 0), 0);
	u.want = -EINVAL;
	assert_int_equal(ftruncate(fileno(u.err), 0), 0);
	assert_int_equal(lseek(fileno(u.err), 0, SEEK_SET), 0);
	assert_int_equal(run_unprivileged(load_as_user, &u), 0);
	rewind(u.err);
	n = fread(got, 1, sizeof(got) - 1, u.err);
	got[n] = 0;
	fclose(u.err);
	snprintf(expect, sizeof(expect), "prowl: error: cannot read config file '%s': Permission denied\n", u.path);
	assert_string_equal(got, expect);
	assert_int_equal(chmod(tmpdir, 0700), 0);
}

/* A FIFO named as the config file is refused at once, not waited on; so is a file
 * nested deeper than 64 levels, with the line where it goes too deep. */
static void test_hostile_files(void **state)
{
	struct agent_config c;
	struct capture cap;
	char fifo[160], expect[512], *err, *deep;
	const char *path;
	int r;

	(void)state;
	snprintf(fifo, sizeof(fifo), "%s/fifo.yaml", tmpdir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	fd_capture_begin(&cap, 2);
	r = load(&c, NULL, ARGS("--config", fifo));
	err = fd_capture_end(&cap);
	assert_int_equal(r, -EINVAL);
	snprintf(expect, sizeof(expect), "prowl: error: cannot read config file '%s': not a regular file\n", fifo);
	assert_string_equal(err, expect);

	deep = calloc(1, 200);
	assert_non_null(deep);
	strcpy(deep, "log:\n  level: info\nlabels:\n  x: ");
	for (int i = 0; i < 63; i++) /* the file and labels are 2 levels: the 63rd [ is the 65th */
		strcat(deep, i < 62 ? "[" : "\n  [");
	path = write_file("deep.yaml", deep);
	free(deep);
	fd_capture_begin(&cap, 2);
	r = load(&c, NULL, ARGS("--config", path));
	err = fd_capture_end(&cap);
	assert_int_equal(r, -EINVAL);
	snprintf(expect, sizeof(expect), "prowl: error: %s:5: nested more than 64 levels deep: a configuration "
		 "needs at most 4\n", path);
	assert_string_equal(err, expect);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_env_warns),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_size_keys_bounded),
		cmocka_unit_test(test_unreadable_file),
		cmocka_unit_test(test_hostile_files),
	};

	log_set_prefix("prowl");
	log_set_format(LOG_FMT_PLAIN);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

/* test_config.c: unit tests of `prowl agent`'s configuration: a full file, precedence
 * (file < env < flags), --check's masked output, and one precise error per invalid input. */
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

static char tmpdir[64];
static char cert_path[128], key_path[128], ca_path[128];

/* Writes name in the temporary directory; returns its path (static until the next call). */
static const char *write_file(const char *name, const char *content)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, 0600), 0);
	return path;
}

/* Redirects fd (1 or 2) to a file until fd_capture_end, which returns what was written. */
struct capture {
	int fd, saved;
	char path[128];
};

static void fd_capture_begin(struct capture *c, int fd)
{
	int tmp;

	fflush(fd == 1 ? stdout : stderr);
	c->fd = fd;
	snprintf(c->path, sizeof(c->path), "%s/capture.%d", tmpdir, fd);
	tmp = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(tmp >= 0);
	c->saved = dup(fd);
	assert_true(c->saved >= 0);
	assert_true(dup2(tmp, fd) >= 0);
	close(tmp);
}

static char *fd_capture_end(struct capture *c)
{
	static char buf[8192];
	ssize_t n;
	int fd;

	fflush(c->fd == 1 ? stdout : stderr);
	assert_true(dup2(c->saved, c->fd) >= 0);
	close(c->saved);
	fd = open(c->path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = 0;
	return buf;
}

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Loads with argv = "agent" + args (NULL-terminated) and the given environment. */
static int load(struct agent_config *c, char **envp, const char *const *args)
{
	char *argv[32] = { "agent" };
	int argc = 1;
	static char *empty_env[] = { NULL };

	for (; args && *args; args++) {
		assert_true(argc < 31);
		argv[argc++] = (char *)*args;
	}
	return agent_config_load(argc, argv, envp ? envp : empty_env, c);
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static int group_setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/prowl-test-config.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(cert_path, sizeof(cert_path), "%s/client.crt", tmpdir);
	snprintf(key_path, sizeof(key_path), "%s/client.key", tmpdir);
	snprintf(ca_path, sizeof(ca_path), "%s/ca.crt", tmpdir);
	write_file("client.crt", "cert\n");
	write_file("client.key", "key\n");
	write_file("ca.crt", "ca\n");
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int group_teardown(void **state)
{
	(void)state;
	return nftw(tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void test_defaults(void **state)
{
	struct agent_config c;
	char host[256] = "";

	(void)state;
	assert_int_equal(load(&c, NULL, NULL), 0);
	gethostname(host, sizeof(host) - 1);
	assert_int_equal(c.frequency, 19);
	assert_int_equal(c.interval_ms, 10000);
	assert_false(c.idle);
	assert_false(c.per_thread);
	assert_int_equal(c.unwind, UNWIND_DWARF);
	assert_string_equal(c.hostname, host);
	assert_int_equal(c.nlabels, 0);
	assert_string_equal(c.state_dir, "/var/lib/prowl");
	assert_int_equal(c.log.level, LOG_LVL_INFO);
	assert_int_equal(c.log.format, LOG_FMT_LOGFMT);
	assert_true(c.metrics.enabled);
	assert_string_equal(c.metrics.address, "127.0.0.1:9464");
	assert_int_equal(c.limits.max_series, 1000);
	assert_int_equal(c.limits.max_stacks_per_window, 200000);
	assert_int_equal(c.limits.symbol_cache_entries, 100000);
	assert_int_equal(c.limits.max_processes, 32768);
	assert_int_equal(c.shutdown_timeout_ms, 10000);
	assert_int_equal(c.spool.max_bytes, 64ull << 20);
	assert_int_equal(c.spool.max_age_ms, 3600ull * 1000);
	/* The embedded default: the directory exporter, nothing else. */
	assert_true(c.exporters.dir.enabled);
	assert_string_equal(c.exporters.dir.path, "/var/lib/prowl/profiles");
	assert_int_equal(c.exporters.dir.max_age_ms, 24ull * 3600 * 1000);
	assert_int_equal(c.exporters.dir.max_size_bytes, 1ull << 30);
	assert_false(c.exporters.pyroscope.enabled);
	assert_null(c.exporters.pyroscope.target.url);
	assert_int_equal(c.exporters.pyroscope.target.timeout_ms, 10000);
	assert_int_equal(c.exporters.pyroscope.target.buffer_bytes, 64ull << 20);
	assert_int_equal(c.exporters.pyroscope.target.max_retries, 0);
	assert_int_equal(c.exporters.pyroscope_api, PYRO_API_INGEST);
	assert_false(c.exporters.otlp.enabled);
	assert_false(c.exporters.parca.enabled);
	assert_null(c.config_path);
	assert_false(c.check);
	agent_config_free(&c);
}

static void test_full_file(void **state)
{
	struct agent_config c;
	struct capture cap;
	char *yaml, *err;
	const char *path;
	int r;

	(void)state;
	assert_true(asprintf(&yaml,
			     "# every key, none at its default\n"
			     "frequency: 49\n"
			     "interval: 1m30s\n"
			     "idle: yes\n"
			     "per_thread: true\n"
			     "unwind: fp\n"
			     "hostname: web-1\n"
			     "labels:\n"
			     "  env: prod\n"
			     "  region: \"eu west\"\n"
			     "state_dir: /srv/prowl\n"
			     "log: {level: debug, format: json}\n"
			     "metrics:\n"
			     "  enabled: false\n"
			     "  address: \"[::1]:9999\"\n"
			     "limits:\n"
			     "  max_series: 50\n"
			     "  max_stacks_per_window: 5000\n"
			     "  symbol_cache_entries: 2000\n"
			     "  max_processes: 1024\n"
			     "shutdown_timeout: 1500ms\n"
			     "spool: {max_size: 128MiB, max_age: 2h}\n"
			     "exporters:\n"
			     "  dir:\n"
			     "    enabled: true\n"
			     "    path: /data/profiles\n"
			     "    max_age: 2h\n"
			     "    max_size: 512MiB\n"
			     "  pyroscope:\n"
			     "    url: https://pyro.example.com:4443/base/\n"
			     "    api: push\n"
			     "    basic_user: alice\n"
			     "    basic_password: 'pa ss'\n"
			     "    tenant: team-a\n"
			     "    ca_file: %s\n"
			     "    cert_file: %s\n"
			     "    key_file: %s\n"
			     "    insecure_skip_verify: true\n"
			     "    timeout: 3s\n"
			     "    buffer_size: 8MiB\n"
			     "    max_retries: 5\n"
			     "  otlp:\n"
			     "    url: http://otel:4318\n"
			     "    bearer_token: tok\n"
			     "    timeout: 250ms\n"
			     "  parca:\n"
			     "    url: http://[fd00::1]:7070\n"
			     "    max_retries: 1\n",
			     ca_path, cert_path, key_path) > 0);
	path = write_file("full.yaml", yaml);
	free(yaml);
	fd_capture_begin(&cap, 2);
	r = load(&c, NULL, ARGS("--config", path));
	err = fd_capture_end(&cap);
	assert_string_equal(err, "");
	assert_int_equal(r, 0);
	assert_int_equal(c.frequency, 49);
	assert_int_equal(c.interval_ms, 90000);
	assert_true(c.idle);
	assert_true(c.per_thread);
	assert_int_equal(c.unwind, UNWIND_FP);
	assert_string_equal(c.hostname, "web-1");
	assert_int_equal(c.nlabels, 2);
	assert_string_equal(c.labels[0].name, "env");
	assert_string_equal(c.labels[0].value, "prod");
	assert_string_equal(c.labels[1].name, "region");
	assert_string_equal(c.labels[1].value, "eu west");
	assert_string_equal(c.state_dir, "/srv/prowl");
	assert_int_equal(c.log.level, LOG_LVL_DEBUG);
	assert_int_equal(c.log.format, LOG_FMT_JSON);
	assert_false(c.metrics.enabled);
	assert_string_equal(c.metrics.address, "[::1]:9999");
	assert_int_equal(c.limits.max_series, 50);
	assert_int_equal(c.limits.max_stacks_per_window, 5000);
	assert_int_equal(c.limits.symbol_cache_entries, 2000);
	assert_int_equal(c.limits.max_processes, 1024);
	assert_int_equal(c.shutdown_timeout_ms, 1500);
	assert_int_equal(c.spool.max_bytes, 128ull << 20);
	assert_int_equal(c.spool.max_age_ms, 2 * 3600 * 1000);
	assert_true(c.exporters.dir.enabled);
	assert_string_equal(c.exporters.dir.path, "/data/profiles");
	assert_int_equal(c.exporters.dir.max_age_ms, 2 * 3600 * 1000);
	assert_int_equal(c.exporters.dir.max_size_bytes, 512ull << 20);

	assert_true(c.exporters.pyroscope.enabled);
	assert_int_equal(c.exporters.pyroscope_api, PYRO_API_PUSH);
	assert_string_equal(c.exporters.pyroscope.target.url, "https://pyro.example.com:4443/base");
	assert_string_equal(c.exporters.pyroscope.target.basic_user, "alice");
	assert_string_equal(c.exporters.pyroscope.target.basic_password, "pa ss");
	assert_null(c.exporters.pyroscope.target.bearer_token);
	assert_string_equal(c.exporters.pyroscope.target.tenant, "team-a");
	assert_string_equal(c.exporters.pyroscope.target.ca_file, ca_path);
	assert_string_equal(c.exporters.pyroscope.target.cert_file, cert_path);
	assert_string_equal(c.exporters.pyroscope.target.key_file, key_path);
	assert_true(c.exporters.pyroscope.target.insecure_skip_verify);
	assert_int_equal(c.exporters.pyroscope.target.timeout_ms, 3000);
	assert_int_equal(c.exporters.pyroscope.target.buffer_bytes, 8ull << 20);
	assert_int_equal(c.exporters.pyroscope.target.max_retries, 5);

	assert_true(c.exporters.otlp.enabled);
	assert_string_equal(c.exporters.otlp.target.url, "http://otel:4318");
	assert_string_equal(c.exporters.otlp.target.bearer_token, "tok");
	assert_null(c.exporters.otlp.target.basic_user);
	assert_int_equal(c.exporters.otlp.target.timeout_ms, 250);
	assert_int_equal(c.exporters.otlp.target.buffer_bytes, 64ull << 20);

	assert_true(c.exporters.parca.enabled);
	assert_string_equal(c.exporters.parca.target.url, "http://[fd00::1]:7070");
	assert_int_equal(c.exporters.parca.target.max_retries, 1);
	assert_string_equal(c.config_path, path);
	agent_config_free(&c);
	/* Freeing twice is harmless: free zeroes the struct. */
	agent_config_free(&c);
}

static void test_precedence(void **state)
{
	extern char **environ;
	struct agent_config c;
	char path[256], other[256];

	(void)state;
	snprintf(path, sizeof(path), "%s", write_file("prec.yaml", "frequency: 50\n"
				       "interval: 20s\n"
				       "hostname: from-file\n"
				       "labels: {env: prod, team: core}\n"
				       "log: {level: warn}\n"
				       "exporters:\n"
				       "  pyroscope: {url: 'http://file:4040'}\n"));

	/* File only (through PROWL_CONFIG). */
	setenv("PROWL_CONFIG", path, 1);
	assert_int_equal(load(&c, environ, NULL), 0);
	assert_int_equal(c.frequency, 50);
	assert_int_equal(c.interval_ms, 20000);
	assert_string_equal(c.hostname, "from-file");
	assert_int_equal(c.log.level, LOG_LVL_WARN);
	assert_string_equal(c.exporters.pyroscope.target.url, "http://file:4040");
	assert_false(c.exporters.dir.enabled); /* another exporter is configured */
	assert_string_equal(c.config_path, path);
	agent_config_free(&c);

	/* Env over file. */
	setenv("PROWL_FREQUENCY", "60", 1);
	setenv("PROWL_LOG_LEVEL", "error", 1);
	setenv("PROWL_LABELS", "env=staging, region=eu", 1);
	setenv("PROWL_PYROSCOPE_URL", "http://env:4040", 1);
	assert_int_equal(load(&c, environ, NULL), 0);
	assert_int_equal(c.frequency, 60);
	assert_int_equal(c.interval_ms, 20000);
	assert_int_equal(c.log.level, LOG_LVL_ERROR);
	assert_string_equal(c.exporters.pyroscope.target.url, "http://env:4040");
	assert_int_equal(c.nlabels, 3);
	assert_string_equal(c.labels[0].name, "env");
	assert_string_equal(c.labels[0].value, "staging");
	assert_string_equal(c.labels[1].name, "team");
	assert_string_equal(c.labels[1].value, "core");
	assert_string_equal(c.labels[2].name, "region");
	assert_string_equal(c.labels[2].value, "eu");
	agent_config_free(&c);

	/* Flags over env; a later flag over an earlier one; --config over PROWL_CONFIG. */
	snprintf(other, sizeof(other), "%s", write_file("prec2.yaml", "interval: 30s\n"));
	assert_int_equal(load(&c, environ, ARGS("-F", "70", "--label", "region=us,east", "--label", "team=x",
						"--pyroscope-url", "", "--dir", "/out", "-v", "--config", other,
						"--check")),
			 0);
	assert_int_equal(c.frequency, 70);
	assert_int_equal(c.interval_ms, 30000); /* from prec2.yaml, not prec.yaml */
	assert_int_equal(c.log.level, LOG_LVL_DEBUG);
	assert_string_not_equal(c.hostname, "from-file"); /* prec.yaml was not read */
	assert_int_equal(c.nlabels, 3); /* env from env; region, team from flags */
	assert_string_equal(c.labels[0].value, "staging");
	assert_string_equal(c.labels[1].name, "region");
	assert_string_equal(c.labels[1].value, "us,east");
	assert_string_equal(c.labels[2].name, "team");
	assert_string_equal(c.labels[2].value, "x");
	assert_false(c.exporters.pyroscope.enabled); /* an empty URL disables */
	assert_true(c.exporters.dir.enabled);
	assert_string_equal(c.exporters.dir.path, "/out");
	assert_true(c.check);
	assert_string_equal(c.config_path, other);
	agent_config_free(&c);

	unsetenv("PROWL_CONFIG");
	unsetenv("PROWL_FREQUENCY");
	unsetenv("PROWL_LOG_LEVEL");
	unsetenv("PROWL_LABELS");
	unsetenv("PROWL_PYROSCOPE_URL");
}

static void test_team_label_flag(void **state)
{
	struct agent_config c;
	char *env[] = { "PROWL_LABELS=a=1,b=2", NULL };

	(void)state;
	assert_int_equal(load(&c, env, ARGS("--label", "b=3", "--label", "c=4")), 0);
	assert_int_equal(c.nlabels, 3);
	assert_string_equal(c.labels[0].value, "1");
	assert_string_equal(c.labels[1].value, "3");
	assert_string_equal(c.labels[2].name, "c");
	agent_config_free(&c);
}

static void test_dir_default(void **state)
{
	struct agent_config c;
	const char *path;

	(void)state;
	/* A path given enables the directory next to another exporter. */
	path = write_file("dir1.yaml", "exporters:\n"
				       "  dir: {path: /x}\n"
				       "  otlp: {url: 'http://o:4318'}\n");
	assert_int_equal(load(&c, NULL, ARGS("--config", path)), 0);
	assert_true(c.exporters.dir.enabled);
	assert_true(c.exporters.otlp.enabled);
	agent_config_free(&c);

	/* enabled: false wins over the path. */
	path = write_file("dir2.yaml", "exporters:\n"
				       "  dir: {path: /x, enabled: false}\n"
				       "  parca: {url: 'http://p:7070'}\n");
	assert_int_equal(load(&c, NULL, ARGS("--config", path)), 0);
	assert_false(c.exporters.dir.enabled);
	assert_true(c.exporters.parca.enabled);
	agent_config_free(&c);

	/* Both, with the env. */
	{
		char *env[] = { "PROWL_DIR_ENABLED=true", "PROWL_PARCA_URL=http://p:7070", "PROWL_STATE_DIR=/s",
				"PROWL_DIR_MAX_AGE=0", "PROWL_DIR_MAX_SIZE=0", NULL };

		assert_int_equal(load(&c, env, NULL), 0);
		assert_true(c.exporters.dir.enabled);
		assert_int_equal(c.exporters.dir.max_age_ms, 0); /* keep forever */
		assert_int_equal(c.exporters.dir.max_size_bytes, 0);
		assert_string_equal(c.exporters.dir.path, "/s/profiles");
		assert_true(c.exporters.parca.enabled);
		agent_config_free(&c);
	}
}

static void test_check_print_masks_secrets(void **state)
{
	struct agent_config c, c2;
	char *yaml, *out = NULL, *out2 = NULL;
	size_t len = 0, len2 = 0;
	const char *path;
	char *env[] = { "PROWL_OTLP_BEARER_TOKEN=env-token-XYZ", NULL };
	FILE *f;

	(void)state;
	assert_true(asprintf(&yaml,
			     "labels: {env: prod}\n"
			     "exporters:\n"
			     "  pyroscope:\n"
			     "    url: http://p:4040\n"
			     "    basic_user: bob\n"
			     "    basic_password: hunter2-secret\n"
			     "    cert_file: %s\n"
			     "    key_file: %s\n"
			     "  otlp:\n"
			     "    url: https://o\n",
			     cert_path, key_path) > 0);
	path = write_file("check.yaml", yaml);
	free(yaml);
	assert_int_equal(load(&c, env, ARGS("--config", path, "--check")), 0);
	assert_true(c.check);
	f = open_memstream(&out, &len);
	assert_non_null(f);
	agent_config_print(&c, f);
	fclose(f);
	assert_non_null(strstr(out, "basic_password: \"***\""));
	assert_non_null(strstr(out, "bearer_token: \"***\""));
	assert_null(strstr(out, "hunter2"));
	assert_null(strstr(out, "env-token-XYZ"));
	assert_non_null(strstr(out, "basic_user: \"bob\""));
	assert_non_null(strstr(out, "\nfrequency: 19\n"));
	assert_non_null(strstr(out, "\n  env: \"prod\"\n"));
	assert_non_null(strstr(out, "\n    max_age: 24h\n"));
	assert_non_null(strstr(out, "\n  pyroscope:  # enabled\n"));
	assert_non_null(strstr(out, "\n  parca:  # disabled: no url\n"));

	/* The output is a configuration file itself: it loads back to the same output. */
	path = write_file("printed.yaml", out);
	assert_int_equal(load(&c2, NULL, ARGS("--config", path)), 0);
	f = open_memstream(&out2, &len2);
	assert_non_null(f);
	agent_config_print(&c2, f);
	fclose(f);
	assert_string_equal(strchr(strstr(out2, "config file:"), '\n'), strchr(strstr(out, "config file:"), '\n'));
	assert_string_equal(c2.exporters.pyroscope.target.basic_password, "***");
	free(out);
	free(out2);
	agent_config_free(&c);
	agent_config_free(&c2);
}

static void test_help(void **state)
{
	struct agent_config c;
	struct capture cap;
	char *out;
	int r;

	(void)state;
	fd_capture_begin(&cap, 1);
	r = load(&c, NULL, ARGS("--frequency", "5", "--help"));
	out = fd_capture_end(&cap);
	assert_int_equal(r, 1);
	assert_non_null(strstr(out, "Usage: prowl agent"));
	assert_non_null(strstr(out, "Examples:"));
	assert_non_null(strstr(out, "--pyroscope-url"));
	assert_null(c.hostname);
}

static void test_reload_is_reentrant(void **state)
{
	struct agent_config a, b;
	const char *path;
	char *pa = NULL, *pb = NULL;
	size_t la, lb;
	FILE *f;

	(void)state;
	path = write_file("reload.yaml", "frequency: 33\nlabels: {a: b}\n");
	assert_int_equal(load(&a, NULL, ARGS("--config", path, "--interval", "5s", "--idle")), 0);
	assert_int_equal(load(&b, NULL, ARGS("--config", path, "--interval", "5s", "--idle")), 0);
	f = open_memstream(&pa, &la);
	agent_config_print(&a, f);
	fclose(f);
	f = open_memstream(&pb, &lb);
	agent_config_print(&b, f);
	fclose(f);
	assert_string_equal(pa, pb);
	assert_int_equal(b.frequency, 33);
	assert_int_equal(b.interval_ms, 5000);
	assert_true(b.idle);
	free(pa);
	free(pb);
	agent_config_free(&a);
	agent_config_free(&b);
}

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
	  ":2: unknown key 'frequncy' (known: frequency, interval, idle, include_self, per_thread, unwind, python, java, node, off_cpu, off_cpu_threshold, demangle, hostname, symbols, labels, "
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

/* Kubernetes on in a cluster (auto), the URL and node from the environment; off
 * when told; the series labels rules may use. */
static void test_kubernetes(void **state)
{
	char *env[] = { "KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=6443", "NODE_NAME=node-7", NULL };
	char *env6[] = { "KUBERNETES_SERVICE_HOST=fd00::1", "NODE_NAME=n", NULL };
	const char *names[64];
	struct agent_config c;
	bool has_ns = false, has_team = false, has_cid = false;
	size_t n;

	(void)state;
	assert_int_equal(load(&c, env, NULL), 0);
	assert_true(c.kubernetes.on);
	assert_string_equal(c.kubernetes.api_url, "https://10.0.0.1:6443");
	assert_string_equal(c.kubernetes.node_name, "node-7");
	/* The default token file is dropped when it is not there (outside a pod). */
	if (access("/var/run/secrets/kubernetes.io/serviceaccount/token", R_OK) < 0)
		assert_null(c.kubernetes.token_file);
	else
		assert_string_equal(c.kubernetes.token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token");
	agent_config_free(&c);
	assert_int_equal(load(&c, env6, NULL), 0);
	assert_string_equal(c.kubernetes.api_url, "https://[fd00::1]:443");
	agent_config_free(&c);
	assert_int_equal(load(&c, env, ARGS("--config", write_file("k8s-off.yaml", "kubernetes:\n  enabled: false\n"))), 0);
	assert_false(c.kubernetes.on);
	agent_config_free(&c);
	assert_int_equal(load(&c, NULL, NULL), 0);
	assert_false(c.kubernetes.on);
	agent_config_free(&c);
	/* Rules may match on relabel targets and the Kubernetes labels. */
	assert_int_equal(load(&c, NULL, ARGS("--config", write_file("relabel.yaml",
		"labels: {namespace: x}\n"
		"relabel_configs:\n  - source_labels: [__meta_kubernetes_pod_label_team]\n    target_label: team\n"
		"recording_rules:\n  - metric: team_cpu_seconds_total\n    match: {team: '=~.+'}\n"
		"    group_by: [team, namespace, container]\n"))), 0);
	n = agent_config_series_labels(&c, names, 64);
	for (size_t i = 0; i < n; i++) {
		has_ns += strcmp(names[i], "namespace") == 0;
		has_team += strcmp(names[i], "team") == 0;
		has_cid += strcmp(names[i], "container_id") == 0;
	}
	assert_int_equal(has_ns, 1); /* once, though it is also a static label */
	assert_int_equal(has_team, 1);
	assert_int_equal(has_cid, 1);
	assert_int_equal(c.relabel.n, 1);
	agent_config_free(&c);
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
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_full_file),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_team_label_flag),
		cmocka_unit_test(test_dir_default),
		cmocka_unit_test(test_check_print_masks_secrets),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_reload_is_reentrant),
		cmocka_unit_test(test_unknown_env_warns),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_size_keys_bounded),
		cmocka_unit_test(test_kubernetes),
		cmocka_unit_test(test_unreadable_file),
		cmocka_unit_test(test_hostile_files),
	};

	log_set_prefix("prowl");
	log_set_format(LOG_FMT_PLAIN);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

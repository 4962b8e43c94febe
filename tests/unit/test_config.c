/* test_config.c: unit tests of `prowl agent`'s configuration as it should load: defaults,
 * a full file, precedence (file < env < flags), --check's masked output, Kubernetes. */
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
		cmocka_unit_test(test_kubernetes),
	};

	log_set_prefix("prowl");
	log_set_format(LOG_FMT_PLAIN);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

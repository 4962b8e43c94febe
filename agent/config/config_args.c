/* config_args.c: the agent's PROWL_* environment variables and command-line flags,
 * and its --help text. */
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
	"Series carry the process's container id, or in Kubernetes its namespace, pod,\n"
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
	"      --python MODE          on (default: CPython 3.11-3.13 functions with file and\n"
	"                             line; needs dwarf unwinding: with fp, on is refused and\n"
	"                             the default turns off with a warning) or off\n"
	"      --java MODE            on (default: HotSpot JVMs' Java methods, interpreted and\n"
	"                             compiled, with file and line; needs dwarf unwinding) or\n"
	"                             off (the JVM's code is [jit] frames)\n"
	"      --node MODE            on (default: node's JavaScript functions, unwound through\n"
	"                             V8's frames; needs dwarf unwinding) or off ([jit] frames)\n"
	"      --demangle MODE        C++ and Rust names: templates (default: std::vector<int>::push_back),\n"
	"                             full (with parameters) or none (linkage names as they are)\n"
	"      --per-thread           label samples with tid and thread name\n"
	"      --idle                 keep samples of idle CPUs\n"
	"      --include-self         keep samples of prowl itself (dropped by default)\n"
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

const char *cfg_env_lookup(char **envp, const char *name)
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

	for (size_t i = 0; i < cfg_nrenamed; i++) {
		cfg_env_name(&(struct key_def){ .path = cfg_renamed[i].old }, old, sizeof(old));
		if (strlen(old) == n && strncmp(old, e, n) == 0) {
			cfg_env_name(cfg_find_key(cfg_renamed[i].now), buf, size);
			return buf;
		}
	}
	return NULL;
}

int cfg_load_env(struct load *l, char **envp)
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
		for (size_t i = 0; i < cfg_nkeys && !k; i++) {
			cfg_env_name(&cfg_keys[i], name, sizeof(name));
			if (strlen(name) == n && strncmp(name, *e, n) == 0)
				k = &cfg_keys[i];
		}
		if (!k) {
			if (renamed_env(*e, n, name, sizeof(name)))
				log_warn("environment variable %.*s ignored: it was replaced by %s", (int)n, *e, name);
			else
				log_warn("unknown environment variable %.*s ignored (see docs/configuration.md for the "
					 "PROWL_* variables)", (int)n, *e);
			continue;
		}
		r = cfg_set_value(l, k, eq + 1, &o);
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
	OPT_PYTHON,
	OPT_JAVA,
	OPT_NODE,
	OPT_DEMANGLE,
	OPT_PER_THREAD,
	OPT_IDLE,
	OPT_INCLUDE_SELF,
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
	{ "python", required_argument, NULL, OPT_PYTHON },
	{ "java", required_argument, NULL, OPT_JAVA },
	{ "node", required_argument, NULL, OPT_NODE },
	{ "demangle", required_argument, NULL, OPT_DEMANGLE },
	{ "per-thread", no_argument, NULL, OPT_PER_THREAD },
	{ "idle", no_argument, NULL, OPT_IDLE },
	{ "include-self", no_argument, NULL, OPT_INCLUDE_SELF },
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
	{ OPT_DEMANGLE, "--demangle", "demangle" },
	{ OPT_PER_THREAD, "--per-thread", "per_thread", "true" },
	{ OPT_IDLE, "--idle", "idle", "true" },
	{ OPT_INCLUDE_SELF, "--include-self", "include_self", "true" },
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
int cfg_parse_flags(int argc, char **argv, struct agent_config *c, struct pending *pend, size_t *npend)
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
		case OPT_PYTHON: /* on/off, as record takes them; each key (the option's name) is a boolean */
		case OPT_JAVA:
		case OPT_NODE: {
			const char *key = option_name(ch);

			if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
				log_error("unknown --%s mode '%s': use on or off", key, optarg);
				return -EINVAL;
			}
			pend[(*npend)++] = (struct pending){ .key = cfg_find_key(key),
							     .value = optarg[1] == 'n' ? "true" : "false",
							     .flag = ch == OPT_PYTHON ? "--python" : ch == OPT_JAVA ? "--java" : "--node" };
			continue;
		}
		default:
			break;
		}
		for (size_t i = 0; i < ARRAY_SIZE(opt_keys); i++) {
			if (opt_keys[i].opt != ch)
				continue;
			pend[(*npend)++] = (struct pending){
				.key = opt_keys[i].key ? cfg_find_key(opt_keys[i].key) : NULL,
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

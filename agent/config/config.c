/* config.c: loads `prowl agent`'s configuration from defaults, a YAML file, PROWL_*
 * variables and flags, in that order (see config_*.c), then checks the rules across keys. */
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


static int check_file(struct load *l, const struct key_def *k)
{
	const char *path = *(char *const *)cfg_field(l->cfg, k);
	struct stat st;

	if (!path)
		return 0;
	if (stat(path, &st) < 0 || access(path, R_OK) < 0)
		return cfg_error(l, &l->origins[k - cfg_keys], k->path, false, "cannot read '%s': %s", path,
				 strerror(errno));
	if (!S_ISREG(st.st_mode))
		return cfg_error(l, &l->origins[k - cfg_keys], k->path, false, "'%s' is not a regular file", path);
	return 0;
}

static const struct key_def *http_key(const char *exporter, const char *name)
{
	char path[MAX_KEY_PATH];

	snprintf(path, sizeof(path), "exporters.%s.%s", exporter, name);
	return cfg_find_key(path);
}

/* Cross-cfg_field rules of one HTTP exporter, checked only when it is enabled. */
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
		return cfg_error(l, &l->origins[user - cfg_keys], user->path, false,
				 "basic_user is set without basic_password: set both (the password in the "
				 "file or the environment)");
	if (t->basic_password && !t->basic_user)
		return cfg_error(l, &l->origins[pass - cfg_keys], pass->path, true,
				 "basic_password is set without basic_user: set both");
	if (t->bearer_token && t->basic_user)
		return cfg_error(l, &l->origins[token - cfg_keys], token->path, true,
				 "bearer_token and basic_user/basic_password exclude each other: use one");
	if (t->cert_file && !t->key_file)
		return cfg_error(l, &l->origins[cert - cfg_keys], cert->path, false,
				 "cert_file is set without key_file: a client certificate needs both");
	if (t->key_file && !t->cert_file)
		return cfg_error(l, &l->origins[key - cfg_keys], key->path, false,
				 "key_file is set without cert_file: a client certificate needs both");
	for (size_t i = 0; i < cfg_nkeys; i++) {
		if (cfg_keys[i].type != K_FILE || strncmp(cfg_keys[i].path + 10, name, strlen(name)) != 0 ||
		    cfg_keys[i].path[10 + strlen(name)] != '.')
			continue;
		r = check_file(l, &cfg_keys[i]);
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
	const struct key_def *en = cfg_find_key("kubernetes.enabled"), *url = cfg_find_key("kubernetes.api_url"),
			     *node = cfg_find_key("kubernetes.node_name");
	const char *host = cfg_env_lookup(l->envp, "KUBERNETES_SERVICE_HOST");
	const char *port = cfg_env_lookup(l->envp, "KUBERNETES_SERVICE_PORT");
	const char *node_env = cfg_env_lookup(l->envp, "NODE_NAME");
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
			return cfg_error(l, &l->origins[url - cfg_keys], url->path, false,
					 "KUBERNETES_SERVICE_HOST/PORT do not make a URL (%s: %s): set kubernetes.api_url",
					 c->kubernetes.api_url, why);
	}
	if (!c->kubernetes.api_url) {
		if (c->kubernetes.enabled == KUBE_ON)
			return cfg_error(l, &l->origins[en - cfg_keys], en->path, false,
					 "Kubernetes is on but there is no API server: set kubernetes.api_url, or run "
					 "in a pod (KUBERNETES_SERVICE_HOST)");
		return 0;
	}
	c->kubernetes.on = true;
	if (!c->kubernetes.node_name && node_env && *node_env) {
		r = cfg_set_value(l, node, node_env, &(struct origin){ .kind = ORIGIN_ENV, .env = node_env - strlen("NODE_NAME=") });
		if (r < 0)
			return r;
	}
	if (!c->kubernetes.node_name)
		return cfg_error(l, &l->origins[node - cfg_keys], node->path, false,
				 "the node's name is unknown: set kubernetes.node_name or NODE_NAME (the DaemonSet "
				 "sets it from spec.nodeName), so that only this node's pods are listed");
	/* Files named on purpose must be readable now; the service account
	 * defaults may be missing outside a cluster: then no token is sent and the
	 * system's CAs verify the server. */
	for (size_t i = 0; i < cfg_nkeys; i++) {
		char **file = cfg_field(c, &cfg_keys[i]);

		if (strncmp(cfg_keys[i].path, "kubernetes.", 11) != 0 || !strstr(cfg_keys[i].path, "_file"))
			continue;
		if (l->origins[i].kind != ORIGIN_DEFAULT && (r = check_file(l, &cfg_keys[i])) < 0)
			return r;
		if (l->origins[i].kind == ORIGIN_DEFAULT && *file && access(*file, R_OK) < 0) {
			free(*file);
			*file = NULL;
		}
	}
	return 0;
}

/* Python frames come from the DWARF unwinder: python: true set with unwind: fp
 * cannot take effect (an error at its source); the default gives way (said once
 * if CPython is sampled), and --check prints python: false (decisions.md). */
static int check_python(struct load *l)
{
	const struct key_def *py = cfg_find_key("python");

	if (l->cfg->unwind != UNWIND_FP || !l->cfg->python)
		return 0;
	if (l->origins[py - cfg_keys].kind != ORIGIN_DEFAULT)
		return cfg_error(l, &l->origins[py - cfg_keys], py->path, false,
				 "Python frames need unwind: dwarf (frame pointers alone read none): set unwind "
				 "to dwarf, or python to false");
	l->cfg->python = false;
	l->cfg->python_fp = true;
	return 0;
}

/* Java and JavaScript (node) frames come from the DWARF unwinder too: key (java,
 * node) true set with unwind: fp is an error at its source; the default gives way
 * (the runtime's code keeps its [jit] frames). what: the frames, for the message. */
static int check_needs_dwarf(struct load *l, const char *key, bool *on, const char *what)
{
	const struct key_def *k = cfg_find_key(key);

	if (l->cfg->unwind != UNWIND_FP || !*on)
		return 0;
	if (l->origins[k - cfg_keys].kind != ORIGIN_DEFAULT)
		return cfg_error(l, &l->origins[k - cfg_keys], k->path, false,
				 "%s frames need unwind: dwarf (frame pointers alone read none): set unwind "
				 "to dwarf, or %s to false", what, key);
	*on = false;
	return 0;
}

/* Defaults that depend on other settings, and rules across cfg_keys. */
static int finalize(struct load *l)
{
	struct agent_config *c = l->cfg;
	const struct key_def *enabled = cfg_find_key("exporters.dir.enabled"), *dpath = cfg_find_key("exporters.dir.path");
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
	r = check_python(l);
	if (r == 0)
		r = check_needs_dwarf(l, "java", &l->cfg->java, "Java");
	if (r == 0)
		r = check_needs_dwarf(l, "node", &l->cfg->node, "JavaScript");
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
	if (l->origins[enabled - cfg_keys].kind == ORIGIN_DEFAULT)
		c->exporters.dir.enabled = !any_http || l->origins[dpath - cfg_keys].kind != ORIGIN_DEFAULT;
	if (!c->exporters.dir.enabled && !any_http)
		return cfg_error(l, &l->origins[enabled - cfg_keys], enabled->path, false,
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
	for (size_t i = 0; i < cfg_nkeys; i++) {
		r = cfg_set_value(l, &cfg_keys[i], cfg_keys[i].def, &(struct origin){ .kind = ORIGIN_DEFAULT });
		if (r < 0)
			goto fail;
	}
	r = cfg_parse_flags(argc, argv, &c, pend, &npend);
	if (r != 0)
		goto fail;
	env_config = cfg_env_lookup(envp, "PROWL_CONFIG");
	if (!c.config_path && env_config && *env_config) {
		c.config_path = strdup(env_config);
		if (!c.config_path) {
			r = log_error_errno(-ENOMEM, "cannot load the configuration");
			goto fail;
		}
	}
	if (c.config_path) {
		l->path = c.config_path;
		r = cfg_load_file(l);
		if (r < 0)
			goto fail;
	}
	r = cfg_load_env(l, envp);
	if (r < 0)
		goto fail;
	for (size_t i = 0; i < npend; i++) {
		const struct origin o = { .kind = ORIGIN_FLAG, .flag = pend[i].flag };

		if (pend[i].key)
			r = cfg_set_value(l, pend[i].key, pend[i].value, &o);
		else
			r = cfg_labels_parse(l, &o, pend[i].value, false);
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
		ret[n++] = LABEL_SERVICE_NAME;
	if (n < max)
		ret[n++] = LABEL_HOST_NAME;
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
	free(c->symbols.debuginfod_urls);
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

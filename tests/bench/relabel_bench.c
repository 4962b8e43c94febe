/* relabel_bench.c: CPU cost of relabel_configs per new process: a pod's process's
 * discovery labels through the DaemonSet example's rules and through a longer set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yaml.h>

#include "labels/relabel.h"
#include "log.h"

#define ROUNDS 200000

/* The DaemonSet ConfigMap's rules. */
static const char example[] =
	"- source_labels: [__meta_kubernetes_namespace]\n  regex: prowl\n  action: drop\n"
	"- source_labels: [__meta_kubernetes_pod_label_team]\n  target_label: team\n";

/* Twelve rules of the kinds people write: keep namespaces, map labels, rename, shard. */
static const char longer[] =
	"- source_labels: [__meta_kubernetes_namespace]\n  regex: 'kube-system|monitoring'\n  action: drop\n"
	"- source_labels: [__meta_kubernetes_namespace]\n  regex: '(shop|payments|search)-(\\d+)'\n  action: keep\n"
	"- regex: __meta_kubernetes_pod_label_(team|tier|version)\n  action: labelmap\n"
	"- source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_name]\n  target_label: service_name\n"
	"- source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_pod_container_name]\n  separator: /\n"
	"  regex: '(.+)/(.+)'\n  replacement: '$1-$2'\n  target_label: component\n"
	"- source_labels: [__meta_kubernetes_pod_name]\n  modulus: 8\n  target_label: shard\n  action: hashmod\n"
	"- source_labels: [tier]\n  target_label: tier\n  action: lowercase\n"
	"- source_labels: [__meta_process_executable]\n  regex: '.*/(java|python3?|node)'\n  replacement: '$1'\n"
	"  target_label: runtime\n"
	"- source_labels: [__meta_kubernetes_pod_labelpresent_canary]\n  regex: 'true'\n  replacement: canary\n"
	"  target_label: track\n"
	"- source_labels: [namespace]\n  target_label: __meta_kubernetes_namespace\n  action: keepequal\n"
	"- regex: 'version'\n  action: labeldrop\n"
	"- source_labels: [__meta_container_id]\n  regex: '(.{12}).*'\n  target_label: cid\n";

static void discovery_labels(struct labelset *s)
{
	static const char *const kv[][2] = {
		{ "__meta_process_pid", "48213" },
		{ "__meta_process_comm", "java" },
		{ "__meta_process_executable", "/usr/lib/jvm/java-17-openjdk-amd64/bin/java" },
		{ "__meta_process_cgroup", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b6a7d1c_8f2e_"
					   "4c3a_9b1d_2e3f4a5b6c7d.slice/cri-containerd-3f1a9c0e5b7d2f4a6c8e0b1d3f5a7"
					   "c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a.scope" },
		{ "__meta_systemd_unit", "" },
		{ "__meta_container_id", "3f1a9c0e5b7d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a" },
		{ "__meta_container_runtime", "containerd" },
		{ "__meta_kubernetes_namespace", "shop-3" },
		{ "__meta_kubernetes_pod_name", "checkout-7d9f8b6c5d-x2kq9" },
		{ "__meta_kubernetes_pod_uid", "0b6a7d1c-8f2e-4c3a-9b1d-2e3f4a5b6c7d" },
		{ "__meta_kubernetes_node_name", "node-17" },
		{ "__meta_kubernetes_pod_container_name", "app" },
		{ "host_name", "node-17" },
		{ "cluster", "prod-eu" },
		{ "namespace", "shop-3" },
		{ "pod", "checkout-7d9f8b6c5d-x2kq9" },
		{ "node", "node-17" },
		{ "container", "app" },
		{ "service_name", "checkout" },
	};
	static const char *const pod[][2] = {
		{ "app_kubernetes_io_name", "checkout" }, { "app_kubernetes_io_version", "2.14.1" },
		{ "app_kubernetes_io_part_of", "shop" },  { "pod_template_hash", "7d9f8b6c5d" },
		{ "team", "Payments" },			  { "tier", "Backend" },
		{ "version", "2.14.1" },		  { "release", "stable" },
	};
	char name[128];

	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		labelset_set(s, kv[i][0], kv[i][1]);
	for (size_t i = 0; i < sizeof(pod) / sizeof(pod[0]); i++) {
		snprintf(name, sizeof(name), "__meta_kubernetes_pod_label_%s", pod[i][0]);
		labelset_set(s, name, pod[i][1]);
		snprintf(name, sizeof(name), "__meta_kubernetes_pod_labelpresent_%s", pod[i][0]);
		labelset_set(s, name, "true");
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int load(const char *text, struct relabel_config *c)
{
	yaml_parser_t p;
	yaml_document_t d;
	int r;

	yaml_parser_initialize(&p);
	yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
	if (!yaml_parser_load(&p, &d))
		return -1;
	r = relabel_config_parse("bench", &d, yaml_document_get_root_node(&d), c);
	yaml_document_delete(&d);
	yaml_parser_delete(&p);
	return r;
}

/* ns of CPU per process: copy the discovery labels, relabel, drop "__" labels. */
static int run(const char *name, const char *rules)
{
	struct relabel_config c = {};
	struct relabel *rl;
	struct labelset base = {}, s = {};
	double t0, t1;
	int kept = 0;

	if (load(rules, &c) < 0 || relabel_new(&c, &rl) < 0) {
		fprintf(stderr, "relabel_bench: bad rules %s\n", name);
		return -1;
	}
	discovery_labels(&base);
	t0 = now_s();
	for (int i = 0; i < ROUNDS; i++) {
		labelset_copy(&s, &base);
		kept += relabel_apply(rl, &s) == 1;
		labelset_drop_internal(&s);
	}
	t1 = now_s();
	printf("%-34s %2zu rules  %5zu labels in, %2zu out  %7.2f us per process  (%s)\n", name, relabel_count(rl),
	       base.n, s.n, (t1 - t0) / ROUNDS * 1e6, kept == ROUNDS ? "kept" : "dropped");
	labelset_free(&s);
	labelset_free(&base);
	relabel_free(rl);
	relabel_config_free(&c);
	return 0;
}

int main(void)
{
	log_set_format(LOG_FMT_PLAIN);
	printf("relabel_configs cost per new process (%d rounds; copy + relabel + drop __ labels):\n", ROUNDS);
	if (run("no rules", "[]\n") < 0 || run("DaemonSet example (configmap.yaml)", example) < 0 ||
	    run("12 typical rules", longer) < 0)
		return 1;
	return 0;
}

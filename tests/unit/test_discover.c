/* test_discover.c: a process's identity from a fake /proc: service_name rules, the
 * container_id label, discovery labels seen by relabeling, and hostile names made safe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "labels/discover.h"
#include "labels/relabel.h"

#define CID "3f1a9c0e5b7d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a"

static char root[64];

/* /proc/<pid>/ with an exe link (NULL: none) and a cgroup file (NULL: none). */
static void fake_proc(unsigned int pid, const char *exe, const char *cgroup)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u", root, pid);
	assert_int_equal(mkdir(path, 0755), 0);
	if (exe) {
		snprintf(path, sizeof(path), "%s/%u/exe", root, pid);
		assert_int_equal(symlink(exe, path), 0);
	}
	if (cgroup) {
		snprintf(path, sizeof(path), "%s/%u/cgroup", root, pid);
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(cgroup, f);
		fclose(f);
	}
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/i9-discover.XXXXXX");
	if (!mkdtemp(root))
		return -1;
	fake_proc(10, "/usr/sbin/nginx", "0::/system.slice/nginx.service\n");
	fake_proc(11, "/usr/bin/python3.11 (deleted)", "0::/system.slice/docker-" CID ".scope\n");
	fake_proc(12, NULL, "0::/\n"); /* a kernel thread */
	fake_proc(13, "/opt/bad\x01name\xff\xfe/app", "0::/user.slice/user-1000.slice/session-2.scope\n");
	fake_proc(14, "/usr/bin/java", "0::/kubepods.slice/kubepods-pod0b6a7d1c_8f2e_4c3a_9b1d_2e3f4a5b6c7d.slice/"
				      "cri-containerd-" CID ".scope\n");
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st, (void)type, (void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	(void)state;
	return nftw(root, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static const struct series_label static_labels[] = { { "env", "prod" } };

static struct discover_opts opts(struct cgroup_cache *cc, const struct relabel *rl)
{
	return (struct discover_opts){
		.proc_root = root, .hostname = "host-1", .static_labels = static_labels, .nstatic = 1,
		.relabel = rl, .cgroups = cc,
	};
}

static void test_defaults(void **state)
{
	struct cgroup_cache *cc;
	struct discover_opts o;
	struct identity id;

	(void)state;
	assert_int_equal(cgroup_cache_new(0, &cc), 0);
	o = opts(cc, NULL);
	/* A systemd service: its unit. */
	assert_int_equal(discover(&o, 10, 0, "nginx", &id), 0);
	assert_true(id.keep);
	assert_string_equal(labelset_value(&id.labels, "service_name"), "nginx");
	assert_string_equal(labelset_value(&id.labels, "host_name"), "host-1");
	assert_string_equal(labelset_value(&id.labels, "env"), "prod");
	assert_null(labelset_get(&id.labels, "container_id"));
	assert_null(labelset_get(&id.labels, "__meta_process_pid")); /* "__" labels are gone */
	assert_int_equal(id.labels.n, 3);
	identity_free(&id);
	/* A container outside Kubernetes: the executable's name and container_id; no pod
	 * attributes for OTLP. */
	assert_int_equal(discover(&o, 11, 0, "python3", &id), 0);
	assert_string_equal(labelset_value(&id.labels, "service_name"), "python3.11");
	assert_string_equal(labelset_value(&id.labels, "container_id"), CID);
	assert_int_equal(id.resource.n, 0);
	assert_false(id.in_pod);
	identity_free(&id);
	/* Without Kubernetes a kubepods process is just a container. */
	assert_int_equal(discover(&o, 14, 0, "java", &id), 0);
	assert_string_equal(labelset_value(&id.labels, "container_id"), CID);
	assert_false(id.in_pod);
	assert_null(labelset_get(&id.labels, "namespace"));
	identity_free(&id);
	/* A kernel thread, the idle task, a process that is gone. */
	assert_int_equal(discover(&o, 12, 0, "kworker/0:1", &id), 0);
	assert_string_equal(labelset_value(&id.labels, "service_name"), "kernel");
	identity_free(&id);
	assert_int_equal(discover(&o, 0, 0, "swapper/0", &id), 0);
	assert_string_equal(labelset_value(&id.labels, "service_name"), "idle");
	identity_free(&id);
	assert_int_equal(discover(&o, 99, 0, "gone", &id), 0);
	assert_string_equal(labelset_value(&id.labels, "service_name"), "gone");
	identity_free(&id);
	cgroup_cache_free(cc);
}

static struct relabel *rules(const char *text, struct relabel_config *c)
{
	yaml_parser_t p;
	yaml_document_t d;
	struct relabel *rl;

	assert_true(yaml_parser_initialize(&p));
	yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
	assert_true(yaml_parser_load(&p, &d));
	assert_int_equal(relabel_config_parse("t.yaml", &d, yaml_document_get_root_node(&d), c), 0);
	yaml_document_delete(&d);
	yaml_parser_delete(&p);
	assert_int_equal(relabel_new(c, &rl), 0);
	return rl;
}

/* Relabeling sees the discovery labels and may set service_name; keep/drop decide. */
static void test_relabel(void **state)
{
	struct relabel_config c = {};
	struct cgroup_cache *cc;
	struct discover_opts o;
	struct identity id;
	struct relabel *rl;

	(void)state;
	assert_int_equal(cgroup_cache_new(0, &cc), 0);
	rl = rules("- source_labels: [__meta_process_executable]\n  regex: '/usr/s?bin/(.*)'\n"
		   "  target_label: service_name\n  replacement: 'sys-$1'\n"
		   "- source_labels: [__meta_systemd_unit, __meta_container_runtime, __meta_process_pid]\n"
		   "  separator: '|'\n  target_label: where\n"
		   "- source_labels: [__meta_process_comm]\n  regex: java\n  action: drop\n", &c);
	o = opts(cc, rl);
	assert_int_equal(discover(&o, 10, 0, "nginx", &id), 0);
	assert_true(id.keep);
	assert_string_equal(labelset_value(&id.labels, "service_name"), "sys-nginx");
	assert_string_equal(labelset_value(&id.labels, "where"), "nginx.service||10");
	identity_free(&id);
	assert_int_equal(discover(&o, 11, 0, "python3", &id), 0);
	assert_string_equal(labelset_value(&id.labels, "where"), "|docker|11");
	identity_free(&id);
	assert_int_equal(discover(&o, 14, 0, "java", &id), 0);
	assert_false(id.keep);
	identity_free(&id);
	relabel_free(rl);
	relabel_config_free(&c);
	cgroup_cache_free(cc);
}

/* An unprivileged user's binary path and process name with control characters and
 * invalid UTF-8: labels come out printable, valid UTF-8 and bounded. */
static void test_hostile_names(void **state)
{
	struct relabel_config c = {};
	struct cgroup_cache *cc;
	struct discover_opts o;
	struct identity id;
	struct relabel *rl;
	char comm[17];

	(void)state;
	assert_int_equal(cgroup_cache_new(0, &cc), 0);
	rl = rules("- source_labels: [__meta_process_executable]\n  target_label: exe\n"
		   "- source_labels: [__meta_process_comm]\n  target_label: comm\n", &c);
	o = opts(cc, rl);
	memcpy(comm, "a\nb\x7f\xc3(\xc2\x85\xe2\x80\xa8", 12);
	comm[12] = 0;
	assert_int_equal(discover(&o, 13, 0, comm, &id), 0);
	for (size_t i = 0; i < id.labels.n; i++) {
		const unsigned char *v = (const unsigned char *)id.labels.v[i].value;

		for (; *v; v++) {
			assert_true(*v >= 0x20 && *v != 0x7f);
			assert_false(v[0] == 0xc2 && v[1] >= 0x80 && v[1] <= 0x9f);     /* C1 */
			assert_false(v[0] == 0xe2 && v[1] == 0x80 && (v[2] & 0xfe) == 0xa8); /* U+2028/9 */
		}
		assert_true(strlen(id.labels.v[i].value) <= 3 * LABEL_VALUE_MAX);
	}
	assert_string_equal(labelset_value(&id.labels, "exe"), "/opt/bad?name\xef\xbf\xbd\xef\xbf\xbd/app");
	assert_string_equal(labelset_value(&id.labels, "comm"), "a?b?\xef\xbf\xbd(??");
	assert_string_equal(labelset_value(&id.labels, "service_name"), "app");
	identity_free(&id);
	relabel_free(rl);
	relabel_config_free(&c);
	cgroup_cache_free(cc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_relabel),
		cmocka_unit_test(test_hostile_names),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

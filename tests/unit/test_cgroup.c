/* test_cgroup.c: container ids, runtimes, pod UIDs and systemd units read from
 * /proc/PID/cgroup texts of every runtime's shape (v2, hybrid, v1), and hostile ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labels/cgroup.h"

#define ID   "3f1a9c0e5b7d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a"
#define ID2  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define UID  "0b6a7d1c-8f2e-4c3a-9b1d-2e3f4a5b6c7d"
#define UIDU "0b6a7d1c_8f2e_4c3a_9b1d_2e3f4a5b6c7d"

struct ccase {
	const char *name, *text;
	const char *id;  /* "" = none */
	enum container_runtime rt;
	const char *uid; /* "" = none */
	const char *unit;
	bool kube, v1;
	const char *path; /* NULL: not checked */
};

static const struct ccase cases[] = {
	{ "containerd, systemd driver, burstable",
	  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU ".slice/cri-containerd-" ID ".scope\n",
	  ID, RUNTIME_CONTAINERD, UID, "", true, false,
	  "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU ".slice/cri-containerd-" ID ".scope" },
	{ "containerd, systemd driver, guaranteed",
	  "0::/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-" ID ".scope\n", ID, RUNTIME_CONTAINERD, UID,
	  "", true, false },
	{ "containerd, cgroupfs driver", "0::/kubepods/besteffort/pod" UID "/" ID "\n", ID, RUNTIME_CRI, UID, "", true,
	  false },
	{ "cgroupfs driver, guaranteed", "0::/kubepods/pod" UID "/" ID "\n", ID, RUNTIME_CRI, UID, "", true, false },
	{ "CRI-O, systemd driver",
	  "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU ".slice/crio-" ID ".scope\n", ID,
	  RUNTIME_CRIO, UID, "", true, false },
	{ "CRI-O with crun's container sub-cgroup",
	  "0::/kubepods.slice/kubepods-pod" UIDU ".slice/crio-" ID ".scope/container\n", ID, RUNTIME_CRIO, UID, "",
	  true, false },
	{ "CRI-O conmon is not the container", "0::/kubepods.slice/kubepods-pod" UIDU ".slice/crio-conmon-" ID ".scope\n",
	  "", RUNTIME_NONE, UID, "", false, false },
	{ "Docker, systemd driver", "0::/system.slice/docker-" ID ".scope\n", ID, RUNTIME_DOCKER, "", "", false, false },
	{ "Docker, cgroupfs driver on a hybrid host",
	  "12:pids:/docker/" ID "\n4:memory:/docker/" ID "\n1:name=systemd:/system.slice/docker.service\n"
	  "0::/system.slice/docker.service\n",
	  ID, RUNTIME_DOCKER, "", "docker.service", false, true, "/docker/" ID },
	{ "Docker in Docker: the innermost", "0::/docker/" ID2 "/docker/" ID "\n", ID, RUNTIME_DOCKER, "", "", false,
	  false },
	{ "Podman, rootful", "0::/machine.slice/libpod-" ID ".scope\n", ID, RUNTIME_PODMAN, "", "", false, false },
	{ "Podman, rootless (not Kubernetes even with a forged pod slice)",
	  "0::/user.slice/user-1000.slice/user@1000.service/user.slice/kubepods-pod" UIDU ".slice/libpod-" ID ".scope\n",
	  ID, RUNTIME_PODMAN, UID, "user@1000.service", false, false },
	{ "Podman, cgroupfs", "0::/libpod_parent/libpod-" ID "\n", ID, RUNTIME_PODMAN, "", "", false, false },
	{ "inside a cgroup namespace (paths relative to the agent's)",
	  "0::/../../kubepods-burstable.slice/kubepods-burstable-pod" UIDU ".slice/cri-containerd-" ID ".scope\n", ID,
	  RUNTIME_CONTAINERD, UID, "", true, false },
	{ "Kubernetes on v1/hybrid, cgroupfs driver",
	  "11:cpu,cpuacct:/kubepods/burstable/pod" UID "/" ID "\n1:name=systemd:/kubepods/burstable/pod" UID "/" ID
	  "\n0::/\n",
	  ID, RUNTIME_CRI, UID, "", true, true },
	{ "Kubernetes on v1, systemd driver, no v2 line",
	  "5:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU ".slice/cri-containerd-" ID
	  ".scope\n1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
	  ".slice/cri-containerd-" ID ".scope\n",
	  ID, RUNTIME_CONTAINERD, UID, "", true, true },
	{ "cgroupsPath form under containerd.service (v1, systemd driver)",
	  "1:name=systemd:/system.slice/containerd.service/kubepods-burstable-pod" UIDU ".slice:cri-containerd:" ID "\n",
	  ID, RUNTIME_CONTAINERD, UID, "containerd.service", true, true },
	{ "a plain systemd service", "0::/system.slice/nginx.service\n", "", RUNTIME_NONE, "", "nginx.service", false,
	  false, "/system.slice/nginx.service" },
	{ "the innermost unit", "0::/system.slice/a.service/b.service/sub\n", "", RUNTIME_NONE, "", "b.service", false,
	  false },
	{ "no trailing newline", "0::/system.slice/docker-" ID ".scope", ID, RUNTIME_DOCKER, "", "", false, false },
	{ "63 hex digits are no id", "0::/system.slice/docker-" ID2 "x.scope\n0::/docker/abc\n", "", RUNTIME_NONE, "",
	  "", false, false },
	{ "upper-case hex is no id", "0::/docker/3F1A9C0E5B7D2F4A6C8E0B1D3F5A7C9E1B3D5F7A9C1E3B5D7F9A1C3E5B7D9F1A\n", "",
	  RUNTIME_NONE, "", "", false, false },
	{ "a bare id not under docker or a pod", "0::/x/" ID "\n", "", RUNTIME_NONE, "", "", false, false },
	{ "a pod uid needs its kubepods parent", "0::/pod" UID "/" ID "\n", "", RUNTIME_NONE, "", "", false, false },
	{ "a malformed uid", "0::/kubepods/pod0b6a7d1c-8f2e-4c3a-9b1d_2e3f4a5b6c7dX/" ID "\n", "", RUNTIME_NONE, "", "",
	  false, false },
	{ "garbage", "::::\n\n:\nno colons\n0:\n", "", RUNTIME_NONE, "", "", false, false },
	{ "empty", "", "", RUNTIME_NONE, "", "", false, false },
};

static void test_shapes(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct ccase *c = &cases[i];
		struct cgroup_info ci;

		print_message("case: %s\n", c->name);
		cgroup_parse(c->text, &ci);
		assert_string_equal(ci.container_id, c->id);
		assert_int_equal(ci.runtime, c->rt);
		assert_string_equal(ci.pod_uid, c->uid);
		assert_string_equal(ci.unit, c->unit);
		assert_int_equal(ci.in_kubepods, c->kube);
		assert_int_equal(ci.from_v1, c->v1);
		if (c->path)
			assert_string_equal(ci.path, c->path);
	}
}

/* Long and odd paths never overflow the fixed buffers. */
static void test_long_paths(void **state)
{
	size_t n = 200000;
	char *text = malloc(n + 128);
	struct cgroup_info ci;

	(void)state;
	strcpy(text, "0::");
	for (size_t i = 3; i < n; i++)
		text[i] = i % 97 == 0 ? '/' : i % 5 == 0 ? ':' : 'a';
	strcpy(text + n, ".service/docker-" ID ".scope\n");
	cgroup_parse(text, &ci);
	assert_string_equal(ci.container_id, ID);
	assert_true(strlen(ci.path) < CGROUP_PATH_MAX);
	assert_true(strlen(ci.unit) < sizeof(ci.unit));
	free(text);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* The cache reads a fake /proc once per cgroup id, and not for v1 answers. */
static void test_cache(void **state)
{
	char root[] = "/tmp/i9-cgroup-XXXXXX", path[256];
	struct cgroup_cache *c;
	struct cgroup_info ci;

	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/42", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/42/cgroup", root);
	put(path, "0::/system.slice/docker-" ID ".scope\n");
	assert_int_equal(cgroup_cache_new(2, &c), 0);
	assert_int_equal(cgroup_cache_lookup(c, root, 42, 7, &ci), 0);
	assert_string_equal(ci.container_id, ID);
	/* Changed on disk: the cache still answers for cgroup 7, a new id reads again. */
	put(path, "0::/system.slice/docker-" ID2 ".scope\n");
	assert_int_equal(cgroup_cache_lookup(c, root, 42, 7, &ci), 0);
	assert_string_equal(ci.container_id, ID);
	assert_int_equal(cgroup_cache_lookup(c, root, 42, 8, &ci), 0);
	assert_string_equal(ci.container_id, ID2);
	assert_true(cgroup_cache_mem_bytes(c) > 0);
	/* Gone processes: -ENOENT and an empty answer. */
	assert_int_equal(cgroup_cache_lookup(c, root, 43, 9, &ci), -2);
	assert_string_equal(ci.container_id, "");
	/* v1 answers are not cached by the (shared) v2 id. */
	put(path, "3:pids:/docker/" ID "\n0::/\n");
	assert_int_equal(cgroup_cache_lookup(c, root, 42, 10, &ci), 0);
	assert_true(ci.from_v1);
	put(path, "3:pids:/docker/" ID2 "\n0::/\n");
	assert_int_equal(cgroup_cache_lookup(c, root, 42, 10, &ci), 0);
	assert_string_equal(ci.container_id, ID2);
	/* A hybrid host: processes of one v2 cgroup may sit in different v1 ones, so a
	 * v2 answer without a container is not cached for the id. */
	put(path, "1:name=systemd:/user.slice\n0::/\n");
	assert_int_equal(cgroup_cache_lookup(c, root, 42, 12, &ci), 0);
	assert_string_equal(ci.container_id, "");
	put(path, "1:name=systemd:/docker/" ID "\n0::/\n");
	assert_int_equal(cgroup_cache_lookup(c, root, 42, 12, &ci), 0);
	assert_string_equal(ci.container_id, ID);
	/* Full (max 2): cleared, still correct. */
	put(path, "0::/machine.slice/libpod-" ID ".scope\n");
	assert_int_equal(cgroup_cache_lookup(c, root, 42, 11, &ci), 0);
	assert_int_equal(ci.runtime, RUNTIME_PODMAN);
	cgroup_cache_free(c);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/42", root);
	assert_int_equal(rmdir(path), 0);
	assert_int_equal(rmdir(root), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_long_paths),
		cmocka_unit_test(test_cache),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

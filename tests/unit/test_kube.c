/* test_kube.c: the Kubernetes pod model: Pod JSON parsed strictly and within bounds
 * (hostile API answers), container ids, and the pod store's indexes, deletes and GC. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "labels/kube_http.h"
#include "labels/kube_pod.h"

#define CID1 "3f1a9c0e5b7d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a"
#define CID2 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const char pod_json[] =
	"{\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-1\",\"namespace\":\"shop\","
	"\"uid\":\"0b6a7d1c-8f2e-4c3a-9b1d-2e3f4a5b6c7d\",\"labels\":{\"app.kubernetes.io/name\":\"checkout\","
	"\"tier\":\"web\",\"n\":7}},"
	"\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{\"name\":\"app\"},{\"name\":\"sidecar\"}]},"
	"\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"containerd://" CID1 "\"},"
	"{\"name\":\"sidecar\",\"containerID\":\"cri-o://" CID2 "\"}]}}";

static struct kube_pod *parse(const char *text, int *ret)
{
	struct json_object *o = kube_json_parse(text, strlen(text));
	struct kube_pod *p = NULL;

	*ret = o ? kube_pod_from_json(o, &p) : -EBADMSG;
	json_object_put(o);
	return *ret == 0 ? p : NULL;
}

static void test_pod(void **state)
{
	int r;
	struct kube_pod *p = parse(pod_json, &r);

	(void)state;
	assert_int_equal(r, 0);
	assert_string_equal(p->name, "web-1");
	assert_string_equal(p->ns, "shop");
	assert_string_equal(p->node, "node-1");
	assert_string_equal(p->uid, "0b6a7d1c-8f2e-4c3a-9b1d-2e3f4a5b6c7d");
	assert_int_equal(p->labels.n, 2); /* the number-valued label is left out */
	assert_string_equal(labelset_value(&p->labels, "app.kubernetes.io/name"), "checkout");
	assert_int_equal(p->ncontainers, 2);
	assert_string_equal(p->containers[0].name, "app");
	assert_string_equal(p->containers[0].id, CID1);
	assert_string_equal(p->containers[1].id, CID2);
	assert_null(p->single);
	kube_pod_free(p);
}

static void test_single_container(void **state)
{
	int r;
	struct kube_pod *p = parse("{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\",\"uid\":\"u\"},"
				   "\"spec\":{\"containers\":[{\"name\":\"only\"}]}}", &r);

	(void)state;
	assert_int_equal(r, 0);
	assert_string_equal(p->single, "only");
	assert_string_equal(p->containers[0].id, "");
	kube_pod_free(p);
	/* With an init container the only regular one is not a safe guess. */
	p = parse("{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\",\"uid\":\"u\"},"
		  "\"spec\":{\"containers\":[{\"name\":\"only\"}],\"initContainers\":[{\"name\":\"init\"}]}}", &r);
	assert_int_equal(r, 0);
	assert_null(p->single);
	assert_int_equal(p->ncontainers, 2);
	kube_pod_free(p);
}

static void test_container_ids(void **state)
{
	char id[65];

	(void)state;
	assert_true(kube_container_id("containerd://" CID1, id));
	assert_string_equal(id, CID1);
	assert_true(kube_container_id("docker://" CID2, id));
	assert_true(kube_container_id(CID2, id));
	assert_false(kube_container_id("containerd://" CID1 "0", id));
	assert_false(kube_container_id("containerd://3F1A9C0E5B7D2F4A6C8E0B1D3F5A7C9E1B3D5F7A9C1E3B5D7F9A1C3E5B7D9F1A", id));
	assert_false(kube_container_id("containerd://abc", id));
	assert_false(kube_container_id("", id));
	assert_false(kube_container_id(NULL, id));
}

/* What a hostile or broken API server might send. */
static void test_hostile(void **state)
{
	static const char *const bad[] = {
		"{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"}}",              /* no uid */
		"{\"metadata\":{\"name\":\"a\\u0001\",\"namespace\":\"b\",\"uid\":\"u\"}}", /* control char */
		"{\"metadata\":{\"name\":\"\",\"namespace\":\"b\",\"uid\":\"u\"}}",
		"{\"metadata\":{\"name\":1,\"namespace\":\"b\",\"uid\":\"u\"}}",
		"{\"metadata\":[],\"spec\":{}}",
		"[]",
		"\"pod\"",
	};
	char *big;
	struct kube_pod *p;
	int r;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = parse(bad[i], &r);
		assert_null(p);
		assert_int_equal(r, -EINVAL);
	}
	/* Not JSON, trailing bytes, too deep: the parser refuses. */
	assert_null(kube_json_parse("{\"a\":1} x", 9));
	assert_null(kube_json_parse("{\"a\":", 5));
	assert_null(kube_json_parse("{\"a\" 1}", 7));
	big = malloc(100000);
	n = 0;
	for (int i = 0; i < 200; i++)
		n += (size_t)sprintf(big + n, "{\"a\":");
	n += (size_t)sprintf(big + n, "1");
	for (int i = 0; i < 200; i++)
		big[n++] = '}';
	assert_null(kube_json_parse(big, n));
	/* 1000 labels, long values, 200 containers: bounded. */
	n = (size_t)sprintf(big, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\",\"uid\":\"u\",\"labels\":{");
	for (int i = 0; i < 1000; i++)
		n += (size_t)sprintf(big + n, "%s\"l%d\":\"v\"", i ? "," : "", i);
	n += (size_t)sprintf(big + n, ",\"long\":\"");
	memset(big + n, 'x', 2000);
	n += 2000;
	n += (size_t)sprintf(big + n, "\"}},\"spec\":{\"containers\":[");
	for (int i = 0; i < 200; i++)
		n += (size_t)sprintf(big + n, "%s{\"name\":\"c%d\"}", i ? "," : "", i);
	n += (size_t)sprintf(big + n, "]}}");
	p = parse(big, &r);
	assert_int_equal(r, 0);
	assert_int_equal(p->labels.n, KUBE_MAX_POD_LABELS);
	assert_null(labelset_get(&p->labels, "long"));
	assert_int_equal(p->ncontainers, KUBE_MAX_CONTAINERS);
	kube_pod_free(p);
	free(big);
	/* Wrong types deep inside are skipped, not fatal. */
	p = parse("{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\",\"uid\":\"u\",\"labels\":[1]},"
		  "\"spec\":{\"containers\":{\"x\":1}},\"status\":{\"containerStatuses\":[1,\"x\",{\"name\":2},"
		  "{\"name\":\"c\",\"containerID\":7}]}}", &r);
	assert_int_equal(r, 0);
	assert_int_equal(p->labels.n, 0);
	assert_int_equal(p->ncontainers, 1);
	assert_string_equal(p->containers[0].id, "");
	kube_pod_free(p);
}

static struct kube_pod *pod(const char *uid, const char *cid)
{
	char text[1024];
	int r;
	struct kube_pod *p;

	snprintf(text, sizeof(text),
		 "{\"metadata\":{\"name\":\"p-%s\",\"namespace\":\"n\",\"uid\":\"%s\"},\"spec\":{\"containers\":[{\"name\":"
		 "\"c\"}]},\"status\":{\"containerStatuses\":[{\"name\":\"c\",\"containerID\":\"containerd://%s\"}]}}",
		 uid, uid, cid);
	p = parse(text, &r);
	assert_non_null(p);
	return p;
}

static bool used_cid1(void *ctx, const char *cid)
{
	(void)ctx;
	return strcmp(cid, CID1) == 0;
}

static void test_store(void **state)
{
	struct kube_store s;
	struct kube_pod *list[2];
	uint64_t gen;

	(void)state;
	kube_store_init(&s, 2);
	assert_int_equal(kube_store_put(&s, pod("u1", CID1)), 0);
	assert_int_equal(kube_store_put(&s, pod("u2", CID2)), 0);
	assert_string_equal(kube_store_by_container(&s, CID1)->uid, "u1");
	assert_string_equal(kube_store_by_uid(&s, "u2")->containers[0].id, CID2);
	assert_null(kube_store_by_uid(&s, "u3"));
	/* Full: a third pod is refused and counted; a replacement is not. */
	assert_int_equal(kube_store_put(&s, pod("u3", CID2)), -ENOSPC);
	assert_int_equal(s.rejected, 1);
	gen = s.generation;
	assert_int_equal(kube_store_put(&s, pod("u2", CID2)), 0);
	assert_true(s.generation > gen);
	assert_int_equal(kube_store_by_uid(&s, "u2")->version, s.generation);
	/* Deleted pods stay while their containers have processes. */
	kube_store_delete(&s, "u1");
	kube_store_delete(&s, "u2");
	assert_true(kube_store_by_uid(&s, "u1")->deleted);
	assert_int_equal(kube_store_live(&s), 0);
	assert_int_equal(kube_store_gc(&s, used_cid1, NULL), 1);
	assert_non_null(kube_store_by_container(&s, CID1));
	assert_null(kube_store_by_container(&s, CID2));
	assert_int_equal(kube_store_gc(&s, NULL, NULL), 1);
	assert_int_equal(s.n, 0);
	/* A relist marks what it does not name deleted and keeps the rest. */
	assert_int_equal(kube_store_put(&s, pod("u1", CID1)), 0);
	list[0] = pod("u2", CID2);
	assert_int_equal(kube_store_replace(&s, list, 1), 0);
	assert_true(kube_store_by_uid(&s, "u1")->deleted);
	assert_false(kube_store_by_uid(&s, "u2")->deleted);
	assert_string_equal(kube_store_by_container(&s, CID2)->uid, "u2");
	assert_true(kube_store_mem_bytes(&s) > 0);
	kube_store_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pod),
		cmocka_unit_test(test_single_container),
		cmocka_unit_test(test_container_ids),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_store),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

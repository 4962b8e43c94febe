/* fuzz_kube.c: the API server's JSON: a pod list, a watch event or one pod, parsed
 * strictly, turned into pods, stored and looked up by uid and container id. */
#include <json-c/json.h>

#include <stdbool.h>

#include "fuzz_common.h"
#include "kube_http.h"
#include "kube_pod.h"

static bool never(void *ctx, const char *cid)
{
	(void)ctx;
	(void)cid;
	return false;
}

static void take(struct kube_store *st, struct json_object *o)
{
	struct kube_pod *p = NULL;
	const struct kube_pod *got;
	char *uid;

	if (kube_pod_from_json(o, &p) < 0 || !p)
		return;
	uid = strdup(p->uid);
	if (!uid) {
		kube_pod_free(p);
		return;
	}
	if (kube_store_put(st, p) == 0) { /* takes p, even on error */
		got = kube_store_by_uid(st, uid);
		if (!got || strcmp(got->uid, uid))
			abort(); /* a stored pod is found by its uid */
		for (size_t i = 0; i < got->ncontainers; i++)
			if (got->containers[i].id[0] && !kube_store_by_container(st, got->containers[i].id))
				abort(); /* and by each container id it has */
	}
	free(uid);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *doc, *items, *obj;
	struct kube_store st;

	fuzz_quiet();
	doc = kube_json_parse((const char *)data, size);
	if (!doc)
		return 0;
	kube_store_init(&st, 64);
	if (json_object_object_get_ex(doc, "items", &items) && json_object_is_type(items, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(items) && i < 256; i++)
			take(&st, json_object_array_get_idx(items, i));
	} else if (json_object_object_get_ex(doc, "object", &obj)) {
		take(&st, obj); /* a watch event: {type, object} */
	} else {
		take(&st, doc);
	}
	kube_json_str(doc, "metadata", "resourceVersion");
	kube_store_by_uid(&st, "0");
	kube_store_by_container(&st, "0");
	kube_store_live(&st);
	for (size_t i = 0; i < st.n; i++)
		kube_store_delete(&st, st.pods[i]->uid);
	kube_store_gc(&st, never, NULL);
	if (kube_store_live(&st))
		abort(); /* every pod was deleted and no container is in use */
	kube_store_mem_bytes(&st);
	kube_store_free(&st);
	json_object_put(doc);
	return 0;
}

/* fuzz_cgroup.c: /proc/PID/cgroup text, whose paths a container runtime or an
 * unprivileged user (systemd-run --user, mkdir in a delegated tree) names. */
#include "cgroup.h"
#include "fuzz_common.h"
#include "kube_pod.h"

static void check_id(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n > max)
		abort(); /* not NUL-terminated within its field */
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			abort(); /* an id is printable ASCII: it becomes a label value */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cgroup_info ci;
	char cid[65];
	char *s;

	fuzz_quiet();
	s = fuzz_strdup(data, size);
	if (!s)
		return 0;
	cgroup_parse(s, &ci);
	if (strnlen(ci.path, sizeof(ci.path)) == sizeof(ci.path) || strnlen(ci.unit, sizeof(ci.unit)) == sizeof(ci.unit))
		abort();
	check_id(ci.container_id, sizeof(ci.container_id) - 1);
	check_id(ci.pod_uid, sizeof(ci.pod_uid) - 1);
	container_runtime_name(ci.runtime);
	if (kube_container_id(s, cid))
		check_id(cid, 64);
	free(s);
	return 0;
}

/* fuzz_pprof.c: a profile file given to `prowl report`/`diff` (gzip'ed or not):
 * loaded and merged, turned into the call-tree view, and written as JSON. */
#include "formats.h"
#include "fuzz_common.h"
#include "inputs.h"
#include "view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input_set set = {0};
	struct input_opts o = {0};
	struct format_meta meta = {.title = "fuzz"};
	struct view *v = NULL;
	char path[64], *paths[1] = {path};
	char *out = NULL;
	size_t len = 0;
	int fd;

	fuzz_quiet();
	fd = fuzz_memfd(data, size, path);
	if (fd < 0)
		return 0;
	if (inputs_load_files(&set, paths, 1, &o) == 0) {
		if (view_new(true, &v) == 0 && view_add_profile(v, set.prof, VIEW_BASE) == 0 && view_finish(v) == 0 &&
		    format_json(v, &meta, &out, &len) == 0 && (!out || strnlen(out, len) != len))
			abort(); /* the JSON is text of the length it says */
		free(out);
		view_free(v);
	} else if (!set.err[0]) {
		abort(); /* a refused file always says why */
	}
	input_set_free(&set);
	close(fd);
	return 0;
}

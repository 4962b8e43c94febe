/* fuzz_config.c: the agent's YAML file, with its relabel_configs and recording_rules:
 * loaded as `prowl agent --config FILE` does, printed back, and the print loaded again. */
#include "config.h"
#include "fuzz_common.h"

static int load(const char *path, struct agent_config *c)
{
	char *argv[] = {"agent", "--config", (char *)path, NULL};
	char *envp[] = {NULL};

	return agent_config_load(3, argv, envp, c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_config c = {0}, again = {0};
	char path[64], path2[64];
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int fd, fd2;

	fuzz_quiet();
	fd = fuzz_memfd(data, size, path);
	if (fd < 0)
		return 0;
	if (load(path, &c) == 0) {
		/* What --check prints is YAML the agent accepts back. */
		f = open_memstream(&text, &len);
		if (f) {
			agent_config_print(&c, f);
			fclose(f);
			fd2 = fuzz_memfd((const uint8_t *)text, len, path2);
			if (fd2 >= 0) {
				if (load(path2, &again) != 0)
					abort();
				agent_config_free(&again);
				close(fd2);
			}
			free(text);
		}
	}
	agent_config_free(&c);
	close(fd);
	return 0;
}

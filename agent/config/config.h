/* config.h: the configuration of `prowl agent`: flags, PROWL_* environment variables
 * and a YAML file merged (flags > env > file > defaults) into one validated struct. */
#ifndef PROWL_CONFIG_H
#define PROWL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analyse/rules_config.h"
#include "export.h"
#include "export_pyroscope.h"
#include "labels/relabel_config.h"
#include "log.h"

enum unwind_mode { UNWIND_FP = 0, UNWIND_DWARF };
enum kube_enabled { KUBE_AUTO = 0, KUBE_ON, KUBE_OFF };

/* A static series label; name matches [a-zA-Z_][a-zA-Z0-9_]* and is not reserved. */
struct config_label {
	char *name;
	char *value;
};

struct dir_exporter_config {
	bool enabled;
	char *path;              /* never NULL after load: default <state_dir>/profiles */
	uint64_t max_age_ms;     /* files older than this are removed; 0 = keep forever */
	uint64_t max_size_bytes; /* oldest files removed past this total; 0 = no cap */
};

/* An HTTP exporter is enabled exactly when its URL is set. In target, empty
 * strings are NULL, the URL has no trailing '/', and files named were readable at load. */
struct http_exporter_config {
	bool enabled;
	struct http_target target;
};

struct agent_config {
	uint32_t frequency;      /* Hz per CPU, 1-1000 */
	uint32_t interval_ms;    /* export window, 1s-1h */
	bool idle;               /* keep samples of idle CPUs */
	bool include_self;       /* keep samples of prowl itself */
	bool per_thread;         /* tid/thread_name sample labels */
	enum unwind_mode unwind;
	bool python;             /* CPython frames (default) */
	bool python_fp;          /* python left at its default, off because unwind is fp */
	bool java;               /* Java (HotSpot) frames (default); off with unwind fp */
	bool node;               /* JavaScript (node's V8) frames (default); off with unwind fp */
	bool off_cpu;            /* off-CPU time too (the off_cpu sample type); default off */
	uint32_t off_cpu_threshold_ms; /* waits this long are all kept, shorter ones sampled */
	bool bpf_pin;            /* BPF programs kept pinned between runs: a restart skips the verifier */
	int demangle;            /* enum sym_demangle: templates, full, none */
	char *hostname;          /* never NULL after load: default gethostname() */
	struct config_label *labels;
	size_t nlabels;
	char *state_dir;
	struct {
		char *debuginfod_urls;           /* "": DEBUGINFOD_URLS, else no debuginfod */
		uint32_t debuginfod_timeout_ms;  /* one fetch at most */
		uint64_t debuginfod_cache_bytes; /* <state_dir>/debuginfod, LRU */
		uint32_t debuginfod_miss_ttl_ms; /* a miss is not asked again for this long */
	} symbols;
	uint32_t shutdown_timeout_ms; /* SIGTERM: one deadline for every exporter's flush */

	struct {
		uint64_t max_bytes;   /* undelivered profiles kept across a restart, all backends */
		uint64_t max_age_ms;  /* ... and for how long */
	} spool;

	struct {
		enum log_level level;
		enum log_format format; /* from log.h; plain, logfmt (default) or json */
	} log;

	struct {
		bool enabled;
		char *address;   /* "host:port", "[v6]:port" or ":port" (all interfaces) */
	} metrics;

	struct {
		uint32_t max_series;
		uint32_t recording_series;   /* label sets per recorded metric */
		uint32_t max_stacks_per_window;
		uint32_t symbol_cache_entries;
		uint32_t max_processes;
		uint32_t unwind_table_rows;  /* DWARF unwinder: rows of 8 bytes in the BPF table */
		uint32_t unwind_mappings;    /* ... executable mappings of all processes */
		uint32_t unwind_processes;   /* ... processes */
		uint64_t debug_inflate_bytes; /* inflated debug files in state_dir; 0: in memory */
		uint64_t module_memory_bytes; /* heap of the symbolizer's open object files */
		uint64_t perfmap_memory_bytes; /* JIT symbols of all processes' perf maps */
	} limits;

	struct {
		struct dir_exporter_config dir;
		struct http_exporter_config pyroscope, otlp, parca;
		enum pyroscope_api pyroscope_api; /* from export_pyroscope.h */
	} exporters;

	/* Kubernetes pod metadata (labels/kube.c). on: whether the client runs,
	 * decided at load from enabled, api_url and KUBERNETES_SERVICE_HOST; then
	 * api_url and node_name are set. */
	struct {
		enum kube_enabled enabled;
		char *api_url, *token_file, *ca_file, *node_name;
		bool on;
	} kubernetes;

	struct relabel_config relabel;                 /* relabel_configs, from the file only */
	struct recording_rules_config recording_rules; /* from the file only */

	char *config_path;       /* --config or PROWL_CONFIG; NULL when none */
	bool check;              /* --check: validate, print, exit 0 */
};

/* Parses argv (argv[0] = "agent"), envp (NULL: environ) and the YAML file named by
 * --config or PROWL_CONFIG into *ret (overwritten, not freed first). Returns 0; 1 when
 * --help was printed on stdout (caller exits 0); or -EINVAL after logging exactly one
 * error line naming the file:line and key, the variable or the option (caller exits 2);
 * -ENOMEM likewise. On error *ret is left zeroed. Unknown PROWL_* variables are warned
 * about, one line each. Re-entrant (it resets getopt; so not thread-safe), so a SIGHUP
 * reload may call it again with the same argv/envp and a fresh struct, and swap on success. */
int agent_config_load(int argc, char **argv, char **envp, struct agent_config *ret);

/* Writes the effective configuration as YAML that agent_config_load accepts back;
 * secrets (basic_password, bearer_token) are shown as "***". */
void agent_config_print(const struct agent_config *c, FILE *f);

/* The names of the series labels a series may have (service_name, host_name, the
 * static labels, namespace/pod/container/node/container_id, and the target
 * labels relabel_configs names), as many as fit in ret[0..max); returns their
 * number. Valid while c is unchanged. */
size_t agent_config_series_labels(const struct agent_config *c, const char **ret, size_t max);

/* Frees what c owns and zeroes it; accepts a zeroed struct. */
void agent_config_free(struct agent_config *c);

/* The usage text of `prowl agent --help`. */
extern const char agent_config_usage[];

#endif

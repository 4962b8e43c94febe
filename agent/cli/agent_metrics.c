/* agent_metrics.c: renders the agent's snapshot as Prometheus text for /metrics
 * and decides /healthz (the main loop must have polled in the last 10 seconds). */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "array_size.h"
#include "clock.h"
#include "metrics.h"

static double rss_bytes(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = 0;
	fclose(f);
	return (double)rss * sysconf(_SC_PAGESIZE);
}

/* A runtime's frame name cache (namecache.h): prowl_KEY_names and the rest; what: the
 * frames' language, stale: what makes a name a marker, by: what a name is cached by. */
static void emit_names(FILE *f, const char *key, const char *what, const char *stale, const char *by,
		       const struct name_cache_stats *st)
{
	char name[64], help[160];

	snprintf(name, sizeof(name), "prowl_%s_names", key);
	snprintf(help, sizeof(help), "%s frame names cached, by process, registration and %s (16384 at most).", what, by);
	metrics_emit(f, name, "gauge", help, NULL, st->entries);
	snprintf(name, sizeof(name), "prowl_%s_name_bytes", key);
	snprintf(help, sizeof(help), "Heap held by the cached %s frame names.", what);
	metrics_emit(f, name, "gauge", help, NULL, st->bytes);
	snprintf(name, sizeof(name), "prowl_%s_name_lookups_total", key);
	snprintf(help, sizeof(help), "%s frames named, by whether the name was cached.", what);
	metrics_emit(f, name, "counter", help, "result=\"hit\"", st->hits);
	metrics_emit(f, name, "counter", NULL, "result=\"miss\"", st->misses);
	snprintf(name, sizeof(name), "prowl_%s_name_failures_total", key);
	snprintf(help, sizeof(help), "%s frames that got a marker: %s, the process gone, or garbled memory.", what, stale);
	metrics_emit(f, name, "counter", help, NULL, st->failures);
}

static void exporter_metrics(FILE *f, const struct agent_snapshot *s)
{
	static const struct {
		const char *outcome;
		size_t off;
	} outcomes[] = {
		{ "sent", offsetof(struct export_stats, sent) },
		{ "retried", offsetof(struct export_stats, retried) },
		{ "dropped", offsetof(struct export_stats, dropped) },
		{ "failed", offsetof(struct export_stats, failed) },
	};
	char l[96];

	fputs("# HELP prowl_exports_total Export requests by backend and outcome.\n# TYPE prowl_exports_total counter\n", f);
	for (unsigned int i = 0; i < s->nexp; i++)
		for (size_t k = 0; k < ARRAY_SIZE(outcomes); k++) {
			uint64_t v;

			memcpy(&v, (const char *)&s->exp[i] + outcomes[k].off, sizeof(v));
			snprintf(l, sizeof(l), "backend=\"%s\",outcome=\"%s\"", s->exp_name[i], outcomes[k].outcome);
			metrics_emit(f, "prowl_exports_total", "counter", NULL, l, v);
		}
	fputs("# HELP prowl_export_bytes_total Bytes delivered by backend.\n# TYPE prowl_export_bytes_total counter\n", f);
	for (unsigned int i = 0; i < s->nexp; i++) {
		snprintf(l, sizeof(l), "backend=\"%s\"", s->exp_name[i]);
		metrics_emit(f, "prowl_export_bytes_total", "counter", NULL, l, s->exp[i].bytes_sent);
	}
	fputs("# HELP prowl_export_queue_items Requests waiting to be delivered, per backend.\n"
	      "# TYPE prowl_export_queue_items gauge\n", f);
	for (unsigned int i = 0; i < s->nexp; i++) {
		snprintf(l, sizeof(l), "backend=\"%s\"", s->exp_name[i]);
		metrics_emit(f, "prowl_export_queue_items", "gauge", NULL, l, s->exp[i].queue_items);
	}
	fputs("# HELP prowl_export_queue_bytes Bytes waiting to be delivered, per backend.\n"
	      "# TYPE prowl_export_queue_bytes gauge\n", f);
	for (unsigned int i = 0; i < s->nexp; i++) {
		snprintf(l, sizeof(l), "backend=\"%s\"", s->exp_name[i]);
		metrics_emit(f, "prowl_export_queue_bytes", "gauge", NULL, l, s->exp[i].queue_bytes);
	}
	for (unsigned int i = 0; i < s->nexp; i++) {
		if (strcmp(s->exp_name[i], "dir") != 0)
			continue;
		metrics_emit(f, "prowl_export_dir_files", "gauge", "Profiles the directory exporter keeps on disk.",
			     NULL, s->exp[i].kept_files);
		metrics_emit(f, "prowl_export_dir_bytes", "gauge", "Size of the profiles the directory exporter keeps.",
			     NULL, s->exp[i].kept_bytes);
		metrics_emit(f, "prowl_export_dir_removed_total", "counter",
			     "Profiles the directory exporter removed by retention (exporters.dir.max_age, max_size).",
			     NULL, s->exp[i].removed);
	}
}

static void unwind_metrics(FILE *f, const struct agent_snapshot *s)
{
	char l[64];

	fputs("# HELP prowl_unwind_truncated_total User stacks cut short, by reason (each ends in a marker frame).\n"
	      "# TYPE prowl_unwind_truncated_total counter\n", f);
	for (unsigned int r = PROWL_UR_NONE + 1; r < PROWL_UR__MAX; r++) {
		snprintf(l, sizeof(l), "reason=\"%s\"", prowl_ureason_text(r)->label);
		metrics_emit(f, "prowl_unwind_truncated_total", "counter", NULL, l, s->bpf.v[PROWL_CNT_UNWIND_TRUNC_OF(r)]);
	}
	metrics_emit(f, "prowl_unwind_fp_frames_total", "counter", "Frames unwound with frame pointers (no table).", NULL,
		     s->bpf.v[PROWL_CNT_UNWIND_FP_FRAMES]);
	metrics_emit(f, "prowl_unwind_requests_lost_total", "counter",
		     "Unwinder refresh requests the event ring could not take.", NULL, s->bpf.v[PROWL_CNT_UNWIND_REQ_LOST]);
	if (!s->has_unwind)
		return;
	metrics_emit(f, "prowl_unwind_tables", "gauge", "Objects with unwind tables loaded.", NULL, s->unwind.tables);
	metrics_emit(f, "prowl_unwind_rows", "gauge", "Unwind table rows (8 bytes each).", "kind=\"used\"",
		     s->unwind.rows_used);
	metrics_emit(f, "prowl_unwind_rows", "gauge", NULL, "kind=\"capacity\"", s->unwind.rows_capacity);
	metrics_emit(f, "prowl_unwind_mappings", "gauge", "Executable mappings the unwinder tracks.", "kind=\"used\"",
		     s->unwind.maps_used);
	metrics_emit(f, "prowl_unwind_mappings", "gauge", NULL, "kind=\"capacity\"", s->unwind.maps_capacity);
	metrics_emit(f, "prowl_unwind_processes", "gauge", "Processes the unwinder tracks.", NULL, s->unwind.procs);
	metrics_emit(f, "prowl_unwind_tables_built_total", "counter", "Unwind tables built.", NULL, s->unwind.tables_built);
	metrics_emit(f, "prowl_unwind_table_errors_total", "counter", "Unwind tables that could not be built.", NULL,
		     s->unwind.table_build_errors);
	metrics_emit(f, "prowl_unwind_tables_evicted_total", "counter", "Unwind tables evicted to make room.", NULL,
		     s->unwind.tables_evicted);
	metrics_emit(f, "prowl_unwind_capacity_hits_total", "counter",
		     "Times an unwinder capacity limit was hit (logged once each).", "limit=\"rows\"", s->unwind.rows_full);
	metrics_emit(f, "prowl_unwind_capacity_hits_total", "counter", NULL, "limit=\"mappings\"", s->unwind.maps_full);
	metrics_emit(f, "prowl_unwind_capacity_hits_total", "counter", NULL, "limit=\"processes\"", s->unwind.procs_full);
}

static void spool_metrics(FILE *f, const struct spool_stats *sp)
{
	static const struct {
		const char *reason;
		size_t off;
	} drops[] = {
		{ "max_age", offsetof(struct spool_stats, dropped_age) },
		{ "max_size", offsetof(struct spool_stats, dropped_size) },
		{ "damaged", offsetof(struct spool_stats, damaged) },
		{ "write_error", offsetof(struct spool_stats, write_lost) },
	};
	char l[64];

	metrics_emit(f, "prowl_spool_bytes", "gauge", "Bytes of undelivered profiles kept in state_dir/spool.", NULL,
		     sp->bytes);
	metrics_emit(f, "prowl_spool_files", "gauge", "Files in state_dir/spool.", NULL, sp->files);
	fputs("# HELP prowl_spool_loaded_total Profiles read back from the spool and queued, by backend.\n"
	      "# TYPE prowl_spool_loaded_total counter\n", f);
	for (unsigned int i = 0; i < sp->nkinds; i++) {
		snprintf(l, sizeof(l), "backend=\"%s\"", sp->kinds[i].kind);
		metrics_emit(f, "prowl_spool_loaded_total", "counter", NULL, l, sp->kinds[i].loaded);
	}
	fputs("# HELP prowl_spool_written_total Undelivered profiles written to the spool, by backend.\n"
	      "# TYPE prowl_spool_written_total counter\n", f);
	for (unsigned int i = 0; i < sp->nkinds; i++) {
		snprintf(l, sizeof(l), "backend=\"%s\"", sp->kinds[i].kind);
		metrics_emit(f, "prowl_spool_written_total", "counter", NULL, l, sp->kinds[i].written);
	}
	fputs("# HELP prowl_spool_dropped_total Spooled profiles dropped, by reason (the caps, damaged files, "
	      "write errors).\n# TYPE prowl_spool_dropped_total counter\n", f);
	for (size_t k = 0; k < ARRAY_SIZE(drops); k++) {
		uint64_t v;

		memcpy(&v, (const char *)sp + drops[k].off, sizeof(v));
		snprintf(l, sizeof(l), "reason=\"%s\"", drops[k].reason);
		metrics_emit(f, "prowl_spool_dropped_total", "counter", NULL, l, v);
	}
}

/* Series identity: discovery, relabeling and the Kubernetes client. */
static void label_metrics(FILE *f, const struct agent_snapshot *s)
{
	const struct kube_stats *k = &s->kube;

	metrics_emit(f, "prowl_discoveries_total", "counter",
		     "Processes discovered and relabeled (when first seen, after exec and when their pod changed).",
		     NULL, s->series.discoveries);
	metrics_emit(f, "prowl_discovery_seconds_total", "counter", "Time spent discovering and relabeling processes.",
		     NULL, s->series.discovery_ns / 1e9);
	metrics_emit(f, "prowl_relabel_dropped_processes", "gauge", "Processes relabel_configs excludes.", NULL,
		     s->series.dropped_processes);
	metrics_emit(f, "prowl_relabel_dropped_samples_total", "counter",
		     "Samples of excluded processes, stopped in BPF or (before BPF knew) in the agent.", "where=\"bpf\"",
		     s->bpf.v[PROWL_CNT_DROPPED]);
	metrics_emit(f, "prowl_relabel_dropped_samples_total", "counter", NULL, "where=\"agent\"",
		     s->series.dropped_samples);
	metrics_emit(f, "prowl_pod_unlabelled_processes_total", "counter",
		     "Processes in a pod exported before the pod's metadata was known (labelled later).", NULL,
		     s->series.pod_unlabelled);
	metrics_emit(f, "prowl_pod_wait_overflow_samples_total", "counter",
		     "Samples not held for their pod's metadata because the holding buffer was full.", NULL,
		     s->series.pending_overflow);
	metrics_emit(f, "prowl_label_bytes", "gauge", "Memory of process identities, cgroup and pod caches.", NULL,
		     s->series.label_bytes + (s->has_kube ? k->mem_bytes : 0));
	if (!s->has_kube)
		return;
	metrics_emit(f, "prowl_kubernetes_up", "gauge", "1 when the pod list is current (listed, watch not failing).",
		     NULL, k->synced);
	metrics_emit(f, "prowl_kubernetes_requests_total", "counter", "Requests to the Kubernetes API server.",
		     "verb=\"list\"", k->list_requests);
	metrics_emit(f, "prowl_kubernetes_requests_total", "counter", NULL, "verb=\"watch\"", k->watch_requests);
	metrics_emit(f, "prowl_kubernetes_errors_total", "counter",
		     "Failed requests to the Kubernetes API server (unreachable, refused, bad answers).", NULL, k->errors);
	metrics_emit(f, "prowl_kubernetes_outages_total", "counter",
		     "Times the API server stopped answering (one warning each).", NULL, k->outages);
	metrics_emit(f, "prowl_kubernetes_relists_total", "counter", "Pod lists (start, 410 Gone, unknown containers).",
		     NULL, k->relists);
	metrics_emit(f, "prowl_kubernetes_watch_events_total", "counter", "Pod watch events applied.", NULL, k->events);
	metrics_emit(f, "prowl_kubernetes_received_bytes_total", "counter", "Bytes read from the API server.", NULL,
		     k->bytes);
	metrics_emit(f, "prowl_kubernetes_pods", "gauge", "Pods of this node known.", "state=\"live\"", k->pods);
	metrics_emit(f, "prowl_kubernetes_pods", "gauge", NULL, "state=\"deleted\"", k->deleted_pods);
	metrics_emit(f, "prowl_kubernetes_pods_rejected_total", "counter", "Pod events not kept: more pods than the cap.",
		     NULL, k->pods_rejected);
}

void agent_metrics_render(void *ctx, FILE *f)
{
	struct agent_snapshot *snap = ctx, s;
	struct rusage ru;

	pthread_mutex_lock(&snap->lock);
	s = *snap;
	pthread_mutex_unlock(&snap->lock);

	metrics_emit(f, "prowl_samples_total", "counter", "Samples read from the BPF ring buffer.", NULL, s.samples);
	metrics_emit(f, "prowl_lost_samples_total", "counter", "Samples the BPF ring buffer could not take.", NULL,
		     s.bpf.v[PROWL_CNT_LOST]);
	metrics_emit(f, "prowl_off_cpu_samples_total", "counter",
		     "Off-CPU waits kept as samples (off_cpu: true): every wait of the threshold or longer, a shorter "
		     "one with probability wait/threshold.", NULL, s.bpf.v[PROWL_CNT_OFFCPU_SAMPLES]);
	metrics_emit(f, "prowl_off_cpu_skipped_total", "counter",
		     "Off-CPU waits shorter than the threshold the draw left out (the kept ones stand for them).", NULL,
		     s.bpf.v[PROWL_CNT_OFFCPU_SKIPPED]);
	metrics_emit(f, "prowl_off_cpu_dropped_total", "counter",
		     "Off-CPU waits lost: switches the per-task map had no room for, kept waits the ring buffer could "
		     "not take.", "reason=\"task_map_full\"", s.bpf.v[PROWL_CNT_OFFCPU_FULL]);
	metrics_emit(f, "prowl_off_cpu_dropped_total", "counter", NULL, "reason=\"ring_buffer_full\"",
		     s.bpf.v[PROWL_CNT_OFFCPU_LOST]);
	metrics_emit(f, "prowl_off_cpu_dropped_seconds_total", "counter",
		     "The estimated off-CPU time of the kept waits that were lost.", NULL,
		     s.bpf.v[PROWL_CNT_OFFCPU_LOST_NS] / 1e9);
	metrics_emit(f, "prowl_idle_samples_dropped_total", "counter", "Idle-CPU samples dropped in BPF.", NULL,
		     s.bpf.v[PROWL_CNT_IDLE]);
	metrics_emit(f, "prowl_stack_errors_total", "counter", "Stacks bpf_get_stack could not read.", "stack=\"kernel\"",
		     s.bpf.v[PROWL_CNT_KSTACK_ERR]);
	metrics_emit(f, "prowl_stack_errors_total", "counter", NULL, "stack=\"user\"", s.bpf.v[PROWL_CNT_USTACK_ERR]);
	metrics_emit(f, "prowl_sampling_frequency_hertz", "gauge", "Sampling frequency per CPU.", NULL, s.frequency);
	metrics_emit(f, "prowl_stacks", "gauge", "Distinct stacks in the current window.", NULL, s.series.stacks);
	metrics_emit(f, "prowl_series", "gauge", "Series (label sets) alive.", NULL, s.series.series);
	metrics_emit(f, "prowl_series_overflow_samples_total", "counter",
		     "Samples filed under service_name=other because of limits.max_series.", NULL, s.series.series_overflow);
	metrics_emit(f, "prowl_series_refused_total", "counter",
		     "Processes limits.max_series sent to service_name=other (each time one is filed).", NULL,
		     s.series.series_refused);
	metrics_emit(f, "prowl_processes", "gauge", "Processes with cached state.", NULL, s.series.processes);
	metrics_emit(f, "prowl_processes_evicted_total", "counter", "Process entries evicted by limits.max_processes.",
		     NULL, s.series.processes_evicted);
	metrics_emit(f, "prowl_processes_exited_total", "counter", "Process state freed after the process exited.", NULL,
		     s.series.processes_exited);
	metrics_emit(f, "prowl_aggregation_bytes", "gauge", "Memory held by the current window's profiles.", NULL,
		     s.series.profile_bytes);
	metrics_emit(f, "prowl_windows_total", "counter", "Export windows completed.", NULL, s.windows);
	metrics_emit(f, "prowl_windows_cut_total", "counter", "Windows ended early by limits.max_stacks_per_window.", NULL,
		     s.windows_cut);
	metrics_emit(f, "prowl_symbol_cache_hits_total", "counter", "Symbolization cache hits.", NULL, s.sym.frame_hits);
	metrics_emit(f, "prowl_symbol_cache_misses_total", "counter", "Symbolization cache misses.", NULL,
		     s.sym.frame_misses);
	metrics_emit(f, "prowl_symbol_modules", "gauge", "Object files (by build id) known to the symbolizer.", NULL,
		     s.sym.modules);
	metrics_emit(f, "prowl_symbol_cache_evictions_total", "counter",
		     "Symbolizer entries evicted by their cap (limits.symbol_cache_entries, open modules, "
		     "limits.max_processes).", "cache=\"frames\"", s.sym.frame_evictions);
	metrics_emit(f, "prowl_symbol_cache_evictions_total", "counter", NULL, "cache=\"modules\"",
		     s.sym.module_evictions);
	metrics_emit(f, "prowl_symbol_cache_evictions_total", "counter", NULL, "cache=\"processes\"",
		     s.sym.process_evictions);
	metrics_emit(f, "prowl_symbol_cache_evictions_total", "counter", NULL, "cache=\"python_code\"",
		     s.sym.py_code_evictions);
	metrics_emit(f, "prowl_python_samples_total", "counter", "Samples that carried CPython frames.", NULL,
		     s.bpf.v[PROWL_CNT_PY_SAMPLES]);
	metrics_emit(f, "prowl_python_truncated_total", "counter",
		     "CPython stacks cut short in BPF (too deep, no thread state, unreadable).", NULL,
		     s.bpf.v[PROWL_CNT_PY_TRUNC]);
	metrics_emit(f, "prowl_python_code_objects", "gauge",
		     "CPython code objects whose name, file and line table are cached (16384 at most).", NULL,
		     s.sym.py_code_entries);
	metrics_emit(f, "prowl_python_code_bytes", "gauge", "Heap held by the cached CPython code objects (16 MiB at most).",
		     NULL, s.sym.py_code_bytes);
	metrics_emit(f, "prowl_python_code_lookups_total", "counter",
		     "Python frames resolved, by whether the code object was cached.", "result=\"hit\"", s.sym.py_code_hits);
	metrics_emit(f, "prowl_python_code_lookups_total", "counter", NULL, "result=\"miss\"", s.sym.py_code_misses);
	metrics_emit(f, "prowl_python_code_read_errors_total", "counter",
		     "Code objects that could not be read: the process was gone, or the frame was garbled.", NULL,
		     s.sym.py_code_read_errors);
	emit_names(f, "java", "Java", "code freed or moved", "address", &s.sym.java_names);
	emit_names(f, "js", "JavaScript", "function moved or freed", "function", &s.sym.js_names);
	metrics_emit(f, "prowl_symbol_cache_entries", "gauge", "Addresses in the symbolizer's frame cache.", NULL,
		     s.sym.cached_frames);
	metrics_emit(f, "prowl_symbol_open_modules", "gauge", "Object files with ELF/DWARF state open.", NULL,
		     s.sym.open_modules);
	metrics_emit(f, "prowl_symbolizer_bytes", "gauge",
		     "Estimated heap held by the symbolizer, open modules included (mapped files excluded).", NULL,
		     s.sym.mem_bytes);
	metrics_emit(f, "prowl_symbol_open_module_bytes", "gauge",
		     "Heap held by the open modules (symbol indexes, libdw state), as measured while they were used.",
		     NULL, s.sym.open_module_bytes);
	metrics_emit(f, "prowl_symbol_inflated_bytes", "gauge",
		     "Size of the files holding inflated debug sections of open modules (in state_dir, "
		     "page cache rather than heap; limits.debug_inflate_size).", NULL, s.sym.inflated_bytes);
	metrics_emit(f, "prowl_symbol_inflated_files_total", "counter",
		     "Object and debug files whose compressed sections were inflated to a file.", NULL,
		     s.sym.inflated_files);
	metrics_emit(f, "prowl_symbol_inflate_fallbacks_total", "counter",
		     "Compressed debug sections inflated in memory instead (no room or an error).", NULL,
		     s.sym.inflate_fallbacks);
	metrics_emit(f, "prowl_disk_cache_lookups_total", "counter",
		     "Lookups in state_dir/cache (unwind tables and inflated debug files kept across restarts), by result.", "result=\"hit\"",
		     s.sym.disk_hits);
	metrics_emit(f, "prowl_disk_cache_lookups_total", "counter", NULL, "result=\"miss\"", s.sym.disk_misses);
	metrics_emit(f, "prowl_disk_cache_lookups_total", "counter", NULL, "result=\"corrupt\"", s.sym.disk_corrupt);
	metrics_emit(f, "prowl_disk_cache_stores_total", "counter", "Entries written to state_dir/cache.", NULL,
		     s.sym.disk_stores);
	metrics_emit(f, "prowl_disk_cache_evictions_total", "counter",
		     "Entries removed from state_dir/cache to keep it under its size bound.", NULL, s.sym.disk_evicted);
	metrics_emit(f, "prowl_disk_cache_bytes", "gauge", "Size of state_dir/cache.", NULL, s.sym.disk_bytes);
	metrics_emit(f, "prowl_perfmap_bytes", "gauge",
		     "Heap held by the JIT symbols of all processes' perf maps (limits.perfmap_memory).", NULL,
		     s.sym.perfmap_bytes);
	metrics_emit(f, "prowl_perfmap_symbols", "gauge", "JIT symbols read from perf maps.", NULL,
		     s.sym.perfmap_symbols);
	metrics_emit(f, "prowl_perfmaps", "gauge", "Processes whose perf map was read.", NULL, s.sym.perfmaps);
	metrics_emit(f, "prowl_perfmap_dropped_total", "counter",
		     "JIT symbols not kept because limits.perfmap_memory was reached.", NULL, s.sym.perfmap_dropped);
	metrics_emit(f, "prowl_perfmap_bad_lines_total", "counter", "Perf map lines that are not START SIZE NAME.",
		     NULL, s.sym.perfmap_bad_lines);
	if (s.sym.debuginfod) {
		metrics_emit(f, "prowl_debuginfod_fetches_total", "counter",
			     "debuginfod fetches by outcome: a debug file, not found (404), or an error or garbage.",
			     "result=\"fetched\"", s.sym.debuginfod_fetched);
		metrics_emit(f, "prowl_debuginfod_fetches_total", "counter", NULL, "result=\"missed\"",
			     s.sym.debuginfod_missed);
		metrics_emit(f, "prowl_debuginfod_fetches_total", "counter", NULL, "result=\"failed\"",
			     s.sym.debuginfod_failed);
		metrics_emit(f, "prowl_debuginfod_pending", "gauge", "Debug files queued or being fetched.", NULL,
			     s.sym.debuginfod_pending);
		metrics_emit(f, "prowl_debuginfod_cache_bytes", "gauge",
			     "Debug files in the debuginfod cache (symbols.debuginfod_cache_size).", NULL,
			     s.sym.debuginfod_cache_bytes);
		metrics_emit(f, "prowl_debuginfod_evicted_total", "counter", "Debug files removed for the cache's size cap.",
			     NULL, s.sym.debuginfod_evicted);
	}
	metrics_emit(f, "prowl_objects_broken_total", "counter",
		     "Object files that changed (truncated, rewritten) while prowl read them; their frames are shown "
		     "as addresses.", NULL, s.sym.objects_broken);
	unwind_metrics(f, &s);
	label_metrics(f, &s);
	metrics_emit(f, "prowl_config_reloads_total", "counter", "Configuration reloads.", "result=\"ok\"", s.reloads);
	metrics_emit(f, "prowl_config_reloads_total", "counter", NULL, "result=\"error\"", s.reload_errors);
	exporter_metrics(f, &s);
	if (s.has_spool)
		spool_metrics(f, &s.spool);
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		metrics_emit(f, "process_cpu_seconds_total", "counter", "prowl's own user and system CPU time.", NULL,
			     ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	metrics_emit(f, "process_resident_memory_bytes", "gauge", "prowl's own resident memory.", NULL, rss_bytes());
	pthread_mutex_lock(&snap->lock);
	if (snap->rules_text)
		fputs(snap->rules_text, f);
	pthread_mutex_unlock(&snap->lock);
}

bool agent_metrics_healthy(void *ctx, FILE *f)
{
	struct agent_snapshot *snap = ctx;
	bool ok;
	uint64_t age;

	pthread_mutex_lock(&snap->lock);
	age = clock_mono_ns() - snap->last_poll_mono_ns;
	ok = snap->ready && age < 10 * NSEC_PER_SEC;
	pthread_mutex_unlock(&snap->lock);
	if (!ok)
		fprintf(f, "unhealthy: the sampling loop last ran %.1fs ago\n", age / 1e9);
	return ok;
}

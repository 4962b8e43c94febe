/* agent.c: the `prowl agent` main loop: samples the whole host, files samples by
 * series, ends a window every interval and hands it to every exporter; reloads on SIGHUP. */
#include "agent.h"
#include "agent_priv.h"
#include "debuginfod.h"
#include "analyse/rules.h"
#include "array_size.h"
#include "labels/kube.h"
#include "labels/relabel.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "clock.h"
#include "config.h"
#include "diskcache.h"
#include "export_dir.h"
#include "export_otlp.h"
#include "export_parca.h"
#include "export_pyroscope.h"
#include "log.h"
#include "mkdir_p.h"
#include "metrics.h"
#include "jvmname.h"
#include "v8name.h"
#include "objcache.h"
#include "pyresolve.h"
#include "reload.h"
#include "sender.h"
#include "spool.h"

extern char **environ;


static volatile sig_atomic_t got_stop, got_hup;

static void on_stop(int sig) { got_stop = sig; }
static void on_hup(int sig) { (void)sig; got_hup = 1; }

static int catch_up(struct agent *a, uint64_t time_ns);

static int on_sample(void *ctx, const struct prowl_sample *s, size_t size)
{
	struct agent *a = ctx;

	(void)size;
	a->samples++;
	/* Samples carry their own time: one taken after the window's planned end
	 * opens the next window, however late the loop reads it. */
	if (catch_up(a, s->time_ns) == -ENOMEM)
		return -ENOMEM;
	return series_table_ingest(a->series, s) == -ENOMEM ? -ENOMEM : 0;
}

/* Relabeling dropped a process (or let it go again): BPF stops (or resumes) its samples. */
static int drop_pid(void *ctx, uint32_t pid, bool drop)
{
	struct agent *a = ctx;

	return a->sampler ? sampler_drop_pid(a->sampler, pid, drop) : -ENODEV;
}

static bool same_kube(const struct agent_config *x, const struct agent_config *y)
{
	return x->kubernetes.on == y->kubernetes.on && agent_same_str(x->kubernetes.api_url, y->kubernetes.api_url) &&
	       agent_same_str(x->kubernetes.token_file, y->kubernetes.token_file) &&
	       agent_same_str(x->kubernetes.ca_file, y->kubernetes.ca_file) &&
	       agent_same_str(x->kubernetes.node_name, y->kubernetes.node_name);
}

/* The Kubernetes client of c into *ret (NULL when off); keeps `old` when c
 * would build the same one. */
static int make_kube(const struct agent_config *c, const struct agent_config *old_cfg, struct kube *old,
		     struct kube **ret)
{
	struct kube_opts o = {
		.api_url = c->kubernetes.api_url,
		.token_file = c->kubernetes.token_file,
		.ca_file = c->kubernetes.ca_file,
		.node_name = c->kubernetes.node_name,
	};
	int r;

	*ret = NULL;
	if (old && old_cfg && same_kube(c, old_cfg)) {
		*ret = old;
		return 0;
	}
	if (!c->kubernetes.on)
		return 0;
	r = kube_start(&o, ret);
	if (r < 0)
		return log_error_errno(r, "cannot start the Kubernetes client");
	log_info("Kubernetes: watching the pods of node %s at %s", o.node_name, o.api_url);
	return 0;
}

static int make_series(struct agent *a, const struct agent_config *c, struct kube *kube, const struct relabel *rl)
{
	struct series_table_opts o = {
		.hostname = c->hostname,
		.nstatic = c->nlabels,
		.max_series = c->limits.max_series,
		.max_processes = c->limits.max_processes,
		.per_thread = c->per_thread,
		.python_hint = c->python_fp ? "unwind is fp, which reads no Python frames: they get native frames "
					      "only; set unwind to dwarf for Python functions (or python to false "
					      "to silence this)" : NULL,
		.period_ns = NSEC_PER_SEC / c->frequency,
		.off_cpu = c->off_cpu,
		.kube = kube,
		.relabel = rl,
		.drop_pid = drop_pid,
		.drop_ctx = a,
	};
	struct series_label *labels = calloc(c->nlabels ? c->nlabels : 1, sizeof(*labels));
	int r;

	if (!labels)
		return -ENOMEM;
	for (size_t i = 0; i < c->nlabels; i++)
		labels[i] = (struct series_label){ .name = c->labels[i].name, .value = c->labels[i].value };
	o.static_labels = labels;
	r = series_table_new(a->sym, &o, &a->series);
	if (r < 0) {
		free(labels);
		return r;
	}
	free(a->static_labels);
	a->static_labels = labels;
	return 0;
}

static int make_rules(const struct agent_config *c, struct rules **ret)
{
	const char *names[512];
	struct rules_opts o = {
		.series_labels = names,
		.nseries_labels = agent_config_series_labels(c, names, ARRAY_SIZE(names)),
		.max_series = c->limits.recording_series,
		/* Function names new to the rules are evaluated for at most 1% of the
		 * window in CPU time; the rest wait for the next windows. */
		.eval_budget_ns = (uint64_t)c->interval_ms * 10000ull,
	};
	int r = rules_new(&c->recording_rules, &o, ret);

	return r < 0 ? log_error_errno(r, "cannot set up the recording rules") : 0;
}

/* Renders the recorded metrics for /metrics; they change only here and at reloads. */
static void publish_rules(struct agent *a)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return;
	rules_render(a->rules, f);
	if (fclose(f) != 0) {
		free(text);
		return;
	}
	pthread_mutex_lock(&a->snap.lock);
	free(a->snap.rules_text);
	a->snap.rules_text = text;
	pthread_mutex_unlock(&a->snap.lock);
}

static void publish(struct agent *a)
{
	struct agent_snapshot *s = &a->snap;

	pthread_mutex_lock(&s->lock);
	sampler_get_counters(a->sampler, &s->bpf);
	s->samples = a->samples;
	s->windows = a->windows;
	s->windows_cut = a->windows_cut;
	s->reloads = a->reloads;
	s->reload_errors = a->reload_errors;
	series_table_get_stats(a->series, &s->series);
	symbolizer_get_stats(a->sym, &s->sym);
	s->has_kube = a->kube != NULL;
	if (a->kube)
		kube_get_stats(a->kube, &s->kube);
	s->has_unwind = sampler_unwind_stats(a->sampler, &s->unwind) == 0;
	s->has_spool = a->spool != NULL;
	if (a->spool)
		spool_get_stats(a->spool, &s->spool);
	s->nexp = a->nexp;
	for (unsigned int i = 0; i < a->nexp; i++) {
		a->exp[i]->ops->get_stats(a->exp[i], &s->exp[i]);
		snprintf(s->exp_name[i], sizeof(s->exp_name[i]), "%s", a->exp[i]->name);
	}
	s->last_poll_mono_ns = clock_mono_ns();
	s->frequency = a->cfg.frequency;
	s->ready = true;
	pthread_mutex_unlock(&s->lock);
}

/* Ends the current window at end_mono (CLOCK_MONOTONIC, not before its start):
 * hands it to every exporter and starts the next one there, so windows chain. */
static int finish_window(struct agent *a, uint64_t end_mono)
{
	const struct export_series *series;
	struct export_batch b;
	size_t n = 0;
	int64_t end_wall;
	int r;

	end_wall = a->window_start_wall + (int64_t)(end_mono - a->window_start_mono);
	r = series_table_batch(a->series, a->window_start_wall, end_wall, &series, &n);
	if (r < 0)
		return log_error_errno(r, "cannot collect the window's series");
	b = (struct export_batch){
		.series = series,
		.nseries = n,
		.start_unix_ns = a->window_start_wall,
		.end_unix_ns = end_wall,
		.period_ns = NSEC_PER_SEC / a->cfg.frequency,
	};
	if (n) {
		for (unsigned int i = 0; i < a->nexp; i++)
			a->exp[i]->ops->submit(a->exp[i], &b); /* errors are logged by the exporter */
		/* The same window counts into the recorded metrics, once. */
		r = rules_count(a->rules, &b);
		if (r < 0)
			log_error_errno(r, "cannot count the window into the recording rules");
		publish_rules(a);
	}
	series_table_end_window(a->series);
	/* Object files nobody's new addresses needed for a minute are closed: the
	 * frame cache answers for the addresses already seen. */
	symbolizer_close_idle(a->sym, 60ull * NSEC_PER_SEC);
	/* Debug files that arrived: the next windows name those frames. */
	symbolizer_debuginfod_poll(a->sym);
	symbolizer_release_pages(a->sym);
	/* Give freed heap (table builds, DWARF, encoded windows) back to the system. */
	malloc_trim(0);
	a->windows++;
	a->window_start_wall = end_wall;
	a->window_start_mono = end_mono;
	a->window_end_mono = end_mono + (uint64_t)a->cfg.interval_ms * 1000000ull;
	log_debug("window %" PRIu64 ": %zu series exported", a->windows, n);
	return 0;
}

/* Ends windows that a sample taken at time_ns is past (see on_sample). */
static int catch_up(struct agent *a, uint64_t time_ns)
{
	uint64_t interval = (uint64_t)a->cfg.interval_ms * 1000000ull;
	int r;

	if (time_ns < a->window_end_mono)
		return 0;
	r = finish_window(a, a->window_end_mono);
	if (r < 0)
		return r;
	/* Nothing was sampled for whole windows (a suspended host): start the
	 * window that holds time_ns, rather than ending empty ones one by one. */
	if (time_ns >= a->window_end_mono) {
		uint64_t skip = (time_ns - a->window_start_mono) / interval * interval;

		a->window_start_mono += skip;
		a->window_start_wall += (int64_t)skip;
		a->window_end_mono = a->window_start_mono + interval;
	}
	return 0;
}

/* Drains the ring buffer, so every sample taken so far is in, then ends the
 * window: at its planned end when that has passed (a sample stamped past it has
 * already ended it, in on_sample), or now for a cut (stop, reload, stack
 * limit). Windows thus end on time even when the loop falls behind. The drain
 * stops after DRAIN_BUDGET_NS: samples arriving faster than they are read (a
 * starved agent, a flood of new processes) must not keep the loop from SIGTERM,
 * /metrics and the window writer; what is left is read in the next rounds. */
/* Bound of <state_dir>/cache: the unwind tables of a few hundred objects, plus
 * limits.debug_inflate_size for inflated copies of debug files. */
#define DISK_CACHE_TABLE_BYTES (64ull << 20)
#define DRAIN_BUDGET_NS (500ull * 1000 * 1000)

static int end_window(struct agent *a, bool cut)
{
	uint64_t now;
	int r;

	r = sampler_drain(a->sampler, DRAIN_BUDGET_NS);
	if (r < 0)
		return log_error_errno(r, "reading samples failed");
	now = clock_mono_ns();
	if (cut)
		return finish_window(a, now > a->window_start_mono ? now : a->window_start_mono);
	return catch_up(a, now);
}

static void apply_logging(const struct agent_config *c)
{
	log_set_level(c->log.level);
	log_set_format(c->log.format);
}

static int start_metrics(struct agent *a, const struct agent_config *c)
{
	if (!c->metrics.enabled)
		return 0;
	return metrics_server_start(c->metrics.address, agent_metrics_render, agent_metrics_healthy, &a->snap,
				    &a->metrics);
}

/* SIGHUP: the configuration is loaded again on the reloader's thread (see run());
 * once it is valid, the current window ends with the old settings and the new ones
 * apply. The sampler keeps running, so no sample is lost; a bad file leaves
 * everything as it was. */
static void reload_failed(struct agent *a)
{
	a->reload_errors++;
	log_error("configuration reload failed; keeping the running configuration");
	sd_notify(0, "READY=1");
}

static void apply_config(struct agent *a, struct agent_config nc)
{
	struct series_table *old_series = a->series;
	struct rules *rules = NULL;
	struct relabel *rl = NULL;
	struct kube *kube = NULL;
	struct exporter *old_exp[AGENT_MAX_EXPORTERS], *backup[AGENT_MAX_EXPORTERS];
	unsigned int old_nexp = a->nexp;
	int r;

	r = make_rules(&nc, &rules);
	if (r == 0 && (r = relabel_new(&nc.relabel, &rl)) < 0)
		log_error_errno(r, "cannot set up relabel_configs");
	if (r == 0)
		r = make_kube(&nc, &a->cfg, a->kube, &kube);
	if (r != 0) {
		rules_free(rules);
		relabel_free(rl);
		agent_config_free(&nc);
		reload_failed(a);
		return;
	}
	end_window(a, true);

	memcpy(old_exp, a->exp, sizeof(old_exp));
	memcpy(backup, a->exp, sizeof(backup));
	a->nexp = 0;
	r = agent_make_exporters(a, &nc, &a->cfg, old_exp, old_nexp);
	if (r == 0) {
		a->series = NULL;
		r = make_series(a, &nc, kube, rl);
		if (r < 0)
			a->series = old_series;
	}
	if (r < 0) {
		/* Put everything back as it was; free only what this reload built. */
		for (unsigned int i = 0; i < a->nexp; i++) {
			bool reused = false;

			for (unsigned int k = 0; k < old_nexp; k++)
				reused |= a->exp[i] == backup[k];
			if (!reused)
				a->exp[i]->ops->free(a->exp[i]);
		}
		memcpy(a->exp, backup, sizeof(a->exp));
		a->nexp = old_nexp;
		rules_free(rules);
		relabel_free(rl);
		if (kube != a->kube)
			kube_stop(kube);
		agent_config_free(&nc);
		reload_failed(a);
		return;
	}
	/* Rules that did not change keep counting where they were. */
	rules_adopt(rules, a->rules);
	rules_free(a->rules);
	a->rules = rules;
	publish_rules(a);
	/* Exporters whose settings changed keep delivering what they hold, for up
	 * to shutdown_timeout, without holding up sampling; then what is left goes
	 * to the new exporter of the same kind, or to the spool. */
	for (unsigned int i = 0; i < old_nexp; i++) {
		if (!old_exp[i])
			continue;
		if (a->nretiring == ARRAY_SIZE(a->retiring)) {
			agent_retire(a, old_exp[i], false);
			continue;
		}
		a->retiring[a->nretiring] = old_exp[i];
		a->retiring_deadline[a->nretiring++] = clock_mono_ns() + (uint64_t)nc.shutdown_timeout_ms * 1000000ull;
	}
	agent_open_spool(a, &nc);
	for (unsigned int i = 0; i < a->nexp; i++) {
		bool kept = false;

		for (unsigned int k = 0; k < old_nexp; k++)
			kept |= a->exp[i] == backup[k];
		if (!kept)
			agent_requeue_spooled(a, a->exp[i]);
	}
	/* The old table lets BPF sample the processes it dropped: the new rules decide again. */
	series_table_free(old_series);
	relabel_free(a->relabel);
	a->relabel = rl;
	if (kube != a->kube)
		kube_stop(a->kube);
	a->kube = kube;
	if (nc.frequency != a->cfg.frequency && sampler_set_freq(a->sampler, nc.frequency) < 0)
		log_error("cannot change the sampling frequency to %u Hz", nc.frequency);
	if (nc.python != a->cfg.python)
		log_warn("python: turned %s in the configuration; that takes effect when the agent restarts",
			 nc.python ? "on" : "off");
	if (nc.off_cpu != a->cfg.off_cpu || nc.off_cpu_threshold_ms != a->cfg.off_cpu_threshold_ms)
		log_warn("off_cpu: changed in the configuration; that takes effect when the agent restarts");
	if (nc.java != a->cfg.java || nc.node != a->cfg.node)
		log_warn("%s: turned %s in the configuration; that takes effect when the agent restarts",
			 nc.java != a->cfg.java ? "java" : "node",
			 (nc.java != a->cfg.java ? nc.java : nc.node) ? "on" : "off");
	sampler_set_idle(a->sampler, nc.idle);
	sampler_set_include_self(a->sampler, nc.include_self);
	apply_logging(&nc);
	if (nc.metrics.enabled != a->cfg.metrics.enabled || !agent_same_str(nc.metrics.address, a->cfg.metrics.address)) {
		metrics_server_stop(a->metrics);
		a->metrics = NULL;
		start_metrics(a, &nc);
	}
	agent_config_free(&a->cfg);
	a->cfg = nc;
	a->window_end_mono = a->window_start_mono + (uint64_t)a->cfg.interval_ms * 1000000ull;
	a->reloads++;
	log_info("configuration reloaded: %u Hz, %u exporters, interval %ums", a->cfg.frequency, a->nexp,
		 a->cfg.interval_ms);
	sd_notify(0, "READY=1");
}

/* How long the loop may sleep: BPF wakes it when the ring buffer is an eighth
 * full, a signal interrupts the wait, and the deadlines below (the window's end,
 * /metrics' refresh each second, systemd's watchdog) set the timeout. Each wakeup
 * costs the agent about 25 us: once a second is the least /metrics allows.
 * Exporters that a reload retired are looked at 4 times a second until they go. */
#define POLL_MAX_MS      1000
#define POLL_RETIRING_MS 250

static int poll_timeout_ms(const struct agent *a, uint64_t next_publish)
{
	uint64_t now = clock_mono_ns(), until;

	if (a->reload_pending)
		return 10;
	if (a->window_end_mono <= now)
		return 100; /* a window that could not end is tried again soon, not in a spin */
	until = a->window_end_mono - now;
	if (next_publish > now && next_publish - now < until)
		until = next_publish - now;
	if (a->watchdog_usec && a->next_watchdog > now && a->next_watchdog - now < until)
		until = a->next_watchdog - now;
	until = (until + 999999) / 1000000;
	if (a->nretiring && until > POLL_RETIRING_MS)
		return POLL_RETIRING_MS;
	return until < POLL_MAX_MS ? (int)until : POLL_MAX_MS;
}

/* Tells systemd's watchdog the loop is alive. Also called right before work that
 * can block for a while (a reload, a window's export): a ping there bounds the gap
 * by that work alone, not by it and the time since the last ping (the CI of ccc80cc
 * saw 1.11 s around a SIGHUP while other builds wrote to the disk). */
static void feed_watchdog(struct agent *a)
{
	if (!a->watchdog_usec)
		return;
	sd_notify(0, "WATCHDOG=1");
	a->next_watchdog = clock_mono_ns() + a->watchdog_usec * 1000 / 2;
}

static int run(struct agent *a)
{
	uint64_t next_publish = 0;
	int r;

	for (;;) {
		struct agent_config nc = {};
		uint64_t now;

		r = sampler_poll(a->sampler, poll_timeout_ms(a, next_publish));
		if (r < 0)
			return log_error_errno(r, "reading samples failed");
		now = clock_mono_ns();
		if (got_stop) {
			a->stop_mono = now;
			break;
		}
		if (got_hup) {
			got_hup = 0;
			sd_notify(0, "RELOADING=1");
			reloader_request(a->reloader);
			a->reload_pending = true;
		}
		r = reloader_poll(a->reloader, &nc);
		if (r != 0) {
			a->reload_pending = false;
			feed_watchdog(a);
			if (r > 0)
				apply_config(a, nc);
			else
				reload_failed(a);
			next_publish = 0; /* /metrics shows the reload at once */
		}
		if (now >= a->window_end_mono) {
			feed_watchdog(a);
			end_window(a, false);
		} else if (a->cfg.limits.max_stacks_per_window) {
			struct series_stats st;

			series_table_get_stats(a->series, &st);
			if (st.stacks >= a->cfg.limits.max_stacks_per_window) {
				log_warn("window ended early: %u distinct stacks reached limits.max_stacks_per_window",
					 st.stacks);
				a->windows_cut++;
				end_window(a, true);
			}
		}
		if (a->nretiring)
			agent_reap_retiring(a, now);
		if (a->watchdog_usec && clock_mono_ns() >= a->next_watchdog)
			feed_watchdog(a);
		if (now >= next_publish) {
			publish(a);
			next_publish = now + NSEC_PER_SEC;
		}
	}
	return 0;
}

/* Unwind tables are kept in <state_dir>/cache across restarts (diskcache.h),
 * in the object cache that the symbolizer and the unwinder share. */
static void open_disk_cache(struct agent *a)
{
	struct diskcache *dc;
	char *dir = NULL;
	int r = mkdir_p(a->cfg.state_dir, 0700);

	if (r == 0 && asprintf(&dir, "%s/cache", a->cfg.state_dir) < 0)
		r = -ENOMEM;
	if (r == 0)
		r = diskcache_open(dir, DISK_CACHE_TABLE_BYTES + a->cfg.limits.debug_inflate_bytes, &dc);
	if (r < 0) {
		log_warn("cannot keep unwind tables in %s/cache: %s: they are built again at each start, and debug "
			 "sections inflated again",
			 a->cfg.state_dir, strerror(-r));
	} else {
		a->objs = objcache_shared();
		if (a->objs)
			objcache_set_disk(a->objs, dc);
		else
			diskcache_free(dc);
	}
	free(dir);
}

int agent_main(int argc, char **argv)
{
	struct agent a = { .argc = argc, .argv = argv };
	struct sampler_opts so;
	struct symbolizer_opts syo = {};
	struct sigaction sa_stop = { .sa_handler = on_stop }, sa_hup = { .sa_handler = on_hup };
	int r, ret = 1;

	pthread_mutex_init(&a.snap.lock, NULL);
	r = agent_config_load(argc, argv, environ, &a.cfg);
	if (r == 1)
		return 0;
	if (r < 0)
		return r == -EINVAL ? 2 : 1;
	if (a.cfg.check) {
		agent_config_print(&a.cfg, stdout);
		agent_config_free(&a.cfg);
		return 0;
	}
	apply_logging(&a.cfg);
	/* Debug files by build id (symbols.debuginfod_urls, else DEBUGINFOD_URLS),
	 * fetched on a thread of their own; the environment libdebuginfod reads is
	 * set before any thread starts. A reload does not change it. */
	{
		const char *urls = a.cfg.symbols.debuginfod_urls && *a.cfg.symbols.debuginfod_urls ?
					   a.cfg.symbols.debuginfod_urls : getenv("DEBUGINFOD_URLS");
		char *cache = NULL;

		if (urls && *urls && asprintf(&cache, "%s/debuginfod", a.cfg.state_dir) < 0)
			cache = NULL;
		r = dbgd_setup_env(cache ? urls : NULL, cache ? cache : "", a.cfg.symbols.debuginfod_timeout_ms * 1000000ull,
				   a.cfg.symbols.debuginfod_cache_bytes);
		a.debuginfod_cache = cache;
		if (r < 0) {
			log_error_errno(r, "cannot set up debuginfod");
			goto out;
		}
	}

	if (sampler_preflight(a.cfg.unwind == UNWIND_DWARF) < 0)
		goto out;
	syo.max_cached_frames = a.cfg.limits.symbol_cache_entries;
	syo.max_processes = a.cfg.limits.max_processes;
	syo.max_module_heap = a.cfg.limits.module_memory_bytes;
	syo.perfmap_max_bytes = a.cfg.limits.perfmap_memory_bytes;
	syo.demangle = a.cfg.demangle;
	syo.debuginfod_cache = a.debuginfod_cache;
	syo.debuginfod_cache_bytes = a.cfg.symbols.debuginfod_cache_bytes;
	syo.debuginfod_miss_ttl_ns = a.cfg.symbols.debuginfod_miss_ttl_ms * 1000000ull;
	syo.debuginfod_timeout_ns = a.cfg.symbols.debuginfod_timeout_ms * 1000000ull;
	if (a.cfg.limits.debug_inflate_bytes) {
		r = mkdir_p(a.cfg.state_dir, 0700);
		if (r < 0)
			log_warn("cannot create state_dir %s: %s: compressed debug sections will be inflated in memory "
				    "(set state_dir to a writable directory)", a.cfg.state_dir, strerror(-r));
		else {
			syo.inflate_dir = a.cfg.state_dir;
			syo.inflate_max_bytes = a.cfg.limits.debug_inflate_bytes;
		}
	}
	open_disk_cache(&a);
	r = symbolizer_new(&syo, &a.sym);
	if (r < 0) {
		log_error_errno(r, "cannot set up the symbolizer");
		goto out;
	}
	agent_open_spool(&a, &a.cfg);
	r = relabel_new(&a.cfg.relabel, &a.relabel);
	if (r < 0) {
		log_error_errno(r, "cannot set up relabel_configs");
		goto out;
	}
	if (make_kube(&a.cfg, NULL, NULL, &a.kube) < 0 || make_series(&a, &a.cfg, a.kube, a.relabel) < 0 ||
	    make_rules(&a.cfg, &a.rules) < 0 ||
	    agent_make_exporters(&a, &a.cfg, NULL, NULL, 0) < 0)
		goto out;
	publish_rules(&a);
	for (unsigned int i = 0; i < a.nexp; i++)
		agent_requeue_spooled(&a, a.exp[i]);
	r = reloader_new(argc, argv, NULL, &a.reloader);
	if (r < 0) {
		log_error_errno(r, "cannot start the configuration loader");
		goto out;
	}
	so = (struct sampler_opts){
		.freq = a.cfg.frequency,
		.idle = a.cfg.idle,
		.include_self = a.cfg.include_self,
		.cb = on_sample,
		.cb_ctx = &a,
		.verbose = a.cfg.log.level >= LOG_LVL_DEBUG,
		.unwind_dwarf = a.cfg.unwind == UNWIND_DWARF,
		.unwind_max_rows = a.cfg.limits.unwind_table_rows,
		.unwind_max_maps = a.cfg.limits.unwind_mappings,
		.unwind_max_procs = a.cfg.limits.unwind_processes,
		.unwind_names = { "limits.unwind_table_rows", "limits.unwind_mappings", "limits.unwind_processes" },
		.drop_pids = true,
		.python_off = !a.cfg.python,
		.java_off = !a.cfg.java,
		.node_off = !a.cfg.node,
		.offcpu = a.cfg.off_cpu,
		.offcpu_threshold_ns = (uint64_t)a.cfg.off_cpu_threshold_ms * 1000000,
		.pin = a.cfg.bpf_pin,
	};
	if (sampler_open(&so, &a.sampler) < 0)
		goto out;
	py_resolver_set_io(symbolizer_python(a.sym), sampler_maps_io(a.sampler));
	jvm_namer_set_io(symbolizer_java(a.sym), sampler_maps_io(a.sampler));
	v8_namer_set_io(symbolizer_node(a.sym), sampler_maps_io(a.sampler));
	if (start_metrics(&a, &a.cfg) < 0)
		goto out;

	sigaction(SIGINT, &sa_stop, NULL);
	sigaction(SIGTERM, &sa_stop, NULL);
	sigaction(SIGHUP, &sa_hup, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (sampler_start(a.sampler) < 0)
		goto out;
	a.window_start_wall = clock_wall_ns();
	a.window_start_mono = clock_mono_ns();
	a.window_end_mono = a.window_start_mono + (uint64_t)a.cfg.interval_ms * 1000000ull;
	if (sd_watchdog_enabled(0, &a.watchdog_usec) <= 0)
		a.watchdog_usec = 0;
	publish(&a);
	log_info("agent started: %u Hz on %u CPUs, window %ums, %u exporters%s%s", a.cfg.frequency,
		 sampler_ncpus_active(a.sampler), a.cfg.interval_ms, a.nexp, a.metrics ? ", metrics on " : "",
		 a.metrics ? a.cfg.metrics.address : "");
	sd_notify(0, "READY=1");

	if (run(&a) < 0)
		goto out;

	/* Stop: the last partial window goes to every exporter; what they cannot
	 * deliver by shutdown_timeout after the signal goes to the spool. */
	sd_notify(0, "STOPPING=1");
	log_info("%s: flushing the last window and stopping (at most %ums)", strsignal(got_stop),
		 a.cfg.shutdown_timeout_ms);
	sampler_stop(a.sampler);
	end_window(&a, true);
	/* /metrics shows the last window's counts while the exporters flush. */
	publish(&a);
	agent_stop_exporters(&a, a.stop_mono + (uint64_t)a.cfg.shutdown_timeout_ms * 1000000ull);
	ret = 0;
out:
	metrics_server_stop(a.metrics);
	reloader_free(a.reloader);
	agent_stop_exporters(&a, 0);
	spool_free(a.spool);
	series_table_free(a.series);
	sampler_free(a.sampler);
	kube_stop(a.kube);
	relabel_free(a.relabel);
	rules_free(a.rules);
	free(a.snap.rules_text);
	symbolizer_free(a.sym);
	objcache_unref(a.objs);
	free(a.debuginfod_cache);
	free(a.static_labels);
	agent_config_free(&a.cfg);
	pthread_mutex_destroy(&a.snap.lock);
	return ret;
}

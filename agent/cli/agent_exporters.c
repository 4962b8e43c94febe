/* agent_exporters.c: the agent's exporters over their life: made from the settings,
 * kept across a reload when unchanged, retired with a deadline, and stopped into the spool. */
#include "agent_priv.h"

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
#include "export_dir.h"
#include "export_otlp.h"
#include "export_parca.h"
#include "export_pyroscope.h"
#include "log.h"
#include "mkdir_p.h"
#include "metrics.h"
#include "reload.h"
#include "sender.h"
#include "spool.h"

/* What e did not deliver goes to the exporter of the same kind in a->exp (a
 * reload replaced e) or, failing that, to the spool; then e is freed. */
void agent_retire(struct agent *a, struct exporter *e, bool stopping)
{
	struct sender_request **reqs = NULL;
	size_t n = 0;

	if (e->ops->take_pending && (a->spool || !stopping) && e->ops->take_pending(e, &reqs, &n) == 0) {
		struct exporter *to = NULL;

		for (unsigned int i = 0; !stopping && i < a->nexp; i++)
			if (a->exp[i] != e && strcmp(a->exp[i]->ops->kind, e->ops->kind) == 0)
				to = a->exp[i];
		if (to) {
			for (size_t i = 0; i < n; i++)
				to->ops->requeue(to, reqs[i]);
		} else if (a->spool) {
			spool_put(a->spool, e->ops->kind, reqs, n);
		} else {
			log_warn("%s: %zu undelivered profiles dropped: the spool is not available", e->name, n);
			for (size_t i = 0; i < n; i++)
				sender_request_free(reqs[i]);
		}
		free(reqs);
	}
	e->ops->free(e); /* drops (and logs) whatever is still queued */
}

static uint32_t ms_until(uint64_t deadline)
{
	uint64_t now = clock_mono_ns();

	return now >= deadline ? 0 : (uint32_t)((deadline - now + 999999) / 1000000);
}

/* Every exporter, retiring ones too, delivers what it holds until one common
 * deadline (their senders work in parallel); the rest goes to the spool. */
void agent_stop_exporters(struct agent *a, uint64_t deadline)
{
	for (unsigned int i = 0; i < a->nexp; i++)
		a->exp[i]->ops->flush(a->exp[i], ms_until(deadline));
	for (unsigned int i = 0; i < a->nretiring; i++)
		a->retiring[i]->ops->flush(a->retiring[i], ms_until(deadline));
	for (unsigned int i = 0; i < a->nretiring; i++)
		agent_retire(a, a->retiring[i], true);
	a->nretiring = 0;
	for (unsigned int i = 0; i < a->nexp; i++) {
		agent_retire(a, a->exp[i], true);
		a->exp[i] = NULL;
	}
	a->nexp = 0;
}

/* Queues what the spool holds for e's kind ahead of new windows. */
void agent_requeue_spooled(struct agent *a, struct exporter *e)
{
	struct sender_request **reqs;
	size_t n;

	if (!a->spool || !e->ops->requeue || spool_take(a->spool, e->ops->kind, &reqs, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		e->ops->requeue(e, reqs[i]);
	free(reqs);
}

static bool any_http(const struct agent_config *c)
{
	return c->exporters.pyroscope.enabled || c->exporters.otlp.enabled || c->exporters.parca.enabled;
}

void agent_open_spool(struct agent *a, const struct agent_config *c)
{
	struct spool_opts o = {
		.state_dir = c->state_dir,
		.max_bytes = c->spool.max_bytes,
		.max_age_ns = c->spool.max_age_ms * 1000000ull,
	};

	if (!a->spool && any_http(c))
		spool_open(&o, &a->spool); /* logs why not; the agent runs on without */
}

/* Frees retired exporters once their queue is empty or their grace time is over;
 * never waits. */
void agent_reap_retiring(struct agent *a, uint64_t now)
{
	unsigned int k = 0;

	for (unsigned int i = 0; i < a->nretiring; i++) {
		struct exporter *e = a->retiring[i];
		struct export_stats st;

		e->ops->get_stats(e, &st);
		if (st.queue_items == 0 || now >= a->retiring_deadline[i]) {
			agent_retire(a, e, false);
			continue;
		}
		a->retiring[k] = e;
		a->retiring_deadline[k++] = a->retiring_deadline[i];
	}
	a->nretiring = k;
}

bool agent_same_str(const char *x, const char *y)
{
	return (!x && !y) || (x && y && strcmp(x, y) == 0);
}

static bool same_target(const struct http_target *x, const struct http_target *y)
{
	return agent_same_str(x->url, y->url) && agent_same_str(x->basic_user, y->basic_user) &&
	       agent_same_str(x->basic_password, y->basic_password) && agent_same_str(x->bearer_token, y->bearer_token) &&
	       agent_same_str(x->tenant, y->tenant) && agent_same_str(x->ca_file, y->ca_file) &&
	       agent_same_str(x->cert_file, y->cert_file) && agent_same_str(x->key_file, y->key_file) &&
	       x->insecure_skip_verify == y->insecure_skip_verify && x->timeout_ms == y->timeout_ms &&
	       x->buffer_bytes == y->buffer_bytes && x->max_retries == y->max_retries;
}

/* Whether the exporter of `kind` would be built the same from both configs. */
static bool same_exporter(const struct agent_config *x, const struct agent_config *y, const char *kind)
{
	if (strcmp(kind, "dir") == 0)
		return x->exporters.dir.enabled == y->exporters.dir.enabled &&
		       agent_same_str(x->exporters.dir.path, y->exporters.dir.path) &&
		       x->exporters.dir.max_age_ms == y->exporters.dir.max_age_ms &&
		       x->exporters.dir.max_size_bytes == y->exporters.dir.max_size_bytes;
	if (strcmp(kind, "pyroscope") == 0)
		return x->exporters.pyroscope.enabled == y->exporters.pyroscope.enabled &&
		       x->exporters.pyroscope_api == y->exporters.pyroscope_api &&
		       same_target(&x->exporters.pyroscope.target, &y->exporters.pyroscope.target);
	if (strcmp(kind, "otlp") == 0)
		return x->exporters.otlp.enabled == y->exporters.otlp.enabled &&
		       same_target(&x->exporters.otlp.target, &y->exporters.otlp.target);
	return x->exporters.parca.enabled == y->exporters.parca.enabled &&
	       same_target(&x->exporters.parca.target, &y->exporters.parca.target);
}

/* Takes the exporter of `kind` out of keep[] (and returns it) when old_cfg would
 * build it the same as c; NULL otherwise. */
static struct exporter *take_kept(struct exporter **keep, unsigned int nkeep, const struct agent_config *old_cfg,
				  const struct agent_config *c, const char *kind)
{
	for (unsigned int i = 0; old_cfg && i < nkeep; i++) {
		struct exporter *e = keep[i];

		if (e && strcmp(e->ops->kind, kind) == 0 && same_exporter(old_cfg, c, kind)) {
			keep[i] = NULL;
			return e;
		}
	}
	return NULL;
}

/* Builds the exporters of c into a->exp, reusing from keep[] (built from old_cfg)
 * those whose settings did not change, so their queues and counters survive. */
int agent_make_exporters(struct agent *a, const struct agent_config *c, const struct agent_config *old_cfg,
			  struct exporter **keep, unsigned int nkeep)
{
	struct exporter *e;
	int r;

	if (c->exporters.dir.enabled) {
		struct export_dir_opts o = {
			.path = c->exporters.dir.path,
			.max_age_ns = c->exporters.dir.max_age_ms * 1000000ull,
			.max_bytes = c->exporters.dir.max_size_bytes,
		};

		e = take_kept(keep, nkeep, old_cfg, c, "dir");
		r = e ? 0 : exporter_dir_new(&o, &e);
		if (r < 0)
			return r;
		a->exp[a->nexp++] = e;
	}
	if (c->exporters.pyroscope.enabled) {
		e = take_kept(keep, nkeep, old_cfg, c, "pyroscope");
		r = e ? 0 : exporter_pyroscope_new(&c->exporters.pyroscope.target, c->exporters.pyroscope_api, &e);
		if (r < 0)
			return log_error_errno(r, "cannot set up the pyroscope exporter");
		a->exp[a->nexp++] = e;
	}
	if (c->exporters.otlp.enabled) {
		e = take_kept(keep, nkeep, old_cfg, c, "otlp");
		r = e ? 0 : exporter_otlp_new(&c->exporters.otlp.target, &e);
		if (r < 0)
			return log_error_errno(r, "cannot set up the otlp exporter");
		a->exp[a->nexp++] = e;
	}
	if (c->exporters.parca.enabled) {
		e = take_kept(keep, nkeep, old_cfg, c, "parca");
		r = e ? 0 : exporter_parca_new(&c->exporters.parca.target, &e);
		if (r < 0)
			return log_error_errno(r, "cannot set up the parca exporter");
		a->exp[a->nexp++] = e;
	}
	return 0;
}

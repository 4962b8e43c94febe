/* rules_eval.c: counts one window's aggregated profiles into the recorded metrics:
 * series matchers, function regexes evaluated once per distinct name, one count per rule per sample. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aggregate.h"
#include "profile_data.h"
#include "clock.h"
#include "escape.h"
#include "log.h"
#include "rules_priv.h"

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)timespec_ns(&ts);
}

/* Label name of series s as a rule sees it. container_id is the id of the series'
 * container also in a pod, where the "container" label names it and the id is a
 * resource attribute only (with_id). The built-in counter keeps to the series
 * labels, so that a container's restart does not start a new series of it. */
static const char *rule_label(const struct export_series *s, const char *name, bool with_id)
{
	if (with_id && strcmp(name, LABEL_CONTAINER_ID) == 0)
		return export_series_container_id(s);
	return export_series_label(s, name);
}

static bool matcher_ok(const struct rule_matcher *m, const struct export_series *s)
{
	const char *v = rule_label(s, m->label, true);

	if (!v)
		v = ""; /* an absent label reads as empty, as in Prometheus */
	switch (m->op) {
	case RULE_MATCH_EQ: return strcmp(v, m->value) == 0;
	case RULE_MATCH_NE: return strcmp(v, m->value) != 0;
	case RULE_MATCH_RE: return regexec(&m->rx, v, 0, NULL, 0) == 0;
	default: return regexec(&m->rx, v, 0, NULL, 0) != 0;
	}
}

static bool series_ok(const struct rule *r, const struct export_series *s)
{
	for (size_t i = 0; i < r->nm; i++)
		if (!matcher_ok(&r->m[i], s))
			return false;
	return true;
}

static int grow(void **p, size_t *cap, size_t want, size_t elem)
{
	size_t n = *cap ? *cap : 64;
	void *np;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	np = realloc(*p, n * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = n;
	return 0;
}

/* The label set of family f for series s (function: fn, may be NULL) into
 * e->keybuf, values made valid UTF-8; returns its length or -ENOMEM. */
static ssize_t make_key(struct rules *e, const struct rule_family *f, const struct export_series *s, const char *fn)
{
	size_t len = 0;

	for (size_t i = 0; i < f->nlabels; i++) {
		const char *v = (int)i == f->fn_pos ? fn : rule_label(s, f->labels[i], f != e->fams);
		size_t n = v ? strnlen(v, PROWL_NAME_MAX) : 0;

		if (grow((void **)&e->keybuf, &e->keybuf_cap, len + 3 * n + 1, 1) < 0)
			return -ENOMEM;
		/* Prometheus rejects a whole scrape over one label value that is not UTF-8, and
		 * symbol and executable names come from unprivileged users. */
		len += utf8_sanitize(v ? v : "", n, e->keybuf + len);
		e->keybuf[len++] = 0;
	}
	return (ssize_t)len;
}

/* Rewrites the key in e->keybuf (len bytes) as its overflow series:
 * function="other" when the metric has that label, else service_name="other",
 * else (or with all) every label "other". Returns the new length or -ENOMEM. */
static ssize_t overflow_key(struct rules *e, const struct rule_family *f, size_t len, bool all)
{
	int which = all ? -1 : f->fn_pos >= 0 ? f->fn_pos : f->svc_pos;
	char *out = malloc(len + 6 * f->nlabels + 1);
	size_t o = 0, pos = 0;

	if (!out || grow((void **)&e->keybuf, &e->keybuf_cap, len + 6 * f->nlabels + 1, 1) < 0) {
		free(out);
		return -ENOMEM;
	}
	for (size_t i = 0; i < f->nlabels && pos < len; i++) {
		size_t n = strlen(e->keybuf + pos);
		const char *v = which == -1 || (int)i == which ? "other" : e->keybuf + pos;
		size_t vn = strlen(v);

		memcpy(out + o, v, vn + 1);
		o += vn + 1;
		pos += n + 1;
	}
	memcpy(e->keybuf, out, o);
	free(out);
	return (ssize_t)o;
}

static int counter_slot(struct rules *e, struct rule_family *f, size_t len, int64_t samples, uint32_t *ret)
{
	struct rule_counters *ct = &f->ct;
	uint32_t id = intern_find(ct->keys, e->keybuf, len);
	ssize_t olen;
	bool added, overflow = false;
	int rc;

	if (!id && ct->nnormal >= e->o.max_series) {
		ct->overflow_samples += (uint64_t)samples;
		ct->refused++;
		ct->refused_now = true; /* label sets idle for this window are freed after it */
		if (!ct->warned) {
			log_warn("recording rule metric %s reached limits.recording_series (%u label sets): further label "
				 "sets are counted under function=\"other\" (or service_name=\"other\") until label sets "
				 "without samples for a window are freed; see prowl_recording_series_refused_total",
				 f->metric, e->o.max_series);
			ct->warned = true;
		}
		/* The overflow series may exceed the cap by as much again; past that
		 * one series with every label "other" takes the rest. */
		olen = overflow_key(e, f, len, false);
		if (olen >= 0 && !intern_find(ct->keys, e->keybuf, (size_t)olen) &&
		    intern_count(ct->keys) >= 2 * e->o.max_series)
			olen = overflow_key(e, f, (size_t)olen, true);
		if (olen < 0)
			return (int)olen;
		len = (size_t)olen;
		overflow = true;
	}
	rc = intern_put(ct->keys, e->keybuf, len, &id, &added);
	if (rc < 0)
		return rc;
	if (id >= ct->v_cap) {
		size_t cap = ct->v_cap;

		rc = grow((void **)&ct->v, &cap, (size_t)id + 1, sizeof(*ct->v));
		if (rc < 0)
			return rc;
		memset(ct->v + ct->v_cap, 0, (cap - ct->v_cap) * sizeof(*ct->v));
		ct->v_cap = (uint32_t)cap;
	}
	if (added) {
		ct->v[id] = (struct rule_value){ .overflow = overflow };
		ct->nnormal += !overflow;
	}
	ct->v[id].seen = e->windows;
	*ret = id;
	return 0;
}

/* Frees f's label sets that got nothing in this window (the cap refused some):
 * their counters go from /metrics, as a process's series goes when it ends, and
 * come back from zero if they get samples again (a counter reset to Prometheus). */
static int free_idle(struct rules *e, struct rule_family *f)
{
	struct rule_counters *ct = &f->ct, n = { .keys = intern_new() };
	uint32_t count = intern_count(ct->keys), kept = 0;
	size_t cap = 0;
	int rc = n.keys ? 0 : -ENOMEM;

	if (rc == 0)
		rc = grow((void **)&n.v, &cap, (size_t)count + 1, sizeof(*n.v));
	if (rc == 0)
		memset(n.v, 0, cap * sizeof(*n.v));
	for (uint32_t id = 1; id <= count && rc == 0; id++) {
		size_t len;
		const void *key = intern_key(ct->keys, id, &len);
		uint32_t nid;

		if (ct->v[id].seen < e->windows)
			continue;
		rc = intern_put(n.keys, key, len, &nid, NULL);
		if (rc == 0) {
			n.v[nid] = ct->v[id];
			n.nnormal += !ct->v[id].overflow;
			kept++;
		}
	}
	if (rc < 0) {
		intern_free(n.keys);
		free(n.v);
		return rc;
	}
	n.v_cap = (uint32_t)cap;
	n.overflow_samples = ct->overflow_samples;
	n.refused = ct->refused;
	n.deferred_samples = ct->deferred_samples;
	n.freed = ct->freed + (count - kept);
	n.warned = ct->warned;
	intern_free(ct->keys);
	free(ct->v);
	*ct = n;
	if (count > kept)
		log_info("recording rule metric %s: %u label sets without samples in the last window freed to make room "
			 "under limits.recording_series", f->metric, count - kept);
	return 0;
}

static int add(struct rules *e, struct rule_family *f, const struct export_series *s, const char *fn,
	       int64_t samples, double period_s)
{
	ssize_t len = make_key(e, f, s, fn);
	uint32_t id = 0;
	int rc;

	if (len < 0)
		return (int)len;
	rc = counter_slot(e, f, (size_t)len, samples, &id);
	if (rc < 0)
		return rc;
	f->ct.v[id].seconds += (double)samples * period_s;
	return 0;
}

/* The function-rule bits of name into bits[nwords]: from the cache, else evaluated
 * while the window's budget lasts. Returns 1 when known, 0 when left for a later
 * window, or -ENOMEM. */
static int function_bits(struct rules *e, const char *name, uint64_t *bits)
{
	char buf[PROWL_NAME_MAX + 1];
	size_t len = strnlen(name, PROWL_NAME_MAX);
	const uint64_t *cached = rules_fcache_find(&e->fcache, name, len);
	int rc;

	if (cached) {
		memcpy(bits, cached, e->nwords * sizeof(uint64_t));
		return 1;
	}
	if (e->budget_spent) {
		e->names_deferred++;
		return 0;
	}
	if (name[len]) {
		memcpy(buf, name, len);
		buf[len] = 0;
		name = buf;
	}
	memset(bits, 0, e->nwords * sizeof(uint64_t));
	for (size_t i = 0; i < e->nrules; i++) {
		const struct rule *r = &e->rules[i];

		if (r->has_fn && regexec(&r->fn, name, 0, NULL, 0) == 0)
			bits[r->fn_bit / 64] |= 1ull << (r->fn_bit % 64);
	}
	e->names_evaluated++;
	/* One name's regexes at least; then the budget decides. */
	if (thread_cpu_ns() - e->window_t0 >= e->o.eval_budget_ns)
		e->budget_spent = true;
	rc = rules_fcache_add(&e->fcache, name, len, bits);
	return rc < 0 ? rc : 1;
}

/* A sample of cnt left out of the function rules whose bits are in open[]. */
static void defer(struct rules *e, const uint64_t *open, int64_t cnt)
{
	for (size_t w = 0; w < e->nwords; w++)
		for (uint64_t m = open[w]; m; m &= m - 1)
			e->bit_fam[(unsigned int)__builtin_ctzll(m) + 64 * w]->ct.deferred_samples += (uint64_t)cnt;
}

/* The function rules in want[] over one series: each sample counts once per
 * rule, under the matching frame nearest the leaf (the leaf frame alone for self). */
static int count_functions(struct rules *e, const struct export_series *s, const uint64_t *want, double period_s)
{
	const struct profile *p = s->prof;
	uint32_t nf = intern_count(p->functions), ns = intern_count(p->samples);
	size_t stride = (size_t)nf + 1;
	int rc;

	rc = grow((void **)&e->fb, &e->fb_cap, stride * e->nwords, sizeof(*e->fb));
	if (rc == 0)
		rc = grow((void **)&e->known, &e->known_cap, stride, 1);
	if (rc == 0)
		rc = grow((void **)&e->acc, &e->acc_cap, stride * e->nfn, sizeof(*e->acc));
	if (rc < 0)
		return rc;
	memset(e->acc, 0, stride * e->nfn * sizeof(*e->acc));
	for (uint32_t fid = 1; fid <= nf; fid++) {
		rc = function_bits(e, profile_str(p, p->funcs[fid].name_str), &e->fb[(size_t)fid * e->nwords]);
		if (rc < 0)
			return rc;
		e->known[fid] = (uint8_t)rc;
	}
	for (uint32_t sid = 1; sid <= ns; sid++) {
		struct prof_sample_key k = profile_sample_key(p, sid);
		int64_t cnt = p->counts[sid];
		uint64_t open[RULES_WORDS] = {}, any = 0;
		const unsigned char *raw;
		size_t n;
		bool leaf = true;

		if (cnt <= 0)
			continue;
		for (size_t w = 0; w < e->nwords; w++)
			any |= open[w] = want[w];
		raw = profile_stack(p, k.stack_id, &n);
		for (size_t i = 0; i < n && any; i++) {
			const struct prof_loc *loc = &p->locs[stack_loc(raw, i)];

			for (uint32_t l = 0; l < loc->nlines && any; l++) {
				uint32_t fid = p->lines[loc->first_line + l].function_id;
				const uint64_t *bits = &e->fb[(size_t)fid * e->nwords];

				if (!e->known[fid]) {
					/* Whether this frame counts is not known yet: the rules
					 * still open leave the sample out, counted as deferred. */
					defer(e, open, cnt);
					any = 0;
					break;
				}
				any = 0;
				for (size_t w = 0; w < e->nwords; w++) {
					uint64_t hit = bits[w] & open[w];

					open[w] &= ~hit;
					while (hit) {
						unsigned int j = (unsigned int)__builtin_ctzll(hit) + 64 * (unsigned int)w;

						e->acc[(size_t)j * stride + fid] += (uint32_t)cnt;
						hit &= hit - 1;
					}
					if (leaf)
						open[w] &= ~e->self_mask[w];
					any |= open[w];
				}
				leaf = false;
			}
		}
	}
	for (size_t i = 0; i < e->nrules; i++) {
		const struct rule *r = &e->rules[i];

		if (!r->has_fn || !(want[r->fn_bit / 64] & (1ull << (r->fn_bit % 64))))
			continue;
		for (uint32_t fid = 1; fid <= nf; fid++) {
			int64_t c = e->acc[(size_t)r->fn_bit * stride + fid];

			/* (a window holds far fewer than 2^32 samples of one function) */

			if (c && (rc = add(e, r->fam, s, profile_str(p, p->funcs[fid].name_str), c, period_s)) < 0)
				return rc;
		}
	}
	return 0;
}

int rules_count(struct rules *e, const struct export_batch *b)
{
	double period_s = (double)b->period_ns / 1e9;
	uint64_t t0 = thread_cpu_ns(), deferred = e->names_deferred;
	int rc = 0;

	e->window_t0 = t0;
	e->budget_spent = false;
	e->fcache.window = e->windows + 1; /* 0 is no window: names used before the first */
	for (size_t i = 0; i < b->nseries && rc == 0; i++) {
		const struct export_series *s = &b->series[i];
		uint64_t want[RULES_WORDS] = {}, samples = s->prof->total_samples;
		bool any = false;

		if (!samples)
			continue;
		for (size_t k = 0; k < e->nrules && rc == 0; k++) {
			const struct rule *r = &e->rules[k];

			if (!series_ok(r, s))
				continue;
			if (!r->has_fn) {
				rc = add(e, r->fam, s, NULL, (int64_t)samples, period_s);
				continue;
			}
			want[r->fn_bit / 64] |= 1ull << (r->fn_bit % 64);
			any = true;
		}
		if (any && rc == 0)
			rc = count_functions(e, s, want, period_s);
	}
	for (size_t i = 0; i < e->nfams; i++) {
		struct rule_family *f = &e->fams[i];

		if (!f->ct.refused_now)
			continue;
		f->ct.refused_now = false;
		if (rc == 0)
			rc = free_idle(e, f);
	}
	if (e->names_deferred > deferred && !e->warned_budget) {
		log_warn("recording rules: the evaluation budget of %.0f ms per window was used up; %llu function names "
			 "are left for later windows and the samples that need them are left out of the function rules "
			 "(see prowl_recording_deferred_samples_total)", (double)e->o.eval_budget_ns / 1e6,
			 (unsigned long long)(e->names_deferred - deferred));
		e->warned_budget = true;
	}
	e->windows++;
	e->eval_ns += thread_cpu_ns() - t0;
	return rc;
}

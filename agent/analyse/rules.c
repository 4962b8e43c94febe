/* rules.c: recording rules' lifecycle: compiles the configured rules and the
 * built-in counter, carries counters over reloads and renders them for /metrics. */
#include "rules.h"

#include <errno.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "label_names.h"
#include "log.h"
#include "regex_re2.h"
#include "rules_priv.h"

#define DEFAULT_MAX_SERIES 1000

static int strcmp_p(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A rule's definition as text: equal texts count the same thing the same way.
 * Matchers are sorted, since their order in the file means nothing. */
static char *rule_identity(const struct recording_rule_config *c)
{
	char *buf = NULL, *m[RULES_MAX_MATCHERS];
	size_t len = 0, nm = 0;
	FILE *f = open_memstream(&buf, &len);
	bool ok = true;

	if (!f)
		return NULL;
	fprintf(f, "%s\x1f%s\x1f%d\x1f", c->metric, c->function ? c->function : "", c->self);
	for (size_t g = 0; g < c->ngroup; g++)
		fprintf(f, "%s\x1e", c->group_by[g]);
	for (size_t i = 0; i < c->nmatch && ok; i++)
		ok = asprintf(&m[nm++], "\x1f%s\x1e%d\x1e%s", c->match[i].label, (int)c->match[i].op,
			      c->match[i].value) >= 0;
	if (!ok)
		nm--;
	qsort(m, nm, sizeof(m[0]), strcmp_p);
	for (size_t i = 0; i < nm; i++) {
		fputs(m[i], f);
		free(m[i]);
	}
	fputc('\n', f);
	if (fclose(f) != 0 || !ok) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int append(char **s, const char *add)
{
	size_t a = *s ? strlen(*s) : 0, b = strlen(add);
	char *n = realloc(*s, a + b + 1);

	if (!n)
		return -ENOMEM;
	memcpy(n + a, add, b + 1);
	*s = n;
	return 0;
}

static int family_init(struct rule_family *f, const char *metric, const char *const *labels, size_t n)
{
	f->fn_pos = f->svc_pos = -1;
	f->metric = strdup(metric);
	f->labels = calloc(n ? n : 1, sizeof(*f->labels));
	f->ct.keys = intern_new();
	if (!f->metric || !f->labels || !f->ct.keys)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		f->labels[i] = strdup(labels[i]);
		if (!f->labels[i])
			return -ENOMEM;
		f->nlabels++;
		if (strcmp(labels[i], RULES_FUNCTION_LABEL) == 0)
			f->fn_pos = (int)i;
		if (strcmp(labels[i], LABEL_SERVICE_NAME) == 0)
			f->svc_pos = (int)i;
	}
	return 0;
}

static void counters_free(struct rule_counters *ct)
{
	intern_free(ct->keys);
	free(ct->v);
	*ct = (struct rule_counters){};
}

static void family_free(struct rule_family *f)
{
	free(f->metric);
	for (size_t i = 0; i < f->nlabels; i++)
		free(f->labels[i]);
	free(f->labels);
	free(f->identity);
	free(f->help);
	counters_free(&f->ct);
}

/* Compiles a regex the way rules_config_parse checked it. */
static int compile(regex_t *rx, const char *re, bool anchored)
{
	char err[256];
	int rc = regex_re2_compile(re, anchored, REG_NOSUB, rx, err, sizeof(err));

	if (rc == -EINVAL)
		log_error("cannot compile the regular expression '%s': %s", re, err);
	return rc;
}

static void rule_free(struct rule *r)
{
	for (size_t i = 0; i < r->nm; i++) {
		free(r->m[i].label);
		free(r->m[i].value);
		if (r->m[i].has_rx)
			regfree(&r->m[i].rx);
	}
	free(r->m);
	if (r->has_fn)
		regfree(&r->fn);
}

static int rule_init(struct rules *e, struct rule *r, const struct recording_rule_config *c)
{
	int rc;

	r->m = calloc(c->nmatch ? c->nmatch : 1, sizeof(*r->m));
	if (!r->m)
		return -ENOMEM;
	for (size_t i = 0; i < c->nmatch; i++) {
		struct rule_matcher *m = &r->m[i];

		m->op = c->match[i].op;
		m->label = strdup(c->match[i].label);
		m->value = strdup(c->match[i].value);
		r->nm++;
		if (!m->label || !m->value)
			return -ENOMEM;
		if (m->op == RULE_MATCH_RE || m->op == RULE_MATCH_NRE) {
			rc = compile(&m->rx, m->value, true);
			if (rc < 0)
				return rc;
			m->has_rx = true;
		}
	}
	if (c->function) {
		char *simple = NULL;

		/* `.*(gc|GC).*` costs glibc time quadratic in the name; `(gc|GC)` does not. */
		rc = rules_regex_simplify(c->function, &simple);
		if (rc < 0)
			return rc;
		if (simple && regcomp(&r->fn, simple, REG_EXTENDED | REG_NOSUB) == 0) {
			log_debug("recording rule %s: function regex '%s' evaluated as '%s'", c->metric, c->function,
				  simple);
		} else {
			rc = compile(&r->fn, c->function, false); /* as written */
		}
		free(simple);
		if (rc < 0)
			return rc;
		r->has_fn = true;
		r->self = c->self;
		r->fn_bit = e->nfn++;
		e->bit_fam[r->fn_bit] = r->fam;
		if (r->self)
			e->self_mask[r->fn_bit / 64] |= 1ull << (r->fn_bit % 64);
	}
	return 0;
}

/* The family of metric, made from rule c when it is the first of that name. */
static int family_for(struct rules *e, const struct recording_rule_config *c, size_t idx, struct rule_family **ret)
{
	struct rule_family *f = NULL;
	char *id, note[64];
	int rc;

	for (size_t i = 0; i < e->nfams && !f; i++)
		if (strcmp(e->fams[i].metric, c->metric) == 0)
			f = &e->fams[i];
	if (!f) {
		f = &e->fams[e->nfams++];
		rc = family_init(f, c->metric, (const char *const *)c->group_by, c->ngroup);
		if (rc == 0)
			rc = append(&f->help, "CPU seconds (samples x sampling period) counted by");
		if (rc < 0)
			return rc;
	}
	snprintf(note, sizeof(note), "%s recording_rules[%zu]", f->identity ? "," : "", idx);
	id = rule_identity(c);
	rc = id ? append(&f->identity, id) : -ENOMEM;
	free(id);
	if (rc == 0)
		rc = append(&f->help, note);
	if (rc < 0)
		return rc;
	*ret = f;
	return 0;
}

int rules_new(const struct recording_rules_config *c, const struct rules_opts *o, struct rules **ret)
{
	struct rules *e = calloc(1, sizeof(*e));
	int rc = -ENOMEM;

	if (!e)
		return -ENOMEM;
	e->o = *o;
	e->o.series_labels = NULL;
	if (!e->o.max_series)
		e->o.max_series = DEFAULT_MAX_SERIES;
	if (!e->o.eval_budget_ns)
		e->o.eval_budget_ns = RULES_DEFAULT_BUDGET_NS;
	rules_fcache_init(&e->fcache, 1, RULES_FCACHE_MAX_NAMES, RULES_FCACHE_MAX_BYTES);
	e->rules = calloc(c->n + 1, sizeof(*e->rules));
	e->fams = calloc(c->n + 1, sizeof(*e->fams));
	if (!e->rules || !e->fams)
		goto fail;

	/* The built-in counter: every series' CPU under all of its labels. */
	e->nfams = 1;
	e->nrules = 1;
	e->rules[0].fam = &e->fams[0];
	rc = family_init(&e->fams[0], RULES_BUILTIN_METRIC, o->series_labels, o->nseries_labels);
	if (rc == 0)
		rc = append(&e->fams[0].help, "CPU seconds (samples x sampling period) of each series as the profiler "
			    "saw it.");
	for (size_t i = 0; rc == 0 && i < o->nseries_labels; i++)
		rc = append(&e->fams[0].identity, o->series_labels[i]);
	if (rc == 0 && !e->fams[0].identity)
		rc = append(&e->fams[0].identity, "");
	if (rc < 0)
		goto fail;

	for (size_t i = 0; i < c->n; i++) {
		struct rule *r = &e->rules[e->nrules++];

		rc = family_for(e, &c->rules[i], i, &r->fam);
		if (rc == 0)
			rc = rule_init(e, r, &c->rules[i]);
		if (rc < 0)
			goto fail;
	}
	e->nwords = e->nfn ? (e->nfn + 63) / 64 : 1;
	e->fcache.nwords = e->nwords;
	*ret = e;
	return 0;
fail:
	rules_free(e);
	return rc;
}

void rules_free(struct rules *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->nrules; i++)
		rule_free(&e->rules[i]);
	free(e->rules);
	for (size_t i = 0; i < e->nfams; i++)
		family_free(&e->fams[i]);
	free(e->fams);
	rules_fcache_free(&e->fcache);
	free(e->fb);
	free(e->known);
	free(e->acc);
	free(e->keybuf);
	free(e);
}

void rules_adopt(struct rules *e, struct rules *old)
{
	for (size_t i = 0; old && i < e->nfams; i++) {
		struct rule_family *f = &e->fams[i];

		for (size_t k = 0; k < old->nfams; k++) {
			struct rule_family *of = &old->fams[k];
			struct rule_counters swap;

			if (strcmp(of->metric, f->metric) != 0 || strcmp(of->identity, f->identity) != 0)
				continue;
			swap = f->ct;
			f->ct = of->ct;
			of->ct = swap;
			break;
		}
	}
	if (old) {
		e->windows = old->windows;
		e->eval_ns = old->eval_ns;
	}
}

/* A label value in the text format: backslash, quote and newline escaped. */
static void put_value(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' || s[i] == '"')
			fputc('\\', f);
		if (s[i] == '\n') {
			fputs("\\n", f);
			continue;
		}
		fputc(s[i], f);
	}
}

static void render_family(const struct rule_family *fam, FILE *f)
{
	uint32_t n = intern_count(fam->ct.keys);

	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", fam->metric, fam->help, fam->metric);
	for (uint32_t id = 1; id <= n; id++) {
		size_t len, pos = 0;
		const char *key = intern_key(fam->ct.keys, id, &len);
		bool open = false;

		fputs(fam->metric, f);
		for (size_t l = 0; l < fam->nlabels && pos <= len; l++) {
			size_t vlen = strnlen(key + pos, len - pos);

			/* An empty value is an absent label, as Prometheus reads it. */
			if (vlen) {
				fprintf(f, "%s%s=\"", open ? "," : "{", fam->labels[l]);
				put_value(f, key + pos, vlen);
				fputc('"', f);
				open = true;
			}
			pos += vlen + 1;
		}
		fprintf(f, "%s %.15g\n", open ? "}" : "", fam->ct.v[id].seconds);
	}
}

static size_t counters_bytes(const struct rule_counters *ct)
{
	return intern_mem_bytes(ct->keys) + (size_t)ct->v_cap * sizeof(*ct->v);
}

void rules_get_stats(const struct rules *e, struct rules_stats *ret)
{
	*ret = (struct rules_stats){
		.rules = (uint32_t)e->nrules - 1,
		.metrics = (uint32_t)e->nfams,
		.windows = e->windows,
		.eval_ns = e->eval_ns,
		.names_evaluated = e->names_evaluated,
		.names_deferred = e->names_deferred,
		.fcache_evictions = e->fcache.evictions,
		.fcache_refused = e->fcache.refused,
		.fcache_names = e->fcache.count,
	};
	ret->mem_bytes = sizeof(*e) + e->nrules * sizeof(*e->rules) + e->nfams * sizeof(*e->fams) +
			 rules_fcache_mem_bytes(&e->fcache) + e->fb_cap * sizeof(*e->fb) + e->known_cap +
			 e->acc_cap * sizeof(*e->acc) + e->keybuf_cap;
	for (size_t i = 0; i < e->nfams; i++) {
		ret->series += intern_count(e->fams[i].ct.keys);
		ret->overflow_samples += e->fams[i].ct.overflow_samples;
		ret->refused += e->fams[i].ct.refused;
		ret->freed += e->fams[i].ct.freed;
		ret->deferred_samples += e->fams[i].ct.deferred_samples;
		ret->mem_bytes += counters_bytes(&e->fams[i].ct);
	}
}

/* One counter per recorded metric: the uint64_t at `off` in each metric's counters. */
static void family_counter(const struct rules *e, FILE *f, const char *name, const char *help, size_t off)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (size_t i = 0; i < e->nfams; i++) {
		uint64_t v;

		memcpy(&v, (const char *)&e->fams[i].ct + off, sizeof(v));
		fprintf(f, "%s{metric=\"%s\"} %llu\n", name, e->fams[i].metric, (unsigned long long)v);
	}
}

void rules_render(const struct rules *e, FILE *f)
{
	struct rules_stats st;

	for (size_t i = 0; i < e->nfams; i++)
		render_family(&e->fams[i], f);
	rules_get_stats(e, &st);
	fputs("# HELP prowl_recording_series Label sets per recorded metric (limits.recording_series caps each).\n"
	      "# TYPE prowl_recording_series gauge\n", f);
	for (size_t i = 0; i < e->nfams; i++)
		fprintf(f, "prowl_recording_series{metric=\"%s\"} %u\n", e->fams[i].metric,
			intern_count(e->fams[i].ct.keys));
	family_counter(e, f, "prowl_recording_overflow_samples_total", "Samples counted under an overflow series "
		       "(function=\"other\") because a metric reached limits.recording_series.",
		       offsetof(struct rule_counters, overflow_samples));
	family_counter(e, f, "prowl_recording_series_refused_total", "New label sets limits.recording_series "
		       "refused (each counted once per window it appears in); their samples went to the overflow series.",
		       offsetof(struct rule_counters, refused));
	family_counter(e, f, "prowl_recording_series_freed_total", "Label sets dropped to make room under "
		       "limits.recording_series because they got no samples for a whole window.",
		       offsetof(struct rule_counters, freed));
	fputs("# HELP prowl_recording_deferred_samples_total Samples left out of a function rule because a "
	      "function name in their stack was not evaluated within the window's budget.\n"
	      "# TYPE prowl_recording_deferred_samples_total counter\n", f);
	for (size_t i = 0; i < e->nfams; i++)
		if (e->fams[i].fn_pos >= 0 || e->fams[i].ct.deferred_samples)
			fprintf(f, "prowl_recording_deferred_samples_total{metric=\"%s\"} %llu\n", e->fams[i].metric,
				(unsigned long long)e->fams[i].ct.deferred_samples);
	fprintf(f, "# HELP prowl_recording_names_evaluated_total Function names evaluated against the function "
		   "rules (names not in the cache).\n# TYPE prowl_recording_names_evaluated_total counter\n"
		   "prowl_recording_names_evaluated_total %llu\n", (unsigned long long)st.names_evaluated);
	fprintf(f, "# HELP prowl_recording_names_deferred_total Function names left for a later window because "
		   "the window's evaluation budget was used up.\n# TYPE prowl_recording_names_deferred_total counter\n"
		   "prowl_recording_names_deferred_total %llu\n", (unsigned long long)st.names_deferred);
	fprintf(f, "# HELP prowl_recording_function_cache_names Function names whose rule results are cached.\n"
		   "# TYPE prowl_recording_function_cache_names gauge\nprowl_recording_function_cache_names %u\n",
		st.fcache_names);
	fprintf(f, "# HELP prowl_recording_function_cache_evictions_total Function names evicted from the cache "
		   "(least recently used first) to keep it within its bounds.\n"
		   "# TYPE prowl_recording_function_cache_evictions_total counter\n"
		   "prowl_recording_function_cache_evictions_total %llu\n", (unsigned long long)st.fcache_evictions);
	fprintf(f, "# HELP prowl_recording_function_cache_refused_total Function names evaluated but not cached "
		   "because the cache was full of names used in the same window.\n"
		   "# TYPE prowl_recording_function_cache_refused_total counter\n"
		   "prowl_recording_function_cache_refused_total %llu\n", (unsigned long long)st.fcache_refused);
	fprintf(f, "# HELP prowl_recording_rules Recording rules configured.\n# TYPE prowl_recording_rules gauge\n"
		   "prowl_recording_rules %u\n", st.rules);
	fprintf(f, "# HELP prowl_recording_eval_seconds_total CPU time spent counting windows into the recorded "
		   "metrics.\n# TYPE prowl_recording_eval_seconds_total counter\nprowl_recording_eval_seconds_total "
		   "%.9f\n", st.eval_ns / 1e9);
	fprintf(f, "# HELP prowl_recording_bytes Memory held by the recorded metrics, their function cache and "
		   "scratch space.\n# TYPE prowl_recording_bytes gauge\nprowl_recording_bytes %zu\n", st.mem_bytes);
}

double rules_value(const struct rules *e, const char *metric, const char *const *values, size_t n)
{
	char buf[4096];
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(values[i]);

		if (len + l + 1 > sizeof(buf))
			return -1;
		memcpy(buf + len, values[i], l + 1);
		len += l + 1;
	}
	for (size_t i = 0; i < e->nfams; i++) {
		uint32_t id;

		if (strcmp(e->fams[i].metric, metric) != 0 || e->fams[i].nlabels != n)
			continue;
		id = intern_find(e->fams[i].ct.keys, buf, len);
		return id ? e->fams[i].ct.v[id].seconds : -1;
	}
	return -1;
}

/* encode_otlp.c: serialises an export batch to an OTLP ExportProfilesServiceRequest
 * with one shared dictionary and one ResourceProfiles per (series, process). */
#include "encode_otlp.h"
#include "array_size.h"
#include "encode_otlp_priv.h"
#include "label_names.h"
#include "window.h"

#include "otlp_profiles_service.pb-c.h"

#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#ifndef PROWL_VERSION
#define PROWL_VERSION "0.0.0"
#endif

/* A string KeyValue; the strings are the batch's or the dictionary's, which
 * outlive the message. */
static pb_kv *kv_str(struct otlp_build *b, const char *key, const char *val)
{
	pb_kv *kv;
	pb_any *v;

	if (!ARENA_NEW(b, kv, 1) || !ARENA_NEW(b, v, 1))
		return NULL;
	*kv = (pb_kv)OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
	*v = (pb_any)OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
	kv->key = (char *)key;
	kv->value = v;
	v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	v->string_value = (char *)(val ? val : "");
	return kv;
}

static pb_kv *kv_int(struct otlp_build *b, const char *key, int64_t val)
{
	pb_kv *kv = kv_str(b, key, NULL);

	if (!kv)
		return NULL;
	kv->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
	kv->value->int_value = val;
	return kv;
}

/* Series labels that OpenTelemetry's semantic conventions name otherwise. */
static const char *const semconv[][2] = {
	{ "namespace", "k8s.namespace.name" }, { "pod", "k8s.pod.name" },	 { "container", "k8s.container.name" },
	{ "node", "k8s.node.name" },	       { LABEL_CONTAINER_ID, RESOURCE_CONTAINER_ID },
};

static const char *semconv_name(const char *label)
{
	for (size_t i = 0; i < ARRAY_SIZE(semconv); i++)
		if (strcmp(semconv[i][0], label) == 0)
			return semconv[i][1];
	return label;
}

/* Resource attributes: service.name, host.name, process.executable.name,
 * process.pid, the series' other labels (k8s.* and container.id under their
 * semantic-convention names), then the series' own resource attributes. */
static int build_resource(struct otlp_build *b, const struct export_series *s, const struct res_key *rk,
			  const char *hostname, pb_resource **ret)
{
	const char *service = export_series_label(s, LABEL_SERVICE_NAME);
	const char *host = export_series_label(s, LABEL_HOST_NAME);
	pb_resource *r;
	pb_kv **kvs;
	size_t n = 0;

	if (!ARENA_NEW(b, r, 1) || !ARENA_NEW(b, kvs, s->nlabels + s->nresource + 4))
		return -ENOMEM;
	*r = (pb_resource)OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
	kvs[n++] = kv_str(b, "service.name", service && *service ? service : "unknown_service");
	kvs[n++] = kv_str(b, "host.name", host && *host ? host : hostname);
	if (rk->pname_str)
		kvs[n++] = kv_str(b, "process.executable.name", intern_str(b->strs, (uint32_t)rk->pname_str));
	if (rk->has_pid)
		kvs[n++] = kv_int(b, "process.pid", rk->pid);
	for (size_t i = 0; i < s->nlabels; i++) {
		const char *name = s->labels[i].name;

		if (!name || !*name || !strcmp(name, LABEL_SERVICE_NAME) || !strcmp(name, LABEL_HOST_NAME))
			continue;
		kvs[n++] = kv_str(b, semconv_name(name), s->labels[i].value);
	}
	for (size_t i = 0; i < s->nresource; i++) {
		bool dup = false;

		for (size_t k = 0; k < n && !dup; k++)
			dup = kvs[k] && strcmp(kvs[k]->key, s->resource[i].name) == 0;
		if (!dup)
			kvs[n++] = kv_str(b, s->resource[i].name, s->resource[i].value);
	}
	for (size_t i = 0; i < n; i++)
		if (!kvs[i])
			return -ENOMEM;
	r->n_attributes = n;
	r->attributes = kvs;
	*ret = r;
	return 0;
}

static void random_bytes(uint8_t *buf, size_t len)
{
	static uint64_t counter;
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom(buf + got, len - got, GRND_NONBLOCK);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	/* Without entropy yet, ids only need to be distinct, not secret. */
	while (got < len) {
		struct timespec ts;
		uint64_t x[3];
		uint64_t h;

		clock_gettime(CLOCK_REALTIME, &ts);
		x[0] = (uint64_t)ts.tv_sec;
		x[1] = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
		x[2] = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
		h = hash_bytes(x, sizeof(x));
		for (int i = 0; i < 8 && got < len; i++)
			buf[got++] = (uint8_t)(h >> (8 * i));
	}
}

/* The message tree: dictionary tables from the intern tables, then one
 * ResourceProfiles per resource with its samples. */
struct build_ctx {
	const struct export_batch *batch;
	int64_t period, time, duration; /* batch values, profile fallbacks below */
	pb_value_type sample_type, period_type;
	pb_value_type off_type;      /* off_cpu/nanoseconds: the second profile of a resource with off-CPU time */
	char hostname[256];
};

static int build_dictionary(struct otlp_build *b, pb_dict *d)
{
	static char empty[] = "";
	uint32_t nstr = intern_count(b->strs), nattr = intern_count(b->attrs);
	uint32_t nmap = intern_count(b->maps), nfunc = intern_count(b->funcs);
	uint32_t nloc = intern_count(b->locs), nstack = intern_count(b->stacks);
	pb_kvu *attrs;
	pb_any *anys;
	pb_mapping *maps;
	pb_function *funcs;
	pb_location *locs;
	pb_stack *stacks;
	pb_link *link;

	if (!ARENA_NEW(b, d->string_table, (size_t)nstr + 1) ||
	    !ARENA_NEW(b, d->attribute_table, (size_t)nattr + 1) || !ARENA_NEW(b, attrs, (size_t)nattr + 1) ||
	    !ARENA_NEW(b, anys, (size_t)nattr + 1) ||
	    !ARENA_NEW(b, d->mapping_table, (size_t)nmap + 1) || !ARENA_NEW(b, maps, (size_t)nmap + 1) ||
	    !ARENA_NEW(b, d->function_table, (size_t)nfunc + 1) || !ARENA_NEW(b, funcs, (size_t)nfunc + 1) ||
	    !ARENA_NEW(b, d->location_table, (size_t)nloc + 1) || !ARENA_NEW(b, locs, (size_t)nloc + 1) ||
	    !ARENA_NEW(b, d->stack_table, (size_t)nstack + 1) || !ARENA_NEW(b, stacks, (size_t)nstack + 1) ||
	    !ARENA_NEW(b, d->link_table, 1) || !ARENA_NEW(b, link, 1))
		return -ENOMEM;

	d->n_string_table = (size_t)nstr + 1;
	d->string_table[0] = empty;
	for (uint32_t i = 1; i <= nstr; i++)
		d->string_table[i] = (char *)intern_str(b->strs, i);

	d->n_attribute_table = (size_t)nattr + 1;
	attrs[0] = (pb_kvu)PB(KEY_VALUE_AND_UNIT);
	d->attribute_table[0] = &attrs[0];
	for (uint32_t i = 1; i <= nattr; i++) {
		struct attr_key k;

		attrs[i] = (pb_kvu)PB(KEY_VALUE_AND_UNIT);
		d->attribute_table[i] = &attrs[i];
		memcpy(&k, intern_key(b->attrs, i, NULL), sizeof(k));
		anys[i] = (pb_any)OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
		if (k.kind == ATTR_STR) {
			anys[i].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
			anys[i].string_value = d->string_table[k.str];
		} else {
			anys[i].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
			anys[i].int_value = k.num;
		}
		attrs[i].key_strindex = k.key_str;
		attrs[i].unit_strindex = k.unit_str;
		attrs[i].value = &anys[i];
	}

	d->n_mapping_table = (size_t)nmap + 1;
	maps[0] = (pb_mapping)PB(MAPPING);
	d->mapping_table[0] = &maps[0];
	for (uint32_t i = 1; i <= nmap; i++) {
		struct map_key k;

		maps[i] = (pb_mapping)PB(MAPPING);
		d->mapping_table[i] = &maps[i];
		memcpy(&k, intern_key(b->maps, i, NULL), sizeof(k));
		maps[i].memory_start = k.start;
		maps[i].memory_limit = k.limit;
		maps[i].file_offset = k.offset;
		maps[i].filename_strindex = k.filename_str;
		if (k.attr) {
			if (!ARENA_NEW(b, maps[i].attribute_indices, 1))
				return -ENOMEM;
			maps[i].attribute_indices[0] = k.attr;
			maps[i].n_attribute_indices = 1;
		}
	}

	d->n_function_table = (size_t)nfunc + 1;
	funcs[0] = (pb_function)PB(FUNCTION);
	d->function_table[0] = &funcs[0];
	for (uint32_t i = 1; i <= nfunc; i++) {
		struct func_key k;

		funcs[i] = (pb_function)PB(FUNCTION);
		d->function_table[i] = &funcs[i];
		memcpy(&k, intern_key(b->funcs, i, NULL), sizeof(k));
		funcs[i].name_strindex = k.name_str;
		funcs[i].system_name_strindex = k.system_name_str;
		funcs[i].filename_strindex = k.filename_str;
		funcs[i].start_line = k.start_line;
	}

	d->n_location_table = (size_t)nloc + 1;
	locs[0] = (pb_location)PB(LOCATION);
	d->location_table[0] = &locs[0];
	for (uint32_t i = 1; i <= nloc; i++) {
		const unsigned char *raw = intern_key(b->locs, i, NULL);
		struct loc_head h;
		pb_line *lines;

		locs[i] = (pb_location)PB(LOCATION);
		d->location_table[i] = &locs[i];
		memcpy(&h, raw, sizeof(h));
		locs[i].mapping_index = h.mapping;
		locs[i].address = h.addr;
		if (!ARENA_NEW(b, locs[i].attribute_indices, 1) || !ARENA_NEW(b, lines, h.nlines) ||
		    !ARENA_NEW(b, locs[i].lines, h.nlines))
			return -ENOMEM;
		locs[i].attribute_indices[0] = h.attr;
		locs[i].n_attribute_indices = 1;
		locs[i].n_lines = h.nlines;
		for (uint32_t l = 0; l < h.nlines; l++) {
			struct line_key lk;

			memcpy(&lk, raw + sizeof(h) + l * sizeof(lk), sizeof(lk));
			lines[l] = (pb_line)PB(LINE);
			lines[l].function_index = lk.function;
			lines[l].line = lk.line;
			locs[i].lines[l] = &lines[l];
		}
	}

	d->n_stack_table = (size_t)nstack + 1;
	stacks[0] = (pb_stack)PB(STACK);
	d->stack_table[0] = &stacks[0];
	for (uint32_t i = 1; i <= nstack; i++) {
		size_t len;
		const void *raw = intern_key(b->stacks, i, &len);

		stacks[i] = (pb_stack)PB(STACK);
		d->stack_table[i] = &stacks[i];
		stacks[i].n_location_indices = len / sizeof(int32_t);
		if (!ARENA_NEW(b, stacks[i].location_indices, stacks[i].n_location_indices))
			return -ENOMEM;
		memcpy(stacks[i].location_indices, raw, len);
	}

	*link = (pb_link)PB(LINK);
	d->link_table[0] = link;
	d->n_link_table = 1;
	return 0;
}

/* One sample of key k with one value. */
static int fill_sample(struct otlp_build *b, pb_sample *s, const struct sample_key *k, int64_t value)
{
	size_t len;
	const void *raw = intern_key(b->attrsets, k->attrset, &len);

	*s = (pb_sample)PB(SAMPLE);
	s->stack_index = k->stack;
	s->n_attribute_indices = len / sizeof(int32_t);
	if (!ARENA_NEW(b, s->values, 1) || !ARENA_NEW(b, s->attribute_indices, s->n_attribute_indices))
		return -ENOMEM;
	memcpy(s->attribute_indices, raw, len);
	s->values[0] = value;
	s->n_values = 1;
	return 0;
}

static int build_profiles(struct otlp_build *b, struct build_ctx *c, pb_request *req)
{
	const struct export_batch *batch = c->batch;
	uint32_t nres = intern_count(b->res), nsamples = intern_count(b->samples);
	uint32_t *first, *fill;
	pb_sample *samples, **sample_ptrs, *offs, **off_ptrs;
	uint32_t *noff;
	uint8_t *ids;
	int err = 0;

	if (!ARENA_NEW(b, first, (size_t)nres + 2) || !ARENA_NEW(b, fill, (size_t)nres + 1) ||
	    !ARENA_NEW(b, samples, nsamples) || !ARENA_NEW(b, sample_ptrs, nsamples) ||
	    !ARENA_NEW(b, offs, nsamples) || !ARENA_NEW(b, off_ptrs, nsamples) || !ARENA_NEW(b, noff, (size_t)nres + 1) ||
	    !ARENA_NEW(b, ids, (size_t)nres * 32) || !ARENA_NEW(b, req->resource_profiles, nres))
		return -ENOMEM;
	random_bytes(ids, (size_t)nres * 32);

	/* Group the samples by resource (counting sort, sample id order kept). */
	for (uint32_t i = 1; i <= nsamples; i++) {
		struct sample_key k;

		memcpy(&k, intern_key(b->samples, i, NULL), sizeof(k));
		first[k.res + 1]++;
	}
	for (uint32_t r = 1; r <= nres + 1; r++)
		first[r] += first[r - 1];
	/* Each resource's samples: on-CPU ones (a count) from first[r], off-CPU ones
	 * (nanoseconds; its second profile) from first[r] in off_ptrs, noff[r] of them. */
	memcpy(fill, first, ((size_t)nres + 1) * sizeof(*fill));
	for (uint32_t i = 1; i <= nsamples; i++) {
		struct sample_key k;
		pb_sample *s;

		memcpy(&k, intern_key(b->samples, i, NULL), sizeof(k));
		if (b->off_ns[i] > 0) {
			s = &offs[first[k.res] + noff[k.res]];
			off_ptrs[first[k.res] + noff[k.res]++] = s;
			if (fill_sample(b, s, &k, b->off_ns[i]) < 0)
				return -ENOMEM;
		}
		if (b->counts[i] <= 0)
			continue;
		s = &samples[fill[k.res]];
		sample_ptrs[fill[k.res]++] = s;
		if (fill_sample(b, s, &k, b->counts[i]) < 0)
			return -ENOMEM;
	}

	for (uint32_t r = 1; r <= nres; r++) {
		const struct export_series *series;
		const struct profile *p;
		struct res_key rk;
		pb_resprof *rp;
		pb_scopeprof *sp;
		pb_scope *scope;
		pb_profile *prof, *off;

		memcpy(&rk, intern_key(b->res, r, NULL), sizeof(rk));
		series = &batch->series[rk.series];
		p = series->prof;
		if (!ARENA_NEW(b, rp, 1) || !ARENA_NEW(b, sp, 1) || !ARENA_NEW(b, scope, 1) || !ARENA_NEW(b, prof, 1))
			return -ENOMEM;
		*rp = (pb_resprof)PB(RESOURCE_PROFILES);
		*sp = (pb_scopeprof)PB(SCOPE_PROFILES);
		*scope = (pb_scope)OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
		*prof = (pb_profile)PB(PROFILE);
		if (!ARENA_NEW(b, rp->scope_profiles, 1) || !ARENA_NEW(b, sp->profiles, 2) || !ARENA_NEW(b, off, 1))
			return -ENOMEM;
		err = build_resource(b, series, &rk, c->hostname, &rp->resource);
		if (err)
			return err;
		scope->name = (char *)"prowl";
		scope->version = (char *)PROWL_VERSION;
		sp->scope = scope;
		rp->n_scope_profiles = 1;
		rp->scope_profiles[0] = sp;

		prof->sample_type = &c->sample_type;
		prof->period_type = &c->period_type;
		prof->period = c->period > 0 ? c->period : p->period;
		prof->time_unix_nano = (uint64_t)(c->time > 0 ? c->time : p->time_nanos);
		prof->duration_nano = (uint64_t)(c->duration > 0 ? c->duration : p->duration_nanos);
		prof->profile_id.data = ids + (size_t)(r - 1) * 16;
		prof->profile_id.len = 16;
		prof->n_samples = fill[r] - first[r];
		prof->samples = prof->n_samples ? &sample_ptrs[first[r]] : NULL;
		if (prof->n_samples) /* none: the resource only waited */
			sp->profiles[sp->n_profiles++] = prof;
		if (noff[r]) { /* off-CPU time: a profile of its own type, same window */
			*off = *prof;
			off->sample_type = &c->off_type;
			off->profile_id.data = ids + (size_t)(nres + r - 1) * 16;
			off->n_samples = noff[r];
			off->samples = &off_ptrs[first[r]];
			sp->profiles[sp->n_profiles++] = off;
		}
		req->resource_profiles[r - 1] = rp;
	}
	req->n_resource_profiles = nres;
	return 0;
}

int encode_otlp(const struct export_batch *batch, uint8_t **ret_buf, size_t *ret_len)
{
	pb_request req = OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
	pb_dict dict = PB(PROFILES_DICTIONARY);
	struct otlp_build b = {};
	struct build_ctx c = { .batch = batch };
	uint8_t *buf = NULL;
	size_t len;
	int err;

	if (!batch || !ret_buf || !ret_len || (batch->nseries && !batch->series) || batch->nseries > UINT32_MAX)
		return -EINVAL;
	b.strs = intern_new();
	b.attrs = intern_new();
	b.maps = intern_new();
	b.funcs = intern_new();
	b.locs = intern_new();
	b.stacks = intern_new();
	b.attrsets = intern_new();
	b.res = intern_new();
	b.samples = intern_new();
	if (!b.strs || !b.attrs || !b.maps || !b.funcs || !b.locs || !b.stacks || !b.attrsets ||
	    !b.res || !b.samples) {
		err = -ENOMEM;
		goto out;
	}
	c.sample_type = (pb_value_type)PB(VALUE_TYPE);
	c.period_type = (pb_value_type)PB(VALUE_TYPE);
	/* The value types' strings. */
	c.off_type = (pb_value_type)PB(VALUE_TYPE);
	err = otlp_dict_str(&b, "samples", &c.sample_type.type_strindex);
	if (!err)
		err = otlp_dict_str(&b, "count", &c.sample_type.unit_strindex);
	if (!err)
		err = otlp_dict_str(&b, "cpu", &c.period_type.type_strindex);
	if (!err)
		err = otlp_dict_str(&b, "nanoseconds", &c.period_type.unit_strindex);
	c.off_type.unit_strindex = c.period_type.unit_strindex;
	for (size_t i = 0; i < batch->nseries && !err; i++)
		if (batch->series[i].prof)
			err = otlp_add_series(&b, (uint32_t)i, batch->series[i].prof);
	/* "off_cpu" is in the string table only when a sample has off-CPU time. */
	for (uint32_t i = 1; i <= intern_count(b.samples) && !err && !c.off_type.type_strindex; i++)
		if (b.off_ns[i] > 0)
			err = otlp_dict_str(&b, PROF_TYPE_OFFCPU, &c.off_type.type_strindex);
	if (err)
		goto out;

	c.period = batch->period_ns;
	c.time = batch->start_unix_ns;
	c.duration = batch->end_unix_ns - batch->start_unix_ns;
	if (gethostname(c.hostname, sizeof(c.hostname) - 1) < 0 || !c.hostname[0])
		strcpy(c.hostname, "unknown");

	err = build_dictionary(&b, &dict);
	if (!err)
		err = build_profiles(&b, &c, &req);
	if (err)
		goto out;
	req.dictionary = &dict;

	len = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(&req);
	buf = malloc(len ? len : 1);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(&req, buf);
	*ret_buf = buf;
	*ret_len = len;
out:
	otlp_build_free(&b);
	return err;
}

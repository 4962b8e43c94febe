/* export_parca.c: the Parca exporter: encodes each series to gzip'ed pprof and queues
 * one gRPC-web WriteRaw call per window on its sender; reads the call's grpc-status. */
#include "export_parca.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode.h"
#include "export_http.h"
#include "log.h"
#include "parca_profilestore.pb-c.h"
#include "sender.h"

/* Parca requires __name__. Its own eBPF agent names on-CPU profiles
 * "parca_agent_cpu", and Parca's UI lists and pre-selects profile types by that
 * name, so prowl's profiles appear next to (and compare with) the agent's. */
#define PROFILE_NAME    "parca_agent_cpu"
#define WRITERAW_PATH   "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
#define GRPC_WEB_TYPE   "application/grpc-web+proto"
#define GRPC_FRAME_HDR  5    /* flag byte, 4-byte big-endian length */
#define GRPC_TRAILER    0x80 /* the flag of the frame that carries the trailers */
#define GRPC_MSG_MAX    200  /* characters of a grpc-message quoted in the log */

typedef Prowl__Parca__Profilestore__V1alpha1__WriteRawRequest pb_request;
typedef Prowl__Parca__Profilestore__V1alpha1__RawProfileSeries pb_series;
typedef Prowl__Parca__Profilestore__V1alpha1__LabelSet pb_labelset;
typedef Prowl__Parca__Profilestore__V1alpha1__Label pb_label;
typedef Prowl__Parca__Profilestore__V1alpha1__RawSample pb_sample;

/* The gRPC status codes' names (grpc/doc/statuscodes.md), for the log. */
static const char *const grpc_code_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
	"PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

/* Statuses of a server that is down, overloaded or busy: worth the same call again. */
static bool grpc_code_is_retryable(long code)
{
	return code == 4 /* DEADLINE_EXCEEDED */ || code == 8 /* RESOURCE_EXHAUSTED */ ||
	       code == 10 /* ABORTED */ || code == 14 /* UNAVAILABLE */;
}

/* A decimal grpc-status of at most 3 digits (surrounding blanks allowed), or -1. */
static long parse_code(const char *p, size_t n)
{
	long v = 0;
	size_t digits = 0;

	while (n && (*p == ' ' || *p == '\t'))
		p++, n--;
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
		n--;
	for (; n && digits < 4; p++, n--, digits++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	return digits && digits <= 3 && !n ? v : -1;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* grpc-message, percent-decoded (as gRPC sends it), printable ASCII kept and every
 * other byte written \xNN, at most GRPC_MSG_MAX characters: a server's words reach
 * the log as one safe line. */
static void put_message(char *out, size_t outlen, const char *p, size_t n)
{
	size_t k = 0;

	while (n && (*p == ' ' || *p == '\t'))
		p++, n--;
	while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
		n--;
	for (size_t i = 0; i < n && k + 5 < outlen && k < GRPC_MSG_MAX; i++) {
		unsigned char c = (unsigned char)p[i];
		int hi = i + 2 < n ? hexval(p[i + 1]) : -1, lo = i + 2 < n ? hexval(p[i + 2]) : -1;

		if (c == '%' && hi >= 0 && lo >= 0) {
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (c < 0x20 || c >= 0x7f || c == '\\')
			k += (size_t)snprintf(out + k, outlen - k, "\\x%02x", c);
		else
			out[k++] = (char)c;
	}
	out[k < outlen ? k : outlen - 1] = 0;
	if (!k)
		snprintf(out, outlen, "(no message)");
}

/* Finds "name:" (any case) at the start of a line of the trailer block p[0..n) and
 * points *val at its value, to the line's end. */
static bool trailer_find(const char *p, size_t n, const char *name, const char **val, size_t *vlen)
{
	size_t nl = strlen(name);

	while (n) {
		const char *eol = memchr(p, '\n', n);
		size_t line = eol ? (size_t)(eol - p) : n;

		if (line > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			*val = p + nl + 1;
			*vlen = line - nl - 1;
			return true;
		}
		if (!eol)
			break;
		n -= line + 1;
		p = eol + 1;
	}
	return false;
}

enum sender_verdict parca_reply_verdict(const struct sender_reply *r, char *what, size_t whatlen)
{
	const char *st = NULL, *msg = NULL;
	size_t stlen = 0, msglen = 0;
	char text[4 * GRPC_MSG_MAX + 8];
	long code;

	/* A trailers-only answer (an error before any message) has them as headers. */
	st = r->header(r, "grpc-status");
	if (st) {
		stlen = strlen(st);
		msg = r->header(r, "grpc-message");
		msglen = msg ? strlen(msg) : 0;
	} else {
		/* Otherwise the frames of the body: the trailer frame (flag 0x80) holds them.
		 * Only the bytes at hand are read; a frame's length is never trusted past them. */
		for (size_t i = 0; i + GRPC_FRAME_HDR <= r->len;) {
			const uint8_t *f = r->body + i;
			size_t n = (size_t)f[1] << 24 | (size_t)f[2] << 16 | (size_t)f[3] << 8 | f[4];
			size_t have = r->len - i - GRPC_FRAME_HDR;

			if (n > have)
				n = have;
			if (f[0] & GRPC_TRAILER) {
				if (trailer_find((const char *)f + GRPC_FRAME_HDR, n, "grpc-status", &st, &stlen))
					trailer_find((const char *)f + GRPC_FRAME_HDR, n, "grpc-message", &msg, &msglen);
				break;
			}
			i += GRPC_FRAME_HDR + n;
		}
	}
	if (!st) {
		snprintf(what, whatlen, "HTTP 2xx without a grpc-status: not a gRPC-web answer (is the URL Parca's?)");
		return SENDER_REPLY_REJECTED;
	}
	code = parse_code(st, stlen);
	if (code == 0)
		return SENDER_REPLY_SENT;
	put_message(text, sizeof(text), msg ? msg : "", msglen);
	if (code < 0) {
		snprintf(what, whatlen, "invalid grpc-status in the answer: %s", text);
		return SENDER_REPLY_REJECTED;
	}
	snprintf(what, whatlen, "gRPC status %ld %s: %s", code,
		 (size_t)code < sizeof(grpc_code_names) / sizeof(grpc_code_names[0]) ? grpc_code_names[code] : "(unknown)",
		 text);
	return grpc_code_is_retryable(code) ? SENDER_REPLY_RETRY : SENDER_REPLY_REJECTED;
}

/* One gRPC frame: flag 0 (not compressed), the length, the message. */
static int pack_frame(const pb_request *req, uint8_t **ret, size_t *ret_len)
{
	size_t len = prowl__parca__profilestore__v1alpha1__write_raw_request__get_packed_size(req);
	uint8_t *b;

	if (len > UINT32_MAX)
		return -EMSGSIZE;
	b = malloc(GRPC_FRAME_HDR + len);
	if (!b)
		return -ENOMEM;
	b[0] = 0;
	b[1] = (uint8_t)(len >> 24);
	b[2] = (uint8_t)(len >> 16);
	b[3] = (uint8_t)(len >> 8);
	b[4] = (uint8_t)len;
	prowl__parca__profilestore__v1alpha1__write_raw_request__pack(req, b + GRPC_FRAME_HDR);
	*ret = b;
	*ret_len = GRPC_FRAME_HDR + len;
	return 0;
}

static int queue_call(struct exporter_http *p, uint8_t *body, size_t len)
{
	struct sender_request *req = calloc(1, sizeof(*req));

	if (!req) {
		free(body);
		return -ENOMEM;
	}
	req->body = body;
	req->len = len;
	req->path = strdup(WRITERAW_PATH);
	req->content_type = strdup(GRPC_WEB_TYPE);
	if (!req->path || !req->content_type) {
		sender_request_free(req);
		return -ENOMEM;
	}
	return sender_enqueue(p->snd, req);
}

static int parca_submit(struct exporter *e, const struct export_batch *b)
{
	struct exporter_http *p = (struct exporter_http *)e;
	pb_request req = PROWL__PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;
	pb_series *series = NULL, **seriesp = NULL;
	pb_labelset *sets = NULL;
	pb_sample *samples = NULL, **samplesp = NULL;
	pb_label *labels = NULL, **labelsp = NULL;
	uint8_t **bufs = NULL, *body = NULL;
	size_t nser = 0, nlab = 0, ns = 0, nl = 0, len;
	int r = 0;

	nser = export_batch_count(b, &nlab);
	if (nser == 0)
		return 0;
	series = calloc(nser, sizeof(*series));
	seriesp = calloc(nser, sizeof(*seriesp));
	sets = calloc(nser, sizeof(*sets));
	samples = calloc(nser, sizeof(*samples));
	samplesp = calloc(nser, sizeof(*samplesp));
	bufs = calloc(nser, sizeof(*bufs));
	labels = calloc(nlab, sizeof(*labels));
	labelsp = calloc(nlab, sizeof(*labelsp));
	if (!series || !seriesp || !sets || !samples || !samplesp || !bufs || !labels || !labelsp) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < b->nseries; i++) {
		const struct export_series *s = &b->series[i];
		size_t first = nl;

		if (!export_series_has_samples(s))
			continue;
		r = encode_pprof(s->prof, &bufs[ns], &len);
		if (r < 0)
			goto out;
		prowl__parca__profilestore__v1alpha1__raw_sample__init(&samples[ns]);
		samples[ns].raw_profile.data = bufs[ns];
		samples[ns].raw_profile.len = len;
		samplesp[ns] = &samples[ns];
		for (size_t k = 0; k < 2 + s->nlabels; k++) {
			const char *name, *value;

			if (!export_series_sent_label(s, PROFILE_NAME, k, &name, &value))
				continue;
			prowl__parca__profilestore__v1alpha1__label__init(&labels[nl]);
			labels[nl].name = (char *)name;
			labels[nl].value = (char *)value;
			labelsp[nl] = &labels[nl];
			nl++;
		}
		prowl__parca__profilestore__v1alpha1__label_set__init(&sets[ns]);
		sets[ns].labels = &labelsp[first];
		sets[ns].n_labels = nl - first;
		prowl__parca__profilestore__v1alpha1__raw_profile_series__init(&series[ns]);
		series[ns].labels = &sets[ns];
		series[ns].samples = &samplesp[ns];
		series[ns].n_samples = 1;
		seriesp[ns] = &series[ns];
		ns++;
	}
	req.series = seriesp;
	req.n_series = ns;
	r = pack_frame(&req, &body, &len);
	if (r == 0)
		r = queue_call(p, body, len);
out:
	if (r < 0)
		log_error_errno(r, "%s: cannot build or queue a write request", p->base.name);
	if (bufs)
		for (size_t i = 0; i < nser; i++)
			free(bufs[i]);
	free(bufs);
	free(series);
	free(seriesp);
	free(sets);
	free(samples);
	free(samplesp);
	free(labels);
	free(labelsp);
	return r;
}

static const struct exporter_ops parca_ops = {
	.kind = "parca",
	.submit = parca_submit,
	.flush = exporter_http_flush,
	.get_stats = exporter_http_get_stats,
	.free = exporter_http_free,
	.requeue = exporter_http_requeue,
	.take_pending = exporter_http_take_pending,
};

int exporter_parca_new(const struct http_target *t, struct exporter **ret)
{
	int r = exporter_http_new(sizeof(struct exporter_http), &parca_ops, "parca", t, ret);

	if (r == 0)
		sender_set_reply_check(((struct exporter_http *)*ret)->snd, parca_reply_verdict);
	return r;
}

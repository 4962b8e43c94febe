/* test_export_parca.c: unit tests of how the Parca exporter reads a gRPC-web answer
 * (parca_reply_verdict): grpc-status from headers or the trailer frame, hostile bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "export_parca.h"

/* An answer: its headers as "name", "value" pairs (NULL-ended) and its body. */
struct answer {
	const char *const *headers;
	const void *body;
	size_t len;
};

static const char *answer_header(const struct sender_reply *r, const char *name)
{
	const struct answer *a = r->ctx;

	for (const char *const *h = a->headers; h && *h; h += 2)
		if (strcasecmp(h[0], name) == 0)
			return h[1];
	return NULL;
}

static enum sender_verdict verdict(const struct answer *a, char *what, size_t whatlen)
{
	struct sender_reply r = { .body = a->body, .len = a->len, .header = answer_header, .ctx = (void *)a };

	what[0] = 0;
	return parca_reply_verdict(&r, what, whatlen);
}

#define BODY(s) .body = (s), .len = sizeof(s) - 1

static void test_trailer_frame(void **state)
{
	static const struct {
		struct answer a;
		enum sender_verdict want;
		const char *what; /* a part of what, or NULL */
	} cases[] = {
		/* Parca's success: an empty reply frame, then the trailers */
		{ { BODY("\0\0\0\0\0\x80\0\0\0\x1fgrpc-status: 0\r\ngrpc-message: \r\n") }, SENDER_REPLY_SENT, NULL },
		/* trailers only in the body, other order, other case */
		{ { BODY("\x80\0\0\0\xffGrpc-Message: busy%20now\r\nGRPC-STATUS:14\r\n") }, SENDER_REPLY_RETRY,
		  "gRPC status 14 UNAVAILABLE: busy now" },
		{ { BODY("\x80\0\0\0\xffgrpc-status: 3\r\ngrpc-message: bad\x1b[31m%0aline\r\n") }, SENDER_REPLY_REJECTED,
		  "gRPC status 3 INVALID_ARGUMENT: bad\\x1b[31m\\x0aline" },
		{ { BODY("\x80\0\0\0\xffgrpc-status: 99\r\n") }, SENDER_REPLY_REJECTED, "gRPC status 99 (unknown)" },
		{ { BODY("\x80\0\0\0\xffgrpc-status: -1\r\n") }, SENDER_REPLY_REJECTED, "invalid grpc-status" },
		{ { BODY("\x80\0\0\0\xffgrpc-status: 0000\r\n") }, SENDER_REPLY_REJECTED, "invalid grpc-status" },
		/* a frame length past the body: only the bytes at hand are read */
		{ { BODY("\0\xff\xff\xff\xffgrpc-status: 0\r\n") }, SENDER_REPLY_REJECTED, "without a grpc-status" },
		{ { BODY("\x80\xff\xff\xff\xffgrpc-status: 8") }, SENDER_REPLY_RETRY, "RESOURCE_EXHAUSTED" },
		{ { BODY("\x80\0\0") }, SENDER_REPLY_REJECTED, "without a grpc-status" },
		{ { BODY("") }, SENDER_REPLY_REJECTED, "without a grpc-status" },
		{ { BODY("{\"ok\":true}") }, SENDER_REPLY_REJECTED, "without a grpc-status" },
		/* the status name must be the whole name */
		{ { BODY("\x80\0\0\0\xffgrpc-status-x: 0\r\n") }, SENDER_REPLY_REJECTED, "without a grpc-status" },
	};
	char what[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum sender_verdict v = verdict(&cases[i].a, what, sizeof(what));

		if (v != cases[i].want || (cases[i].what && !strstr(what, cases[i].what)))
			fail_msg("case %zu: verdict %d, want %d; what '%s'", i, v, cases[i].want, what);
	}
}

static void test_trailers_only_headers(void **state)
{
	static const char *const unavailable[] = { "grpc-status", "14", "grpc-message", "shutting down", NULL };
	static const char *const denied[] = { "Grpc-Status", "7", NULL };
	static const char *const aborted[] = { "grpc-status", " 10 ", NULL };
	static const char *const ok[] = { "grpc-status", "0", NULL };
	/* the header wins over a body that says otherwise */
	struct answer a = { unavailable, "\x80\0\0\0\x0fgrpc-status: 0\r\n", 20 };
	char what[512], longmsg[2000];
	const char *huge[] = { "grpc-status", "13", "grpc-message", longmsg, NULL };

	(void)state;
	assert_int_equal(verdict(&a, what, sizeof(what)), SENDER_REPLY_RETRY);
	assert_non_null(strstr(what, "gRPC status 14 UNAVAILABLE: shutting down"));
	a.headers = denied;
	assert_int_equal(verdict(&a, what, sizeof(what)), SENDER_REPLY_REJECTED);
	assert_non_null(strstr(what, "gRPC status 7 PERMISSION_DENIED: (no message)"));
	a.headers = aborted;
	assert_int_equal(verdict(&a, what, sizeof(what)), SENDER_REPLY_RETRY);
	a.headers = ok;
	a.body = "";
	a.len = 0;
	assert_int_equal(verdict(&a, what, sizeof(what)), SENDER_REPLY_SENT);
	/* a long message is cut: the line stays bounded */
	memset(longmsg, '\x01', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = 0;
	a.headers = huge;
	assert_int_equal(verdict(&a, what, sizeof(what)), SENDER_REPLY_REJECTED);
	assert_true(strlen(what) < 300);
	assert_non_null(strstr(what, "gRPC status 13 INTERNAL: \\x01\\x01"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trailer_frame),
		cmocka_unit_test(test_trailers_only_headers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

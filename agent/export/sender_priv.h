/* sender_priv.h: the sender's state, shared by its queue and worker (sender.c) and
 * its HTTP transfers (sender_http.c); not for other stages. */
#ifndef PROWL_SENDER_PRIV_H
#define PROWL_SENDER_PRIV_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sender.h"

#ifndef PROWL_VERSION
#define PROWL_VERSION "0.0.0"
#endif

#define DEFAULT_TIMEOUT_MS     10000u
#define MAX_CONNECT_TIMEOUT_MS 5000u
#define DEFAULT_BUFFER_BYTES   (64ull << 20)
#define BACKOFF_BASE_MS        500u
#define BACKOFF_CAP_MS         30000u
#define RETRY_AFTER_CAP_MS     300000u /* a Retry-After beyond 5 min is clamped */
#define REPLY_SNIPPET          256     /* bytes of a rejection's body quoted in the log */
#define REPLY_KEEP             4096    /* bytes of the body kept for the reply check */
#define REPLY_MAX_BYTES        (64u << 10) /* the transfer stops past this much body */
#define DROP_WARN_INTERVAL_NS  (60 * NSEC_PER_SEC)

enum outcome {
	OUT_SENT,    /* 2xx */
	OUT_FAILED,  /* permanent: 4xx (but 429), 3xx, 501, 505, configuration errors */
	OUT_RETRY,   /* network error, timeout, 5xx (but 501, 505), 429 */
	OUT_ABORTED, /* sender stopping */
};

struct qitem {
	struct qitem *next;
	struct sender_request *req;
};

struct sender {
	char *name;
	struct http_target t; /* deep copy; url without a trailing '/' */
	char *auth_header;    /* "Authorization: Bearer ..." (secret) */
	char *tenant_header;
	uint32_t backoff_base_ms, backoff_cap_ms;
	sender_reply_check_fn check; /* or NULL: every 2xx is a delivery */

	/* worker thread only (but curl_multi_wakeup) */
	CURLM *multi; /* holds the connection cache; lets sender_free wake a transfer */
	CURL *tmpl; /* the options of every POST; never performed itself */
	CURL *curl; /* this attempt's handle: a fresh copy of tmpl (see sender_attempt) */
	char errbuf[CURL_ERROR_SIZE];
	char reply[REPLY_KEEP];
	char reply_text[4 * REPLY_SNIPPET + 4]; /* escaped for the log */
	size_t reply_len;
	uint64_t reply_total; /* body bytes received, up to REPLY_MAX_BYTES + one read */
	bool reply_cut;       /* the body was longer than REPLY_MAX_BYTES: transfer stopped */
	uint64_t rng;
	uint64_t fail_streak; /* consecutive retryable failures */

	pthread_t thread;
	bool thread_started;
	atomic_bool stop;     /* read without the lock by the progress callback */

	pthread_mutex_t lock; /* protects everything below */
	pthread_cond_t wake;  /* worker: work queued, stop, or current request dropped */
	pthread_cond_t idle;  /* flushers: a request finished */
	struct qitem *head, *tail;
	struct sender_request *cur; /* owned by the worker while sent or waiting to retry */
	bool cur_dropped;           /* cur was dropped by the buffer cap; already counted */
	struct export_stats st;     /* queue_* count the queue plus a live cur */
	bool in_burst;
	uint64_t burst_drops;
	int64_t last_drop_warn_ns;
};

/* sender_http.c */
int sender_path_len_for_log(const char *path);
void sender_note_reachable(struct sender *s);
void sender_note_retryable(struct sender *s, const struct sender_request *req, const char *what);
enum outcome sender_attempt(struct sender *s, const struct sender_request *req, uint64_t *ret_retry_after_ms);
int sender_setup_curl(struct sender *s);

#endif

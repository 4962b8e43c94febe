/* sender.c: asynchronous HTTP delivery: one libcurl thread per sender drains a FIFO
 * bounded by bytes (oldest dropped first), retrying with jittered exponential backoff. */
#include "sender.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "curlopt.h"
#include "log.h"
#include "url.h"

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
#define REPLY_MAX_BYTES        (64u << 10) /* the transfer stops past this much body */
#define DROP_WARN_INTERVAL_NS  (60ll * 1000000000ll)
#define NSEC_PER_MSEC          1000000ll
#define NSEC_PER_SEC           1000000000ll

enum outcome {
	OUT_SENT,    /* 2xx */
	OUT_FAILED,  /* permanent: 4xx (but 429), 3xx, configuration errors */
	OUT_RETRY,   /* network error, timeout, 5xx, 429 */
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

	/* worker thread only (but curl_multi_wakeup) */
	CURLM *multi; /* holds the connection cache; lets sender_free wake a transfer */
	CURL *curl;
	char errbuf[CURL_ERROR_SIZE];
	char reply[REPLY_SNIPPET];
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

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static struct timespec mono_after_ms(uint64_t ms)
{
	int64_t t = (int64_t)clock_mono_ns() + (int64_t)ms * NSEC_PER_MSEC;

	return (struct timespec){ .tv_sec = t / NSEC_PER_SEC, .tv_nsec = t % NSEC_PER_SEC };
}

static void free_secret(char *s)
{
	if (!s)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

void sender_request_free(struct sender_request *req)
{
	if (!req)
		return;
	if (req->on_free)
		req->on_free(req);
	free(req->path);
	free(req->content_type);
	free(req->content_encoding);
	if (req->headers)
		for (char **h = req->headers; *h; h++)
			free(*h);
	free(req->headers);
	free(req->body);
	free(req);
}

/* The path without its query string, for log lines: label values and names in the
 * query are not secrets, but they make lines long and are not what a person needs. */
static int path_len_for_log(const char *path)
{
	size_t n = strcspn(path, "?");

	return n > 200 ? 200 : (int)n;
}

/* The start of the reply's body on one line: printable ASCII as it is, every other
 * byte (and the backslash) escaped, "..." when there was more. */
static const char *reply_text(struct sender *s)
{
	size_t n = s->reply_len, k = 0;

	while (n > 0 && (s->reply[n - 1] == '\n' || s->reply[n - 1] == '\r' || s->reply[n - 1] == ' '))
		n--;
	if (!n)
		return "(empty body)";
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s->reply[i];

		if (c == '\\')
			k += (size_t)snprintf(s->reply_text + k, sizeof(s->reply_text) - k, "\\\\");
		else if (c < 0x20 || c >= 0x7f)
			k += (size_t)snprintf(s->reply_text + k, sizeof(s->reply_text) - k, "\\x%02x", c);
		else
			s->reply_text[k++] = (char)c;
	}
	snprintf(s->reply_text + k, sizeof(s->reply_text) - k, "%s", s->reply_total > s->reply_len ? "..." : "");
	return s->reply_text;
}

/* Keeps the start of the body for the log and stops the transfer (a write error)
 * once more than REPLY_MAX_BYTES came: a backend's answer is never read whole. */
static size_t on_reply(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct sender *s = userdata;
	size_t n = size * nmemb, room = REPLY_SNIPPET - s->reply_len;

	if (room > n)
		room = n;
	memcpy(s->reply + s->reply_len, data, room);
	s->reply_len += room;
	s->reply_total += n;
	if (s->reply_total > REPLY_MAX_BYTES) {
		s->reply_cut = true;
		return 0;
	}
	return n;
}

static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	struct sender *s = userdata;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return atomic_load(&s->stop) ? 1 : 0; /* nonzero aborts the transfer */
}

/* Errors that retrying cannot fix: the configuration must change. */
static bool curl_error_is_permanent(CURLcode rc)
{
	switch (rc) {
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
	case CURLE_NOT_BUILT_IN:
	case CURLE_BAD_FUNCTION_ARGUMENT:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_LOGIN_DENIED:
	case CURLE_FILESIZE_EXCEEDED:
		return true;
	default:
		return false;
	}
}

static uint64_t rng_next(struct sender *s)
{
	/* xorshift64*: jitter only, not security */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545F4914F6CDD1Dull;
}

/* Full jitter: uniform in [0, min(cap, base * 2^(attempt-1))]. */
static uint64_t backoff_ms(struct sender *s, unsigned attempt)
{
	unsigned shift = attempt > 0 ? attempt - 1 : 0;
	uint64_t ceil_ms = s->backoff_base_ms;

	if (shift > 20)
		shift = 20;
	ceil_ms <<= shift;
	if (ceil_ms > s->backoff_cap_ms)
		ceil_ms = s->backoff_cap_ms;
	return rng_next(s) % (ceil_ms + 1);
}

static void note_reachable(struct sender *s)
{
	if (s->fail_streak == 0)
		return;
	log_info("%s: backend reachable again after %" PRIu64 " failed attempts", s->name, s->fail_streak);
	s->fail_streak = 0;
}

/* One warning at the start of an outage; the rest go to debug. */
static void note_retryable(struct sender *s, const struct sender_request *req, const char *what)
{
	if (s->fail_streak++ == 0)
		log_warn("%s: POST %.*s failed: %s; retrying with backoff, profiles stay queued",
			 s->name, path_len_for_log(req->path), req->path, what);
	else
		log_debug("%s: POST %.*s failed again (%" PRIu64 " in a row): %s",
			  s->name, path_len_for_log(req->path), req->path, s->fail_streak, what);
}

static struct curl_slist *build_headers(struct sender *s, const struct sender_request *req, bool *ret_oom)
{
	struct curl_slist *l = NULL, *n;
	char buf[256];
	const char *fixed[4];
	size_t nfixed = 0;

	*ret_oom = false;
	/* No "Expect: 100-continue" round trip for large bodies. */
	fixed[nfixed++] = "Expect:";
	if (s->auth_header)
		fixed[nfixed++] = s->auth_header;
	if (s->tenant_header)
		fixed[nfixed++] = s->tenant_header;
	for (size_t i = 0; i < nfixed; i++) {
		n = curl_slist_append(l, fixed[i]);
		if (!n)
			goto oom;
		l = n;
	}
	if (req->content_type) {
		snprintf(buf, sizeof(buf), "Content-Type: %s", req->content_type);
		n = curl_slist_append(l, buf);
		if (!n)
			goto oom;
		l = n;
	}
	if (req->content_encoding) {
		snprintf(buf, sizeof(buf), "Content-Encoding: %s", req->content_encoding);
		n = curl_slist_append(l, buf);
		if (!n)
			goto oom;
		l = n;
	}
	if (req->headers)
		for (char **h = req->headers; *h; h++) {
			n = curl_slist_append(l, *h);
			if (!n)
				goto oom;
			l = n;
		}
	return l;
oom:
	curl_slist_free_all(l);
	*ret_oom = true;
	return NULL;
}

/* Runs the transfer set up on s->curl. Returns early, as CURLE_ABORTED_BY_CALLBACK,
 * once the sender is stopping: sender_free wakes the poll, and the progress
 * callback covers the stretches inside libcurl. */
static CURLcode perform(struct sender *s)
{
	CURLcode rc = CURLE_OK;
	CURLMcode mc;
	CURLMsg *m;
	int running = 1, left;

	mc = curl_multi_add_handle(s->multi, s->curl);
	if (mc != CURLM_OK)
		return CURLE_OUT_OF_MEMORY;
	while (running) {
		mc = curl_multi_perform(s->multi, &running);
		if (mc == CURLM_OK && running)
			mc = curl_multi_poll(s->multi, NULL, 0, 1000, NULL);
		if (mc != CURLM_OK) {
			snprintf(s->errbuf, sizeof(s->errbuf), "%s", curl_multi_strerror(mc));
			rc = CURLE_RECV_ERROR;
			break;
		}
		if (atomic_load(&s->stop)) {
			rc = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
	}
	if (!running)
		while ((m = curl_multi_info_read(s->multi, &left)))
			if (m->msg == CURLMSG_DONE && m->easy_handle == s->curl)
				rc = m->data.result;
	curl_multi_remove_handle(s->multi, s->curl);
	return rc;
}

/* One POST of req. Called without the lock. */
static enum outcome attempt_once(struct sender *s, const struct sender_request *req, uint64_t *ret_retry_after_ms)
{
	struct curl_slist *hdrs = NULL;
	curl_off_t retry_after = 0;
	char *url = NULL, what[4 * REPLY_SNIPPET + CURL_ERROR_SIZE];
	enum outcome o;
	long code = 0;
	CURLcode rc;
	bool oom;
	int r;

	*ret_retry_after_ms = 0;
	hdrs = build_headers(s, req, &oom);
	r = oom ? -ENOMEM : url_join(s->t.url, req->path, &url);
	if (r == -EINVAL) {
		log_error("%s: POST %.*s failed: libcurl cannot make a URL of it", s->name, path_len_for_log(req->path),
			  req->path);
		o = OUT_FAILED;
		goto out;
	}
	if (r < 0) {
		snprintf(what, sizeof(what), "out of memory");
		o = OUT_RETRY;
		goto retry;
	}
	s->reply_len = 0;
	s->reply_total = 0;
	s->reply_cut = false;
	s->errbuf[0] = 0;
	curl_easy_setopt(s->curl, CURLOPT_URL, url);
	curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, req->len ? (const char *)req->body : "");
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->len);
	rc = perform(s);
	curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, NULL);
	if (rc == CURLE_ABORTED_BY_CALLBACK && atomic_load(&s->stop)) {
		o = OUT_ABORTED;
		goto out;
	}
	/* A body cut short by on_reply: the status line is what counts. */
	if (rc == CURLE_WRITE_ERROR && s->reply_cut)
		rc = CURLE_OK;
	if (rc != CURLE_OK) {
		snprintf(what, sizeof(what), "%s", s->errbuf[0] ? s->errbuf : curl_easy_strerror(rc));
		if (curl_error_is_permanent(rc)) {
			log_error("%s: POST %.*s failed: %s", s->name, path_len_for_log(req->path), req->path, what);
			o = OUT_FAILED;
			goto out;
		}
		o = OUT_RETRY;
		goto retry;
	}
	curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 200 && code < 300) {
		note_reachable(s);
		o = OUT_SENT;
		goto out;
	}
	if (code == 429 || code >= 500) {
		if (curl_easy_getinfo(s->curl, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0)
			*ret_retry_after_ms = retry_after > RETRY_AFTER_CAP_MS / 1000 ? RETRY_AFTER_CAP_MS
										: (uint64_t)retry_after * 1000;
		snprintf(what, sizeof(what), "HTTP %ld: %s", code, reply_text(s));
		o = OUT_RETRY;
		goto retry;
	}
	/* The backend answered, so it is reachable, but it will not take this one. */
	note_reachable(s);
	log_error("%s: POST %.*s rejected with HTTP %ld: %s", s->name, path_len_for_log(req->path), req->path,
		  code, reply_text(s));
	o = OUT_FAILED;
	goto out;
retry:
	note_retryable(s, req, what);
out:
	curl_slist_free_all(hdrs);
	free(url);
	return o;
}

/* Delivers s->cur until it is sent, fails for good, is dropped or the sender
 * stops. Called and returns with the lock held; frees the request. */
static void deliver(struct sender *s)
{
	struct sender_request *req = s->cur;
	uint64_t delay_ms, retry_after_ms;
	unsigned attempt = 0;
	bool gave_up = false, burst_over = false, done = true;
	uint64_t burst_drops = 0;
	enum outcome o;

	for (;;) {
		pthread_mutex_unlock(&s->lock);
		o = attempt_once(s, req, &retry_after_ms);
		pthread_mutex_lock(&s->lock);
		if (o == OUT_ABORTED) {
			done = false;
			break;
		}
		if (o == OUT_SENT) {
			s->st.sent++;
			s->st.bytes_sent += req->len;
			if (s->cur_dropped) {
				/* Delivered after all: undo the drop. */
				s->st.dropped--;
				if (s->burst_drops)
					s->burst_drops--;
			} else {
				s->st.queue_items--;
				s->st.queue_bytes -= req->len;
			}
			if (s->in_burst) {
				burst_over = true;
				burst_drops = s->burst_drops;
				s->in_burst = false;
				s->burst_drops = 0;
			}
			break;
		}
		if (s->cur_dropped || atomic_load(&s->stop)) {
			done = false;
			break;
		}
		if (o == OUT_FAILED) {
			s->st.failed++;
			s->st.queue_items--;
			s->st.queue_bytes -= req->len;
			break;
		}
		attempt++;
		if (s->t.max_retries && attempt > s->t.max_retries) {
			s->st.dropped++;
			s->st.queue_items--;
			s->st.queue_bytes -= req->len;
			gave_up = true;
			break;
		}
		s->st.retried++;
		delay_ms = retry_after_ms ? retry_after_ms : backoff_ms(s, attempt);
		{
			struct timespec until = mono_after_ms(delay_ms);

			while (!atomic_load(&s->stop) && !s->cur_dropped)
				if (pthread_cond_timedwait(&s->wake, &s->lock, &until) == ETIMEDOUT)
					break;
		}
		if (s->cur_dropped || atomic_load(&s->stop)) {
			done = false;
			break;
		}
	}
	/* Stopping: the request stays s->cur, for sender_stop() to hand back. */
	if (!done && !s->cur_dropped)
		return;
	s->cur = NULL;
	s->cur_dropped = false;
	pthread_mutex_unlock(&s->lock);
	if (gave_up)
		log_warn("%s: dropping a profile after %u failed attempts (max_retries=%" PRIu32 ")",
			 s->name, attempt, s->t.max_retries);
	if (burst_over && burst_drops)
		log_info("%s: delivering again; %" PRIu64 " queued profiles were dropped while the send buffer was full",
			 s->name, burst_drops);
	sender_request_free(req);
	pthread_mutex_lock(&s->lock);
}

static void *worker(void *arg)
{
	struct sender *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct qitem *it;

		while (!atomic_load(&s->stop) && !s->head)
			pthread_cond_wait(&s->wake, &s->lock);
		if (atomic_load(&s->stop))
			break;
		it = s->head;
		s->head = it->next;
		if (!s->head)
			s->tail = NULL;
		s->cur = it->req;
		s->cur_dropped = false;
		free(it);
		deliver(s);
		pthread_cond_broadcast(&s->idle);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int sender_enqueue(struct sender *s, struct sender_request *req)
{
	struct qitem *it, *dropped = NULL;
	uint64_t ndrop = 0, queued = 0, cap;
	bool warn = false;
	int64_t now;

	if (!s || !req || !req->path || (!req->body && req->len)) {
		sender_request_free(req);
		return -EINVAL;
	}
	it = calloc(1, sizeof(*it));
	pthread_mutex_lock(&s->lock);
	if (atomic_load(&s->stop)) {
		pthread_mutex_unlock(&s->lock);
		free(it);
		sender_request_free(req);
		return -ESHUTDOWN;
	}
	if (!it) {
		s->st.dropped++;
		pthread_mutex_unlock(&s->lock);
		sender_request_free(req);
		return -ENOMEM;
	}
	if (!req->queued_unix_ns)
		req->queued_unix_ns = clock_wall_ns();
	cap = s->t.buffer_bytes;
	if (req->len > cap) {
		/* Larger than the whole buffer: it can never be queued. */
		it->req = req;
		it->next = dropped;
		dropped = it;
		ndrop++;
	} else {
		while (s->st.queue_bytes + req->len > cap) {
			if (s->cur && !s->cur_dropped) {
				/* The request being retried is the oldest of all. */
				s->cur_dropped = true;
				s->st.queue_items--;
				s->st.queue_bytes -= s->cur->len;
				pthread_cond_signal(&s->wake);
			} else if (s->head) {
				struct qitem *old = s->head;

				s->head = old->next;
				if (!s->head)
					s->tail = NULL;
				s->st.queue_items--;
				s->st.queue_bytes -= old->req->len;
				old->next = dropped;
				dropped = old;
			} else {
				break;
			}
			ndrop++;
		}
		it->req = req;
		if (s->tail)
			s->tail->next = it;
		else
			s->head = it;
		s->tail = it;
		s->st.queue_items++;
		s->st.queue_bytes += req->len;
		pthread_cond_signal(&s->wake);
	}
	if (ndrop) {
		s->st.dropped += ndrop;
		s->burst_drops += ndrop;
		now = (int64_t)clock_mono_ns();
		if (!s->in_burst || now - s->last_drop_warn_ns >= DROP_WARN_INTERVAL_NS) {
			warn = true;
			s->in_burst = true;
			s->last_drop_warn_ns = now;
			queued = s->burst_drops;
		}
	}
	pthread_mutex_unlock(&s->lock);
	while (dropped) {
		struct qitem *next = dropped->next;

		sender_request_free(dropped->req);
		free(dropped);
		dropped = next;
	}
	if (warn)
		log_warn("%s: send buffer full (%" PRIu64 " bytes): dropped %" PRIu64
			 " oldest profiles so far while the backend is not keeping up",
			 s->name, cap, queued);
	return 0;
}

int sender_flush(struct sender *s, uint32_t deadline_ms)
{
	struct timespec until = mono_after_ms(deadline_ms);
	int left;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	while (s->st.queue_items > 0 && !atomic_load(&s->stop))
		if (pthread_cond_timedwait(&s->idle, &s->lock, &until) == ETIMEDOUT)
			break;
	left = s->st.queue_items > INT32_MAX ? INT32_MAX : (int)s->st.queue_items;
	pthread_mutex_unlock(&s->lock);
	return left;
}

void sender_get_stats(struct sender *s, struct export_stats *ret)
{
	pthread_mutex_lock(&s->lock);
	*ret = s->st;
	pthread_mutex_unlock(&s->lock);
}

/* Stops the worker, cutting a transfer under way short. */
static void stop_thread(struct sender *s)
{
	if (!s->thread_started)
		return;
	pthread_mutex_lock(&s->lock);
	atomic_store(&s->stop, true);
	pthread_cond_broadcast(&s->wake);
	pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->lock);
	curl_multi_wakeup(s->multi);
	pthread_join(s->thread, NULL);
	s->thread_started = false;
}

int sender_stop(struct sender *s, struct sender_request ***ret, size_t *ret_n)
{
	struct sender_request **v;
	size_t n = 0;

	stop_thread(s);
	v = calloc(s->st.queue_items + 1, sizeof(*v));
	if (!v)
		return -ENOMEM; /* sender_free() drops and counts them */
	if (s->cur && !s->cur_dropped)
		v[n++] = s->cur;
	else
		sender_request_free(s->cur);
	s->cur = NULL;
	while (s->head && n < s->st.queue_items + 1) {
		struct qitem *next = s->head->next;

		v[n++] = s->head->req;
		free(s->head);
		s->head = next;
	}
	s->tail = NULL;
	s->st.queue_items = 0;
	s->st.queue_bytes = 0;
	*ret = v;
	*ret_n = n;
	return 0;
}

void sender_free(struct sender *s)
{
	uint64_t left;

	if (!s)
		return;
	stop_thread(s);
	/* A request kept by a stop is in queue_items (counted below); a dropped one is not. */
	sender_request_free(s->cur);
	s->cur = NULL;
	left = s->st.queue_items;
	while (s->head) {
		struct qitem *next = s->head->next;

		sender_request_free(s->head->req);
		free(s->head);
		s->head = next;
	}
	s->st.dropped += left;
	if (left)
		log_warn("%s: %" PRIu64 " queued profiles (%" PRIu64 " bytes) not delivered before shutdown",
			 s->name, left, s->st.queue_bytes);
	if (s->curl)
		curl_easy_cleanup(s->curl);
	if (s->multi)
		curl_multi_cleanup(s->multi);
	pthread_cond_destroy(&s->idle);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s->name);
	free(s->t.url);
	free(s->t.basic_user);
	free_secret(s->t.basic_password);
	free_secret(s->t.bearer_token);
	free_secret(s->auth_header);
	free(s->t.tenant);
	free(s->tenant_header);
	free(s->t.ca_file);
	free(s->t.cert_file);
	free(s->t.key_file);
	free(s);
}

static int dup_opt(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

static int setup_curl(struct sender *s)
{
	uint32_t connect_ms = s->t.timeout_ms < MAX_CONNECT_TIMEOUT_MS ? s->t.timeout_ms : MAX_CONNECT_TIMEOUT_MS;
	CURL *c;

	s->multi = curl_multi_init();
	c = s->curl = curl_easy_init();
	if (!s->multi || !c)
		return -ENOMEM;
	curl_set_common(c, &(struct curl_io){
		.timeout_ms = (long)s->t.timeout_ms, .connect_ms = (long)connect_ms, .errbuf = s->errbuf,
		.write = on_reply, .progress = on_progress, .ctx = s,
		.verify = !s->t.insecure_skip_verify, .ca_file = s->t.ca_file,
	});
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	if (s->t.cert_file)
		curl_easy_setopt(c, CURLOPT_SSLCERT, s->t.cert_file);
	if (s->t.key_file)
		curl_easy_setopt(c, CURLOPT_SSLKEY, s->t.key_file);
	/* A bearer token wins over basic credentials: one Authorization header only. */
	if (!s->auth_header && (s->t.basic_user || s->t.basic_password)) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERNAME, s->t.basic_user ?: "");
		curl_easy_setopt(c, CURLOPT_PASSWORD, s->t.basic_password ?: "");
	}
	return 0;
}

/* Test hook: PROWL_TEST_BACKOFF_MS shrinks the backoff (base; cap = 60 x base). */
static void setup_backoff(struct sender *s)
{
	const char *e = getenv("PROWL_TEST_BACKOFF_MS");
	unsigned long v;
	char *end;

	s->backoff_base_ms = BACKOFF_BASE_MS;
	s->backoff_cap_ms = BACKOFF_CAP_MS;
	if (!e || !*e)
		return;
	v = strtoul(e, &end, 10);
	if (*end || v == 0 || v > BACKOFF_BASE_MS)
		return;
	s->backoff_base_ms = (uint32_t)v;
	s->backoff_cap_ms = (uint32_t)(v * 60 < BACKOFF_CAP_MS ? v * 60 : BACKOFF_CAP_MS);
}

int sender_new(const char *name, const struct http_target *t, struct sender **ret)
{
	pthread_condattr_t ca;
	sigset_t all, old;
	struct sender *s;
	size_t n;
	int r;

	if (!name || !t || !t->url || !*t->url || !ret)
		return -EINVAL;
	/* These end up in header lines: no way to smuggle in another header. */
	if ((t->bearer_token && strpbrk(t->bearer_token, "\r\n")) || (t->tenant && strpbrk(t->tenant, "\r\n")))
		return -EINVAL;
	pthread_once(&curl_once, curl_init_once);
	if (curl_init_rc != CURLE_OK)
		return -ENOMEM;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_cond_init(&s->idle, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&s->stop, false);

	s->t = *t;
	s->t.url = s->t.basic_user = s->t.basic_password = s->t.bearer_token = NULL;
	s->t.tenant = s->t.ca_file = s->t.cert_file = s->t.key_file = NULL;
	s->name = strdup(name);
	r = s->name ? 0 : -ENOMEM;
	if (r == 0)
		r = dup_opt(&s->t.url, t->url);
	if (r == 0)
		r = dup_opt(&s->t.basic_user, t->basic_user);
	if (r == 0)
		r = dup_opt(&s->t.basic_password, t->basic_password);
	if (r == 0)
		r = dup_opt(&s->t.bearer_token, t->bearer_token);
	if (r == 0)
		r = dup_opt(&s->t.tenant, t->tenant);
	if (r == 0)
		r = dup_opt(&s->t.ca_file, t->ca_file);
	if (r == 0)
		r = dup_opt(&s->t.cert_file, t->cert_file);
	if (r == 0)
		r = dup_opt(&s->t.key_file, t->key_file);
	if (r == 0 && s->t.bearer_token && *s->t.bearer_token &&
	    asprintf(&s->auth_header, "Authorization: Bearer %s", s->t.bearer_token) < 0) {
		s->auth_header = NULL;
		r = -ENOMEM;
	}
	if (r == 0 && s->t.tenant && *s->t.tenant &&
	    asprintf(&s->tenant_header, "X-Scope-OrgID: %s", s->t.tenant) < 0) {
		s->tenant_header = NULL;
		r = -ENOMEM;
	}
	if (r < 0)
		goto fail;
	n = strlen(s->t.url);
	while (n > 0 && s->t.url[n - 1] == '/')
		s->t.url[--n] = 0;
	if (!s->t.timeout_ms)
		s->t.timeout_ms = DEFAULT_TIMEOUT_MS;
	if (!s->t.buffer_bytes)
		s->t.buffer_bytes = DEFAULT_BUFFER_BYTES;
	setup_backoff(s);
	s->rng = (uint64_t)clock_wall_ns() ^ ((uint64_t)(uintptr_t)s << 16) ^ 0x9E3779B97F4A7C15ull;
	if (!s->rng)
		s->rng = 1;
	r = setup_curl(s);
	if (r < 0)
		goto fail;

	/* Signals belong to the main thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&s->thread, NULL, worker, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		goto fail;
	s->thread_started = true;
	{
		char tname[16];

		snprintf(tname, sizeof(tname), "send-%s", name);
		pthread_setname_np(s->thread, tname);
	}
	*ret = s;
	return 0;
fail:
	sender_free(s);
	return r;
}

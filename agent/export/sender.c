/* sender.c: asynchronous HTTP delivery: one libcurl thread per sender drains a FIFO
 * bounded by bytes (oldest dropped first), retrying with jittered exponential backoff. */
#include "sender_priv.h"

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
		o = sender_attempt(s, req, &retry_after_ms);
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

void sender_set_reply_check(struct sender *s, sender_reply_check_fn check)
{
	pthread_mutex_lock(&s->lock);
	s->check = check;
	pthread_mutex_unlock(&s->lock);
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
	if (s->tmpl)
		curl_easy_cleanup(s->tmpl);
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
	if (curl_init() < 0)
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
	r = sender_setup_curl(s);
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

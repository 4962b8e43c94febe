/* sender_http.c: one HTTP POST of a queued request with libcurl: headers, the transfer
 * (cut short when the sender stops), the answer's outcome and the log of a rejection. */
#include "sender_priv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curlopt.h"
#include "log.h"
#include "url.h"

/* The path without its query string, for log lines: label values and names in the
 * query are not secrets, but they make lines long and are not what a person needs. */
int sender_path_len_for_log(const char *path)
{
	size_t n = strcspn(path, "?");

	return n > 200 ? 200 : (int)n;
}

/* The start of the reply's body on one line: printable ASCII as it is, every other
 * byte (and the backslash) escaped, "..." when there was more. */
static const char *reply_text(struct sender *s)
{
	size_t n = s->reply_len < REPLY_SNIPPET ? s->reply_len : REPLY_SNIPPET, k = 0;

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
	snprintf(s->reply_text + k, sizeof(s->reply_text) - k, "%s", s->reply_total > n ? "..." : "");
	return s->reply_text;
}

/* Keeps the start of the body for the log and stops the transfer (a write error)
 * once more than REPLY_MAX_BYTES came: a backend's answer is never read whole. */
static size_t on_reply(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct sender *s = userdata;
	size_t n = size * nmemb, room = REPLY_KEEP - s->reply_len;

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

/* Whether an HTTP answer is worth sending the same request again: 429 and the 5xx
 * of a server that is down, overloaded or restarting, 500 included (a backend's
 * crashed component answers it; docs/decisions.md). 501 and 505 say that this server
 * will never take this request, and any other status will not change either. */
static bool http_status_is_retryable(long code)
{
	if (code == 429) /* Too Many Requests */
		return true;
	if (code < 500 || code > 599)
		return false;
	return code != 501 && code != 505; /* Not Implemented, HTTP Version Not Supported */
}

void sender_note_reachable(struct sender *s)
{
	if (s->fail_streak == 0)
		return;
	log_info("%s: backend reachable again after %" PRIu64 " failed attempts", s->name, s->fail_streak);
	s->fail_streak = 0;
}

/* One warning at the start of an outage; the rest go to debug. */
void sender_note_retryable(struct sender *s, const struct sender_request *req, const char *what)
{
	if (s->fail_streak++ == 0)
		log_warn("%s: POST %.*s failed: %s; retrying with backoff, profiles stay queued",
			 s->name, sender_path_len_for_log(req->path), req->path, what);
	else
		log_debug("%s: POST %.*s failed again (%" PRIu64 " in a row): %s",
			  s->name, sender_path_len_for_log(req->path), req->path, s->fail_streak, what);
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

static const char *reply_header(const struct sender_reply *r, const char *name)
{
	struct sender *s = r->ctx;
	struct curl_header *h;

	if (curl_easy_header(s->curl, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
		return NULL;
	return h->value;
}

/* The outcome of a 2xx answer: sent, unless the request's reply check says otherwise
 * (then a rejection is logged here, a retry by the caller). */
static enum outcome check_reply(struct sender *s, const struct sender_request *req, char *what, size_t whatlen)
{
	struct sender_reply r = {
		.body = (const uint8_t *)s->reply, .len = s->reply_len, .header = reply_header, .ctx = s,
	};

	if (!s->check)
		return OUT_SENT;
	what[0] = 0;
	switch (s->check(&r, what, whatlen)) {
	case SENDER_REPLY_SENT:
		return OUT_SENT;
	case SENDER_REPLY_RETRY:
		return OUT_RETRY;
	default:
		log_error("%s: POST %.*s rejected: %s", s->name, sender_path_len_for_log(req->path), req->path, what);
		return OUT_FAILED;
	}
}

/* One POST of req. Called without the lock. */
enum outcome sender_attempt(struct sender *s, const struct sender_request *req, uint64_t *ret_retry_after_ms)
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
		log_error("%s: POST %.*s failed: libcurl cannot make a URL of it", s->name, sender_path_len_for_log(req->path),
			  req->path);
		o = OUT_FAILED;
		goto out;
	}
	if (r < 0) {
		snprintf(what, sizeof(what), "out of memory");
		o = OUT_RETRY;
		goto retry;
	}
	/* A fresh handle per attempt: libcurl 7.88 keeps the last header of a transfer
	 * in the handle, and a reply that opens with a folded line reads it after it was
	 * freed (found by fuzz_http). The multi handle keeps the connections alive. */
	s->curl = curl_easy_duphandle(s->tmpl);
	if (!s->curl) {
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
			log_error("%s: POST %.*s failed: %s", s->name, sender_path_len_for_log(req->path), req->path, what);
			o = OUT_FAILED;
			goto out;
		}
		o = OUT_RETRY;
		goto retry;
	}
	curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 200 && code < 300) {
		o = check_reply(s, req, what, sizeof(what));
		if (o == OUT_RETRY)
			goto retry;
		sender_note_reachable(s);
		goto out;
	}
	if (http_status_is_retryable(code)) {
		if (curl_easy_getinfo(s->curl, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0)
			*ret_retry_after_ms = retry_after > RETRY_AFTER_CAP_MS / 1000 ? RETRY_AFTER_CAP_MS
										: (uint64_t)retry_after * 1000;
		snprintf(what, sizeof(what), "HTTP %ld: %s", code, reply_text(s));
		o = OUT_RETRY;
		goto retry;
	}
	/* The backend answered, so it is reachable, but it will not take this one. */
	sender_note_reachable(s);
	log_error("%s: POST %.*s rejected with HTTP %ld: %s", s->name, sender_path_len_for_log(req->path), req->path,
		  code, reply_text(s));
	o = OUT_FAILED;
	goto out;
retry:
	sender_note_retryable(s, req, what);
out:
	if (s->curl)
		curl_easy_cleanup(s->curl);
	s->curl = NULL;
	curl_slist_free_all(hdrs);
	free(url);
	return o;
}

int sender_setup_curl(struct sender *s)
{
	uint32_t connect_ms = s->t.timeout_ms < MAX_CONNECT_TIMEOUT_MS ? s->t.timeout_ms : MAX_CONNECT_TIMEOUT_MS;
	CURL *c;

	s->multi = curl_multi_init();
	c = s->tmpl = curl_easy_init();
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

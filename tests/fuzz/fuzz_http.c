/* fuzz_http.c: raw HTTP answers from a loopback server to what prowl reads over HTTP:
 * the Kubernetes client (a list body, a watch stream of lines) and an exporter's POST
 * (plain, or Parca's gRPC-web call, whose 2xx answer is read for its grpc-status). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "export_parca.h"
#include "fuzz_common.h"
#include "kube_http.h"
#include "sender_priv.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *answer; /* a copy: the server may still send it after the client gave up */
static size_t answer_len;
static int listen_fd = -1;
static char base_url[64];

/* Reads the request's head and as much body as Content-Length says (bounded), so the
 * client is done sending before the answer comes. */
static void read_request(int fd)
{
	char buf[8192];
	size_t len = 0, want = 0;
	char *end = NULL;

	while (len < sizeof(buf) - 1) {
		ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (n <= 0)
			return;
		len += (size_t)n;
		buf[len] = 0;
		if (!end && (end = strstr(buf, "\r\n\r\n"))) {
			char *cl = strcasestr(buf, "\r\nContent-Length:");
			want = (size_t)(end + 4 - buf) + (cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0);
		}
		if (end && len >= want)
			return;
	}
}

static void *serve(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(listen_fd, NULL, NULL);
		if (fd < 0)
			continue;
		read_request(fd);
		pthread_mutex_lock(&lock);
		for (size_t off = 0; off < answer_len;) {
			ssize_t n = send(fd, answer + off, answer_len - off, MSG_NOSIGNAL);
			if (n <= 0)
				break;
			off += (size_t)n;
		}
		pthread_mutex_unlock(&lock);
		shutdown(fd, SHUT_RDWR);
		close(fd);
	}
	return NULL;
}

static int start_server(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	pthread_t t;

	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(listen_fd, 16) < 0 ||
	    getsockname(listen_fd, (struct sockaddr *)&a, &alen) < 0)
		return -1;
	snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%u", ntohs(a.sin_port));
	return pthread_create(&t, NULL, serve, NULL) == 0 ? 0 : -1;
}

static bool on_line(void *ctx, const char *line, size_t len)
{
	size_t *lines = ctx;

	if (memchr(line, '\n', len))
		abort(); /* a line never holds a newline */
	(*lines)++;
	return *lines < 1000;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct kube_http *kh;
	static struct sender *snd, *grpc;
	struct kube_get g = {.max = 1 << 20, .timeout_ms = 2000};
	struct sender_request req = {.path = "/ingest?name=fuzz", .content_type = "text/plain",
				     .body = (uint8_t *)"x", .len = 1};
	uint64_t retry_after_ms;
	size_t lines = 0;

	fuzz_quiet();
	if (!kh) {
		struct http_target t = {.timeout_ms = 2000, .max_retries = 1};
		if (start_server() < 0 || kube_http_new(&(struct kube_http_opts){.api_url = base_url}, &kh) < 0)
			abort();
		t.url = base_url;
		if (sender_new("fuzz", &t, &snd) < 0 || sender_new("fuzz-grpc", &t, &grpc) < 0)
			abort();
		sender_set_reply_check(grpc, parca_reply_verdict);
	}
	pthread_mutex_lock(&lock);
	free(answer);
	answer = malloc(size ? size : 1);
	if (answer)
		memcpy(answer, data, size);
	answer_len = answer ? size : 0;
	pthread_mutex_unlock(&lock);

	/* A list: the body of a 200 answer, NUL-terminated at the length it says. */
	if (kube_http_get(kh, "/api/v1/pods?fieldSelector=spec.nodeName%3Dfuzz", &g) == 0 &&
	    g.body && strlen(g.body) > g.len)
		abort();
	free(g.body);
	/* A watch: the same answer as a stream of lines. */
	g = (struct kube_get){.max = 4096, .timeout_ms = 2000, .line = on_line, .ctx = &lines};
	kube_http_get(kh, "/api/v1/pods?watch=1", &g);
	free(g.body);
	if (strnlen(g.why, sizeof(g.why)) == sizeof(g.why))
		abort();
	/* An exporter's POST: the worker thread is idle (nothing queued), so the
	 * transfer runs here; the outcome and Retry-After come from the answer. Answers
	 * of odd length go to the sender that reads gRPC-web answers. */
	sender_attempt(size & 1 ? grpc : snd, &req, &retry_after_ms);
	if (retry_after_ms > RETRY_AFTER_CAP_MS)
		abort();
	return 0;
}

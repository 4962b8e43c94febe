/* curlopt.h: the libcurl options every prowl HTTP client sets (exporters' senders,
 * the Kubernetes client), and libcurl's one global init: no signals, timeouts, keepalive, http(s) only, TLS checks. */
#ifndef PROWL_CURLOPT_H
#define PROWL_CURLOPT_H

#include <stdbool.h>

#include <curl/curl.h>

struct curl_io {
	long timeout_ms, connect_ms;
	char *errbuf;                   /* CURL_ERROR_SIZE bytes */
	curl_write_callback write;      /* the answer's body */
	curl_xferinfo_callback progress;
	void *ctx;                      /* given to both callbacks */
	bool verify;                    /* TLS peer and host checks */
	const char *ca_file;            /* NULL: the system's CAs */
};

/* curl_global_init, once per process, whichever client comes first (thread-safe);
 * 0, or -ENOMEM when libcurl could not start. */
int curl_init(void);

/* Sets the common options of c for io. */
void curl_set_common(CURL *c, const struct curl_io *io);

#endif

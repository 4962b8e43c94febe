/* curlopt.c: the libcurl options shared by prowl's HTTP clients, set in one place
 * so that every client gets the same timeouts, protocols and TLS checks. */
#include "curlopt.h"

#include <errno.h>
#include <pthread.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int curl_init(void)
{
	pthread_once(&curl_once, curl_init_once);
	return curl_init_rc == CURLE_OK ? 0 : -ENOMEM;
}

void curl_set_common(CURL *c, const struct curl_io *io)
{
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "prowl/" PROWL_VERSION);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, io->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, io->connect_ms);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, io->errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, io->write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, io->ctx);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, io->progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, io->ctx);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, io->verify ? 1L : 0L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, io->verify ? 2L : 0L);
	if (io->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, io->ca_file);
}

/* url.c: checks and builds backend URLs with libcurl's URL API (curl_url) and its
 * percent-encoder, so that prowl and libcurl read every URL the same way. */
#include "url.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHY_SCHEME "use http:// or https:// followed by a host, e.g. https://profiles.example.com"
#define WHY_PORT   "the port must be a number from 1 to 65535"

/* Whether part is set in u; -ENOMEM when libcurl could not say. */
static int has_part(CURLU *u, CURLUPart part)
{
	char *v = NULL;
	CURLUcode rc = curl_url_get(u, part, &v, 0);

	curl_free(v);
	if (rc == CURLUE_OUT_OF_MEMORY)
		return -ENOMEM;
	return rc == CURLUE_OK;
}

/* What to do about a URL that curl_url_set() refused with rc. */
static const char *why_refused(const char *url, CURLUcode rc)
{
	switch (rc) {
	case CURLUE_NO_HOST:
		return "the URL has no host: use e.g. http://127.0.0.1:4040";
	case CURLUE_BAD_PORT_NUMBER:
		return WHY_PORT;
	case CURLUE_BAD_IPV6:
		return "the IPv6 host must be written [address], e.g. http://[::1]:4040";
	case CURLUE_BAD_HOSTNAME:
		if (strpbrk(url, " \t"))
			return "it must not contain spaces";
		return "the host is not a valid name or address";
	case CURLUE_MALFORMED_INPUT:
		if (strpbrk(url, " \t"))
			return "it must not contain spaces";
		return "it is not a valid URL: " WHY_SCHEME;
	default:
		return WHY_SCHEME;
	}
}

int url_check_base(const char *url, const char **ret_why)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *port = NULL;
	const char *why = NULL;
	CURLUcode rc;
	int r = 0;

	if (!u)
		return -ENOMEM;
	rc = curl_url_set(u, CURLUPART_URL, url, 0);
	if (rc == CURLUE_OUT_OF_MEMORY) {
		r = -ENOMEM;
		goto out;
	}
	if (rc != CURLUE_OK) {
		why = why_refused(url, rc);
		goto out;
	}
	rc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
	if (rc != CURLUE_OK || (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
		why = WHY_SCHEME;
		goto out;
	}
	if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK && strtoul(port, NULL, 10) == 0) {
		why = WHY_PORT;
		goto out;
	}
	r = has_part(u, CURLUPART_USER);
	if (r == 0)
		r = has_part(u, CURLUPART_PASSWORD);
	if (r != 0) {
		if (r > 0)
			why = "do not put credentials in the URL: use basic_user and basic_password";
		goto out;
	}
	r = has_part(u, CURLUPART_QUERY);
	if (r == 0)
		r = has_part(u, CURLUPART_FRAGMENT);
	if (r < 0)
		goto out;
	if (r > 0 || strpbrk(url, "?#")) /* libcurl forgets an empty "?" or "#" */
		why = "give the base URL, without a query or fragment";
out:
	curl_free(scheme);
	curl_free(port);
	curl_url_cleanup(u);
	if (r >= 0 && why) {
		*ret_why = why;
		return -EINVAL;
	}
	return r < 0 ? r : 0;
}

int url_join(const char *base, const char *path, char **ret)
{
	CURLU *u = curl_url();
	const char *q = strchr(path, '?');
	char *bpath = NULL, *full = NULL, *out = NULL;
	size_t blen;
	int r = -EINVAL;

	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, base, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &bpath, 0) != CURLUE_OK)
		goto out;
	/* "/" + "/ingest" is "/ingest"; "/prefix/" + "/ingest" is "/prefix/ingest". */
	blen = strlen(bpath);
	while (blen > 0 && bpath[blen - 1] == '/')
		blen--;
	if (asprintf(&full, "%.*s%.*s", (int)blen, bpath, (int)(q ? (size_t)(q - path) : strlen(path)), path) < 0) {
		full = NULL;
		r = -ENOMEM;
		goto out;
	}
	if (curl_url_set(u, CURLUPART_PATH, full, 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_QUERY, q && q[1] ? q + 1 : NULL, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &out, 0) != CURLUE_OK)
		goto out;
	*ret = strdup(out);
	r = *ret ? 0 : -ENOMEM;
out:
	curl_free(bpath);
	curl_free(out);
	free(full);
	curl_url_cleanup(u);
	return r;
}

char *url_escape(const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0), *copy;

	if (!e)
		return NULL;
	copy = strdup(e);
	curl_free(e);
	return copy;
}

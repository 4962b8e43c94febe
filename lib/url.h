/* url.h: backend URLs through libcurl's URL API (curl_url): the check of a base URL
 * that the configuration takes, and the request URLs built on it. */
#ifndef PROWL_URL_H
#define PROWL_URL_H

/* Checks a backend's base URL: http or https, a host, an optional port 1..65535, and
 * no credentials, query or fragment. Returns 0, -EINVAL with *ret_why set to what
 * to do (a static string), or -ENOMEM. */
int url_check_base(const char *url, const char **ret_why);

/* The URL of a request: base (checked by url_check_base) with path appended to its
 * own path ("/prefix" + "/ingest") and path's "?query" (already percent-encoded, see
 * url_escape) as the query. *ret is malloc'ed. Returns 0, -EINVAL or -ENOMEM. */
int url_join(const char *base, const char *path, char **ret);

/* s percent-encoded for a query value or a path segment (all but RFC 3986's
 * unreserved characters), malloc'ed; NULL when out of memory. */
char *url_escape(const char *s);

#endif

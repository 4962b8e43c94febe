/* test_url.c: unit tests of the URL helpers over libcurl's URL API: which base URLs
 * the configuration takes and why it refuses the others, request URLs, escaping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "url.h"

static void test_url_check_base(void **state)
{
	static const char *const ok[] = {
		"http://127.0.0.1:4040", "https://profiles.example.com", "HTTPS://Example.COM/prefix/",
		"http://[::1]:4318", "http://localhost:1", "http://h:65535/a/b",
	};
	static const struct { const char *in, *why; } bad[] = {
		{ "ftp://p:4040", "use http:// or https://" },
		{ "localhost:4040", "use http:// or https://" },
		{ "otel:4318", "use http:// or https://" },
		{ "http://", "the URL has no host" },
		{ "http://:80", "the URL has no host" },
		{ "https://h:99999", "the port must be a number from 1 to 65535" },
		{ "https://h:0", "the port must be a number from 1 to 65535" },
		{ "https://h:x", "the port must be a number from 1 to 65535" },
		{ "http://u:p@h", "do not put credentials in the URL" },
		{ "http://u@h", "do not put credentials in the URL" },
		{ "https://h/?a=b", "without a query or fragment" },
		{ "https://h/?", "without a query or fragment" },
		{ "https://h/#frag", "without a query or fragment" },
		{ "http://[::1", "the IPv6 host must be written [address]" },
		{ "http://h x/", "it must not contain spaces" },
		{ "", "use http:// or https://" },
	};
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (url_check_base(ok[i], &why) != 0)
			fail_msg("'%s' refused: %s", ok[i], why);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		if (url_check_base(bad[i].in, &why) != -EINVAL || !strstr(why, bad[i].why))
			fail_msg("'%s': got '%s', want '%s'", bad[i].in, why ? why : "(accepted)", bad[i].why);
	}
}

static void test_url_join(void **state)
{
	static const struct { const char *base, *path, *want; } cases[] = {
		{ "http://127.0.0.1:4040", "/ingest?name=a%20b&from=1", "http://127.0.0.1:4040/ingest?name=a%20b&from=1" },
		{ "http://127.0.0.1:4040/", "/ingest", "http://127.0.0.1:4040/ingest" },
		{ "https://h/pyro/", "/push.v1.PusherService/Push", "https://h/pyro/push.v1.PusherService/Push" },
		{ "https://h/pyro", "/api/profiles/writeraw", "https://h/pyro/api/profiles/writeraw" },
		{ "http://[::1]:4318", "/v1development/profiles", "http://[::1]:4318/v1development/profiles" },
	};
	char *url;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(url_join(cases[i].base, cases[i].path, &url), 0);
		assert_string_equal(url, cases[i].want);
		free(url);
	}
	assert_int_equal(url_join("not a url", "/x", &url), -EINVAL);
}

static void test_url_escape(void **state)
{
	char in[32], *e, *back;
	int n;

	(void)state;
	e = url_escape("svc{host_name=h,env=a b}/~-._");
	assert_string_equal(e, "svc%7Bhost_name%3Dh%2Cenv%3Da%20b%7D%2F~-._");
	free(e);
	/* Any bytes come back as they were through libcurl's own decoder. */
	srandom(7);
	for (int round = 0; round < 2000; round++) {
		size_t len = (size_t)(random() % 31);

		for (size_t i = 0; i < len; i++)
			in[i] = (char)(1 + random() % 255);
		in[len] = 0;
		e = url_escape(in);
		assert_non_null(e);
		assert_null(strpbrk(e, " &=?#/{}"));
		back = curl_easy_unescape(NULL, e, 0, &n);
		assert_int_equal((size_t)n, len);
		assert_memory_equal(back, in, len);
		curl_free(back);
		free(e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_url_check_base),
		cmocka_unit_test(test_url_join),
		cmocka_unit_test(test_url_escape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

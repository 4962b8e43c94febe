/* test_netaddr.c: unit tests of the one host:port parser: what it accepts and refuses,
 * that --check and the metrics endpoint's start agree on every value, dual stack. */
/* LINK: -Wl,--wrap=socket */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "metrics.h"
#include "netaddr.h"
#include "testutil.h"

/* --wrap=socket: lets a test play a kernel without IPv6 (ipv6.disable=1). */
int __real_socket(int domain, int type, int protocol);
static bool no_ipv6;

int __wrap_socket(int domain, int type, int protocol)
{
	if (no_ipv6 && domain == AF_INET6) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	return __real_socket(domain, type, protocol);
}

static const char *addr_text(const struct netaddr *a, char *buf, size_t n)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)&a->ss;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->ss;
	char ip[INET6_ADDRSTRLEN];

	if (a->ss.ss_family == AF_INET)
		snprintf(buf, n, "%s:%u", inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip)), ntohs(in->sin_port));
	else
		snprintf(buf, n, "[%s]:%u", inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip)), ntohs(in6->sin6_port));
	return buf;
}

static void test_parse_accepts(void **state)
{
	static const struct { const char *in, *want; bool any; } ok[] = {
		{ "127.0.0.1:9464", "127.0.0.1:9464", false },
		{ "0.0.0.0:1", "0.0.0.0:1", false },
		{ "[::1]:9464", "[::1]:9464", false },
		{ "[::]:65535", "[::]:65535", false },
		{ ":9464", "[::]:9464", true },
		{ "localhost:9464", "127.0.0.1:9464", false }, /* a name: its IPv4 address first */
	};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct netaddr a;
		const char *why = NULL;

		if (netaddr_parse(ok[i].in, &a, &why) != 0)
			fail_msg("'%s' refused: %s", ok[i].in, why);
		assert_string_equal(addr_text(&a, buf, sizeof(buf)), ok[i].want);
		assert_int_equal(a.any, ok[i].any);
	}
}

static void test_parse_refuses(void **state)
{
	static const struct { const char *in, *why; } bad[] = {
		{ "", "use host:port" },
		{ "localhost", "use host:port" },
		{ ":", "the port must be" },
		{ "127.0.0.1:", "the port must be" },
		{ "127.0.0.1:0", "the port must be" },
		{ "127.0.0.1:65536", "the port must be" },
		{ "127.0.0.1:+80", "the port must be" },
		{ "127.0.0.1:80x", "the port must be" },
		{ "[]:9464", "the brackets are empty" },
		{ "[::1:9464", "write an IPv6 address as [address]:port" },
		{ "[::1]9464", "write an IPv6 address as [address]:port" },
		{ "::1:9464", "write an IPv6 address as [address]:port" },
		{ "[127.0.0.1]:9464", "not an IPv6 address" },
		{ "[localhost]:9464", "not an IPv6 address" },
		{ "no-such-host.invalid:9464", "neither an address nor a name" },
		{ "a b:9464", "neither an address nor a name" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct netaddr a;
		const char *why = NULL;

		if (netaddr_parse(bad[i].in, &a, &why) != -EINVAL || !why || !strstr(why, bad[i].why))
			fail_msg("'%s': got '%s', wanted '%s'", bad[i].in, why ? why : "(accepted)", bad[i].why);
	}
}

/* The host's own name is resolved as getaddrinfo() resolves it, or refused when it
 * does not resolve: never refused by the syntax alone. */
static void test_own_hostname(void **state)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	char host[256], in[300], buf[64], want[80];
	struct netaddr a;
	const char *why = NULL;
	int r;

	(void)state;
	assert_int_equal(gethostname(host, sizeof(host)), 0);
	snprintf(in, sizeof(in), "%s:9464", host);
	r = netaddr_parse(in, &a, &why);
	if (getaddrinfo(host, "9464", &hints, &res) != 0) {
		assert_int_equal(r, -EINVAL); /* e.g. a name only DNS knows, and no DNS */
		return;
	}
	assert_int_equal(r, 0);
	inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, buf, sizeof(buf));
	snprintf(want, sizeof(want), "%s:9464", buf);
	freeaddrinfo(res);
	assert_string_equal(addr_text(&a, buf, sizeof(buf)), want);
}

/* A port that is free on every IPv4 and IPv6 address just now. */
static unsigned int free_port(void)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6 };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET6, SOCK_STREAM, 0), zero = 0;

	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)), 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin6_port);
}

/* GET /healthz over a real connection to ip:port; returns the HTTP status or -errno. */
static int healthz(const char *ip, unsigned int port)
{
	struct sockaddr_storage ss = {};
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	char reply[256] = "";
	int fd, status = -EPROTO, r;

	if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons(port);
	} else {
		assert_int_equal(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	r = connect(fd, (struct sockaddr *)&ss, ss.ss_family == AF_INET ? sizeof(*in) : sizeof(*in6));
	if (r < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	assert_true(write(fd, "GET /healthz HTTP/1.0\r\n\r\n", 25) == 25);
	for (size_t n = 0; n < sizeof(reply) - 1;) {
		ssize_t k = read(fd, reply + n, sizeof(reply) - 1 - n);

		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	sscanf(reply, "HTTP/1.%*d %d", &status);
	return status;
}

static void render(void *ctx, FILE *f) { (void)ctx; fputs("x 1\n", f); }
static bool healthy(void *ctx, FILE *f) { (void)ctx; (void)f; return true; }

/* The reason after "invalid ... address 'X': " in one error line, without the hint. */
static char *reason(const char *err, char *buf, size_t n)
{
	const char *p = strstr(err, "': ");
	size_t len;

	if (!p)
		return strncpy(buf, "(no reason)", n);
	p += 3;
	len = strcspn(p, "\n");
	if (strstr(p, " (see '") && (size_t)(strstr(p, " (see '") - p) < len)
		len = (size_t)(strstr(p, " (see '") - p);
	snprintf(buf, n, "%.*s", (int)len, p);
	return buf;
}

/* `prowl agent --check --metrics-address X` and the endpoint's start with X accept
 * and refuse the same values, for the same reason; what both accept answers. */
static void test_check_and_start_agree(void **state)
{
	/* fmt takes the port; NULL stands for the host's own name (vm:9464). */
	static const struct { const char *fmt, *connect[2]; bool ok; } cases[] = {
		{ NULL, {}, true },
		{ "localhost:%u", { "127.0.0.1" }, true },
		{ "[::1]:%u", { "::1" }, true },               /* an IPv6 literal */
		{ ":%u", { "::1", "127.0.0.1" }, true },       /* every interface, both families */
		{ "127.0.0.1:%u", { "127.0.0.1" }, true },
		{ "127.0.0.1:99999", {}, false },              /* a bad port */
		{ "127.0.0.1:0", {}, false },
		{ "[]:%u", {}, false },                        /* an empty host */
		{ "localhost", {}, false },
		{ "no-such-host.invalid:%u", {}, false },
		{ "[::1:%u", {}, false },
	};
	char host[256], own_ip[INET6_ADDRSTRLEN] = "", probe[300];
	struct netaddr own;
	const char *why;

	(void)state;
	assert_int_equal(gethostname(host, sizeof(host)), 0);
	/* Where the host's own name leads (test_own_hostname checks that part). */
	snprintf(probe, sizeof(probe), "%s:1", host);
	if (netaddr_parse(probe, &own, &why) == 0)
		inet_ntop(own.ss.ss_family,
			  own.ss.ss_family == AF_INET ? (void *)&((struct sockaddr_in *)&own.ss)->sin_addr
						      : (void *)&((struct sockaddr_in6 *)&own.ss)->sin6_addr,
			  own_ip, sizeof(own_ip));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned int port = free_port();
		char addr[300], why_check[300], why_start[300];
		char *argv[] = { "agent", "--metrics-address", addr, NULL };
		static char *env[] = { NULL };
		struct agent_config c = {};
		struct metrics_server *m = NULL;
		char *err;
		int r_check, r_start;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-extra-args"
		if (cases[i].fmt)
			snprintf(addr, sizeof(addr), cases[i].fmt, port);
		else
			snprintf(addr, sizeof(addr), "%s:%u", host, port);
#pragma GCC diagnostic pop
		capture_begin();
		r_check = agent_config_load(3, argv, env, &c);
		reason(err = capture_end(), why_check, sizeof(why_check));
		free(err);
		if (r_check == 0)
			agent_config_free(&c);
		capture_begin();
		r_start = metrics_server_start(addr, render, healthy, NULL, &m);
		reason(err = capture_end(), why_start, sizeof(why_start));
		free(err);
		if ((r_check == 0) != (r_start == 0) || (r_check == 0) != (cases[i].fmt ? cases[i].ok : !!own_ip[0]))
			fail_msg("'%s': --check %s (%s), start %s (%s), wanted %s", addr, r_check ? "refused" : "accepted",
				 why_check, r_start ? "refused" : "accepted", why_start, cases[i].ok ? "both accept" : "both refuse");
		if (r_check != 0)
			assert_string_equal(why_check, why_start);
		for (size_t k = 0; k < 2 && r_start == 0 && (cases[i].connect[k] || (!k && !cases[i].fmt)); k++) {
			const char *ip = cases[i].fmt ? cases[i].connect[k] : own_ip;
			int status = healthz(ip, port);

			if (status != 200)
				fail_msg("'%s': GET /healthz via %s: %d", addr, ip, status);
		}
		metrics_server_stop(m);
	}
}

/* ":PORT" on a kernel without IPv6: every IPv4 interface instead. */
static void test_any_without_ipv6(void **state)
{
	unsigned int port = free_port();
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct netaddr a;
	const char *why;
	char addr[16];
	int fd;

	(void)state;
	snprintf(addr, sizeof(addr), ":%u", port);
	assert_int_equal(netaddr_parse(addr, &a, &why), 0);
	no_ipv6 = true;
	fd = netaddr_listen(&a, 4);
	no_ipv6 = false;
	assert_true(fd >= 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(((struct sockaddr_in *)&ss)->sin_addr.s_addr, htonl(INADDR_ANY));
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), port);
	close(fd);
	/* With IPv6 there, one socket takes both. */
	fd = netaddr_listen(&a, 4);
	assert_true(fd >= 0);
	len = sizeof(ss);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_accepts),
		cmocka_unit_test(test_parse_refuses),
		cmocka_unit_test(test_own_hostname),
		cmocka_unit_test(test_check_and_start_agree),
		cmocka_unit_test(test_any_without_ipv6),
	};

	log_set_prefix("prowl");
	log_set_format(LOG_FMT_PLAIN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

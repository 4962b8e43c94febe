/* netaddr.c: parses and resolves "host:port" listen addresses once for every caller,
 * and opens the listening socket (dual stack for ":port"). */
#include "netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "parse.h"

#define WHY_FORM "use host:port, e.g. 127.0.0.1:9464, [::1]:9464 or :9464 (all interfaces)"

/* Resolves host (a name or an address without brackets) into a; prefers IPv4. */
static int resolve(const char *host, uint16_t port, bool v6_only, struct netaddr *a, const char **ret_why)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL, *pick = NULL;
	int rc;

	hints.ai_family = v6_only ? AF_INET6 : AF_UNSPEC;
	if (v6_only)
		hints.ai_flags = AI_NUMERICHOST;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc != 0) {
		if (v6_only || rc == EAI_ADDRFAMILY || rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_FAIL) {
			*ret_why = v6_only ? "the address in [] is not an IPv6 address" :
					     "the host is neither an address nor a name this host resolves: " WHY_FORM;
			return -EINVAL;
		}
		*ret_why = "the host name cannot be resolved now (name service unavailable): use an IP address";
		return -EINVAL;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET) {
			pick = ai;
			break;
		}
		if (ai->ai_family == AF_INET6 && !pick)
			pick = ai;
	}
	if (!pick || pick->ai_addrlen > sizeof(a->ss)) {
		freeaddrinfo(res);
		*ret_why = "the host has no IPv4 or IPv6 address: " WHY_FORM;
		return -EINVAL;
	}
	memcpy(&a->ss, pick->ai_addr, pick->ai_addrlen);
	a->len = pick->ai_addrlen;
	if (pick->ai_family == AF_INET)
		((struct sockaddr_in *)&a->ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&a->ss)->sin6_port = htons(port);
	freeaddrinfo(res);
	return 0;
}

int netaddr_parse(const char *s, struct netaddr *ret, const char **ret_why)
{
	char host[256];
	const char *colon, *h = s;
	size_t hlen;
	uint64_t port;
	bool bracket = s[0] == '[';

	*ret = (struct netaddr){};
	if (bracket) {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':') {
			*ret_why = "write an IPv6 address as [address]:port, e.g. [::1]:9464";
			return -EINVAL;
		}
		h = s + 1;
		hlen = (size_t)(end - h);
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon) {
			*ret_why = WHY_FORM;
			return -EINVAL;
		}
		hlen = (size_t)(colon - s);
		if (memchr(s, ':', hlen)) {
			*ret_why = "write an IPv6 address as [address]:port, e.g. [::1]:9464";
			return -EINVAL;
		}
	}
	if (parse_u64_range(colon + 1, 1, 65535, &port) < 0) {
		*ret_why = "the port must be a number from 1 to 65535";
		return -EINVAL;
	}
	if (hlen >= sizeof(host)) {
		*ret_why = "the host name is too long";
		return -EINVAL;
	}
	memcpy(host, h, hlen);
	host[hlen] = 0;
	if (!hlen && bracket) {
		*ret_why = "the brackets are empty: use [::]:PORT for every IPv6 address, or :PORT";
		return -EINVAL;
	}
	if (!hlen) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ret->ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_any;
		in6->sin6_port = htons((uint16_t)port);
		ret->len = sizeof(*in6);
		ret->any = true;
		return 0;
	}
	return resolve(host, (uint16_t)port, bracket, ret, ret_why);
}

static int listen_on(const struct sockaddr *sa, socklen_t len, bool dual, int backlog)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, zero = 0, r;

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (sa->sa_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual ? &zero : &one, sizeof(int)) < 0) ||
	    bind(fd, sa, len) < 0 || listen(fd, backlog) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

int netaddr_listen(const struct netaddr *a, int backlog)
{
	struct sockaddr_in in4 = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	int fd;

	fd = listen_on((const struct sockaddr *)&a->ss, a->len, a->any, backlog);
	if (!a->any || (fd != -EAFNOSUPPORT && fd != -EADDRNOTAVAIL))
		return fd;
	/* A kernel without IPv6 (ipv6.disable=1): every IPv4 interface it is. */
	in4.sin_port = ((const struct sockaddr_in6 *)&a->ss)->sin6_port;
	return listen_on((const struct sockaddr *)&in4, sizeof(in4), false, backlog);
}

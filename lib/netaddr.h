/* netaddr.h: the one parser of "host:port" listen addresses, used by the config check
 * and by the metrics endpoint's start alike, and the listening socket made from it. */
#ifndef PROWL_NETADDR_H
#define PROWL_NETADDR_H

#include <stdbool.h>
#include <sys/socket.h>

struct netaddr {
	struct sockaddr_storage ss; /* the address to bind; for ":PORT", [::]:PORT */
	socklen_t len;
	bool any; /* ":PORT": every interface, IPv6 and IPv4 (dual stack) */
};

/* Parses "HOST:PORT", "[IPV6]:PORT" or ":PORT" with PORT 1..65535. HOST is an IPv4
 * address, or a name resolved with getaddrinfo() (an IPv4 address is taken before an
 * IPv6 one). Returns 0, or -EINVAL with *ret_why saying what is wrong (a static
 * string). The same input gives the same answer wherever it is parsed. */
int netaddr_parse(const char *s, struct netaddr *ret, const char **ret_why);

/* A listening TCP socket (SOCK_CLOEXEC, SO_REUSEADDR) bound to a. For a->any it is an
 * IPv6 socket that takes IPv4 too (IPV6_V6ONLY off), or, on a host without IPv6, an
 * IPv4 socket on 0.0.0.0. Returns the fd or a negative errno. */
int netaddr_listen(const struct netaddr *a, int backlog);

#endif

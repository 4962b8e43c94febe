/* parse.c: strict value parsers shared by the CLI and the configuration file.
 * Every parser consumes its whole input or fails with -EINVAL / -ERANGE. */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array_size.h"
#include "clock.h"

/* The decimal number s starts with (it must start with a digit: no sign, no
 * space); *end is set past it. Returns 0, -EINVAL or -ERANGE. */
static int parse_leading_u64(const char *s, unsigned long long *v, char **end)
{
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, end, 10);
	return errno ? -ERANGE : 0;
}

int parse_u64_range(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	unsigned long long v;
	char *end;
	int r;

	r = parse_leading_u64(s, &v, &end);
	if (r < 0)
		return r;
	if (*end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

int parse_duration_ns(const char *s, uint64_t *ret)
{
	static const struct { const char *suffix; uint64_t ns; } units[] = {
		{ "ms", NSEC_PER_MSEC }, { "s", NSEC_PER_SEC }, { "m", 60 * NSEC_PER_SEC }, { "h", 3600 * NSEC_PER_SEC },
	};
	uint64_t total = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	while (*p) {
		unsigned long long v;
		double frac = 0;
		char *end;
		size_t i;
		int r;

		r = parse_leading_u64(p, &v, &end);
		if (r < 0)
			return r;
		if (*end == '.') {
			char *fend;

			frac = strtod(end, &fend);
			if (fend == end + 1)
				return -EINVAL;
			end = fend;
		}
		p = end;
		if (!*p) {
			/* A bare number means seconds, and only on its own. */
			if (p == s + strlen(s) && total == 0 && end != s) {
				total = (uint64_t)((v + frac) * 1e9);
				break;
			}
			return -EINVAL;
		}
		for (i = 0; i < ARRAY_SIZE(units); i++) {
			size_t n = strlen(units[i].suffix);

			if (strncmp(p, units[i].suffix, n) == 0 && !isalpha((unsigned char)p[n]))
				break;
		}
		if (i == ARRAY_SIZE(units))
			return -EINVAL;
		if (v > UINT64_MAX / units[i].ns)
			return -ERANGE;
		total += v * units[i].ns + (uint64_t)(frac * units[i].ns);
		p += strlen(units[i].suffix);
	}
	if (total == 0)
		return -ERANGE;
	*ret = total;
	return 0;
}

int parse_pid_list(const char *s, uint32_t **pids, size_t *n)
{
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	while (*p) {
		char buf[16];
		size_t len = strcspn(p, ",");
		uint64_t v;
		uint32_t *np;
		int r;

		if (len == 0 || len >= sizeof(buf))
			return -EINVAL;
		memcpy(buf, p, len);
		buf[len] = 0;
		r = parse_u64_range(buf, 1, 0x3fffffff, &v);
		if (r < 0)
			return r;
		np = realloc(*pids, (*n + 1) * sizeof(**pids));
		if (!np)
			return -ENOMEM;
		*pids = np;
		(*pids)[(*n)++] = (uint32_t)v;
		p += len;
		if (*p == ',' && !*++p)
			return -EINVAL;
	}
	return 0;
}

int parse_size_bytes(const char *s, uint64_t *ret)
{
	static const struct { const char *suffix; uint64_t mult; } units[] = {
		{ "", 1 }, { "B", 1 }, { "k", 1ull << 10 }, { "K", 1ull << 10 }, { "KB", 1ull << 10 },
		{ "KiB", 1ull << 10 }, { "M", 1ull << 20 }, { "MB", 1ull << 20 }, { "MiB", 1ull << 20 },
		{ "G", 1ull << 30 }, { "GB", 1ull << 30 }, { "GiB", 1ull << 30 },
		{ "T", 1ull << 40 }, { "TB", 1ull << 40 }, { "TiB", 1ull << 40 },
	};
	unsigned long long v;
	char *end;
	int r;

	r = parse_leading_u64(s, &v, &end);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			if (v > UINT64_MAX / units[i].mult)
				return -ERANGE;
			*ret = v * units[i].mult;
			return 0;
		}
	}
	return -EINVAL;
}

bool valid_label_name(const char *s)
{
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* timespec.c: strict parsers and formatters for the time points and ranges of
 * report and diff; every form consumes its whole input or fails with -EINVAL. */
#include "analyse/timespec.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "parse.h"


/* Exactly n digits at *p, advancing it; -1 when they are not there. */
static int digits(const char **p, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return -1;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	return v;
}

/* "HH:MM[:SS[.frac]]" into tm and *frac_ns. */
static int parse_clock(const char **p, struct tm *tm, int64_t *frac_ns)
{
	int h = digits(p, 2), m;

	if (h < 0 || h > 23 || **p != ':')
		return -EINVAL;
	(*p)++;
	m = digits(p, 2);
	if (m < 0 || m > 59)
		return -EINVAL;
	tm->tm_hour = h;
	tm->tm_min = m;
	tm->tm_sec = 0;
	*frac_ns = 0;
	if (**p != ':')
		return 0;
	(*p)++;
	tm->tm_sec = digits(p, 2);
	if (tm->tm_sec < 0 || tm->tm_sec > 60)
		return -EINVAL;
	if (**p == '.') {
		int64_t scale = NSEC_PER_SEC / 10;

		(*p)++;
		if (!isdigit((unsigned char)**p))
			return -EINVAL;
		for (; isdigit((unsigned char)**p); (*p)++, scale /= 10)
			*frac_ns += (**p - '0') * scale;
	}
	return 0;
}

static int local_to_ns(struct tm *tm, int64_t frac, int64_t *ret)
{
	time_t t;

	tm->tm_isdst = -1;
	t = mktime(tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*ret = (int64_t)t * NSEC_PER_SEC + frac;
	return 0;
}

static int parse_date_time(const char *s, int64_t *ret)
{
	const char *p = s;
	struct tm tm = {};
	int64_t frac;
	int y, mo, d, off = 0;
	time_t t;

	y = digits(&p, 4);
	if (y < 1970 || *p++ != '-')
		return -EINVAL;
	mo = digits(&p, 2);
	if (mo < 1 || mo > 12 || *p++ != '-')
		return -EINVAL;
	d = digits(&p, 2);
	if (d < 1 || d > 31 || (*p != 'T' && *p != 't' && *p != ' '))
		return -EINVAL;
	p++;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	if (parse_clock(&p, &tm, &frac) < 0)
		return -EINVAL;
	if (!*p)
		return local_to_ns(&tm, frac, ret);
	if ((*p == 'Z' || *p == 'z') && !p[1]) {
		off = 0;
	} else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
		const char *q = p + 1;
		int oh = digits(&q, 2), om;

		q++;
		om = digits(&q, 2);
		if (oh < 0 || oh > 23 || om < 0 || om > 59)
			return -EINVAL;
		off = (oh * 60 + om) * 60 * (*p == '-' ? -1 : 1);
	} else {
		return -EINVAL;
	}
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*ret = ((int64_t)t - off) * NSEC_PER_SEC + frac;
	return 0;
}

static bool is_clock_time(const char *s)
{
	return isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[1]) && s[2] == ':';
}

/* Clock time s on the local day of day_ns, moved by days (a struct tm's day, so that
 * a change of daylight saving time between keeps the clock time). */
static int clock_on_day(const char *s, int64_t day_ns, int days, int64_t *ret_ns)
{
	time_t day = (time_t)(day_ns / NSEC_PER_SEC);
	const char *p = s;
	struct tm tm;
	int64_t frac;

	localtime_r(&day, &tm);
	if (parse_clock(&p, &tm, &frac) < 0 || *p)
		return -EINVAL;
	tm.tm_mday += days;
	return local_to_ns(&tm, frac, ret_ns);
}

int time_parse(const char *s, int64_t now_ns, int64_t *ret_ns)
{
	uint64_t d;

	if (!s || !*s)
		return -EINVAL;
	if (strcmp(s, "now") == 0) {
		*ret_ns = now_ns;
		return 0;
	}
	if (s[0] == '-') {
		if (parse_duration_ns(s + 1, &d) < 0 || d > (uint64_t)now_ns)
			return -EINVAL;
		*ret_ns = now_ns - (int64_t)d;
		return 0;
	}
	if (is_clock_time(s)) {
		if (clock_on_day(s, now_ns, 0, ret_ns) < 0)
			return -EINVAL;
		/* A clock time still ahead means the last one: yesterday's. */
		if (*ret_ns > now_ns + 60 * NSEC_PER_SEC)
			return clock_on_day(s, now_ns, -1, ret_ns);
		return 0;
	}
	return parse_date_time(s, ret_ns);
}

int time_parse_end(const char *s, int64_t now_ns, int64_t from_ns, int64_t *ret_ns)
{
	if (!s || !is_clock_time(s) || from_ns == INT64_MIN)
		return time_parse(s, now_ns, ret_ns);
	if (clock_on_day(s, from_ns, 0, ret_ns) < 0)
		return -EINVAL;
	if (*ret_ns <= from_ns)
		return clock_on_day(s, from_ns, 1, ret_ns);
	return 0;
}

int time_range_parse(const char *s, int64_t now_ns, int64_t *ret_from, int64_t *ret_to)
{
	const char *dots = s ? strstr(s, "..") : NULL;
	char from[128];
	size_t n;

	if (!dots || (size_t)(dots - s) >= sizeof(from))
		return -EINVAL;
	n = (size_t)(dots - s);
	memcpy(from, s, n);
	from[n] = 0;
	*ret_from = INT64_MIN;
	*ret_to = now_ns;
	if (n && time_parse(from, now_ns, ret_from) < 0)
		return -EINVAL;
	if (dots[2] && time_parse_end(dots + 2, now_ns, *ret_from, ret_to) < 0)
		return -EINVAL;
	return *ret_from < *ret_to ? 0 : -EINVAL;
}

/* strftime of ns (clamped at the epoch) in local time or UTC; returns the length. */
static size_t format_at(int64_t ns, bool utc, const char *fmt, char *buf, size_t n, struct tm *tm)
{
	time_t t = (time_t)((ns < 0 ? 0 : ns) / NSEC_PER_SEC);

	if (utc)
		gmtime_r(&t, tm);
	else
		localtime_r(&t, tm);
	return strftime(buf, n, fmt, tm);
}

static int millis(int64_t ns)
{
	return ns < 0 ? 0 : (int)(ns % NSEC_PER_SEC / NSEC_PER_MSEC);
}

void time_format_local(int64_t ns, int ms, char *buf, size_t n)
{
	struct tm tm;
	size_t len = format_at(ns, false, "%Y-%m-%d %H:%M:%S", buf, n, &tm);

	if (ms && len)
		len += (size_t)snprintf(buf + len, n - len, ".%03d", millis(ns));
	if (len && len < n)
		strftime(buf + len, n - len, " %Z", &tm);
}

void time_format_utc(int64_t ns, char *buf, size_t n)
{
	struct tm tm;
	size_t len = format_at(ns, true, "%Y-%m-%dT%H:%M:%S", buf, n, &tm);

	if (len)
		snprintf(buf + len, n - len, ".%03dZ", millis(ns));
}

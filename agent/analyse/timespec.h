/* timespec.h: the times `prowl report` and `prowl diff` select windows by:
 * RFC 3339, a local date and time or HH:MM, relative (-1h), and FROM..TO ranges. */
#ifndef PROWL_TIMESPEC_H
#define PROWL_TIMESPEC_H

#include <stddef.h>
#include <stdint.h>

/* Accepts "now"; "-DURATION" before now ("-1h", "-90s", "-1h30m");
 * "2024-05-01T10:00:00Z", "...T10:00:00.5+02:00" (RFC 3339); the same without a
 * zone, or with a space for the T, or without seconds, in local time; "HH:MM" or
 * "HH:MM:SS" local time today, or yesterday when that is still ahead of now.
 * Returns nanoseconds since the epoch, or -EINVAL. */
int time_parse(const char *s, int64_t now_ns, int64_t *ret_ns);
/* The end of a range that starts at from_ns (INT64_MIN: no start): as time_parse, but
 * "HH:MM" is the first such time after from_ns, ahead of now or not ("--from 09:00
 * --to 10:00" at 09:30 is today's hour; "23:00..01:00" crosses midnight). */
int time_parse_end(const char *s, int64_t now_ns, int64_t from_ns, int64_t *ret_ns);
/* "FROM..TO" (TO read by time_parse_end); an empty FROM is the beginning of time, an empty TO is now.
 * -EINVAL also when FROM is not before TO. */
int time_range_parse(const char *s, int64_t now_ns, int64_t *ret_from, int64_t *ret_to);
/* Local "2024-05-01 10:00:00 CEST" (".123" after the seconds when ms is set). */
void time_format_local(int64_t ns, int ms, char *buf, size_t n);
/* UTC RFC 3339 with milliseconds: "2024-05-01T08:00:00.000Z". */
void time_format_utc(int64_t ns, char *buf, size_t n);

#endif

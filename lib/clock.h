/* clock.h: the clocks prowl reads, as nanoseconds: monotonic for intervals and
 * deadlines, realtime (wall clock) for what is stamped on profiles and files. */
#ifndef PROWL_CLOCK_H
#define PROWL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* The one set of time constants (int64_t, so that signed arithmetic stays signed). */
#define NSEC_PER_SEC  INT64_C(1000000000)
#define NSEC_PER_MSEC INT64_C(1000000)
#define NSEC_PER_USEC INT64_C(1000)

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t clock_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* CLOCK_REALTIME in nanoseconds since the Unix epoch. */
static inline int64_t clock_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

/* A struct timespec (a file's st_mtim) in nanoseconds. */
static inline int64_t timespec_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

#endif

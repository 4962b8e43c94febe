/* extent.c: first-fit allocation over a sorted, coalesced free list, plus a limbo
 * list that holds freed extents for a grace period before they can be reused. */
#include "extent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

int extent_init(struct extent_space *s, uint32_t total, uint64_t grace_ns)
{
	memset(s, 0, sizeof(*s));
	s->grace_ns = grace_ns;
	s->free = malloc(sizeof(*s->free) * 16);
	if (!s->free)
		return -ENOMEM;
	s->capfree = 16;
	s->total = total;
	if (total)
		s->free[s->nfree++] = (struct extent){ 0, total, 0 };
	return 0;
}

void extent_fini(struct extent_space *s)
{
	free(s->free);
	free(s->limbo);
	memset(s, 0, sizeof(*s));
}

int extent_alloc(struct extent_space *s, uint32_t len, uint32_t *ret)
{
	for (size_t i = 0; i < s->nfree; i++) {
		if (s->free[i].len < len)
			continue;
		*ret = s->free[i].start;
		s->free[i].start += len;
		s->free[i].len -= len;
		if (!s->free[i].len) {
			memmove(&s->free[i], &s->free[i + 1], (s->nfree - i - 1) * sizeof(*s->free));
			s->nfree--;
		}
		s->used += len;
		return 0;
	}
	return -ENOSPC;
}

int extent_release(struct extent_space *s, uint32_t start, uint32_t len)
{
	size_t i = 0;

	while (i < s->nfree && s->free[i].start < start)
		i++;
	/* Merge with the previous and/or next free extent. */
	if (i > 0 && s->free[i - 1].start + s->free[i - 1].len == start) {
		s->free[i - 1].len += len;
		if (i < s->nfree && start + len == s->free[i].start) {
			s->free[i - 1].len += s->free[i].len;
			memmove(&s->free[i], &s->free[i + 1], (s->nfree - i - 1) * sizeof(*s->free));
			s->nfree--;
		}
	} else if (i < s->nfree && start + len == s->free[i].start) {
		s->free[i].start = start;
		s->free[i].len += len;
	} else {
		if (s->nfree == s->capfree) {
			struct extent *v = realloc(s->free, 2 * s->capfree * sizeof(*v));

			if (!v)
				return -ENOMEM; /* the space is lost, not corrupted */
			s->free = v;
			s->capfree *= 2;
		}
		memmove(&s->free[i + 1], &s->free[i], (s->nfree - i) * sizeof(*s->free));
		s->free[i] = (struct extent){ start, len, 0 };
		s->nfree++;
	}
	s->used -= len;
	return 0;
}

void extent_defer(struct extent_space *s, uint32_t start, uint32_t len)
{
	if (!len)
		return;
	if (s->nlimbo == s->caplimbo) {
		size_t cap = s->caplimbo ? s->caplimbo * 2 : 16;
		struct extent *v = realloc(s->limbo, cap * sizeof(*v));

		if (!v) { /* no memory for the list: release now, the race is tiny */
			extent_release(s, start, len);
			return;
		}
		s->limbo = v;
		s->caplimbo = cap;
	}
	s->limbo[s->nlimbo++] = (struct extent){ start, len, clock_mono_ns() };
}

size_t extent_reclaim(struct extent_space *s, bool wait)
{
	uint64_t now = clock_mono_ns();
	size_t j = 0, n = 0;

	if (wait && s->nlimbo) {
		uint64_t newest = 0;

		for (size_t i = 0; i < s->nlimbo; i++)
			if (s->limbo[i].freed_ns > newest)
				newest = s->limbo[i].freed_ns;
		if (newest + s->grace_ns > now) {
			uint64_t ns = newest + s->grace_ns - now;
			struct timespec ts = { (time_t)(ns / NSEC_PER_SEC), (long)(ns % NSEC_PER_SEC) };

			nanosleep(&ts, NULL);
		}
		now = clock_mono_ns();
	}
	for (size_t i = 0; i < s->nlimbo; i++) {
		if (s->limbo[i].freed_ns + s->grace_ns <= now) {
			extent_release(s, s->limbo[i].start, s->limbo[i].len);
			n++;
		} else {
			s->limbo[j++] = s->limbo[i];
		}
	}
	s->nlimbo = j;
	return n;
}

/* first.c: the first of the two source files of libtrunc.so (see trunc_attack.c): the
 * code that runs before the library file is truncated. */
#include <stdint.h>

static volatile uint64_t sink;

__attribute__((noinline)) uint64_t trunc_first_inner(uint64_t x)
{
	for (int i = 0; i < 20000; i++)
		x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ull + (uint64_t)i;
	return x;
}

__attribute__((noinline)) void trunc_first_work(int rounds)
{
	uint64_t x = sink;

	for (int i = 0; i < rounds; i++)
		x = trunc_first_inner(x);
	sink = x;
}

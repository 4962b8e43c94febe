/* unw_plugin.c: a shared object that unw_dlopen loads with dlopen(): the CPU
 * time is spent in plugin_inner, called by plugin_work. -O2, no frame pointers. */
/* BUILD: -O2 -g -shared -fPIC */
#include <stdint.h>

static volatile uint64_t sink;

__attribute__((noinline)) uint64_t plugin_inner(uint64_t x)
{
	for (int i = 0; i < 100000; i++)
		x = (x ^ (x >> 27)) * 0x94d049bb133111ebull + (uint64_t)i;
	return x;
}

__attribute__((noinline)) void plugin_work(int rounds)
{
	uint64_t x = sink;

	for (int i = 0; i < rounds; i++)
		x = plugin_inner(x);
	sink = x;
}

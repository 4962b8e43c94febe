/* cpp_hot.cpp: a C++ workload for demangling: half its time in std::sort over a
 * vector<long>, half in a member function of a class template. Usage: cpp_hot SECONDS */
/* BUILD: -O2 -g */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace shop {
template <typename T> struct Cart {
	std::vector<T> items;

	__attribute__((noinline)) T total() const
	{
		T s = 0;
		for (T x : items)
			s += x * x % 7;
		return s;
	}
};
} // namespace shop

static volatile long sink;

int main(int argc, char **argv)
{
	using clock = std::chrono::steady_clock;
	double seconds = argc > 1 ? atof(argv[1]) : 10;
	auto end = clock::now() + std::chrono::duration<double>(seconds);
	std::mt19937_64 rng(1);
	shop::Cart<long> cart;
	std::vector<long> v(200000);

	cart.items.assign(200000, 3);
	while (clock::now() < end) {
		/* Half a slice each, by the clock: the split is the design. */
		auto half = clock::now() + std::chrono::milliseconds(10);
		while (clock::now() < half) {
			for (auto &x : v)
				x = (long)(rng() >> 1);
			std::sort(v.begin(), v.end());
			sink = v[v.size() / 2];
		}
		half = clock::now() + std::chrono::milliseconds(10);
		while (clock::now() < half)
			sink = cart.total();
	}
	printf("cpp_hot: done\n");
	return 0;
}

/* jitspin.c: "JIT" code without a runtime: copies a spin loop into anonymous executable
 * memory at JITSPIN_ADDR, prints that address (hex, one line) and runs there for S seconds
 * (SIGALRM ends it). Perf-map tests write the map that names it, or an attacker does.
 * Usage: jitspin [SECONDS]   (default 10) */
/* BUILD: -O2 -g */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define JITSPIN_ADDR 0x200000000000ul

int main(int argc, char **argv)
{
#if defined(__x86_64__)
	static const unsigned char loop[] = { 0x48, 0xff, 0xc0, 0xeb, 0xfb }; /* 1: inc %rax; jmp 1b */
#elif defined(__aarch64__)
	static const unsigned char loop[] = { 0x00, 0x04, 0x00, 0x91, 0xff, 0xff, 0xff, 0x17 }; /* add x0,x0,1; b .-4 */
#else
#error "jitspin: no loop for this architecture"
#endif
	unsigned seconds = argc > 1 ? (unsigned)atoi(argv[1]) : 10;
	void *code = mmap((void *)JITSPIN_ADDR, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			  -1, 0);

	if (code == MAP_FAILED || code != (void *)JITSPIN_ADDR) {
		perror("jitspin: mmap");
		return 1;
	}
	memcpy(code, loop, sizeof(loop));
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC) < 0) {
		perror("jitspin: mprotect");
		return 1;
	}
	printf("%lx\n", JITSPIN_ADDR);
	fflush(stdout);
	alarm(seconds);
	((void (*)(void))code)();
	return 0;
}

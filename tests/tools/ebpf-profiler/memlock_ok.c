/* memlock_ok.c: runs a command whose setrlimit/prlimit64 calls on RLIMIT_MEMLOCK succeed
 * without effect (a seccomp filter answers 0), for hosts without CAP_SYS_RESOURCE.
 * The OpenTelemetry eBPF profiler stops when it cannot raise that limit to infinity, though
 * kernels >= 5.11 charge BPF memory to the memory cgroup, not to it (make bench-peers).
 * Usage: memlock_ok COMMAND [ARG...] */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARG0 offsetof(struct seccomp_data, args[0])
#define ARG1 offsetof(struct seccomp_data, args[1])

int main(int argc, char **argv)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setrlimit, 0, 2),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0),              /* setrlimit(resource, ...) */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, RLIMIT_MEMLOCK, 3, 4),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prlimit64, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG1),              /* prlimit64(pid, resource, ...) */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, RLIMIT_MEMLOCK, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0),      /* "done": returns 0 */
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (argc < 2) {
		fprintf(stderr, "usage: memlock_ok COMMAND [ARG...]\n");
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		fprintf(stderr, "memlock_ok: seccomp: %s\n", strerror(errno));
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "memlock_ok: %s: %s\n", argv[1], strerror(errno));
	return 127;
}

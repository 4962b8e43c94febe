/* kfeatures.h: what the running kernel's BPF can do, probed once at start-up, and
 * which of the sampler's BPF programs it can therefore load. */
#ifndef PROWL_KFEATURES_H
#define PROWL_KFEATURES_H

#include <stdbool.h>

enum kfeature {
	KF_BTF = 0,      /* /sys/kernel/btf/vmlinux */
	KF_PERF_EVENT,   /* BPF_PROG_TYPE_PERF_EVENT */
	KF_RINGBUF,      /* BPF_MAP_TYPE_RINGBUF */
	KF_MMAP_ARRAY,   /* BPF_F_MMAPABLE arrays */
	KF_TP_BTF,       /* BPF_PROG_TYPE_TRACING (tp_btf programs) */
	KF_RAW_TP,       /* BPF_PROG_TYPE_RAW_TRACEPOINT */
	KF_TASK_BTF,     /* bpf_get_current_task_btf */
	KF_TASK_PT_REGS, /* bpf_task_pt_regs */
	KF_LOOP,         /* bpf_loop */
	KF_STATS,        /* BPF_ENABLE_STATS */
	KF__MAX,
};

struct kfeatures {
	bool has[KF__MAX];
	char release[65]; /* uname -r */
};

/* The user-stack unwinder in BPF, one program each. */
enum kf_unwinder {
	KF_UNW_FP = 0,       /* frame pointers: 5.8+ */
	KF_UNW_DWARF_LOOP,   /* DWARF, stepped by bpf_loop: 5.17+ */
	KF_UNW_DWARF_BOUNDED, /* DWARF, a bounded loop: 5.8+ */
};

/* Probes the kernel (once; later calls return the same answers). Needs the
 * capabilities to load BPF programs; a probe that cannot run reads as absent. */
const struct kfeatures *kfeatures_get(void);
/* "the bpf_loop helper", and the first Linux release that has it, "5.17". */
const char *kfeature_name(enum kfeature f);
const char *kfeature_since(enum kfeature f);
/* Picks the unwinder for dwarf (or fp) mode on this kernel. The environment
 * variable PROWL_BPF_UNWINDER=loop|bounded forces a DWARF build (benchmarks,
 * tests). Returns 0, or a negative errno after logging one line that names the
 * missing feature and the kernel release that brings it. */
int kfeatures_pick_unwinder(const struct kfeatures *kf, bool dwarf, enum kf_unwinder *ret);
/* Checks what every mode needs (BTF, perf_event programs, the ring buffer). */
int kfeatures_check_base(const struct kfeatures *kf);
const char *kf_unwinder_name(enum kf_unwinder u);
/* Logs every probe's answer at debug level. */
void kfeatures_log(const struct kfeatures *kf);

#endif

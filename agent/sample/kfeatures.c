/* kfeatures.c: probes the running kernel's BPF features (helpers, program and map
 * types, BTF) and picks the BPF programs it can load, naming what a mode lacks. */
#include "kfeatures.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/btf.h>

#include "array_size.h"
#include "log.h"

static const struct {
	const char *name;
	const char *since; /* the first Linux release with it */
} info[KF__MAX] = {
	[KF_BTF] = { "kernel BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF=y)", "5.4" },
	[KF_PERF_EVENT] = { "BPF programs on perf events (BPF_PROG_TYPE_PERF_EVENT)", "4.9" },
	[KF_RINGBUF] = { "the BPF ring buffer (BPF_MAP_TYPE_RINGBUF)", "5.8" },
	[KF_MMAP_ARRAY] = { "memory-mapped BPF arrays (BPF_F_MMAPABLE)", "5.5" },
	[KF_TP_BTF] = { "BTF tracepoints (tp_btf)", "5.5" },
	[KF_RAW_TP] = { "raw tracepoints (BPF_PROG_TYPE_RAW_TRACEPOINT)", "4.17" },
	[KF_TASK_BTF] = { "the bpf_get_current_task_btf helper", "5.11" },
	[KF_TASK_PT_REGS] = { "the bpf_task_pt_regs helper", "5.15" },
	[KF_LOOP] = { "the bpf_loop helper", "5.17" },
	[KF_STATS] = { "BPF run-time statistics (BPF_ENABLE_STATS)", "5.8" },
};

const char *kfeature_name(enum kfeature f) { return info[f].name; }
const char *kfeature_since(enum kfeature f) { return info[f].since; }

const char *kf_unwinder_name(enum kf_unwinder u)
{
	switch (u) {
	case KF_UNW_FP: return "frame pointers";
	case KF_UNW_DWARF_LOOP: return "dwarf (bpf_loop)";
	default: return "dwarf (bounded loop)";
	}
}

/* The file must exist and start with a BTF header: an empty or foreign file
 * (a bind mount over it, say) is no BTF. */
static bool probe_btf(void)
{
	struct btf_header h;
	int fd = open("/sys/kernel/btf/vmlinux", O_RDONLY | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return false;
	ok = read(fd, &h, sizeof(h)) == (ssize_t)sizeof(h) && h.magic == BTF_MAGIC;
	close(fd);
	return ok;
}

static bool probe_mmap_array(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_MMAPABLE);
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, NULL, sizeof(uint32_t), sizeof(uint64_t), 1, &o);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* libbpf's probe of BPF_PROG_TYPE_TRACING looks for a verifier message that
 * newer kernels (6.18) no longer give: its "yes" is believed, and a "no" is
 * checked by loading an empty tp_btf program for a tracepoint prowl uses. That
 * costs a parse of the kernel's BTF (30 ms here, seconds under emulation). */
static bool probe_tp_btf(void)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = BPF_TRACE_RAW_TP);
	int id, fd;

	if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_TRACING, NULL) == 1)
		return true;
	id = libbpf_find_vmlinux_btf_id("sched_process_exec", BPF_TRACE_RAW_TP);
	if (id <= 0)
		return false;
	o.attach_btf_id = id;
	fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, NULL, "GPL", insns, 2, &o);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static bool probe_stats(void)
{
	int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* libbpf's probes return 1 (yes), 0 (no) or a negative errno (could not tell). */
static bool yes(int r) { return r == 1; }

const struct kfeatures *kfeatures_get(void)
{
	static struct kfeatures kf;
	static bool done;
	struct utsname u;

	if (done)
		return &kf;
	done = true;
	if (uname(&u) == 0)
		snprintf(kf.release, sizeof(kf.release), "%s", u.release);
	else
		snprintf(kf.release, sizeof(kf.release), "unknown");
	kf.has[KF_BTF] = probe_btf();
	kf.has[KF_PERF_EVENT] = yes(libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL));
	kf.has[KF_RINGBUF] = yes(libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL));
	kf.has[KF_MMAP_ARRAY] = probe_mmap_array();
	kf.has[KF_TP_BTF] = kf.has[KF_BTF] && probe_tp_btf();
	kf.has[KF_RAW_TP] = yes(libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_RAW_TRACEPOINT, NULL));
	kf.has[KF_TASK_BTF] = yes(libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_get_current_task_btf, NULL));
	kf.has[KF_TASK_PT_REGS] = yes(libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL));
	kf.has[KF_LOOP] = yes(libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL));
	kf.has[KF_STATS] = probe_stats();
	return &kf;
}

void kfeatures_log(const struct kfeatures *kf)
{
	char buf[512];
	size_t off = 0;
	static const char *const short_names[KF__MAX] = {
		[KF_BTF] = "btf", [KF_PERF_EVENT] = "perf_event", [KF_RINGBUF] = "ringbuf",
		[KF_MMAP_ARRAY] = "mmapable_array", [KF_TP_BTF] = "tp_btf", [KF_RAW_TP] = "raw_tp",
		[KF_TASK_BTF] = "get_current_task_btf", [KF_TASK_PT_REGS] = "task_pt_regs", [KF_LOOP] = "bpf_loop",
		[KF_STATS] = "bpf_stats",
	};

	for (int f = 0; f < KF__MAX && off < sizeof(buf); f++)
		off += snprintf(buf + off, sizeof(buf) - off, "%s%s=%s", f ? " " : "", short_names[f],
				kf->has[f] ? "yes" : "no");
	log_debug("kernel %s BPF features: %s", kf->release, buf);
}

/* One line: what is missing, for what, and which kernel brings it. */
static int missing(const struct kfeatures *kf, enum kfeature f, const char *what, const char *hint)
{
	log_error("%s needs %s (Linux %s+), which this kernel (%s) lacks%s%s", what, info[f].name, info[f].since,
		  kf->release, hint ? ": " : "", hint ? hint : "");
	return -EOPNOTSUPP;
}

int kfeatures_check_base(const struct kfeatures *kf)
{
	static const enum kfeature base[] = { KF_BTF, KF_PERF_EVENT, KF_RINGBUF };

	for (size_t i = 0; i < ARRAY_SIZE(base); i++)
		if (!kf->has[base[i]])
			return missing(kf, base[i], "prowl", base[i] == KF_BTF ? "use a kernel built with it" : NULL);
	return 0;
}

int kfeatures_pick_unwinder(const struct kfeatures *kf, bool dwarf, enum kf_unwinder *ret)
{
	static const enum kfeature loop_needs[] = { KF_LOOP, KF_TASK_PT_REGS, KF_TASK_BTF };
	const char *force = getenv("PROWL_BPF_UNWINDER");

	if (!dwarf) {
		*ret = KF_UNW_FP;
		return 0;
	}
#if !defined(__x86_64__) && !defined(__aarch64__)
	log_error("DWARF unwinding (--unwind=dwarf) is implemented for x86_64 and arm64 only: use --unwind=fp on this machine");
	return -EOPNOTSUPP;
#endif
	if (!kf->has[KF_MMAP_ARRAY])
		return missing(kf, KF_MMAP_ARRAY, "DWARF unwinding (--unwind=dwarf)", "use --unwind=fp");
	if (force && *force && strcmp(force, "loop") != 0 && strcmp(force, "bounded") != 0) {
		log_error("PROWL_BPF_UNWINDER=%s is not an unwinder: use loop or bounded, or unset it", force);
		return -EINVAL;
	}
	if (force && strcmp(force, "bounded") == 0) {
		*ret = KF_UNW_DWARF_BOUNDED;
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(loop_needs); i++) {
		if (kf->has[loop_needs[i]])
			continue;
		if (force && strcmp(force, "loop") == 0)
			return missing(kf, loop_needs[i], "the bpf_loop unwinder (PROWL_BPF_UNWINDER=loop)",
				       "unset PROWL_BPF_UNWINDER to use the bounded unwinder");
		*ret = KF_UNW_DWARF_BOUNDED;
		return 0;
	}
	*ret = KF_UNW_DWARF_LOOP;
	return 0;
}

/* offcpu.c: the off-CPU half of the sample stage: which of bpf/offcpu.bpf.h's programs
 * load (one per unwinder; sched_switch as tp_btf or raw_tp), and attaching them. */
#include <errno.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "array_size.h"
#include "log.h"
#include "sample_priv.h"

/* Entries offcpu_pending keeps where it must be preallocated (see below): 1 KiB each. */
#define OFFCPU_PENDING_PREALLOC 1024

/* What the kernel's BPF allocates with, read from its BTF: whether maps allocated at
 * run time (offcpu_pending) take their memory from bpf_mem_alloc's per-CPU caches
 * (*ret_memalloc), and whether task-local storage does too (*ret_storage). Without,
 * they call kmalloc(GFP_ATOMIC) in sched_switch, under the run queue's lock, which
 * can wake kswapd and deadlock on that lock: the kernel itself warns of run-time
 * allocated hash maps in tracing programs. */
static void kernel_bpf_alloc(bool *ret_memalloc, bool *ret_storage)
{
	struct btf *btf = btf__load_vmlinux_btf();
	const struct btf_type *t;
	int id;

	*ret_memalloc = *ret_storage = false;
	if (!btf)
		return;
	*ret_memalloc = btf__find_by_name_kind(btf, "bpf_mem_alloc", BTF_KIND_STRUCT) > 0;
	id = btf__find_by_name_kind(btf, "bpf_local_storage_map", BTF_KIND_STRUCT);
	t = id > 0 ? btf__type_by_id(btf, id) : NULL;
	for (unsigned i = 0; t && i < btf_vlen(t); i++)
		if (!strcmp(btf__name_by_offset(btf, btf_members(t)[i].name_off), "selem_ma"))
			*ret_storage = true;
	btf__free(btf);
}

int offcpu_setup(struct sampler *s)
{
	struct prowl_bpf *k = s->skel;
	struct bpf_program *const sw_btf[] = {
		[KF_UNW_FP] = k->progs.prowl_offcpu_switch_fp,
		[KF_UNW_DWARF_LOOP] = k->progs.prowl_offcpu_switch_dwarf,
		[KF_UNW_DWARF_BOUNDED] = k->progs.prowl_offcpu_switch_bounded,
	};
	struct bpf_program *const sw_raw[] = {
		[KF_UNW_FP] = k->progs.prowl_offcpu_switch_fp_raw,
		[KF_UNW_DWARF_LOOP] = k->progs.prowl_offcpu_switch_dwarf_raw,
		[KF_UNW_DWARF_BOUNDED] = k->progs.prowl_offcpu_switch_bounded_raw,
	};
	struct bpf_program *const sysexit[] = {
		[KF_UNW_FP] = k->progs.prowl_offcpu_sysexit_fp,
		[KF_UNW_DWARF_LOOP] = k->progs.prowl_offcpu_sysexit_dwarf,
		[KF_UNW_DWARF_BOUNDED] = k->progs.prowl_offcpu_sysexit_bounded,
	};
	bool on = s->opts.offcpu, bounded = s->unwinder == KF_UNW_DWARF_BOUNDED, memalloc = false, storage = false;

	for (size_t i = 0; i < ARRAY_SIZE(sw_btf); i++) {
		bpf_program__set_autoload(sw_btf[i], on && s->tp_btf && i == s->unwinder);
		bpf_program__set_autoload(sw_raw[i], on && !s->tp_btf && i == s->unwinder);
		bpf_program__set_autoload(sysexit[i], on && i == s->unwinder);
	}
	bpf_program__set_autoload(k->progs.prowl_offcpu_step_raw, on && bounded);
	bpf_program__set_autoload(k->progs.prowl_offcpu_step_btf, on && bounded && s->tp_btf);
	s->offcpu_switch = s->tp_btf ? sw_btf[s->unwinder] : sw_raw[s->unwinder];
	s->offcpu_sysexit = sysexit[s->unwinder];
	if (on)
		kernel_bpf_alloc(&memalloc, &storage);
	/* Task-local storage where it allocates from bpf_mem_alloc (its programs check
	 * for 5.12's tracing support themselves): else a one-slot array stands in,
	 * which they leave alone. */
	k->rodata->offcpu_task_on = on && s->tp_btf && storage &&
				    libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) == 1;
	if (!k->rodata->offcpu_task_on) {
		bpf_map__set_type(k->maps.offcpu_task, BPF_MAP_TYPE_ARRAY);
		bpf_map__set_map_flags(k->maps.offcpu_task, 0);
		bpf_map__set_max_entries(k->maps.offcpu_task, 1);
	}
	if (!on) {
		bpf_map__set_max_entries(k->maps.offcpu_start, 1);
		bpf_map__set_max_entries(k->maps.offcpu_pending, 1);
		return 0;
	}
	if (!memalloc) { /* preallocated: fewer entries, and no kmalloc under the lock */
		bpf_map__set_map_flags(k->maps.offcpu_pending, 0);
		bpf_map__set_max_entries(k->maps.offcpu_pending, OFFCPU_PENDING_PREALLOC);
	}
	if (!s->tp_btf && !kfeatures_get()->has[KF_RAW_TP]) {
		log_error("off-CPU profiling needs %s (Linux %s+), which this kernel (%s) lacks",
			  kfeature_name(KF_RAW_TP), kfeature_since(KF_RAW_TP), kfeatures_get()->release);
		return -EOPNOTSUPP;
	}
	if (!s->tp_btf)
		log_warn("off-CPU profiling: tracing programs cannot attach by BTF on this kernel (%s): off-CPU samples "
			 "have user stacks only", kfeatures_get()->release);
	k->rodata->offcpu_threshold_ns = s->opts.offcpu_threshold_ns ? s->opts.offcpu_threshold_ns
								     : PROWL_OFFCPU_T_DEFAULT;
	return 0;
}

/* Puts prog in slot 0 of chain. */
static int chain(struct bpf_map *chain, struct bpf_program *prog)
{
	__u32 slot = 0;
	int fd = bpf_program__fd(prog);

	if (bpf_map__update_elem(chain, &slot, sizeof(slot), &fd, sizeof(fd), BPF_ANY))
		return log_error_errno(-errno, "cannot chain the bounded unwinder's off-CPU programs");
	return 0;
}

int offcpu_loaded(struct sampler *s)
{
	int r;

	if (!s->opts.offcpu || s->unwinder != KF_UNW_DWARF_BOUNDED)
		return 0;
	r = chain(s->skel->maps.offcpu_chain_raw, s->skel->progs.prowl_offcpu_step_raw);
	if (!r && s->tp_btf)
		r = chain(s->skel->maps.offcpu_chain_btf, s->skel->progs.prowl_offcpu_step_btf);
	return r;
}

int offcpu_start(struct sampler *s)
{
	int r;

	if (!s->opts.offcpu)
		return 0;
	s->offcpu_links[0] = bpf_program__attach_raw_tracepoint(s->offcpu_sysexit, "sys_exit");
	if (!s->offcpu_links[0]) {
		r = log_error_errno(-errno, "off-CPU profiling: cannot attach to the sys_exit tracepoint");
		offcpu_stop(s);
		return r;
	}
	if (s->tp_btf)
		s->offcpu_links[1] = bpf_program__attach(s->offcpu_switch);
	else
		s->offcpu_links[1] = bpf_program__attach_raw_tracepoint(s->offcpu_switch, "sched_switch");
	if (!s->offcpu_links[1]) {
		r = log_error_errno(-errno, "off-CPU profiling: cannot attach to the sched_switch tracepoint");
		offcpu_stop(s);
		return r;
	}
	log_debug("off-CPU: %s and %s, threshold %llu ns, task-local storage %s, pending waits %s",
		  bpf_program__name(s->offcpu_switch), bpf_program__name(s->offcpu_sysexit),
		  (unsigned long long)s->skel->rodata->offcpu_threshold_ns,
		  s->skel->rodata->offcpu_task_on ? "where the kernel has it (5.12+)" : "no",
		  bpf_map__map_flags(s->skel->maps.offcpu_pending) & BPF_F_NO_PREALLOC ? "allocated on use"
										 : "preallocated");
	return 0;
}

void offcpu_stop(struct sampler *s)
{
	/* The switch first: no wait becomes pending once it is gone. */
	for (int i = 1; i >= 0; i--) {
		bpf_link__destroy(s->offcpu_links[i]);
		s->offcpu_links[i] = NULL;
	}
}

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* prowl.h: the structs and constants shared by the BPF sampler and user space.
 * Everything that crosses the BPF/user boundary is defined here and only here. */
#ifndef PROWL_H
#define PROWL_H

#define PROWL_MAX_STACK   127  /* frames kept per kernel or user stack */
#define PROWL_COMM_LEN    16
#define PROWL_RINGBUF_SZ  (16u << 20) /* compiled-in default; user space sizes it per host */
#define PROWL_RINGBUF_WAKE_DIV 8      /* the reader is woken when 1/8 of the ring is full */
#define PROWL_DROP_MAX    65536 /* processes the pid_drop map holds */

/* Values of prowl_cfg.filter_mode. */
enum prowl_filter {
	PROWL_FILTER_ALL = 0,  /* every task on the host */
	PROWL_FILTER_PIDS = 1, /* only tgids present in the pid_filter map */
};

/* A constant as a string literal: "127" for PROWL_MAX_STACK. */
#define PROWL_STR_(x) #x
#define PROWL_STR(x) PROWL_STR_(x)

/* Why a DWARF-unwound user stack stops short of the thread's entry
 * (prowl_sample.ureason; 0 = complete, or --unwind=fp where nothing is known): the
 * one table of the reasons. X(ID, metric label, log name, marker text, names object):
 * PROWL_UR_ID, reason="label" of prowl_unwind_truncated_total, the name in the
 * unwinder's debug log, and the marker frame at the stack's root, a format whose %s
 * is the object of the last frame when it names one. BPF uses the enum only; user
 * space the strings (prowl_ureason_text()). */
#define PROWL_UREASONS(X)                                                                      \
	/* deeper than PROWL_MAX_STACK frames */                                               \
	X(DEPTH, "depth", "too deep", "[truncated: user stack deeper than " PROWL_STR(PROWL_MAX_STACK) " frames]", 0) \
	/* a frame in an object whose table is not loaded (capacity, build error): frame      \
	 * pointers were tried from there */                                                   \
	X(NO_TABLE, "no_table", "no table", "[truncated: no unwind table for %s]", 1)                          \
	/* a pc in no executable mapping the unwinder knows */                                 \
	X(NO_MAPPING, "no_mapping", "no mapping", "[truncated: return address in no known mapping]", 0)     \
	/* stack memory could not be read */                                                   \
	X(READ, "unreadable", "unreadable stack", "[truncated: unreadable stack]", 0)                       \
	/* CFI the BPF unwinder cannot evaluate, or a corrupt frame */                         \
	X(BAD_CFI, "bad_cfi", "bad CFI", "[truncated: unwind rule prowl cannot follow in %s]", 1)              \
	/* a pc inside an object but not covered by its CFI */                                 \
	X(NO_FDE, "no_fde", "no FDE", "[truncated: no unwind info for code in %s]", 1)                         \
	/* the process's mappings were not loaded yet (frame pointers used) */                 \
	X(NEW_PROC, "new_process", "new process", "[truncated: frame pointers only, process not loaded by the unwinder yet]", 0) \
	/* the user registers of a task sampled in the kernel were not found (kernels         \
	 * without bpf_task_pt_regs; frame pointers used) */                                   \
	X(NO_REGS, "no_registers", "no registers", "[truncated: frame pointers only, user registers not found in the kernel]", 0) \
	/* a frame of the JVM's code cache the Java walk cannot follow (no code blob for     \
	 * the pc, a frame pointer or frame size that leads nowhere) */                        \
	X(JAVA, "java", "java frame", "[truncated: Java frame prowl cannot follow]", 0) \
	/* a frame of V8's code (the builtins, JIT code) whose frame pointer leads nowhere */ \
	X(V8, "v8", "v8 frame", "[truncated: V8 frame prowl cannot follow]", 0)

enum prowl_ureason {
	PROWL_UR_NONE = 0,
#define PROWL_UR_ENUM(id, label, log_name, marker, names_object) PROWL_UR_##id,
	PROWL_UREASONS(PROWL_UR_ENUM)
#undef PROWL_UR_ENUM
	PROWL_UR__MAX,
};

/* Indices of the per-CPU counters map. */
enum prowl_counter {
	PROWL_CNT_SAMPLES = 0, /* BPF program runs that produced an event */
	PROWL_CNT_LOST,        /* events the ring buffer could not take */
	PROWL_CNT_IDLE,        /* idle samples dropped (no --idle) */
	PROWL_CNT_FILTERED,    /* samples of processes outside the filter */
	PROWL_CNT_KSTACK_ERR,  /* bpf_get_stack failed for the kernel stack */
	PROWL_CNT_USTACK_ERR,  /* bpf_get_stack failed for the user stack */
	/* DWARF unwinding (--unwind=dwarf): user stacks cut short, one counter per
	 * reason (PROWL_CNT_UNWIND_TRUNC_OF()), and refresh requests. */
	PROWL_CNT_UNWIND_TRUNC,                                          /* PROWL_UR_NONE + 1 */
	PROWL_CNT_UNWIND_TRUNC_LAST = PROWL_CNT_UNWIND_TRUNC + PROWL_UR__MAX - 2, /* the last reason */
	PROWL_CNT_UNWIND_REQ,      /* refresh requests sent to user space */
	PROWL_CNT_UNWIND_REQ_LOST, /* refresh requests the event ring could not take */
	PROWL_CNT_UNWIND_FP_FRAMES, /* frames unwound with frame pointers (no table) */
	PROWL_CNT_DROPPED,         /* samples of processes relabeling excludes (pid_drop) */
	PROWL_CNT_PY_SAMPLES,      /* samples that carried Python frames */
	PROWL_CNT_PY_TRUNC,        /* Python stacks cut short (any enum prowl_pyreason) */
	/* Off-CPU (bpf/offcpu.bpf.h): waits kept as samples, waits the draw left out
	 * (by design: the kept ones stand for them), switches the per-task map had no
	 * room for, kept waits the ring buffer could not take and their weight in ns. */
	PROWL_CNT_OFFCPU_SAMPLES,
	PROWL_CNT_OFFCPU_SKIPPED,
	PROWL_CNT_OFFCPU_FULL,
	PROWL_CNT_OFFCPU_LOST,
	PROWL_CNT_OFFCPU_LOST_NS,
	PROWL_CNT__MAX,
};

/* The counter of user stacks cut short for reason r (PROWL_UR_NONE < r < PROWL_UR__MAX). */
#define PROWL_CNT_UNWIND_TRUNC_OF(r) (PROWL_CNT_UNWIND_TRUNC + (r) - (PROWL_UR_NONE + 1))

#ifndef __bpf__
/* User space: a reason's strings from PROWL_UREASONS; NULL for none or an unknown one. */
struct prowl_ureason_text {
	const char *label;    /* prowl_unwind_truncated_total{reason="label"} */
	const char *log_name; /* the unwinder's debug log */
	const char *marker;   /* the marker frame; a format of one %s when names_object */
	int names_object;     /* the marker names the object of the last frame */
};

static inline const struct prowl_ureason_text *prowl_ureason_text(unsigned int r)
{
	static const struct prowl_ureason_text texts[PROWL_UR__MAX] = {
#define PROWL_UR_TEXT(id, label, log_name, marker, names_object) \
	[PROWL_UR_##id] = { label, log_name, marker, names_object },
		PROWL_UREASONS(PROWL_UR_TEXT)
#undef PROWL_UR_TEXT
	};

	return r > PROWL_UR_NONE && r < PROWL_UR__MAX ? &texts[r] : (const struct prowl_ureason_text *)0;
}
#endif

/* Bits in prowl_sample.flags. */
#define PROWL_SAMPLE_KERNEL_MODE (1u << 0) /* the CPU was in kernel mode */
#define PROWL_SAMPLE_USTACK_TRUNC (1u << 1) /* user stack hit PROWL_MAX_STACK */
#define PROWL_SAMPLE_KSTACK_TRUNC (1u << 2) /* kernel stack hit PROWL_MAX_STACK */
#define PROWL_SAMPLE_USTACK_FP (1u << 3)    /* the user stack is the kernel's frame-pointer
					     * walk (bpf_get_stack), which cannot tell
					     * whether it reached the thread's entry */
#define PROWL_SAMPLE_JAVA (1u << 4)         /* pystack holds Java frames (jstack) */
#define PROWL_SAMPLE_V8 (1u << 5)           /* pystack holds V8's JavaScript frames (jstack) */
#define PROWL_SAMPLE_OFFCPU (1u << 6)       /* an off-CPU sample: the task came back from a
					     * wait; off_ns is its weight */

/* ---- Off-CPU time ----
 * A wait of d ns is kept with probability min(1, d / T) and weighs d / p ns
 * (docs/decisions.md): T is offcpu_threshold_ns, at most PROWL_OFFCPU_T_MAX so
 * that the draw's product fits 64 bits. */
#define PROWL_OFFCPU_T_DEFAULT (1000ull * 1000)        /* 1 ms */
#define PROWL_OFFCPU_T_MAX     (1000ull * 1000 * 1000) /* 1 s */
#define PROWL_OFFCPU_TASKS     65536 /* tasks off the CPU the per-task map holds */


/* ---- CPython (3.6-3.14) ----
 * User space finds CPython processes and writes, per tgid, where _PyRuntime is
 * and the offsets of the fields the walk reads (symbolizer/python/pyversions.c
 * holds them per version, taken from CPython's headers). BPF finds the sampled
 * thread's PyThreadState in the interpreter's thread list (by native thread id)
 * and walks its interpreter frames, leaf first. */
#define PROWL_MAX_PY      128 /* Python frames kept per sample */
#define PROWL_PY_THREADS  64  /* thread states looked at to find the sampled thread */
#define PROWL_PY_NONE     0xffff /* an offset the version does not have */
#define PROWL_PY_FRAME_READ 127 /* most bytes of a frame read at once (prowl_py_proc.fr_read) */

/* prowl_py_proc.flags */
#define PROWL_PYP_FRAMEOBJ    1 /* 3.6-3.10: a PyFrameObject chain; each frame is one evaluation and
                                 * fr_instr is the offset of the int f_lasti */
#define PROWL_PYP_LASTI_BYTES 2 /* f_lasti counts bytes (3.6-3.9), not code units (3.10) */
#define PROWL_PYP_PTHREAD     4 /* ts_native_tid is thread_id, the thread's pthread_self()
                                 * (its fs base), not a native thread id (3.6-3.10) */

struct prowl_py_proc {
	__u64 runtime;          /* address of _PyRuntime in the process */
	__u16 version;          /* major << 8 | minor */
	__u16 rt_interp_head;   /* _PyRuntimeState.interpreters.head */
	__u16 is_threads_head;  /* PyInterpreterState.threads.head */
	__u16 ts_next;          /* PyThreadState.next */
	__u16 ts_native_tid;    /* PyThreadState.native_thread_id */
	__u16 ts_frame;         /* PyThreadState.frame (3.6-3.10), .cframe (3.11, 3.12) or
	                         * .current_frame (3.13+) */
	__u16 cf_current_frame; /* _PyCFrame.current_frame; PROWL_PY_NONE on 3.13 */
	__u16 fr_code;          /* _PyInterpreterFrame.f_code / f_executable; PyFrameObject.f_code */
	__u16 fr_previous;      /* previous; PyFrameObject.f_back */
	__u16 fr_instr;         /* prev_instr (3.11, 3.12) or instr_ptr (3.13+); f_lasti before */
	__u16 fr_is_entry;      /* 3.11's is_entry; PROWL_PY_NONE after */
	__u16 fr_owner;         /* owner: 3 (FRAME_OWNED_BY_CSTACK) marks an entry shim on 3.12+ */
	__u16 co_firstlineno;   /* PyCodeObject.co_firstlineno */
	__u16 co_code;          /* PyCodeObject.co_code_adaptive: the first instruction (3.11+) */
	__u16 flags;            /* PROWL_PYP_* */
	__u16 fr_read;          /* bytes of a frame to read, <= PROWL_PY_FRAME_READ */
	__u32 gen;              /* changes with every (re)registration of the process */
	__u32 tp_pthread_off;   /* arm64: pthread_self() is the thread pointer less this (glibc's
	                         * sizeof(struct pthread)): 3.6-3.10's thread_id; 0 on x86_64 */
	/* Read by user space only: the type objects that a code object, its names
	 * and its line table must point to (what a garbled frame fails). */
	__u64 code_type, unicode_type, bytes_type;
};

/* prowl_pyframe.lasti: the instruction index (code units from co_code_adaptive),
 * or PROWL_PYF_LASTI_NONE; PROWL_PYF_ENTRY is set on the outermost frame of one
 * _PyEval_EvalFrameDefault activation. */
#define PROWL_PYF_ENTRY      (1u << 31)
#define PROWL_PYF_LASTI_NONE 0x7fffffffu

struct prowl_pyframe {
	__u64 code;        /* the PyCodeObject's address */
	__u32 lasti;
	__s32 firstlineno; /* co_firstlineno as read now: tells a reused address apart */
};

/* prowl_sample.pyreason: why a Python stack is missing or cut short. */
enum prowl_pyreason {
	PROWL_PY_OK = 0,
	PROWL_PY_DEPTH,      /* deeper than PROWL_MAX_PY frames */
	PROWL_PY_NO_THREAD,  /* no thread state for this thread (tearing down, or not started) */
	PROWL_PY_READ,       /* interpreter memory could not be read */
	PROWL_PY__MAX,
};

/* ---- HotSpot (JDK 9+) ----
 * User space reads the JVM's serviceability tables (symbolizer/java/jvmmeta.c) and
 * writes, per tgid, the code cache's heaps and the offsets the walk reads. The DWARF
 * unwinder hands a pc in the code cache to the Java walk (bpf/java.bpf.h), which
 * records the frame and steps to its caller; native frames go on from there. */
#define PROWL_MAX_JAVA  80 /* Java frames kept per sample (in pystack's room) */
#define PROWL_JAVA_HEAPS 3 /* code heaps: non-nmethods, profiled, non-profiled */

struct prowl_java_heap {
	__u64 low, high;  /* [low, high): the heap's reserved memory */
	__u64 segmap;     /* its segment map: one byte per segment */
};

/* prowl_java_proc.flags */
#define PROWL_JAVA_READY       (1u << 0) /* the code cache is set up (else: ask again) */
#define PROWL_JAVA_CODE_OFFSET (1u << 1) /* CodeBlob has _code_offset (int), not _code_begin */
#define PROWL_JAVA_FC_16       (1u << 2) /* _frame_complete_offset is 16 bits wide */
#define PROWL_JAVA_SCOPES      (1u << 3) /* the sc_* and pd_* offsets are set (user space) */
#define PROWL_JAVA_SCOPES_NEW  (1u << 4) /* debug info in _immutable_data / _mutable_data (JDK 23+) */

struct prowl_java_proc {
	struct prowl_java_heap heap[PROWL_JAVA_HEAPS];
	__u64 cc_low, cc_high;     /* the whole code cache */
	__u64 interp_low, interp_high; /* the template interpreter's code */
	__u32 flags;
	__u32 gen;                 /* changes with every (re)registration of the process */
	__u8 log2_seg;             /* log2 of the code heap segment size */
	__u8 heap_block;           /* sizeof(HeapBlock): the blob follows it */
	__u16 cb_name, cb_frame_size, cb_frame_complete, cb_code;
	__u16 nm_compile_id, m_const_method, const_method_size;
	__u16 jdk_major;           /* Abstract_VM_Version::_vm_major_version (user space) */
	__u16 _pad;
	/* Read by user space only (naming, symbolizer/java/jvmname.c). */
	__u16 nm_method, cm_constants, cm_name_index, cm_sig_index, cm_code_size, cm_flags;
	__u16 cp_holder, cp_size, cp_source_file; /* PROWL_JAVA_NONE: in InstanceKlass (ik_source_file) */
	__u16 ik_source_file, k_name, sym_length, sym_body, has_lines; /* has_lines: the flag's bit */
	/* An nmethod's debug information (inlined frames, lines: symbolizer/java/jvmscope.c):
	 * offsets in the nmethod of the fields that bound its PcDescs, scopes and metadata. */
	__u16 sc_pcs, sc_pcs_end, sc_data, sc_data_end, sc_base, sc_meta, sc_meta_base, sc_meta_end;
	__u16 pd_size, pd_pc, pd_scope; /* PcDesc: size, _pc_offset, _scope_decode_offset */
	__u16 hb_used; /* the code heap block's "in use" flag, from the block's start; or NONE */
	__u16 _pad2[2];
};
#define PROWL_JAVA_NONE 0xffffu /* an offset this JVM does not have */

/* prowl_jframe.kind */
enum prowl_jkind {
	PROWL_JF_INTERP = 1, /* ptr: Method*, off: bytecode index, check: ConstMethod* >> 3, ident */
	PROWL_JF_COMPILED,   /* ptr: nmethod, off: pc - code begin, check: compile id */
	PROWL_JF_NATIVE,     /* ptr: a native method's wrapper nmethod, as compiled */
	PROWL_JF_STUB,       /* ptr: the code blob (stub, adapter, call stub) */
	PROWL_JF_BUILDING,   /* an interpreted frame being built, or rebuilt by deoptimization */
};
#define PROWL_JF_BCI_NONE 0xffffu /* no bytecode index */

struct prowl_jframe {
	__u64 ptr;
	__u32 off;
	__u32 check;
	__u8 idx;   /* the ustack entry this frame names */
	__u8 kind;  /* enum prowl_jkind */
	__u8 _pad[2];
	__u32 ident; /* interpreted: PROWL_JAVA_IDENT of its class and method name Symbol*s */
};
/* A method's identity as its two names' Symbol*s, taken when sampled: metaspace is
 * reused at the same addresses once a class is unloaded; other names are other Symbols. */
#define PROWL_JAVA_IDENT(ksym, nsym) ((__u32)(((ksym) >> 3) * 0x9e3779b1u) ^ (__u32)((nsym) >> 3))

/* ---- V8 (Node.js) ----
 * User space reads V8's post-mortem constants from the node binary (symbolizer/node/
 * v8meta.c) and writes, per tgid, where the embedded builtins are and the frame and
 * object offsets. The DWARF unwinder hands a pc in the builtins, or in code no file
 * backs, to the V8 walk (bpf/v8.bpf.h): it steps by frame pointer, as V8's frames all
 * keep one, and records each JavaScript frame in jstack (kind PROWL_V8_*). */
struct prowl_v8_proc {
	__u64 builtins_low, builtins_high; /* [low, high): the embedded builtins' code */
	__u32 gen;                /* changes with every (re)registration of the process */
	__u32 flags;
	__s16 fp_context, fp_function, fp_bytecode_array, fp_bytecode_offset; /* slots from fp */
	__u16 o_map, o_map_type, o_fn_shared, o_sfi_name, o_sfi_script; /* field offsets */
	__u16 t_js_function, t_bytecode_array, t_sfi; /* instance types */
	__u8 smi_tag, smi_tag_mask, heap_tag, heap_tag_mask;
	/* Read by user space only (naming, symbolizer/node/v8name.c). */
	__u16 t_script, t_scope_info, first_nonstring, o_sfi_data, o_script_name, o_script_source,
		o_script_line_ends, o_str_length, o_seq1_chars, o_seq2_chars, o_cons_first, o_cons_second,
		o_thin_actual, o_fa_length, o_fa_data, o_bytecode_data, t_byte_array, t_fixed_array;
	__u8 str_repr_mask, str_encoding_mask, str_seq, str_cons, str_thin, str_one_byte, str_two_byte;
	__u8 si_first_vars, si_ncontext_locals;
	__u8 str_internalized; /* ONE_BYTE_INTERNALIZED_STRING_TYPE; 0xff: not known */
	__u8 _pad[2];
	__u32 str_not_string_mask;
	/* The V8 binary's executable mapping: a pc there that its CFI does not cover is
	 * V8's code too (builtins whose symbols were stripped). */
	__u64 text_low, text_high;
	/* Read by user space only: the functions TurboFan and Maglev inlined into optimized
	 * code (symbolizer/node/v8inline.c); t_instruction_stream 0: not read. */
	__u16 t_code, t_instruction_stream, o_is_start, o_code_deopt, o_code_spt;
	__u8 dd_inlined_count, dd_literals, dd_sfi, dd_inlining_positions, code_kind_mask, code_kind_baseline;
	/* Code's InstructionStream, instruction start, flags and instruction size; V8 12's
	 * arrays in its trusted space (the deoptimization data, the position table); 0: none. */
	__u16 o_code_istream, o_code_start, o_code_flags, o_code_size, t_trusted_fixed_array, t_trusted_byte_array;
	__u8 _cpad[4];
	/* [low, high): the builtins again, where V8 mapped the binary's embedded builtins a
	 * second time, near its JIT code (short builtin calls); 0: not mapped so. */
	__u64 copy_low, copy_high;
	/* Read by user space only: V8's Bytecodes::kBytecodeSizes in the process (3 rows of
	 * bc_count sizes: operand scales 1, 2, 4), to walk a baseline (Sparkplug) code's
	 * bytecode offset table beside its bytecodes; 0: not known. */
	__u64 bc_sizes;
	__u16 bc_count;
	__u16 o_ba_spt; /* BytecodeArray's source position table (0: V8 9-11's fourth word) */
	__u8 _bpad[4];
};

/* prowl_jframe.kind of a V8 frame: ptr is the SharedFunctionInfo (tagged), check the
 * low 32 bits of its name ^ script words as BPF read them (user space reads them again). */
enum prowl_v8kind {
	PROWL_V8_INTERP = 1, /* off: the bytecode offset (Ignition, Sparkplug) */
	PROWL_V8_JIT,        /* off: PROWL_JF_BCI_NONE (Maglev, TurboFan, and builtins) */
	PROWL_V8_ENTRY,      /* off: PROWL_JF_BCI_NONE; the first frame, at its code's entry
			      * (its frame not built): named only when the code at pc is its own */
};

/* One sample, as written to the ring buffer. Stacks are leaf first. A sample of a
 * process without Python frames ends at pystack (PROWL_SAMPLE_NOPY_SIZE bytes). */
struct prowl_sample {
	__u64 time_ns;    /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u64 cgroup_id;
	__u32 pid;        /* tgid */
	__u32 tid;
	__u32 cpu;
	__u32 flags;
	__u16 kstack_len; /* number of valid entries in kstack */
	__u16 ustack_len; /* number of valid entries in ustack */
	__u8 ureason;     /* enum prowl_ureason */
	__u8 pyreason;    /* enum prowl_pyreason (a CPython process only) */
	__u16 pystack_len; /* valid entries in pystack; 0: no Python frames (and no pystack) */
	char comm[PROWL_COMM_LEN];  /* thread name */
	char pcomm[PROWL_COMM_LEN]; /* process (group leader) name */
	__u32 pygen;      /* prowl_py_proc.gen of the process when pystack was read */
	__u32 _pad;
	__u64 off_ns;     /* PROWL_SAMPLE_OFFCPU: the wait's weight d / p in ns; else 0 */
	__u64 kstack[PROWL_MAX_STACK];
	__u64 ustack[PROWL_MAX_STACK];
	union { /* a CPython process's frames, or (PROWL_SAMPLE_JAVA) a JVM's */
		struct prowl_pyframe pystack[PROWL_MAX_PY];
		struct prowl_jframe jstack[PROWL_MAX_JAVA];
	};
};

#define PROWL_SAMPLE_NOPY_SIZE __builtin_offsetof(struct prowl_sample, pystack)

/* ---- DWARF CFI unwinding (x86_64 and arm64) ----
 * On arm64 "rsp" is sp and "rbp" is the frame pointer x29; the return address has
 * a rule of its own (enum prowl_ra_rule), as it may still be in the link register.
 * Unwind rows of every loaded object live in one array map (unwind_rows), each
 * object's rows sorted by pc and contiguous. Each process has a sorted run of
 * executable mappings in unwind_maps; unwind_procs maps a tgid to that run. */

/* Low 4 bits of prowl_unwind_row.rule */
enum prowl_cfa_type {
	PROWL_CFA_NONE = 0, /* no CFI covers this pc (a gap between FDEs, or past the end) */
	PROWL_CFA_RSP,      /* CFA = rsp + cfa_off * 8 */
	PROWL_CFA_RBP,      /* CFA = rbp + cfa_off * 8 */
	PROWL_CFA_PLT,      /* PLT entry: CFA = rsp + cfa_off * 8 + ((rip & 15) >= rbp_off ? 8 : 0) */
	PROWL_CFA_SIGNAL,   /* signal trampoline (__restore_rt): registers are in the
			     * ucontext at rsp */
	PROWL_CFA_END,      /* return address undefined: the outermost frame */
	PROWL_CFA_BAD,      /* a rule the BPF unwinder cannot evaluate */
};

/* Bits 4-5 of prowl_unwind_row.rule. */
enum prowl_rbp_rule {
	PROWL_RBP_SAME = 0, /* unchanged from the callee */
	PROWL_RBP_CFA,      /* saved at CFA + rbp_off * 8 */
	PROWL_RBP_UNKNOWN,  /* not recoverable */
};

/* Bits 6-7 of prowl_unwind_row.rule: the return address. x86_64 rows are all
 * PROWL_RA_CFA (at CFA - 8, where call pushed it). */
enum prowl_ra_rule {
	PROWL_RA_CFA = 0, /* x86_64: at CFA - 8; arm64: at CFA + (rbp_off + 1) * 8, beside
			   * the saved x29 (stp x29, x30) */
	PROWL_RA_LR,      /* arm64: still in the link register x30 (a leaf, a prologue) */
	PROWL_RA_CFA_OFF, /* arm64 with x29 not saved: at CFA + rbp_off * 8 */
};

/* One row: the rule from pc to the next row's pc. pc is relative to the
 * object's table base (an ELF virtual address), so one table serves every
 * process that maps the object. Offsets are in units of 8 bytes (x86_64 stack
 * slots); 8 bytes per row, the element size of a BPF array. */
struct prowl_unwind_row {
	__u32 pc;
	__u16 cfa_off;  /* CFA offset / 8 (the CFA is above rsp/rbp) */
	__u8 rule;      /* cfa_type | rbp_type << 4 | ra_type << 6 */
	__s8 rbp_off;   /* rbp save slot relative to the CFA / 8; PLT rows: the threshold K;
			 * arm64 PROWL_RA_CFA_OFF rows: the return address's slot */
};

#define PROWL_ROW_CFA(r) ((r)->rule & 0xf)
#define PROWL_ROW_RBP(r) (((r)->rule >> 4) & 3)
#define PROWL_ROW_RA(r)  ((r)->rule >> 6)

/* prowl_unwind_map.kind */
enum prowl_map_kind {
	PROWL_MAP_TABLE = 0, /* rows [row_first, row_first + row_count) */
	PROWL_MAP_FP,        /* the object has no CFI (JIT code, no .eh_frame): frame pointers */
	PROWL_MAP_NO_TABLE,  /* it should have a table but has none: frame pointers and
			      * PROWL_UR_NO_TABLE */
};

/* One executable mapping of a process: runtime pc - bias = row pc. */
struct prowl_unwind_map {
	__u64 start, end; /* [start, end) */
	__u64 bias;
	__u32 row_first;
	__u32 row_count;
	__u32 kind;       /* enum prowl_map_kind */
	__u32 _pad;
};

/* unwind_procs value: the process's mappings are unwind_maps[map_first .. +map_count).
 * map_first == PROWL_PROC_FP: unwind it with frame pointers (bpf_get_stack), e.g.
 * a 32-bit process. */
#define PROWL_PROC_FP 0xffffffffu

struct prowl_unwind_proc {
	__u32 map_first;
	__u32 map_count;
};

/* Events on the unwind_events ring buffer. */
enum prowl_unwind_event_type {
	PROWL_UEV_UNKNOWN_PID = 1, /* a sample of a process with no unwind_procs entry */
	PROWL_UEV_UNKNOWN_PC,      /* a pc in no mapping of a known process (dlopen) */
	PROWL_UEV_EXEC,            /* the process exec'ed (its entry was removed) */
	PROWL_UEV_EXIT,            /* the process exited (its entry was removed) */
};

/* unwind_req_time (LRU hash tgid -> __u64): CLOCK_MONOTONIC ns of the last
 * request; BPF sends at most one per PROWL_UNWIND_REQ_NS unless user space set
 * a later time to back off. */
#define PROWL_UNWIND_REQ_NS (20ull * 1000 * 1000)

struct prowl_unwind_event {
	__u32 type;
	__u32 pid;
	__u64 pc;
};

/* Per-sample BPF cost histogram (when timing is on): bucket i counts program
 * runs that took [i * 100 ns, (i + 1) * 100 ns); the last bucket is open. */
#define PROWL_COST_BUCKETS 512
#define PROWL_COST_BUCKET_NS 100

/* Every struct above crosses the BPF/user boundary: clang -target bpf and the
 * host's compiler both include this header, so both check that they agree on
 * the layout, field by field, and that no implicit padding crept in. */
#define PROWL_AT(type, field, off) \
	_Static_assert(__builtin_offsetof(struct type, field) == (off), #type "." #field " is not at " #off)
#define PROWL_SIZE(type, size) _Static_assert(sizeof(struct type) == (size), "struct " #type " is not " #size " bytes")

PROWL_AT(prowl_sample, time_ns, 0);
PROWL_AT(prowl_sample, cgroup_id, 8);
PROWL_AT(prowl_sample, pid, 16);
PROWL_AT(prowl_sample, tid, 20);
PROWL_AT(prowl_sample, cpu, 24);
PROWL_AT(prowl_sample, flags, 28);
PROWL_AT(prowl_sample, kstack_len, 32);
PROWL_AT(prowl_sample, ustack_len, 34);
PROWL_AT(prowl_sample, ureason, 36);
PROWL_AT(prowl_sample, pyreason, 37);
PROWL_AT(prowl_sample, pystack_len, 38);
PROWL_AT(prowl_sample, comm, 40);
PROWL_AT(prowl_sample, pcomm, 40 + PROWL_COMM_LEN);
PROWL_AT(prowl_sample, pygen, 40 + 2 * PROWL_COMM_LEN);
PROWL_AT(prowl_sample, off_ns, 48 + 2 * PROWL_COMM_LEN);
PROWL_AT(prowl_sample, kstack, 56 + 2 * PROWL_COMM_LEN);
PROWL_AT(prowl_sample, ustack, 56 + 2 * PROWL_COMM_LEN + 8 * PROWL_MAX_STACK);
PROWL_AT(prowl_sample, pystack, 56 + 2 * PROWL_COMM_LEN + 16 * PROWL_MAX_STACK);
PROWL_SIZE(prowl_sample, 56 + 2 * PROWL_COMM_LEN + 16 * PROWL_MAX_STACK + 16 * PROWL_MAX_PY);

PROWL_AT(prowl_py_proc, runtime, 0);
PROWL_AT(prowl_py_proc, version, 8);
PROWL_AT(prowl_py_proc, co_code, 34);
PROWL_AT(prowl_py_proc, gen, 40);
PROWL_AT(prowl_py_proc, code_type, 48);
PROWL_AT(prowl_py_proc, bytes_type, 64);
PROWL_SIZE(prowl_py_proc, 72);
PROWL_AT(prowl_pyframe, lasti, 8);
PROWL_SIZE(prowl_pyframe, 16);

PROWL_SIZE(prowl_java_heap, 24);
PROWL_AT(prowl_java_proc, cc_low, 72);
PROWL_AT(prowl_java_proc, flags, 104);
PROWL_AT(prowl_java_proc, log2_seg, 112);
PROWL_AT(prowl_java_proc, cb_name, 114);
PROWL_AT(prowl_java_proc, jdk_major, 128);
PROWL_AT(prowl_java_proc, sc_pcs, 160);
PROWL_SIZE(prowl_java_proc, 192);
PROWL_AT(prowl_jframe, off, 8);
PROWL_AT(prowl_jframe, idx, 16);
PROWL_AT(prowl_jframe, ident, 20);
PROWL_SIZE(prowl_jframe, 24);
_Static_assert(PROWL_MAX_JAVA * 24 <= PROWL_MAX_PY * 16, "Java frames fit in pystack's room");

PROWL_AT(prowl_v8_proc, gen, 16);
PROWL_AT(prowl_v8_proc, fp_context, 24);
PROWL_AT(prowl_v8_proc, smi_tag, 48);
PROWL_AT(prowl_v8_proc, t_script, 52);
PROWL_AT(prowl_v8_proc, text_low, 104);
PROWL_AT(prowl_v8_proc, t_code, 120);
PROWL_AT(prowl_v8_proc, o_code_istream, 136);
PROWL_AT(prowl_v8_proc, copy_low, 152);
PROWL_AT(prowl_v8_proc, bc_sizes, 168);
PROWL_SIZE(prowl_v8_proc, 184);

PROWL_AT(prowl_unwind_row, pc, 0);
PROWL_AT(prowl_unwind_row, cfa_off, 4);
PROWL_AT(prowl_unwind_row, rule, 6);
PROWL_AT(prowl_unwind_row, rbp_off, 7);
PROWL_SIZE(prowl_unwind_row, 8);

PROWL_AT(prowl_unwind_map, start, 0);
PROWL_AT(prowl_unwind_map, end, 8);
PROWL_AT(prowl_unwind_map, bias, 16);
PROWL_AT(prowl_unwind_map, row_first, 24);
PROWL_AT(prowl_unwind_map, row_count, 28);
PROWL_AT(prowl_unwind_map, kind, 32);
PROWL_AT(prowl_unwind_map, _pad, 36);
PROWL_SIZE(prowl_unwind_map, 40);

PROWL_AT(prowl_unwind_proc, map_first, 0);
PROWL_AT(prowl_unwind_proc, map_count, 4);
PROWL_SIZE(prowl_unwind_proc, 8);

PROWL_AT(prowl_unwind_event, type, 0);
PROWL_AT(prowl_unwind_event, pid, 4);
PROWL_AT(prowl_unwind_event, pc, 8);
PROWL_SIZE(prowl_unwind_event, 16);

#undef PROWL_AT
#undef PROWL_SIZE

#endif /* PROWL_H */

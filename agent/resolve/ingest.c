/* ingest.c: resolves each sampled address to a module location (symbolizing a
 * location only the first time it is seen) and counts the stack under its labels. */
#include "ingest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "array_size.h"
#include "label_names.h"
#include "log.h"
#include "jvmname.h"
#include "v8name.h"
#include "pymerge.h"
#include "symbolizer.h"
#include "u64map.h"

#define KEY_UNKNOWN (UINT64_MAX - 1) /* mapping for addresses in no known mapping */
#define KEY_PROWL   (UINT64_MAX - 2) /* mapping for prowl's own marker frames */
#define KEY_PYTHON  (UINT64_MAX - 3) /* mapping for CPython frames */
#define KEY_JAVA    (UINT64_MAX - 4) /* mapping for Java frames */
#define KEY_JS      (UINT64_MAX - 5) /* mapping for node's JavaScript frames */

/* Keys of the marker frames' locations in the KEY_PROWL mapping. */
enum {
	MARKER_USER_DEPTH = 1,   /* user stack deeper than PROWL_MAX_STACK */
	MARKER_KERNEL_DEPTH = 2, /* kernel stack deeper than PROWL_MAX_STACK */
	MARKER_NO_ENTRY = 3,     /* a frame-pointer walk that did not reach a thread's entry */
	MARKER_UREASON = 16,     /* + enum prowl_ureason, + the module's id << 8 when it names one */
};
_Static_assert(MARKER_UREASON + PROWL_UR__MAX <= 0xff, "ureason marker keys overlap the module id");

/* Bits of ingest.loc_flags. */
#define LOC_ENTRY 1 /* its function is a thread's entry (thread_entry()) */
#define LOC_EVAL  2 /* its function is CPython's _PyEval_EvalFrameDefault */

struct ingest {
	struct symbolizer *sym;
	struct profile *prof;
	struct ingest_opts opts;
	uint32_t *mapping_of;   /* symbolizer module id -> profile mapping id */
	size_t mapping_of_cap;
	uint32_t unknown_mapping, prowl_mapping, python_mapping;
	uint32_t loc_trunc_user, loc_trunc_kernel, loc_no_entry;
	/* Per location id: LOC_* bits. */
	uint8_t *loc_flags;
	size_t loc_flags_cap;
	struct u64map pylocs;  /* py_resolver_frame() key -> location id */
	uint64_t py_next_addr; /* addresses of [python] locations: 1, 2, ... */
	/* The runtimes whose frames BPF records (jstack): Java, JavaScript. */
	struct runtime_locs {
		uint32_t mapping;
		struct u64map locs; /* the namer's key -> location id */
		uint64_t next_addr; /* addresses of its locations: 1, 2, ... */
	} java, js;
	const struct sym_module *main_mod;
	bool main_mod_looked_up;
	/* The previous sample's labels, reused while pid/tid/names repeat. */
	struct {
		uint32_t pid, tid, id;
		char comm[PROWL_COMM_LEN], pcomm[PROWL_COMM_LEN];
	} last;
	uint32_t locs[2 * PROWL_MAX_STACK + PROWL_MAX_PY + 4];
};

int ingest_new(struct symbolizer *sym, struct profile *prof, const struct ingest_opts *opts, struct ingest **ret)
{
	struct ingest *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	g->sym = sym;
	g->prof = prof;
	g->opts = *opts;
	*ret = g;
	return 0;
}

void ingest_free(struct ingest *g)
{
	if (!g)
		return;
	free(g->mapping_of);
	free(g->loc_flags);
	u64map_free(&g->pylocs);
	u64map_free(&g->java.locs);
	u64map_free(&g->js.locs);
	free(g);
}

void ingest_profile_reset(struct ingest *g)
{
	if (g->mapping_of)
		memset(g->mapping_of, 0, g->mapping_of_cap * sizeof(*g->mapping_of));
	g->unknown_mapping = g->prowl_mapping = g->python_mapping = g->java.mapping = g->js.mapping = 0;
	g->loc_trunc_user = g->loc_trunc_kernel = g->loc_no_entry = 0;
	if (g->loc_flags)
		memset(g->loc_flags, 0, g->loc_flags_cap);
	u64map_free(&g->pylocs);
	g->py_next_addr = 0;
	u64map_free(&g->java.locs);
	u64map_free(&g->js.locs);
	g->java.next_addr = g->js.next_addr = 0;
	g->last.id = 0;
}

static int mapping_for_module(struct ingest *g, const struct sym_module *m, uint32_t *ret)
{
	struct prof_mapping_in in;
	int r;

	if (m->id >= g->mapping_of_cap) {
		size_t cap = g->mapping_of_cap ? g->mapping_of_cap : 64;
		uint32_t *p;

		while (cap <= m->id)
			cap *= 2;
		p = realloc(g->mapping_of, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + g->mapping_of_cap, 0, (cap - g->mapping_of_cap) * sizeof(*p));
		g->mapping_of = p;
		g->mapping_of_cap = cap;
	}
	if (g->mapping_of[m->id]) {
		*ret = g->mapping_of[m->id];
		return 0;
	}
	if (!g->main_mod_looked_up && g->opts.main_pid) {
		g->main_mod = symbolizer_main_module(g->sym, g->opts.main_pid);
		g->main_mod_looked_up = true;
	}
	in = (struct prof_mapping_in){
		.key = m->id,
		.start = m->start,
		.limit = m->limit,
		.offset = m->offset,
		.filename = m->path,
		.build_id = m->build_id,
		.is_main = m == g->main_mod,
		.is_kernel = m->kind == SYM_MOD_KERNEL,
	};
	r = profile_mapping(g->prof, &in, &g->mapping_of[m->id]);
	*ret = g->mapping_of[m->id];
	return r;
}

static int pseudo_mapping(struct ingest *g, uint64_t key, const char *name, uint32_t *cache)
{
	struct prof_mapping_in in = { .key = key, .start = 0, .limit = UINT64_MAX, .filename = name };

	if (*cache)
		return 0;
	return profile_mapping(g->prof, &in, cache);
}

/* A location for an address that no mapping covers: kept, never dropped. */
static int unknown_location(struct ingest *g, uint64_t addr, uint32_t *ret)
{
	char name[48];
	struct prof_frame f = { .function = name };
	int r = pseudo_mapping(g, KEY_UNKNOWN, PROF_UNKNOWN_MAPPING, &g->unknown_mapping);

	if (r < 0)
		return r;
	*ret = profile_find_location(g->prof, g->unknown_mapping, addr);
	if (*ret)
		return 0;
	snprintf(name, sizeof(name), "[unknown]+0x%" PRIx64, addr);
	return profile_add_location(g->prof, g->unknown_mapping, addr, &f, 1, false, ret);
}

/* The marker frame at the root of a stack that was cut short. */
static int truncated_location(struct ingest *g, bool kernel, uint32_t *ret)
{
	uint32_t *cache = kernel ? &g->loc_trunc_kernel : &g->loc_trunc_user;
	/* The user stack's is the depth reason's marker (bpf/prowl.h). */
	struct prof_frame f = {
		.function = kernel ? "[truncated: kernel stack deeper than " PROWL_STR(PROWL_MAX_STACK) " frames]"
				   : prowl_ureason_text(PROWL_UR_DEPTH)->marker,
	};
	int r;

	if (*cache) {
		*ret = *cache;
		return 0;
	}
	r = pseudo_mapping(g, KEY_PROWL, PROF_MARKER_MAPPING, &g->prowl_mapping);
	if (r < 0)
		return r;
	r = profile_add_location(g->prof, g->prowl_mapping, kernel ? MARKER_KERNEL_DEPTH : MARKER_USER_DEPTH, &f, 1, true,
				 cache);
	*ret = *cache;
	return r;
}

/* The location of a marker frame (text f) in the [prowl] mapping, one per key. */
static int marker_location(struct ingest *g, uint64_t key, const struct prof_frame *f, uint32_t *ret)
{
	int r = pseudo_mapping(g, KEY_PROWL, PROF_MARKER_MAPPING, &g->prowl_mapping);

	if (r < 0)
		return r;
	*ret = profile_find_location(g->prof, g->prowl_mapping, key);
	if (*ret)
		return 0;
	return profile_add_location(g->prof, g->prowl_mapping, key, f, 1, true, ret);
}

/* The marker frame at the root of a user stack that the DWARF unwinder cut
 * short (prowl_sample.ureason). mod: the module of the last frame, when known;
 * reasons about an object name it. Locations are keyed in the [prowl] mapping
 * by reason and module, so each distinct marker is one location. */
static int ureason_location(struct ingest *g, unsigned int reason, const struct sym_module *mod, uint32_t *ret)
{
	char text[300];
	const char *name = mod && mod->name && mod->name[0] ? mod->name : NULL;
	uint64_t key;
	struct prof_frame f = { .function = text };
	const struct prowl_ureason_text *t = prowl_ureason_text(reason);

	if (!t) {
		snprintf(text, sizeof(text), "[truncated: unknown reason %u]", reason);
		name = NULL;
	} else if (t->names_object) {
		/* The table's own format (a literal of bpf/prowl.h), with one %s. */
		snprintf(text, sizeof(text), t->marker, name ? name : "an object");
	} else {
		snprintf(text, sizeof(text), "%s", t->marker);
		name = NULL;
	}
	key = MARKER_UREASON + reason + (name ? (uint64_t)mod->id << 8 : 0);
	return marker_location(g, key, &f, ret);
}

/* Where a thread's user stack begins: the functions that call the program's
 * own code first (glibc, musl, Go). A frame-pointer walk that ends anywhere
 * else lost the frames above, because code without frame pointers broke the chain. */
static bool thread_entry(const char *fn)
{
	static const char *const entries[] = {
		"_start", "__libc_start_main", "__libc_start_main_impl", "__libc_start_call_main",
		"libc_start_main_stage2", "start_thread", "clone", "__clone", "clone3", "__clone3",
		"thread_start", /* glibc's arm64 clone and clone3: the new thread's first code */
		"runtime.goexit", "runtime.mstart", "runtime.rt0_go",
	};

	for (size_t i = 0; i < ARRAY_SIZE(entries); i++)
		if (strcmp(fn, entries[i]) == 0)
			return true;
	return false;
}

static int note_flag(struct ingest *g, uint32_t loc, uint8_t flag)
{
	if (loc >= g->loc_flags_cap) {
		size_t cap = g->loc_flags_cap ? g->loc_flags_cap : 1024;
		uint8_t *p;

		while (cap <= loc)
			cap *= 2;
		p = realloc(g->loc_flags, cap);
		if (!p)
			return -ENOMEM;
		memset(p + g->loc_flags_cap, 0, cap - g->loc_flags_cap);
		g->loc_flags = p;
		g->loc_flags_cap = cap;
	}
	g->loc_flags[loc] |= flag;
	return 0;
}

static bool has_flag(const struct ingest *g, uint32_t loc, uint8_t flag)
{
	return loc < g->loc_flags_cap && (g->loc_flags[loc] & flag);
}

/* The marker frame at the root of a frame-pointer walk that ended short of a
 * thread's entry. */
static int no_entry_location(struct ingest *g, uint32_t *ret)
{
	struct prof_frame f = { .function = "[truncated: frame-pointer walk ended before the thread's entry]" };
	int r;

	if (g->loc_no_entry) {
		*ret = g->loc_no_entry;
		return 0;
	}
	r = pseudo_mapping(g, KEY_PROWL, PROF_MARKER_MAPPING, &g->prowl_mapping);
	if (r < 0)
		return r;
	r = profile_add_location(g->prof, g->prowl_mapping, MARKER_NO_ENTRY, &f, 1, true, &g->loc_no_entry);
	*ret = g->loc_no_entry;
	return r;
}

/* Anonymous executable memory: the JIT symbol its process's perf map names, or
 * one [jit] location per process and mapping. Locations of different processes
 * stay apart (the variant is the pid): their addresses mean different code. The
 * [jit] one's variant has its top bit too: its key is the mapping's start, which a
 * named symbol at that very address would share (and would then be [jit] for good). */
static int jit_location(struct ingest *g, const struct sym_addr *a, uint32_t mapping, uint32_t *ret)
{
	struct sym_frame sf;
	struct prof_frame pf;
	uint64_t key;
	bool named;
	int r;

	r = symbolizer_jit_frame(g->sym, a, &sf, &key, &named);
	if (r < 0)
		return r;
	pf = (struct prof_frame){ .function = sf.function, .system_name = sf.system_name };
	return profile_add_location_variant(g->prof, mapping, key, named ? a->pid : a->pid | 1u << 31, &pf, 1, named,
					   ret);
}

static int location_for(struct ingest *g, const struct sym_addr *a, uint32_t *ret)
{
	struct sym_frame sf[SYM_MAX_INLINE];
	struct prof_frame pf[SYM_MAX_INLINE];
	uint32_t mapping;
	size_t n = 0;
	bool symbolized = false;
	int r;

	r = mapping_for_module(g, a->mod, &mapping);
	if (r < 0)
		return r;
	if (a->mod->kind == SYM_MOD_ANON && a->pid)
		return jit_location(g, a, mapping, ret);
	*ret = profile_find_location(g->prof, mapping, a->addr);
	if (*ret)
		return 0;
	r = symbolizer_frames(g->sym, a->mod, a->addr, sf, SYM_MAX_INLINE, &n, &symbolized);
	if (r < 0 || n == 0)
		return r < 0 ? r : -EIO;
	for (size_t i = 0; i < n; i++)
		pf[i] = (struct prof_frame){
			.function = sf[i].function,
			.system_name = sf[i].system_name,
			.file = sf[i].file,
			.line = sf[i].line,
			.start_line = sf[i].start_line,
		};
	r = profile_add_location(g->prof, mapping, a->addr, pf, n, symbolized, ret);
	/* The outermost of an inline chain is the function the code is in. */
	if (r >= 0 && a->mod->kind != SYM_MOD_KERNEL && thread_entry(sf[n - 1].function))
		r = note_flag(g, *ret, LOC_ENTRY);
	if (r >= 0 && a->mod->kind == SYM_MOD_ELF && py_is_eval_function(sf[n - 1].function)) {
		static atomic_bool hinted; /* every ingest of the process shares it */

		r = note_flag(g, *ret, LOC_EVAL);
		if (g->opts.python_hint && !atomic_exchange(&hinted, true))
			log_warn("python: CPython processes are sampled, but %s", g->opts.python_hint);
	}
	return r;
}

/* ---- Python frames ---- */

static int python_mapping(struct ingest *g)
{
	struct prof_mapping_in in = { .key = KEY_PYTHON, .start = 0, .limit = UINT64_MAX, .filename = "[python]",
				      .is_python = true };

	if (g->python_mapping)
		return 0;
	return profile_mapping(g->prof, &in, &g->python_mapping);
}

/* struct py_sink's marker: one in the [prowl] mapping per text, for a Python
 * stack that stops short. */
static int python_marker(void *ctx, const char *why, uint32_t *ret)
{
	struct ingest *g = ctx;
	uint64_t key = 64;
	struct prof_frame f = { .function = why };

	for (const char *p = why; *p; p++) /* one location per text */
		key = key * 31 + (unsigned char)*p;
	return marker_location(g, key | 1ull << 63, &f, ret);
}

/* struct py_sink's frame: one [python] location per (code object, line). */
static int python_location(void *ctx, const struct py_frame_name *name, uint64_t key, uint32_t *ret)
{
	struct ingest *g = ctx;
	struct prof_frame pf;
	uint64_t id;
	int r;

	if (u64map_get(&g->pylocs, key, &id)) {
		*ret = (uint32_t)id;
		return 0;
	}
	r = python_mapping(g);
	if (r < 0)
		return r;
	pf = (struct prof_frame){ .function = name->function, .file = name->file, .line = name->line,
				  .start_line = name->start_line };
	r = profile_add_location(g->prof, g->python_mapping, ++g->py_next_addr, &pf, 1, true, ret);
	if (r < 0)
		return r;
	return u64map_put(&g->pylocs, key, *ret);
}

/* ---- Java and JavaScript frames ---- */

/* A runtime's named frame (key: its namer's): one location per name in the runtime's
 * mapping (in: made on first use), with n lines (pf[0] innermost: inlined methods). */
static int runtime_location(struct ingest *g, struct runtime_locs *rl, const struct prof_mapping_in *in, uint64_t key,
			    const struct prof_frame *pf, size_t n, uint32_t *ret)
{
	uint64_t id;
	int r;

	if (u64map_get(&rl->locs, key, &id)) {
		*ret = (uint32_t)id;
		return 0;
	}
	if (!rl->mapping && (r = profile_mapping(g->prof, in, &rl->mapping)) < 0)
		return r;
	r = profile_add_location(g->prof, rl->mapping, ++rl->next_addr, pf, n, true, ret);
	if (r < 0)
		return r;
	return u64map_put(&rl->locs, key, *ret);
}

/* Java frame f of s: one [java] location per name (a compiled frame's inlined
 * methods as its lines, innermost first), or a marker saying why it has none. */
static int java_location(struct ingest *g, const struct prowl_sample *s, const struct prowl_jframe *f, uint32_t *ret)
{
	static const struct prof_mapping_in in = { .key = KEY_JAVA, .start = 0, .limit = UINT64_MAX,
						   .filename = "[java]", .is_java = true };
	struct jvm_frame_name name[JVM_SCOPE_MAX];
	struct prof_frame pf[JVM_SCOPE_MAX];
	const char *why = NULL;
	uint64_t key;
	size_t n = 0;
	int r;

	r = jvm_namer_frame(symbolizer_java(g->sym), s->pid, s->pygen, f, name, JVM_SCOPE_MAX, &n, &key, &why);
	if (r == -ENOMEM)
		return r;
	if (r < 0 || !n)
		return python_marker(g, why, ret);
	for (size_t i = 0; i < n; i++)
		pf[i] = (struct prof_frame){ .function = name[i].function, .file = name[i].file, .line = name[i].line };
	return runtime_location(g, &g->java, &in, key, pf, n, ret);
}

/* JavaScript frame f of s (node) at pc: one [js] location per name (function, script,
 * line; an optimized frame's inlined functions as its lines, innermost first), or a
 * marker saying why it has none. */
static int js_location(struct ingest *g, const struct prowl_sample *s, const struct prowl_jframe *f, uint64_t pc,
		       uint32_t *ret)
{
	static const struct prof_mapping_in in = { .key = KEY_JS, .start = 0, .limit = UINT64_MAX, .filename = "[js]",
						   .is_js = true };
	struct frame_name name[V8_FRAME_NAMES_MAX];
	struct prof_frame pf[V8_FRAME_NAMES_MAX];
	const char *why = NULL;
	uint64_t key;
	size_t n = 0;
	int r;

	r = v8_namer_frame(symbolizer_node(g->sym), s->pid, s->pygen, f, pc, name, V8_FRAME_NAMES_MAX, &n, &key, &why);
	if (r < 0 || !n)
		return r == -ENOMEM ? r : python_marker(g, why, ret);
	for (size_t i = 0; i < n; i++)
		pf[i] = (struct prof_frame){ .function = name[i].function, .file = name[i].file, .line = name[i].line };
	return runtime_location(g, &g->js, &in, key, pf, n, ret);
}

static int labels_for(struct ingest *g, const struct prowl_sample *s, uint32_t *ret)
{
	char comm[PROWL_COMM_LEN + 1] = "", pcomm[PROWL_COMM_LEN + 1] = "";
	struct prof_label_in l[4];
	size_t n = 0;
	int r;

	if (g->last.id && g->last.pid == s->pid && (!g->opts.per_thread || g->last.tid == s->tid) &&
	    memcmp(g->last.pcomm, s->pcomm, PROWL_COMM_LEN) == 0 &&
	    (!g->opts.per_thread || memcmp(g->last.comm, s->comm, PROWL_COMM_LEN) == 0)) {
		*ret = g->last.id;
		return 0;
	}
	memcpy(comm, s->comm, PROWL_COMM_LEN);
	memcpy(pcomm, s->pcomm, PROWL_COMM_LEN);
	if (!pcomm[0])
		memcpy(pcomm, comm, sizeof(pcomm));
	l[n++] = (struct prof_label_in){ .key = LABEL_PID, .num = s->pid };
	l[n++] = (struct prof_label_in){ .key = LABEL_PROCESS_NAME, .str = pcomm[0] ? pcomm : "unknown" };
	if (g->opts.per_thread) {
		l[n++] = (struct prof_label_in){ .key = LABEL_TID, .num = s->tid };
		l[n++] = (struct prof_label_in){ .key = LABEL_THREAD_NAME, .str = comm[0] ? comm : "unknown" };
	}
	r = profile_labelset(g->prof, l, n, ret);
	if (r < 0)
		return r;
	g->last.pid = s->pid;
	g->last.tid = s->tid;
	g->last.id = *ret;
	memcpy(g->last.comm, s->comm, PROWL_COMM_LEN);
	memcpy(g->last.pcomm, s->pcomm, PROWL_COMM_LEN);
	return 0;
}

int ingest_resymbolize(struct ingest *g)
{
	struct sym_frame sf[SYM_MAX_INLINE];
	struct prof_frame pf[SYM_MAX_INLINE];
	uint32_t nloc = profile_location_count(g->prof);
	int changed = 0;

	for (size_t id = 1; id < g->mapping_of_cap; id++) {
		const struct sym_module *m = symbolizer_module(g->sym, (uint32_t)id);
		uint32_t mapping = g->mapping_of[id];

		if (!mapping || !m || !m->debug_gen)
			continue;
		for (uint32_t loc = 1; loc <= nloc; loc++) {
			bool symbolized = false;
			uint64_t addr;
			size_t n = 0;
			int r;

			if (!profile_location_in(g->prof, loc, mapping, &addr))
				continue;
			r = symbolizer_frames(g->sym, m, addr, sf, SYM_MAX_INLINE, &n, &symbolized);
			if (r < 0)
				return r;
			for (size_t i = 0; i < n; i++)
				pf[i] = (struct prof_frame){ .function = sf[i].function, .system_name = sf[i].system_name,
							     .file = sf[i].file, .line = sf[i].line,
							     .start_line = sf[i].start_line };
			r = n ? profile_set_location_frames(g->prof, loc, pf, n, symbolized) : 0;
			if (r < 0)
				return r;
			changed++;
		}
	}
	return changed;
}

int ingest_sample(struct ingest *g, const struct prowl_sample *s)
{
	unsigned int kn = s->kstack_len < PROWL_MAX_STACK ? s->kstack_len : PROWL_MAX_STACK;
	unsigned int un = s->ustack_len < PROWL_MAX_STACK ? s->ustack_len : PROWL_MAX_STACK;
	size_t n = 0, user_first;
	uint32_t labels;
	struct sym_addr a;
	const struct sym_module *last_mod = NULL;
	unsigned int py_i = 0;
	struct py_resolver *py = symbolizer_python(g->sym);
	const struct py_sink sink = { .ctx = g, .frame = python_location, .marker = python_marker };
	bool stop = false, java = s->flags & (PROWL_SAMPLE_JAVA | PROWL_SAMPLE_V8), js = s->flags & PROWL_SAMPLE_V8;
	unsigned int jn = java ? (s->pystack_len < PROWL_MAX_JAVA ? s->pystack_len : PROWL_MAX_JAVA) : 0, j_i = 0;
	int r;

	/* Leaf first: kernel frames, then user frames. Every frame but the leaf
	 * holds a return address; step back one byte into the call instruction. */
	for (unsigned int i = 0; i < kn; i++) {
		uint64_t pc = s->kstack[i] - (i > 0);

		if (s->kstack[i] == 0)
			break;

		r = symbolizer_resolve_kernel(g->sym, pc, &a);
		r = r < 0 ? unknown_location(g, pc, &g->locs[n]) : location_for(g, &a, &g->locs[n]);
		if (r < 0)
			return r;
		n++;
	}
	if (s->flags & PROWL_SAMPLE_KSTACK_TRUNC && !un) {
		r = truncated_location(g, true, &g->locs[n]);
		if (r < 0)
			return r;
		n++;
	}
	user_first = n;
	for (unsigned int i = 0; i < un; i++) {
		uint64_t pc = s->ustack[i] - (i > 0);

		if (s->ustack[i] == 0) /* the walk reached a zero return address: the end */
			break;
		if (j_i < jn && s->jstack[j_i].idx == i) { /* a Java frame (code cache), or a JavaScript one */
			r = js ? js_location(g, s, &s->jstack[j_i++], pc, &g->locs[n])
			       : java_location(g, s, &s->jstack[j_i++], &g->locs[n]);
			if (r < 0)
				return r;
			n++;
			continue;
		}

		r = symbolizer_resolve_user(g->sym, s->pid, pc, &a);
		last_mod = r < 0 ? NULL : a.mod;
		r = r < 0 ? unknown_location(g, pc, &g->locs[n]) : location_for(g, &a, &g->locs[n]);
		if (r < 0)
			return r;
		if (!java && (s->pystack_len || s->pyreason)) {
			r = py_merge_frame(py, &sink, s, g->locs[n], has_flag(g, g->locs[n], LOC_EVAL), &py_i, g->locs, &n,
					   &stop);
			if (r < 0)
				return r;
			if (stop)
				break;
		} else {
			n++;
		}
	}
	/* Python frames the native stack had no activation left for (it was cut short). */
	if (!stop && !java && (r = py_merge_rest(py, &sink, s, py_i, g->locs, &n, &stop)) < 0)
		return r;
	if (stop) {
		/* The Python marker ends the stack. */
	} else if (s->ureason && s->ureason != PROWL_UR_DEPTH) {
		r = ureason_location(g, s->ureason, last_mod, &g->locs[n]);
		if (r < 0)
			return r;
		n++;
	} else if (s->flags & PROWL_SAMPLE_USTACK_TRUNC) {
		r = truncated_location(g, false, &g->locs[n]);
		if (r < 0)
			return r;
		n++;
	} else if (s->flags & PROWL_SAMPLE_USTACK_FP && n > user_first &&
		   !has_flag(g, g->locs[n - 1], LOC_ENTRY)) {
		/* No stack is passed off as complete: a frame-pointer walk must end
		 * in a thread's entry, or say that it did not. */
		r = no_entry_location(g, &g->locs[n]);
		if (r < 0)
			return r;
		n++;
	}
	r = labels_for(g, s, &labels);
	if (r < 0)
		return r;
	if (s->flags & PROWL_SAMPLE_OFFCPU)
		return profile_add_offcpu(g->prof, labels, g->locs, n, (int64_t)s->off_ns);
	return profile_add_sample(g->prof, labels, g->locs, n, 1);
}

/* v8name.c: reads a JavaScript frame's function (name, script, line) from the node process
 * with process_vm_readv() through v8heap.c, checked against what BPF saw, cached by (process,
 * registration, SharedFunctionInfo, identity, offset); scripts' line tables cached with them. */
#include "v8name.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "jsclass.h"
#include "namecache.h"
#include "u64map.h"
#include "v8heap.h"
#include "v8inline.h"

#define SCRIPTS_MAX       256        /* scripts' line and class tables kept; dropped with the names */
#define SCRIPT_BYTES_MAX (16u << 20) /* and their bytes: past it, they start over */

_Static_assert(V8_FRAME_NAMES_MAX == V8_INLINE_MAX, "v8name.h's V8_FRAME_NAMES_MAX is V8_INLINE_MAX");

struct v8_namer {
	const struct maps_io *io;
	struct name_cache names;
	struct u64map scripts; /* (pid, gen, script) key -> script index + 1 */
	struct v8_script script[SCRIPTS_MAX];
	uint32_t nscripts;
	uint64_t script_bytes;
	uint32_t pid, gen;     /* the registration of the last process looked up */
	struct prowl_v8_proc proc;
	uint64_t istream_map;  /* its InstructionStream map, once found (v8inline.c) */
};

int v8_namer_new(struct v8_namer **ret)
{
	*ret = calloc(1, sizeof(**ret));
	if (!*ret)
		return -ENOMEM;
	(*ret)->names.max = V8_NAME_CACHE_MAX;
	return 0;
}

static void scripts_clear(struct v8_namer *r)
{
	for (uint32_t i = 0; i < r->nscripts; i++)
		v8_script_free(&r->script[i]);
	r->nscripts = 0;
	r->script_bytes = 0;
	u64map_free(&r->scripts);
}

void v8_namer_free(struct v8_namer *r)
{
	if (!r)
		return;
	name_cache_free(&r->names);
	scripts_clear(r);
	free(r);
}

void v8_namer_set_io(struct v8_namer *r, const struct maps_io *io)
{
	r->io = io && io->v8_proc_get ? io : NULL;
	r->pid = 0;
}

void v8_namer_stats(const struct v8_namer *r, struct name_cache_stats *ret)
{
	name_cache_stats(&r->names, r->script_bytes, ret);
}

static int proc_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv((pid_t)(uintptr_t)ctx, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

/* The bytes a cached script holds (its line ends and classes), for SCRIPT_BYTES_MAX. */
static size_t script_size(const struct v8_script *e)
{
	return e->n * sizeof(*e->ends) + js_classes_bytes(&e->cls);
}

/* The line table and the classes of script in process pid, cached; NULL when its lines
 * cannot be read (its classes may be none). */
static const struct v8_script *script_lines(struct v8_namer *r, const struct v8_mem *m, uint32_t pid,
					    uint64_t script)
{
	uint64_t key = name_key_mix(name_key_mix((uint64_t)pid << 32 | r->gen, script), 0x5c), v, src;
	struct v8_script *e;

	if (u64map_get(&r->scripts, key, &v)) {
		e = &r->script[v - 1];
		/* The same script while its source is: the collector may have put another
		 * script where this one was (a registration lasts while the mappings do). */
		if (!r->proc.o_script_source || v8_field(m, &r->proc, script, r->proc.o_script_source, &src) < 0 ||
		    src == e->source)
			return e;
		r->script_bytes -= script_size(e);
		v8_script_free(e);
		if (v8_script_read(m, &r->proc, script, e) < 0)
			return NULL; /* an empty entry: read again next time */
		r->script_bytes += script_size(e);
		return e;
	}
	/* Full: start over. The bytes bound a process's scripts read again, each time the
	 * collector moved their sources. */
	if (r->nscripts >= SCRIPTS_MAX || r->script_bytes >= SCRIPT_BYTES_MAX)
		scripts_clear(r);
	e = &r->script[r->nscripts];
	if (v8_script_read(m, &r->proc, script, e) < 0)
		return NULL;
	if (u64map_put(&r->scripts, key, r->nscripts + 1) < 0) {
		v8_script_free(e);
		return NULL;
	}
	r->script_bytes += script_size(e);
	r->nscripts++;
	return e;
}

/* Function sfi's name, script and the line of script offset pos (-1: its first line) into *e. */
static int read_name(struct v8_namer *r, const struct v8_mem *m, uint32_t pid, uint64_t sfi, int32_t pos,
		     struct name_entry *e)
{
	const struct prowl_v8_proc *vp = &r->proc;
	const struct v8_script *se;
	char name[V8_NAME_MAX], file[V8_NAME_MAX] = "", full[V8_NAME_MAX + JS_CLASS_NAME_MAX];
	const struct js_class *k = NULL;
	int32_t start;
	uint64_t script;
	int rc;

	rc = v8_sfi_name(m, vp, sfi, name, sizeof(name), &start);
	if (rc < 0)
		return rc;
	*e = (struct name_entry){ 0 };
	if (v8_sfi_script(m, vp, sfi, &script) == 0) {
		if (v8_script_name(m, vp, script, file, sizeof(file)) < 0)
			file[0] = 0;
		if (pos < 0)
			pos = start;
		if (pos >= 0 && (se = script_lines(r, m, pid, script))) {
			e->line = v8_line_of(se->ends, se->n, pos);
			/* A method: its class's name before its own, as Error.stack writes it. */
			if (name[0] && start >= 0)
				k = js_class_at(&se->cls, (uint32_t)start);
		}
	}
	if (k)
		snprintf(full, sizeof(full), "%s.%s", k->name, name);
	e->function = strdup(k ? full : name[0] ? name : "(anonymous)");
	e->file = file[0] ? strdup(file) : NULL;
	if (!e->function || (file[0] && !e->file)) {
		free(e->function);
		free(e->file);
		return -ENOMEM;
	}
	return 0;
}

static void entries_free(struct name_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].function);
		free(e[i].file);
	}
}

/* The names of frame f into e[0..*ret_n): an optimized frame's inlined functions
 * innermost first (found from pc), its own function last. */
static int read_frame(struct v8_namer *r, uint32_t pid, const struct prowl_jframe *f, uint64_t pc,
		      struct name_entry *e, size_t cap, size_t *ret_n, const char **why)
{
	struct v8_mem m = { proc_read, (void *)(uintptr_t)pid };
	const struct prowl_v8_proc *vp = &r->proc;
	struct v8_inl_frame inl[V8_INLINE_MAX];
	int32_t pos = -1;
	uint32_t check;
	size_t n = 0;
	int rc;

	/* The function must still be the one BPF saw: the collector moves objects. */
	*why = "[v8: function moved or freed since the sample]";
	if (v8_obj_type(&m, vp, f->ptr) != vp->t_sfi || v8_sfi_check(&m, vp, f->ptr, &check) < 0 || check != f->check)
		return -ESTALE;
	*why = "[v8: function unreadable]";
	/* Compiled code: the functions inlined at pc, when it is optimized code of f's
	 * function, or the line of baseline code's bytecode there; else the function alone,
	 * at its first line. A function at its code's entry is named only from its code. */
	if ((f->kind == PROWL_V8_JIT || f->kind == PROWL_V8_ENTRY) && pc &&
	    v8_inline_frames(&m, vp, pc, f->ptr, &r->istream_map, inl, cap < V8_INLINE_MAX ? cap : V8_INLINE_MAX, &n) < 0)
		n = 0;
	if (!n && f->kind == PROWL_V8_ENTRY) {
		*why = "[v8: a function's entry whose code was not found]";
		return -ENOENT;
	}
	if (!n) {
		/* The line of the bytecode being run. */
		if (f->kind == PROWL_V8_INTERP && f->off != PROWL_JF_BCI_NONE && vp->o_bytecode_data > vp->heap_tag &&
		    f->off >= (uint32_t)(vp->o_bytecode_data - vp->heap_tag))
			v8_bytecode_position(&m, vp, f->ptr, f->off - (vp->o_bytecode_data - vp->heap_tag), &pos);
		inl[0] = (struct v8_inl_frame){ f->ptr, pos };
		n = 1;
	}
	for (size_t i = 0; i < n; i++) {
		if ((rc = read_name(r, &m, pid, inl[i].sfi, inl[i].pos, &e[i])) < 0) {
			entries_free(e, i);
			return rc;
		}
	}
	*ret_n = n;
	return 0;
}

int v8_namer_frame(struct v8_namer *r, uint32_t pid, uint32_t gen, const struct prowl_jframe *f, uint64_t pc,
		   struct frame_name *ret, size_t cap, size_t *ret_n, uint64_t *ret_key, const char **ret_why)
{
	struct name_entry e[V8_INLINE_MAX];
	const struct name_entry *ce;
	uint64_t key;
	size_t n = 0;
	int rc;

	*ret_n = 0;
	*ret_why = "[v8: the process exited or re-registered before its frames were read]";
	if (!cap)
		return -EINVAL;
	if (r->pid != pid || r->gen != gen) {
		r->pid = 0;
		r->istream_map = 0;
		if (!r->io || r->io->v8_proc_get(r->io->ctx, pid, &r->proc) < 0 || r->proc.gen != gen)
			return -ESRCH;
		r->pid = pid;
		r->gen = gen;
	}
	/* Compiled frames by pc too: each pc has its own inlined functions and lines. */
	pc = f->kind == PROWL_V8_JIT || f->kind == PROWL_V8_ENTRY ? pc : 0;
	key = name_key_mix(name_key_mix(name_key_mix(name_key_mix((uint64_t)pid << 32 | gen, f->ptr), f->check),
					f->kind),
			   f->off);
	key = name_key_mix(key, pc);
	key = key ? key : 1;
	if ((ce = name_cache_get(&r->names, key))) {
		for (n = 0; n <= ce->chain && n < cap; n++)
			ret[n] = (struct frame_name){ ce[n].function, ce[n].file, ce[n].line };
		*ret_n = n;
		*ret_key = key;
		return 0;
	}
	rc = f->kind >= PROWL_V8_INTERP && f->kind <= PROWL_V8_ENTRY ? read_frame(r, pid, f, pc, e, cap, &n, ret_why)
								     : -EBADMSG;
	if (rc < 0) {
		r->names.failures++;
		if (rc != -ENOMEM && kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			*ret_why = "[v8: the process exited before its frames were read]";
		return rc == -ENOMEM ? rc : -ESTALE;
	}
	if (r->names.n + n > r->names.max)
		scripts_clear(r); /* the names start over: the line tables with them */
	name_cache_room(&r->names, (uint32_t)n);
	/* A chain in a row: the first entry under key says how many follow. */
	e[0].chain = (uint32_t)n - 1;
	for (size_t i = 0; i < n; i++) {
		const struct name_entry *pe = name_cache_put(&r->names, i ? name_key_mix(key, i) : key, &e[i]);

		if (!pe) {
			entries_free(e + i + 1, n - i - 1);
			return -ENOMEM;
		}
		if (!i)
			ce = pe;
	}
	for (size_t i = 0; i < n; i++)
		ret[i] = (struct frame_name){ ce[i].function, ce[i].file, ce[i].line };
	*ret_n = n;
	*ret_key = key;
	return 0;
}

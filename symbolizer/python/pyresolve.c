/* pyresolve.c: names sampled Python frames: a (code object, instruction) pair becomes a
 * qualified name, file and line, read once per code object and cached. */
#include "pyresolve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct py_resolver {
	const struct maps_io *io;  /* the sampler's maps (NULL: no py_procs) */
	struct pycode_cache *pycode;
	/* The registration of the last process looked up. */
	uint32_t pid, gen;
	struct prowl_py_proc proc;
};

int py_resolver_new(struct py_resolver **ret)
{
	*ret = calloc(1, sizeof(**ret));
	return *ret ? 0 : -ENOMEM;
}

void py_resolver_free(struct py_resolver *r)
{
	if (!r)
		return;
	pycode_cache_free(r->pycode);
	free(r);
}

void py_resolver_set_io(struct py_resolver *r, const struct maps_io *io)
{
	r->io = io && io->py_proc_get ? io : NULL;
	r->pid = 0;
}

/* The registration of pid that BPF used (gen), or -ESRCH when it is gone or
 * was replaced (an exec, a new registration): its addresses mean nothing now. */
static int py_proc(struct py_resolver *r, uint32_t pid, uint32_t gen)
{
	if (r->pid == pid && r->gen == gen)
		return 0;
	r->pid = 0;
	if (!r->io || r->io->py_proc_get(r->io->ctx, pid, &r->proc) < 0 || r->proc.gen != gen)
		return -ESRCH;
	r->pid = pid;
	r->gen = gen;
	return 0;
}

int py_resolver_frame(struct py_resolver *r, uint32_t pid, uint32_t gen, const struct prowl_pyframe *f,
		      struct py_frame_name *ret, uint64_t *ret_key, const char **ret_why)
{
	const struct pycode *co;
	uint32_t lasti = f->lasti & ~PROWL_PYF_ENTRY;
	int e, line;

	if (!r->pycode && (e = pycode_cache_new(0, 0, &r->pycode)) < 0)
		return e;
	e = pycode_get(r->pycode, pid, gen, NULL, f->code, f->firstlineno, &co);
	if (e == -EAGAIN) {
		e = py_proc(r, pid, gen);
		if (e < 0) {
			*ret_why = "[python: the process exited or exec'ed before its frames were read]";
			return e;
		}
		e = pycode_get(r->pycode, pid, gen, &r->proc, f->code, f->firstlineno, &co);
	}
	if (e < 0) {
		*ret_why = e == -ENOMEM ? "[python: out of memory]"
			 : e == -EBADMSG ? "[python: not a code object (garbled or freed frame)]"
					  : "[python: code object unreadable]";
		return e;
	}
	/* A frame entered but not yet at its first instruction (f_lasti -1, or 3.11+'s
	 * instruction pointer before the code) is at its def line, as CPython reports it. */
	line = lasti == PROWL_PYF_LASTI_NONE ? co->firstlineno : pycode_line(co, lasti);
	*ret = (struct py_frame_name){
		.function = co->qualname,
		.file = co->filename,
		.line = line,
		.start_line = co->firstlineno,
	};
	*ret_key = co->id << 24 | ((uint64_t)line & 0xffffff);
	return 0;
}

void py_resolver_stats(const struct py_resolver *r, struct pycode_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (r && r->pycode)
		pycode_get_stats(r->pycode, ret);
}

/* pyresolve.c: the symbolizer's Python frames: a sampled (code object, instruction) pair
 * becomes a qualified name, file and line, read once per code object and cached. */
#include <errno.h>

#include "maps_io.h"
#include "symbolizer_priv.h"
#include "pycode.h"

void symbolizer_set_python(struct symbolizer *s, const struct maps_io *io)
{
	s->py_io = io && io->py_proc_get ? io : NULL;
	s->py_pid = 0;
}

/* The registration of pid that BPF used (gen), or -ESRCH when it is gone or
 * was replaced (an exec, a new registration): its addresses mean nothing now. */
static int py_proc(struct symbolizer *s, uint32_t pid, uint32_t gen)
{
	if (s->py_pid == pid && s->py_gen == gen)
		return 0;
	s->py_pid = 0;
	if (!s->py_io || s->py_io->py_proc_get(s->py_io->ctx, pid, &s->py_proc) < 0 || s->py_proc.gen != gen)
		return -ESRCH;
	s->py_pid = pid;
	s->py_gen = gen;
	return 0;
}

int symbolizer_python_frame(struct symbolizer *s, uint32_t pid, uint32_t gen, const struct prowl_pyframe *f,
			    struct sym_frame *ret, uint64_t *ret_key, const char **ret_why)
{
	const struct pycode *co;
	uint32_t lasti = f->lasti & ~PROWL_PYF_ENTRY;
	int r, line;

	if (!s->pycode && (r = pycode_cache_new(0, 0, &s->pycode)) < 0)
		return r;
	r = pycode_get(s->pycode, pid, gen, NULL, f->code, f->firstlineno, &co);
	if (r == -EAGAIN) {
		r = py_proc(s, pid, gen);
		if (r < 0) {
			*ret_why = "[python: the process exited or exec'ed before its frames were read]";
			return r;
		}
		r = pycode_get(s->pycode, pid, gen, &s->py_proc, f->code, f->firstlineno, &co);
	}
	if (r < 0) {
		*ret_why = r == -ENOMEM ? "[python: out of memory]"
			 : r == -EBADMSG ? "[python: not a code object (garbled or freed frame)]"
					  : "[python: code object unreadable]";
		return r;
	}
	line = lasti == PROWL_PYF_LASTI_NONE ? 0 : pycode_line(co, lasti);
	*ret = (struct sym_frame){
		.function = co->qualname,
		.file = co->filename,
		.line = line,
		.start_line = co->firstlineno,
	};
	*ret_key = co->id << 24 | ((uint64_t)line & 0xffffff);
	return 0;
}

/* pyproc.c: builds a process's py_procs entry from its libpython's symbols, the load
 * bias of its mapping, and the offsets table of its version. */
#include "pyproc.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "log.h"
#include "pydebugoff.h"
#include "pyversions.h"

/* A version taken from the file name that the object's symbols contradict: 3.11+
 * exports Py_Version, 3.6 has no _PyRuntime. The name is not trusted then. */
static bool py_name_contradicted(const struct py_elf *pe)
{
	return pe->version_from_name && pe->major == 3 && (pe->minor >= 11 || (pe->minor == 6 && pe->runtime));
}

int py_proc_fill(const struct py_elf *pe, uint64_t bias, uint32_t gen, struct prowl_py_proc *ret)
{
	const struct py_layout *l = py_layout_for(pe->major, pe->minor);
	/* Where the interpreters' list starts: _PyRuntime, or 3.6's interp_head. */
	uint64_t root = !l ? 0 : l->rt_interp_head == PROWL_PY_NONE ? pe->interp_head : pe->runtime;

	memset(ret, 0, sizeof(*ret));
	if (!pe->found || !root || !l || py_name_contradicted(pe))
		return -EPROTONOSUPPORT;
	*ret = (struct prowl_py_proc){
		.runtime = root + bias,
		.version = (uint16_t)(l->major << 8 | l->minor),
		.rt_interp_head = l->rt_interp_head == PROWL_PY_NONE ? 0 : l->rt_interp_head,
		.is_threads_head = l->is_threads_head,
		.ts_next = l->ts_next,
		.ts_native_tid = l->ts_native_tid,
		.ts_frame = l->ts_frame,
		.cf_current_frame = l->cf_current_frame,
		.fr_code = l->fr_code,
		.fr_previous = l->fr_previous,
		.fr_instr = l->fr_instr,
		.fr_is_entry = l->fr_is_entry,
		.fr_owner = l->fr_owner,
		.co_firstlineno = l->co_firstlineno,
		.co_code = l->co_code,
		.flags = l->flags,
		.fr_read = l->fr_read,
		.gen = gen,
		.code_type = pe->code_type ? pe->code_type + bias : 0,
		.unicode_type = pe->unicode_type ? pe->unicode_type + bias : 0,
		.bytes_type = pe->bytes_type ? pe->bytes_type + bias : 0,
	};
	return 0;
}

const struct py_layout *py_proc_layout(const struct prowl_py_proc *pp)
{
	return py_layout_for(pp->version >> 8, pp->version & 0xff);
}

int py_proc_register(const struct maps_io *io, uint32_t pid, const struct py_elf *pe, uint64_t bias, uint32_t gen,
		     uint32_t pthread_size, const char *path, bool *logged)
{
	struct prowl_py_proc pp;
	int r = py_proc_fill(pe, bias, gen, &pp);

	if (r < 0) {
		const struct py_layout *l = py_layout_for(pe->major, pe->minor);
		char known[128];

		py_layouts_known(known, sizeof(known));
		if (!*logged && pe->major && l && l->rt_interp_head == PROWL_PY_NONE && !pe->interp_head)
			log_warn("python: %s is named CPython %u.%u but has no interp_head (its symbol, or the "
				 "variable PyInterpreterState_Head() reads): its processes get native frames only",
				 path, pe->major, pe->minor);
		else if (!*logged && pe->major && l && l->rt_interp_head != PROWL_PY_NONE && !pe->runtime)
			log_warn("python: %s is named CPython %u.%u but exports no _PyRuntime: its processes get "
				 "native frames only", path, pe->major, pe->minor);
		else if (!*logged && l && py_name_contradicted(pe))
			log_warn("python: %s is named CPython %u.%u but its symbols say otherwise (%s): its processes "
				 "get native frames only", path, pe->major, pe->minor,
				 pe->minor >= 11 ? "no Py_Version, which 3.11 and later export" : "a _PyRuntime, which 3.6 lacks");
		else if (!*logged && pe->major)
			log_warn("python: %s is CPython %u.%u, whose frames prowl cannot read (it reads %s): its "
				 "processes get native frames only", path, pe->major, pe->minor, known);
		else if (!*logged)
			log_warn("python: %s is CPython of a version prowl cannot tell (it reads %s): its processes "
				 "get native frames only", path, known);
		*logged = true;
		return r;
	}
	/* 3.13+ says where its fields are: a build that disagrees with the table (another
	 * configuration, a patched CPython) is not walked. */
	char why[128];

	r = py_debug_offsets_check(pid, pp.runtime, py_proc_layout(&pp), why, sizeof(why));
	if (r == -EPROTO && !*logged)
		log_warn("python: %s is CPython %u.%u, but its process %" PRIu32 " lays its frames out otherwise "
			 "(%s): its processes get native frames only", path, pe->major, pe->minor, pid, why);
	if (r == -EPROTO)
		*logged = true;
	if (r < 0)
		return r;
#if defined(__aarch64__) /* glibc's THREAD_SELF there: the thread pointer - sizeof(struct pthread) */
	pp.tp_pthread_off = pthread_size;
#else
	(void)pthread_size; /* x86_64: pthread_self() is the fs base itself */
#endif
	r = io->py_proc_set(io->ctx, pid, &pp);
	if (r < 0)
		return r;
	log_debug("python: pid %" PRIu32 ": CPython %u.%u in %s", pid, pe->major, pe->minor, path);
	return 0;
}

bool py_proc_wanted(const struct maps_io *io, bool python_off)
{
	return io->py_proc_set && !python_off;
}

void py_proc_update(const struct maps_io *io, bool python_off, uint32_t pid, const struct py_mapping *maps,
		    size_t n, uint32_t *gen)
{
	uint32_t pthread_size = 0;

	if (!py_proc_wanted(io, python_off))
		return;
	for (size_t i = 0; i < n && !pthread_size; i++)
		if (maps[i].pe)
			pthread_size = maps[i].pe->pthread_size; /* the process's libc */
	for (size_t i = 0; i < n; i++) {
		const struct py_mapping *m = &maps[i];

		if (!m->pe || !m->pe->found)
			continue;
		py_proc_register(io, pid, m->pe, m->bias, ++*gen, pthread_size, m->path, m->logged);
		return;
	}
	io->py_proc_del(io->ctx, pid);
}

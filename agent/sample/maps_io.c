/* maps_io.c: the sampler's side of maps_io.h: every write and read of a BPF map's entries
 * from user space outside the sampler itself (the unwinder's tables, processes, py_procs). */
#include "maps_io.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sample_priv.h"

/* Writes n elements at index first of an mmap-able BPF array. Only the pages
 * written are mapped, and only while writing: keeping the whole array mapped
 * would add its full size (16 MiB of rows by default) to prowl's resident memory. */
static int map_window_write(int fd, size_t elem, uint32_t first, const void *src, size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t start = (size_t)first * elem, off = start & ~(page - 1);
	size_t len = ((start + n * elem - off) + page - 1) & ~(page - 1);
	void *p;

	if (!n)
		return 0;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	if (p == MAP_FAILED)
		return -errno;
	memcpy((char *)p + (start - off), src, n * elem);
	munmap(p, len);
	return 0;
}

static int rows_write(void *ctx, uint32_t first, const struct prowl_unwind_row *rows, size_t n)
{
	struct sampler *s = ctx;

	return map_window_write(bpf_map__fd(s->skel->maps.unwind_rows), sizeof(*rows), first, rows, n);
}

static int maps_write(void *ctx, uint32_t first, const struct prowl_unwind_map *ents, size_t n)
{
	struct sampler *s = ctx;

	return map_window_write(bpf_map__fd(s->skel->maps.unwind_maps), sizeof(*ents), first, ents, n);
}

/* One entry, keyed by pid, of a hash map. */
static int pid_set(struct bpf_map *m, uint32_t pid, const void *val)
{
	return bpf_map_update_elem(bpf_map__fd(m), &pid, val, BPF_ANY) < 0 ? -errno : 0;
}

static void pid_del(struct bpf_map *m, uint32_t pid)
{
	bpf_map_delete_elem(bpf_map__fd(m), &pid);
}

static int pid_get(struct bpf_map *m, uint32_t pid, void *ret)
{
	return bpf_map_lookup_elem(bpf_map__fd(m), &pid, ret) < 0 ? -errno : 0;
}

static struct prowl_bpf *skel_of(void *ctx)
{
	return ((struct sampler *)ctx)->skel;
}

static int proc_set(void *ctx, uint32_t pid, const struct prowl_unwind_proc *val)
{
	return pid_set(skel_of(ctx)->maps.unwind_procs, pid, val);
}

static void proc_del(void *ctx, uint32_t pid)
{
	pid_del(skel_of(ctx)->maps.unwind_procs, pid);
}

static void req_time_set(void *ctx, uint32_t pid, uint64_t until_ns)
{
	pid_set(skel_of(ctx)->maps.unwind_req_time, pid, &until_ns);
}

/* NAME_set, NAME_del and NAME_get of a runtime's per-process map, typed as maps_io.h
 * wants them. */
#define RUNTIME_MAP_OPS(name, map, type)                                                   \
	static int name##_set(void *ctx, uint32_t pid, const type *val)                   \
	{                                                                                  \
		return pid_set(skel_of(ctx)->maps.map, pid, val);                          \
	}                                                                                  \
	static void name##_del(void *ctx, uint32_t pid)                                    \
	{                                                                                  \
		pid_del(skel_of(ctx)->maps.map, pid);                                      \
	}                                                                                  \
	static int name##_get(void *ctx, uint32_t pid, type *ret)                          \
	{                                                                                  \
		return pid_get(skel_of(ctx)->maps.map, pid, ret);                          \
	}

RUNTIME_MAP_OPS(py_proc, py_procs, struct prowl_py_proc)
RUNTIME_MAP_OPS(java_proc, java_procs, struct prowl_java_proc)
RUNTIME_MAP_OPS(v8_proc, v8_procs, struct prowl_v8_proc)

void sampler_maps_io_init(struct sampler *s)
{
	bool py = !s->opts.python_off, java = !s->opts.java_off, v8 = !s->opts.node_off;

	s->io = (struct maps_io){
		.ctx = s,
		.max_rows = s->opts.unwind_max_rows,
		.max_maps = s->opts.unwind_max_maps,
		.max_procs = s->opts.unwind_max_procs,
		.rows_write = rows_write,
		.maps_write = maps_write,
		.proc_set = proc_set,
		.proc_del = proc_del,
		.req_time_set = req_time_set,
		.py_proc_set = py ? py_proc_set : NULL,
		.py_proc_del = py ? py_proc_del : NULL,
		.py_proc_get = py ? py_proc_get : NULL,
		.java_proc_set = java ? java_proc_set : NULL,
		.java_proc_del = java ? java_proc_del : NULL,
		.java_proc_get = java ? java_proc_get : NULL,
		.v8_proc_set = v8 ? v8_proc_set : NULL,
		.v8_proc_del = v8 ? v8_proc_del : NULL,
		.v8_proc_get = v8 ? v8_proc_get : NULL,
	};
}

const struct maps_io *sampler_maps_io(const struct sampler *s)
{
	return s->unw ? &s->io : NULL;
}

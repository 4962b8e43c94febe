/* symbolizer.c: the resolve stage's front: the kernel, the frame cache and the
 * symbolizer's lifetime (processes.c has the processes, modules.c the modules). */
#include "symbolizer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "demangle.h"
#include "diskcache.h"
#include "dwarf_frames.h"
#include "escape.h"
#include "kallsyms_cache.h"
#include "log.h"
#include "prowl_limits.h"
#include "symbolizer_priv.h"

#define DEFAULT_MAX_CACHED_FRAMES 100000
#define DEFAULT_MAX_MODULES 48
#define DEFAULT_MAX_MODULE_HEAP (16u << 20)
#define DEFAULT_MAX_PROCESSES 32768
#define DEFAULT_MAX_GONE_PIDS 4096


/* ---- kernel ---- */

/* The host's index comes from the on-disk cache when a previous run kept it for
 * this boot, kernel and module set (reading /proc/kallsyms is a tenth of a
 * restart's CPU); else it is read and kept. */
static int kernel_load(struct symbolizer *s)
{
	struct diskcache *dc = s->objs ? objcache_disk(s->objs) : NULL;
	struct diskcache_key k;
	bool keyed;
	int r;

	if (s->ksyms_tried)
		return 0;
	s->ksyms_tried = true;
	keyed = dc && strcmp(s->kallsyms_path, "/proc/kallsyms") == 0 &&
		kallsyms_cache_key(&kallsyms_ident_host, &k) == 0;
	if (keyed && kallsyms_cached(dc, &k, &s->ksyms) == 0) {
		log_debug("kernel symbols: %zu from state_dir/cache", s->ksyms->n);
		return 0;
	}
	r = kallsyms_load(s->kallsyms_path, &s->ksyms);
	if (r == -ENOMEM)
		return r;
	if (r == 0)
		s->st.kernel_addrs_hidden = s->ksyms->hidden;
	if (r == 0)
		log_debug("kernel symbols: %zu read from %s", s->ksyms->n, s->kallsyms_path);
	if (r == 0 && keyed)
		kallsyms_keep(dc, &k, s->ksyms);
	/* Unreadable kallsyms: kernel frames use the fallback name. */
	return 0;
}

int symbolizer_resolve_kernel(struct symbolizer *s, uint64_t addr, struct sym_addr *ret)
{
	int r;

	if (!s || !ret)
		return -EINVAL;
	r = kernel_load(s);
	if (r < 0)
		return r;
	ret->mod = &s->kernel->pub;
	ret->addr = addr;
	return 0;
}

static int kernel_frame(struct symbolizer *s, uint64_t addr, struct sym_frame *f, size_t *ret_n)
{
	struct ksym k;
	char mod[256], name[sizeof("__pfx_") + KSYM_NAME_LEN];
	int r;

	*ret_n = 0;
	r = kernel_load(s);
	if (r < 0)
		return r;
	if (!s->ksyms || !kallsyms_find(s->ksyms, addr, &k))
		return 0;
	*f = (struct sym_frame){ 0 };
	r = 0;
	if (*k.prefix) {
		snprintf(name, sizeof(name), "%s%s", k.prefix, k.name);
		r = sym_intern_cstr(s->scratch, name, &f->function);
	} else {
		f->function = k.name; /* lives as long as ksyms */
	}
	if (r == 0 && k.module) {
		snprintf(mod, sizeof(mod), "[%s]", k.module);
		r = sym_intern_cstr(s->scratch, mod, &f->file);
	}
	if (r < 0)
		return r;
	*ret_n = 1;
	return 0;
}

/* Reads the kernel's GNU build id from /sys/kernel/notes (a raw note list). */
static int kernel_build_id(struct module *m)
{
	char hex[OBJ_BUILD_ID_HEX];
	unsigned char buf[4096];
	size_t off = 0, n;
	FILE *f = fopen("/sys/kernel/notes", "re");

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	while (off + 12 <= n) {
		uint32_t namesz, descsz, type;
		size_t name_off = off + 12, desc_off;

		memcpy(&namesz, buf + off, 4);
		memcpy(&descsz, buf + off + 4, 4);
		memcpy(&type, buf + off + 8, 4);
		if (namesz > n || descsz > n)
			break;
		desc_off = name_off + ((namesz + 3) & ~3u);
		if (desc_off + descsz > n)
			break;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(buf + name_off, "GNU", 4) == 0 && descsz &&
		    descsz <= OBJ_BUILD_ID_MAX) {
			build_id_to_hex(buf + desc_off, descsz, hex);
			return module_set_build_id(m, hex);
		}
		off = desc_off + ((descsz + 3) & ~3u);
	}
	return 0;
}

/* ---- frames ---- */

/* mallinfo2() walks every arena's free lists (tens of microseconds on a
 * fragmented heap: 8 % of a steady agent's CPU when it ran around 16 lookups
 * per new module): it is measured around a module's first HEAP_MEASURED_FIRST
 * lookups after an open (the session, its symbol tables and inflated
 * sections: nearly all of its growth) and around one in HEAP_MEASURE_EVERY
 * after that (a new CU's line table), whose growth counts HEAP_MEASURE_EVERY
 * times (an estimate of the lookups not measured), not around each. */
#define HEAP_MEASURED_FIRST 4
#define HEAP_MEASURE_EVERY 32

/* Bytes malloc has handed out, in the heap and in mmap'ed blocks. */
static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}


static void copy_out(const struct fc_entry *e, struct sym_frame *frames, size_t max, size_t *ret_n,
		     bool *ret_symbolized)
{
	size_t n = e->n < max ? e->n : max;

	memcpy(frames, e->frames, n * sizeof(*frames));
	*ret_n = n;
	if (ret_symbolized)
		*ret_symbolized = e->symbolized;
}

/* Symbolizes a cache miss into tmp; strings may live in s->scratch. */
static int frames_miss(struct symbolizer *s, struct module *m, uint64_t addr, struct sym_frame *tmp, size_t *ret_n,
		       uint64_t *ret_group)
{
	size_t heap = 0, grown, scale;
	uint64_t now;
	bool cold, measure;
	int r = 0;

	*ret_n = 0;
	switch (m->pub.kind) {
	case SYM_MOD_KERNEL:
		return kernel_frame(s, addr, tmp, ret_n);
	case SYM_MOD_ELF:
	case SYM_MOD_VDSO:
		cold = !module_is_open(m);
		r = sym_module_ready(s, m);
		if (r <= 0)
			return r;
		sym_module_touch(s, m);
		/* What libdw allocates for m (its session, inflated sections, line
		 * tables and DIE caches) is measured as it grows, for the cap. */
		/* A sampled lookup stands for the HEAP_MEASURE_EVERY around it. */
		scale = cold || m->heap_misses < HEAP_MEASURED_FIRST ? 1 : HEAP_MEASURE_EVERY;
		measure = scale == 1 || m->heap_misses % HEAP_MEASURE_EVERY == 0;
		m->heap_misses++;
		if (measure)
			heap = heap_in_use();
		r = dwarf_symbolize(m, addr, s->scratch, tmp, SYM_MAX_INLINE, ret_n, ret_group);
		grown = measure ? heap_in_use() : 0;
		if (grown > heap && lru_linked(&m->open_link)) {
			m->heap_bytes += (grown - heap) * scale;
			s->open_heap += (grown - heap) * scale;
		}
		sym_module_sync(s, m);
		sym_enforce_open_caps(s, m);
		/* Drop the file pages lookups touched once a second, or as soon as
		 * they add up to RELEASE_FILE_BYTES: a burst of first lookups (a
		 * start-up, new binaries) must not pile up. */
		now = clock_mono_ns();
		if (cold)
			module_release_pages(m); /* an open reads the most: headers, symbol tables */
		if (now - s->released_ns >= RELEASE_INTERVAL_NS)
			symbolizer_release_pages(s);
		else if (now - s->checked_ns >= RELEASE_CHECK_NS) {
			s->checked_ns = now;
			if (sym_file_resident_bytes() > s->released_file_bytes + RELEASE_FILE_BYTES)
				symbolizer_release_pages(s);
		}
		return r;
	case SYM_MOD_ANON:
		break;
	}
	return 0;
}

static int demangle_frames(struct symbolizer *s, struct sym_frame *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = sym_demangle_frame(s, &f[i]);

		if (r < 0)
			return r;
	}
	return 0;
}

int symbolizer_frames(struct symbolizer *s, const struct sym_module *mod, uint64_t addr, struct sym_frame *frames,
		      size_t max, size_t *ret_n, bool *ret_symbolized)
{
	struct sym_frame tmp[SYM_MAX_INLINE];
	const struct fc_entry *e;
	struct module *m;
	size_t n = 0;
	uint64_t group = UINT64_MAX;
	bool ok;
	int r;

	if (!s || !mod || !frames || !max || !ret_n)
		return -EINVAL;
	m = module_of(mod);
	e = frame_cache_get(&s->frames, mod->id, addr);
	if (e) {
		s->st.frame_hits++;
		copy_out(e, frames, max, ret_n, ret_symbolized);
		return 0;
	}
	s->st.frame_misses++;

	intern_clear(s->scratch);
	r = frames_miss(s, m, addr, tmp, &n, &group);
	if (r == 0)
		r = demangle_frames(s, tmp, n);
	if (r < 0)
		return r;
	ok = n > 0;
	if (!ok) {
		tmp[0] = (struct sym_frame){ 0 };
		n = 1;
	}
	if (!tmp[0].function) {
		/* Nothing named it: "<module>+0x<file offset>" of the start of the
		 * function's FDE when one covers it (one row per function), keeping
		 * any line. The location keeps the exact address. */
		char name[PATH_MAX + 32];

		snprintf(name, sizeof(name), "%s+0x%" PRIx64, mod->name,
			 module_file_offset(m, group != UINT64_MAX ? group : addr));
		r = sym_intern_cstr(s->scratch, name, &tmp[0].function);
		if (r < 0)
			return r;
	}
	/* The entry owns copies of the strings; the scratch table is reused. */
	r = frame_cache_put(&s->frames, mod->id, addr, tmp, n, ok, &e);
	if (r < 0)
		return r;
	copy_out(e, frames, max, ret_n, ret_symbolized);
	return 0;
}

/* ---- lifetime ---- */

static uint32_t opt_or(uint32_t v, uint32_t def)
{
	return v ? v : def;
}

int symbolizer_new(const struct symbolizer_opts *opts, struct symbolizer **ret)
{
	const struct symbolizer_opts none = { 0 };
	const char *proc_root, *kallsyms;
	struct symbolizer *s;
	int r = -ENOMEM;

	if (!ret)
		return -EINVAL;
	if (!opts)
		opts = &none;
	proc_root = opts->proc_root ? opts->proc_root : "/proc";
	kallsyms = opts->kallsyms ? opts->kallsyms : "/proc/kallsyms";
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EIO;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	lru_init(&s->live);
	lru_init(&s->gone);
	lru_init(&s->open);
	frame_cache_init(&s->frames, opt_or(opts->max_cached_frames, DEFAULT_MAX_CACHED_FRAMES));
	s->max_modules = opt_or(opts->max_modules, DEFAULT_MAX_MODULES);
	s->max_module_heap = opts->max_module_heap ? opts->max_module_heap : DEFAULT_MAX_MODULE_HEAP;
	s->max_processes = opt_or(opts->max_processes, DEFAULT_MAX_PROCESSES);
	s->max_gone = opt_or(opts->max_gone_pids, DEFAULT_MAX_GONE_PIDS);
	s->perfmaps.max_bytes = opts->perfmap_max_bytes;
	s->proc_root = strdup(proc_root);
	s->kallsyms_path = strdup(kallsyms);
	s->scratch = intern_new();
	s->keys = intern_new();
	s->objs = opts->objects ? objcache_ref(opts->objects) : objcache_shared();
	s->demangle = opts->demangle;
	if (!s->proc_root || !s->kallsyms_path || !s->scratch || !s->keys || !s->objs || py_resolver_new(&s->py) < 0 ||
	    jvm_namer_new(&s->java) < 0 || v8_namer_new(&s->node) < 0)
		goto fail;
	if (opts->inflate_dir && opts->inflate_max_bytes) {
		s->inflate.dir = strdup(opts->inflate_dir);
		if (!s->inflate.dir)
			goto fail;
		s->inflate.max = opts->inflate_max_bytes;
	}
	if (dbgd_enabled() && opts->debuginfod_cache) {
		const struct dbgd_opts dopts = {
			.cache_dir = opts->debuginfod_cache,
			.max_bytes = opts->debuginfod_cache_bytes,
			.miss_ttl_ns = opts->debuginfod_miss_ttl_ns,
			.fetch_timeout_ns = opts->debuginfod_timeout_ns,
		};

		/* Without its cache, debug files are only looked for locally. */
		r = dbgd_new(&dopts, &s->dbgd);
		if (r == -ENOMEM)
			goto fail;
	}
	r = module_new_plain(SYM_MOD_KERNEL, "[kernel.kallsyms]", "kernel", &s->kernel);
	if (r < 0)
		goto fail;
	if (strcmp(kallsyms, "/proc/kallsyms") == 0)
		r = kernel_build_id(s->kernel);
	if (r < 0) {
		module_free(s->kernel);
		goto fail;
	}
	r = sym_add_module(s, s->kernel);
	if (r < 0)
		goto fail;
	r = sym_plain_module(s, SYM_MOD_ANON, "[anon]", &s->anon);
	if (r < 0)
		goto fail;
	*ret = s;
	return 0;
fail:
	symbolizer_free(s);
	return r;
}

void symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return;
	sym_procs_free(s);
	for (uint32_t i = 0; i < s->nmods; i++) {
		dwarf_ctx_free(s->mods[i]);
		module_free(s->mods[i]);
	}
	free(s->mods);
	u64map_free(&s->by_obj);
	objcache_unref(s->objs);
	free(s->by_key);
	intern_free(s->keys);
	intern_free(s->scratch);
	kallsyms_free(s->ksyms);
	frame_cache_free(&s->frames);
	free(s->proc_root);
	free(s->kallsyms_path);
	free(s->inflate.dir);
	dbgd_free(s->dbgd);
	py_resolver_free(s->py);
	jvm_namer_free(s->java);
	v8_namer_free(s->node);
	free(s);
}

struct jvm_namer *symbolizer_java(struct symbolizer *s)
{
	return s->java;
}

struct v8_namer *symbolizer_node(struct symbolizer *s)
{
	return s->node;
}

struct py_resolver *symbolizer_python(struct symbolizer *s)
{
	return s->py;
}

const struct sym_module *symbolizer_module(struct symbolizer *s, uint32_t id)
{
	return s && id >= 1 && id <= s->nmods ? &s->mods[id - 1]->pub : NULL;
}

int symbolizer_debuginfod_poll(struct symbolizer *s)
{
	char ids[32][OBJ_BUILD_ID_HEX];
	int changed = 0;
	size_t n;

	if (!s || !s->dbgd)
		return 0;
	while ((n = dbgd_take_arrived(s->dbgd, ids, 32)) > 0) {
		for (uint32_t i = 0; i < s->nmods; i++) {
			struct module *m = s->mods[i];

			if (m->pub.kind != SYM_MOD_ELF || !m->pub.build_id[0])
				continue;
			for (size_t k = 0; k < n; k++) {
				if (strcmp(m->pub.build_id, ids[k]) != 0)
					continue;
				/* Reopened on its next lookup, with the debug file now. */
				sym_close_module(s, m);
				m->dw_failed = false;
				m->reopen_failed = false;
				m->pub.debug_gen++;
				changed++;
			}
		}
	}
	if (changed) {
		/* Frames of those modules were cached without names. */
		uint32_t max = s->frames.max;

		frame_cache_free(&s->frames);
		frame_cache_init(&s->frames, max);
	}
	return changed;
}

int symbolizer_debuginfod_wait(struct symbolizer *s, uint64_t timeout_ns)
{
	if (!s || !s->dbgd)
		return 0;
	dbgd_wait_idle(s->dbgd, clock_mono_ns() + timeout_ns);
	return symbolizer_debuginfod_poll(s);
}

static size_t kallsyms_bytes(const struct kallsyms *k)
{
	return kallsyms_mem_bytes(k);
}

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *ret)
{
	struct objcache_stats os;
	size_t bytes = sizeof(*s);

	*ret = s->st;
	ret->modules = s->nmods;
	ret->processes = s->nlive;
	ret->gone_pids = s->ngone;
	ret->cached_frames = s->frames.count;
	ret->frame_evictions = s->frames.evictions;
	ret->open_modules = s->nopen;
	ret->inflated_bytes = s->inflate.used;
	ret->inflated_files = s->inflate.files;
	ret->inflate_fallbacks = s->inflate.fallbacks;
	ret->open_module_bytes = s->open_heap;
	bytes += s->open_heap;
	bytes += frame_cache_mem_bytes(&s->frames);
	bytes += s->proc_bytes + u64map_mem_bytes(&s->procs);
	bytes += s->mod_bytes + (size_t)s->mods_cap * sizeof(*s->mods) + (size_t)s->by_key_cap * sizeof(*s->by_key);
	bytes += intern_mem_bytes(s->keys) + intern_mem_bytes(s->scratch) + kallsyms_bytes(s->ksyms);
	objcache_get_stats(s->objs, &os);
	bytes += os.bytes + u64map_mem_bytes(&s->by_obj);
	{
		struct diskcache_stats ds;

		diskcache_get_stats(objcache_disk(s->objs), &ds);
		ret->disk_hits = ds.hits;
		ret->disk_misses = ds.misses;
		ret->disk_stores = ds.stores;
		ret->disk_corrupt = ds.corrupt;
		ret->disk_evicted = ds.evicted;
		ret->disk_bytes = ds.bytes;
	}
	ret->perfmap_bytes = s->perfmaps.bytes;
	{
		struct pycode_stats ps;

		py_resolver_stats(s->py, &ps);
		ret->py_code_entries = ps.entries;
		ret->py_code_bytes = ps.bytes;
		ret->py_code_hits = ps.hits;
		ret->py_code_misses = ps.misses;
		ret->py_code_evictions = ps.evictions;
		ret->py_code_read_errors = ps.read_errors;
		bytes += ps.bytes;
	}
	{
		struct jvm_namer_stats js;

		jvm_namer_stats(s->java, &js);
		ret->java_names = (struct name_cache_stats){ .hits = js.hits, .misses = js.misses,
							     .failures = js.failures, .entries = js.entries,
							     .bytes = js.bytes };
		ret->java_name_miss_ns = js.miss_ns;
	}
	v8_namer_stats(s->node, &ret->js_names);
	bytes += ret->java_names.bytes + ret->js_names.bytes;
	ret->perfmap_symbols = s->perfmaps.symbols;
	ret->perfmaps = s->perfmaps.maps;
	ret->perfmap_dropped = s->perfmaps.dropped;
	ret->perfmap_bad_lines = s->perfmaps.bad_lines;
	bytes += s->perfmaps.bytes;
	if (s->dbgd) {
		struct dbgd_stats ds;

		dbgd_get_stats(s->dbgd, &ds);
		ret->debuginfod = true;
		ret->debuginfod_fetched = ds.fetched;
		ret->debuginfod_missed = ds.missed;
		ret->debuginfod_failed = ds.failed;
		ret->debuginfod_evicted = ds.evicted;
		ret->debuginfod_cache_bytes = ds.cache_bytes;
		ret->debuginfod_pending = ds.pending;
	}
	ret->mem_bytes = bytes;
	ret->objects_broken = os.broken;
}

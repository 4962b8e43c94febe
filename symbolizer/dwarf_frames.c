/* dwarf_frames.c: per-module libdwfl session (one Dwfl per module, fed our own Elf) and
 * address -> (function, file, line) frames including inlined callers. */
#include "dwarf_frames.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debugfile.h"
#include "debuginfod.h"
#include "fdegroup.h"
#include "gopclntab.h"
#include "log.h"
#include "plt.h"

/* One function symbol, in libdwfl address space. */
struct fsym {
	uint64_t addr, size; /* a zero-sized symbol gets the size up to the next one or its section's end */
	const char *name;    /* in the ELF string table, alive while the Dwfl is, or in plt.names */
	unsigned rank;       /* 0 global, 1 weak, 2 local, 3 PLT stub: preferred among aliases */
};

/* The string tables symbol names may point into. libdwfl checks that a name
 * starts inside its table but not that it ends there: in a hostile file the last
 * name may run off the table's end. */
struct strtabs {
	const char *lo[16], *hi[16];
	size_t n;
};

struct dwarf_ctx {
	Dwfl *dwfl;
	Dwfl_Module *mod;
	GElf_Addr bias; /* libdwfl address = normalized address + bias */
	/* dwfl_module_addrinfo() scans every symbol per call, far too slow for
	 * big stripped binaries; this sorted copy is searched in O(log n). */
	struct fsym *syms;
	size_t nsyms;
	bool syms_done;
	struct obj_plt plt;       /* the PLT stubs, named `target@plt` */
	struct fde_groups *fdes;  /* for code no symbol covers (fde_group) */
	bool fdes_done;
	struct gopcln *go;        /* Go's own table, for Go binaries without DWARF */
	bool go_done;
	Elf *main_elf;
	bool dwarf_ok;          /* DWARF found and safe to read (strings_terminated) */
	struct strtabs strtabs; /* where the names of syms may point (see name_bounded) */
};

/* Scopes deeper than this are not followed (real code nests a few dozen). */
#define MAX_SCOPE_DEPTH 256

/* Hands the module's already opened Elf to libdwfl, which then owns it. */
static int find_elf_cb(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       char **file_name, Elf **elfp)
{
	struct module *m = *userdata;

	(void)mod;
	(void)modname;
	(void)base;
	if (!m || !m->elf) {
		errno = ENOENT;
		return -1;
	}
	/* The name only guides the .gnu_debuglink search; failure to copy it is harmless. */
	if (!*file_name && m->path[0] == '/')
		*file_name = strdup(m->path);
	*elfp = m->elf;
	m->elf = NULL;
	return -1;
}

/* The separate debug file of m, only from where root alone can put files
 * (debugfile.h): by build id, by .gnu_debuglink, and the dwz file that libdwfl
 * asks for with a name and no CRC. libdwfl maps what it is given, so a file
 * another user controls must never be handed over; nor does libdwfl's own
 * search run, which looks next to the binary. Given a descriptor, libdwfl
 * maps an inflated copy when the file has compressed sections, instead of
 * inflating them into the heap (same build id). */
static int find_debuginfo_cb(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			     const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			     char **debuginfo_file_name)
{
	struct module *m = *userdata;
	const struct obj_facts *f = m ? module_facts(m) : NULL;
	char path[PATH_MAX];
	struct obj_file d;
	int fd, ifd, r;

	(void)mod;
	(void)modname;
	(void)base;
	if (!f)
		return -1;
	if (debuglink_file && debuglink_crc == 0) {
		r = obj_debug_alt(debuglink_file, &d);
		if (r == 0)
			snprintf(path, sizeof(path), "%s", debuglink_file);
	} else {
		r = obj_debug_by_build_id(OBJ_DEBUG_ROOT, f, &d, path, sizeof(path));
		if (r < 0 && debuglink_file)
			r = obj_debug_by_link(file_name ? file_name : m->path, debuglink_file, debuglink_crc, f, &d,
					      path, sizeof(path));
		if (r < 0 && m->dbgd && m->pub.kind == SYM_MOD_ELF && m->pub.build_id[0]) {
			/* What debuginfod fetched into the cache, or a request for it:
			 * it arrives later, and the symbolizer then reopens m. */
			char *cached = NULL;

			fd = dbgd_open(m->dbgd, m->pub.build_id, &cached);
			if (fd < 0)
				return -1;
			if (!*debuginfo_file_name)
				*debuginfo_file_name = cached;
			else
				free(cached);
			goto found;
		}
	}
	if (r < 0)
		return -1;
	fd = d.fd;
	if (!*debuginfo_file_name)
		*debuginfo_file_name = strdup(path); /* names are only for messages */
found:
	ifd = module_inflate_fd(m, fd);
	if (ifd >= 0) {
		close(fd);
		fd = ifd;
	}
	return fd;
}

static char *debuginfo_path; /* unused: the lookups above do not search it */

static const Dwfl_Callbacks callbacks = {
	.find_elf = find_elf_cb,
	.find_debuginfo = find_debuginfo_cb,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

void dwarf_ctx_free(struct module *m)
{
	if (!m->dw)
		return;
	dwfl_end(m->dw->dwfl);
	free(m->dw->syms);
	obj_plt_free(&m->dw->plt);
	fde_groups_free(m->dw->fdes);
	gopcln_free(m->dw->go);
	free(m->dw);
	m->dw = NULL;
}

/* True unless a DWARF string section of elf (decompressed, as libdw reads it)
 * has a last string without its NUL. */
static bool strings_terminated(Elf *elf)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Shdr sh;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || (strcmp(name, ".debug_str") && strcmp(name, ".debug_line_str")))
			continue;
		if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
			return false;
		d = elf_getdata(scn, NULL);
		if (d && d->d_size && (!d->d_buf || ((const char *)d->d_buf)[d->d_size - 1] != '\0'))
			return false;
	}
	return true;
}

static struct dwarf_ctx *ctx_get(struct module *m)
{
	struct dwarf_ctx *c;
	uint64_t low, high;
	Dwarf_Addr dwbias;
	void **ud = NULL;
	Elf *main_elf;
	Dwarf *dw;

	if (m->dw || m->dw_failed)
		return m->dw;
	if (!m->elf || !module_facts(m) || !module_facts(m)->nloads)
		goto fail;
	obj_load_span(module_facts(m)->loads, module_facts(m)->nloads, &low, &high);
	low &= ~(uint64_t)0xfff;
	if (high <= low)
		high = low + 1;

	c = calloc(1, sizeof(*c));
	if (!c)
		goto fail;
	m->dw = c;
	c->dwfl = dwfl_begin(&callbacks);
	if (!c->dwfl)
		goto fail_ctx;
	dwfl_report_begin(c->dwfl);
	c->mod = dwfl_report_module(c->dwfl, m->name, low, high);
	if (!c->mod || dwfl_report_end(c->dwfl, NULL, NULL) != 0)
		goto fail_ctx;
	dwfl_module_info(c->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	if (!ud)
		goto fail_ctx;
	*ud = m;
	/* Triggers find_elf_cb: from here on libdwfl owns the Elf. */
	main_elf = dwfl_module_getelf(c->mod, &c->bias);
	if (!main_elf)
		goto fail_ctx;
	c->main_elf = main_elf;
	dw = dwfl_module_getdwarf(c->mod, &dwbias);
	/* libdw hands out strings of .debug_str and .debug_line_str without checking
	 * that the section ends with a NUL (elfutils 0.188): in a hostile file the
	 * last one runs past the section. Such DWARF is not used; symbols still are. */
	c->dwarf_ok = dw && strings_terminated(dwarf_getelf(dw));
	m->pub.has_dwarf = c->dwarf_ok;
	if (dw) {
		Elf *dbg = dwarf_getelf(dw);

		/* A separate debug file: libdw has inflated its compressed sections
		 * into the heap, so the mapped compressed bytes are not needed now. */
		if (dbg && dbg != main_elf) {
			file_map_note(&m->dbg_map, dbg);
			file_map_release(&m->dbg_map);
		}
	}
	return c;

fail_ctx:
	dwarf_ctx_free(m);
fail:
	/* Only fallbacks from now on: the Elf (if libdwfl did not take it) is of
	 * no use. A file read with pread() may have failed because it changed. */
	module_check_file(m);
	module_close(m);
	m->dw_failed = true;
	return NULL;
}

static int cmp_fsym(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (int)x->rank - (int)y->rank;
}

static void strtabs_add(struct strtabs *t, Elf *elf)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while (elf && t->n < 16 && (scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB)
			continue;
		d = elf_getdata(scn, NULL);
		if (d && d->d_buf && d->d_size) {
			t->lo[t->n] = d->d_buf;
			t->hi[t->n++] = (const char *)d->d_buf + d->d_size;
		}
	}
}

/* True when name ends (NUL) inside the string table it starts in. A name in no
 * table we know (MiniDebugInfo's, which libdwfl keeps to itself) is refused. */
static bool name_bounded(const struct strtabs *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (name >= t->lo[i] && name < t->hi[i])
			return memchr(name, 0, (size_t)(t->hi[i] - name)) != NULL;
	return false;
}

/* The executable sections of elf, in libdwfl addresses, sorted. */
struct xsecs {
	uint64_t *start, *end;
	size_t n;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int xsecs_read(Elf *elf, uint64_t bias, struct xsecs *ret)
{
	Elf_Scn *scn = NULL;
	size_t shnum, n = 0;
	uint64_t *pairs;

	memset(ret, 0, sizeof(*ret));
	if (!elf || elf_getshdrnum(elf, &shnum) < 0 || shnum == 0)
		return 0;
	pairs = calloc(shnum, 2 * sizeof(*pairs));
	if (!pairs)
		return -ENOMEM;
	while ((scn = elf_nextscn(elf, scn)) && n < shnum) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || !(sh.sh_flags & SHF_EXECINSTR) ||
		    !sh.sh_size || sh.sh_addr + sh.sh_size < sh.sh_addr)
			continue;
		pairs[2 * n] = sh.sh_addr + bias;
		pairs[2 * n + 1] = sh.sh_addr + sh.sh_size + bias;
		n++;
	}
	/* Pairs sort by start as one 16-byte record: qsort on the first word. */
	qsort(pairs, n, 2 * sizeof(*pairs), cmp_u64);
	ret->start = pairs;
	ret->n = n;
	return 0;
}

/* The end of the executable section holding a; 0 when none does, UINT64_MAX
 * when the file has no section headers (one unbounded section). */
static uint64_t xsecs_end(const struct xsecs *x, uint64_t a)
{
	size_t lo = 0, hi = x->n;

	if (!x->start)
		return UINT64_MAX;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (x->start[2 * mid] <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && a < x->start[2 * (lo - 1) + 1] ? x->start[2 * (lo - 1) + 1] : 0;
}

/* Bounds every zero-sized symbol (_init, hand-written assembly): up to the next
 * symbol, and never past the end of its section (.init is followed by .plt). */
static void bound_unsized(struct dwarf_ctx *c, const struct xsecs *x)
{
	for (size_t i = 0; i < c->nsyms; i++) {
		uint64_t end;
		size_t j;

		if (c->syms[i].size)
			continue;
		end = xsecs_end(x, c->syms[i].addr);
		for (j = i + 1; j < c->nsyms && c->syms[j].addr == c->syms[i].addr; j++)
			;
		if (j < c->nsyms && c->syms[j].addr < end)
			end = c->syms[j].addr;
		/* end == 0: in no executable section; UINT64_MAX: the last symbol of
		 * a file without section headers, which covers what follows. */
		c->syms[i].size = end > c->syms[i].addr ? end - c->syms[i].addr : 0;
	}
}

static int syms_build(struct dwarf_ctx *c)
{
	int total = dwfl_module_getsymtab(c->mod);
	struct xsecs x;
	Dwarf_Addr bias;
	Dwarf *dw;
	size_t n = 0, cap;
	int r;

	c->syms_done = true;
	if (total < 1)
		total = 1;
	/* The stubs are in the object file itself (not a separate debug file),
	 * named from its dynamic relocations. */
	r = obj_plt_read(c->main_elf, &c->plt);
	if (r < 0)
		return r;
	cap = (size_t)total - 1 + c->plt.n;
	if (cap == 0)
		return 0;
	c->syms = malloc(cap * sizeof(*c->syms));
	if (!c->syms)
		return -ENOMEM;
	c->strtabs.n = 0;
	strtabs_add(&c->strtabs, dwfl_module_getelf(c->mod, &bias));
	dw = dwfl_module_getdwarf(c->mod, &bias);
	if (dw)
		strtabs_add(&c->strtabs, dwarf_getelf(dw));
	for (int i = 1; i < total; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(c->mod, i, &sym, &addr, &shndx, NULL, NULL);
		unsigned type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);

		/* The name itself is not read here (a big binary's .strtab is many MiB
		 * of pages): sym_lookup checks the one it returns. */
		if (!name || shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		c->syms[n++] = (struct fsym){
			.addr = addr,
			.size = addr + sym.st_size >= addr ? sym.st_size : 0,
			.name = name,
			.rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2,
		};
	}
	for (size_t i = 0; i < c->plt.n; i++) {
		const struct obj_plt_stub *st = &c->plt.v[i];

		c->syms[n++] = (struct fsym){ .addr = st->addr + c->bias, .size = st->size,
					      .name = obj_plt_name(&c->plt, st), .rank = 3 };
	}
	c->nsyms = n;
	/* Most symbols are not functions: give the rest back. */
	if (n == 0) {
		free(c->syms);
		c->syms = NULL;
	} else if (n < cap) {
		struct fsym *v = realloc(c->syms, n * sizeof(*c->syms));

		if (v)
			c->syms = v;
	}
	if (n > 1)
		qsort(c->syms, n, sizeof(*c->syms), cmp_fsym);
	r = xsecs_read(c->main_elf, c->bias, &x);
	if (r < 0)
		return r;
	bound_unsized(c, &x);
	free(x.start);
	return 0;
}

/* The function symbol covering q: among the symbols at the nearest address at
 * or before q, the best ranked, when one of them (sized, or bounded by
 * bound_unsized) reaches q. */
static int sym_lookup(struct dwarf_ctx *c, Dwarf_Addr q, const char **ret)
{
	size_t lo = 0, hi, first;
	uint64_t size = 0;
	const struct fsym *f;
	int r;

	*ret = NULL;
	if (!c->syms_done) {
		r = syms_build(c);
		if (r < 0)
			return r;
	}
	hi = c->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->syms[mid].addr <= q)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	first = lo - 1;
	while (first > 0 && c->syms[first - 1].addr == c->syms[lo - 1].addr)
		first--;
	for (size_t i = first; i < lo; i++)
		if (c->syms[i].size > size)
			size = c->syms[i].size;
	f = &c->syms[first];
	/* A stub's name is prowl's own; an ELF name is checked to end in its table. */
	if (q - f->addr < size && (f->rank == 3 || name_bounded(&c->strtabs, f->name)) && f->name[0])
		*ret = f->name;
	return 0;
}

static bool is_code_scope(int tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
	       tag == DW_TAG_entry_point || tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

static bool is_function(int tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_entry_point;
}

static bool is_container(int tag)
{
	return tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_class_type ||
	       tag == DW_TAG_structure_type || tag == DW_TAG_union_type;
}

/* Descends from die into the code scopes containing pc, appending each to
 * path (outermost first). Unlike dwarf_getscopes() + dwarf_getscopes_die(),
 * this skips every subtree that does not contain pc. Returns the new depth. */
static int scope_path(Dwarf_Die *die, Dwarf_Addr pc, Dwarf_Die *path, int depth)
{
	Dwarf_Die child;

	if (depth >= MAX_SCOPE_DEPTH || dwarf_child(die, &child) != 0)
		return depth;
	do {
		int tag = dwarf_tag(&child);

		if (is_code_scope(tag)) {
			if (dwarf_haspc(&child, pc) == 1) {
				path[depth] = child;
				return scope_path(&path[depth], pc, path, depth + 1);
			}
		} else if (is_container(tag)) {
			int d = scope_path(&child, pc, path, depth);

			if (d > depth)
				return d;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return depth;
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n;

	/* Linkage name first (as eu-addr2line does): C++ names stay mangled. */
	n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
	return n;
}

static int put(struct intern *strs, const char *s, const char **ret)
{
	uint32_t id;
	int r;

	if (!s) {
		*ret = NULL;
		return 0;
	}
	r = intern_put_str(strs, s, &id);
	if (r < 0)
		return r;
	*ret = intern_str(strs, id);
	return 0;
}

/* Call site of an inlined_subroutine DIE: where its caller's frame is. */
static void call_site(Dwarf_Die *inl, Dwarf_Files *files, const char **ret_file, int *ret_line)
{
	Dwarf_Attribute a;
	Dwarf_Word v;

	*ret_file = NULL;
	*ret_line = 0;
	if (files && dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &a), &v) == 0)
		*ret_file = dwarf_filesrc(files, v, NULL, NULL);
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &a), &v) == 0 && v <= INT32_MAX)
		*ret_line = (int)v;
}

/* DWARF file names may be relative to the CU's compilation directory; join
 * them only when that directory is absolute (a relative one, as left by
 * -fdebug-prefix-map, would just repeat itself). */
static int fill(struct intern *strs, struct sym_frame *f, const char *function, const char *file,
		const char *comp_dir, int line, int start_line)
{
	char buf[PATH_MAX];
	int r;

	if (file && file[0] != '/' && comp_dir && comp_dir[0] == '/') {
		if (file[0] == '.' && file[1] == '/')
			file += 2;
		if ((size_t)snprintf(buf, sizeof(buf), "%s/%s", comp_dir, file) < sizeof(buf))
			file = buf;
	}
	*f = (struct sym_frame){ .line = line, .start_line = start_line };
	r = put(strs, function, &f->function);
	if (r == 0)
		r = put(strs, file, &f->file);
	return r;
}

static int inline_chain(struct dwarf_ctx *c, Dwarf_Addr q, const char *lfile, const char *ldir, int lline,
			struct intern *strs, struct sym_frame *frames, size_t max, size_t *ret_n)
{
	Dwarf_Die *path = NULL, *inner = NULL;
	Dwarf_Files *files = NULL;
	Dwarf_Attribute attr;
	const char *cu_dir;
	Dwarf_Addr cubias;
	Dwarf_Die *cudie;
	int depth, nfunc = 0, r = 0;
	size_t n = 0;

	cudie = dwfl_module_addrdie(c->mod, q, &cubias);
	if (!cudie)
		goto out;
	path = malloc(MAX_SCOPE_DEPTH * sizeof(*path));
	if (!path) {
		r = -ENOMEM;
		goto out;
	}
	/* The concrete nesting: inlined instances inside their callers. */
	depth = scope_path(cudie, q - cubias, path, 0);
	if (depth == 0) {
		/* Rare inconsistent DWARF: an inner scope claims pc while its parent
		 * does not. The full walk of dwarf_getscopes() still finds it; the
		 * concrete callers are then its lexical parents. */
		Dwarf_Die *scopes = NULL, *chain = NULL;
		int ns = dwarf_getscopes(cudie, q - cubias, &scopes), nc = 0;

		if (ns > 0)
			nc = dwarf_getscopes_die(&scopes[0], &chain);
		for (int i = nc - 2; i >= 0 && depth < MAX_SCOPE_DEPTH; i--) /* skip the CU */
			if (is_code_scope(dwarf_tag(&chain[i])))
				path[depth++] = chain[i];
		free(scopes);
		free(chain);
		if (depth == 0)
			goto out;
	}
	if (dwarf_getsrcfiles(cudie, &files, NULL) != 0)
		files = NULL;
	cu_dir = dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &attr));
	/* Function frames: inlined instances up to the first real function. */
	for (int i = depth - 1; i >= 0; i--) {
		int tag = dwarf_tag(&path[i]);

		if (is_function(tag))
			nfunc++;
		if (is_function(tag) && tag != DW_TAG_inlined_subroutine)
			break;
	}
	for (int i = depth - 1, k = -1; i >= 0 && n < max; i--) {
		Dwarf_Die *d = &path[i];
		int tag = dwarf_tag(d), line, start_line = 0;
		const char *name, *file, *dir = cu_dir;

		if (!is_function(tag))
			continue;
		k++;
		/* Too deep: keep the innermost max - 1 and the outermost function. */
		if ((size_t)k >= max - 1 && k != nfunc - 1) {
			inner = d;
			continue;
		}
		name = die_name(d);
		if (!name && tag != DW_TAG_inlined_subroutine) {
			r = sym_lookup(c, q, &name);
			if (r < 0)
				goto out;
		}
		if (!name)
			name = "??";
		if (!inner) {
			file = lfile;
			line = lline;
			dir = ldir;
		} else {
			call_site(inner, files, &file, &line);
		}
		if (!file) {
			file = dwarf_decl_file(d);
			line = 0;
		}
		if (dwarf_decl_line(d, &start_line) != 0 || start_line < 0)
			start_line = 0;
		r = fill(strs, &frames[n], name, file, dir, line, start_line);
		if (r < 0)
			goto out;
		n++;
		inner = d;
		if (tag != DW_TAG_inlined_subroutine)
			break;
	}
out:
	free(path);
	*ret_n = r < 0 ? 0 : n;
	return r;
}

/* Go's table: frames with inlined calls, for Go binaries without DWARF. */
static int go_frames(struct module *m, struct dwarf_ctx *c, uint64_t addr, struct intern *strs,
		     struct sym_frame *frames, size_t max, size_t *ret_n)
{
	struct gopcln_frame gf[SYM_MAX_INLINE];
	size_t n = 0;
	int r;

	*ret_n = 0;
	if (!c->go_done) {
		c->go_done = true;
		r = (module_facts(m)->sources & OBJ_SRC_GOPCLNTAB) ? gopcln_open(c->main_elf, &c->go) : -ENOENT;
		if (r == -ENOMEM)
			return r;
		if ((r == -EBADMSG || r == -ENOTSUP) && !m->warned_go_table) {
			m->warned_go_table = true;
			log_warn("%s: its Go symbol table (.gopclntab) is %s; its frames stay addresses", m->name,
				 r == -EBADMSG ? "damaged (bad header or function table)" : "older than Go 1.18");
		}
	}
	if (!c->go)
		return 0;
	gopcln_lookup(c->go, addr, gf, max < SYM_MAX_INLINE ? max : SYM_MAX_INLINE, &n);
	for (size_t i = 0; i < n; i++) {
		r = fill(strs, &frames[i], gf[i].function, gf[i].file, NULL, gf[i].line, 0);
		if (r < 0)
			return r;
	}
	*ret_n = n;
	return 0;
}

/* The start of the .eh_frame FDE around addr (normalized), for code no symbol
 * names: one row per function rather than one per address. */
static void fde_group(struct module *m, struct dwarf_ctx *c, uint64_t addr, uint64_t *ret)
{
	if (!c->fdes_done) {
		c->fdes_done = true;
		if (fde_groups_build(c->main_elf, &c->fdes) == -EBADMSG && !m->warned_fde_overlap) {
			m->warned_fde_overlap = true;
			log_warn("%s: its .eh_frame has overlapping entries; its frames without a symbol stay addresses",
				 m->name);
		}
	}
	if (c->fdes && !fde_groups_find(c->fdes, addr, ret))
		*ret = UINT64_MAX;
}

static int symbolize(struct module *m, uint64_t addr, struct intern *strs, struct sym_frame *frames, size_t max,
		     size_t *ret_n, uint64_t *ret_group)
{
	struct dwarf_ctx *c;
	const char *lfile = NULL, *ldir = NULL, *sym;
	Dwfl_Line *ln;
	Dwarf_Addr q;
	int lline = 0, r;
	size_t n = 0;

	*ret_n = 0;
	if (max == 0)
		return 0;
	c = ctx_get(m);
	if (!c)
		return 0;
	q = addr + c->bias;

	if (c->dwarf_ok) {
		ln = dwfl_module_getsrc(c->mod, q);
		if (ln && !(lfile = dwfl_lineinfo(ln, NULL, &lline, NULL, NULL, NULL)))
			lline = 0;
		if (lfile)
			ldir = dwfl_line_comp_dir(ln);
		r = inline_chain(c, q, lfile, ldir, lline, strs, frames, max, &n);
		if (r < 0)
			return r;
	}
	if (n == 0 && !lfile) {
		/* A Go binary without DWARF: its own table has names, lines and inlining. */
		r = go_frames(m, c, addr, strs, frames, max, &n);
		if (r < 0)
			return r;
	}
	if (n == 0) {
		/* No DWARF function here: the symbol tables (.symtab or .dynsym) may
		 * still name it, possibly with a line from the line table. */
		r = sym_lookup(c, q, &sym);
		if (r < 0)
			return r;
		if (!sym)
			fde_group(m, c, addr, ret_group);
		if (sym || lfile) {
			/* A line without a function: function stays NULL and the caller
			 * names it like a fallback. */
			r = fill(strs, &frames[0], sym, lfile, ldir, lline, 0);
			if (r < 0)
				return r;
			n = 1;
		}
	}
	*ret_n = n;
	return 0;
}

int dwarf_symbolize(struct module *m, uint64_t addr, struct intern *strs, struct sym_frame *frames,
		    size_t max, size_t *ret_n, uint64_t *ret_group)
{
	int r;

	*ret_group = UINT64_MAX;
	r = symbolize(m, addr, strs, frames, max, ret_n, ret_group);

	/* libelf's pread() of a file truncated meanwhile fails quietly, and bytes
	 * read before and after a write do not belong together: whatever this
	 * lookup read from such a file is dropped, and so is the module's state. */
	if (!module_check_file(m)) {
		dwarf_ctx_free(m);
		module_close(m);
		*ret_n = 0;
		*ret_group = UINT64_MAX;
	}
	return r;
}

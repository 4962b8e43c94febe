/* dwfl_session.c: the libdwfl session of one module, fed prowl's own Elf and only debug
 * files from where root alone can put them (or debuginfod's cache). */
#include "dwfl_session.h"

#include <elfutils/libdw.h>
#include <gelf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debugfile.h"
#include "debuginfod.h"

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

int dwfl_session_open(struct module *m, struct dwarf_ctx *c, uint64_t low, uint64_t high)
{
	Dwarf_Addr dwbias;
	void **ud = NULL;
	Elf *main_elf;
	Dwarf *dw;

	c->dwfl = dwfl_begin(&callbacks);
	if (!c->dwfl)
		return -1;
	dwfl_report_begin(c->dwfl);
	c->mod = dwfl_report_module(c->dwfl, m->name, low, high);
	if (!c->mod || dwfl_report_end(c->dwfl, NULL, NULL) != 0)
		return -1;
	dwfl_module_info(c->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	if (!ud)
		return -1;
	*ud = m;
	/* Triggers find_elf_cb: from here on libdwfl owns the Elf. */
	main_elf = dwfl_module_getelf(c->mod, &c->bias);
	if (!main_elf)
		return -1;
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
	return 0;
}

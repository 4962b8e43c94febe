/* inlines.c: the DWARF walk from an address to its function and inlined callers (the
 * concrete scopes that contain it), with each frame's file and line. */
#include "inlines.h"

#include <dwarf.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "dwfl_session.h"
#include "symindex.h"

/* Scopes deeper than this are not followed (real code nests a few dozen). */
#define MAX_SCOPE_DEPTH 256

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
int frame_fill(struct intern *strs, struct sym_frame *f, const char *function, const char *file,
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

int inline_chain(struct dwarf_ctx *c, Dwarf_Addr q, const char *lfile, const char *ldir, int lline,
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
		r = frame_fill(strs, &frames[n], name, file, dir, line, start_line);
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


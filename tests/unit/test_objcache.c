/* test_objcache.c: the object cache the symbolizer and the unwinder share: copies of a
 * file are one object, a forged build id is not; mappings are found again without
 * opening files; the opener refuses a file that is not the one mapped; idle
 * objects are evicted within the budget; two threads at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "objcache.h"
#include "procmaps.h"
#include "testutil.h"
#include "trust.h"

/* Two programs with one build id: the second forges the first's. */
#define BUILD_ID "0x0123456789abcdef0123456789abcdef01234567"

static char dir[] = "/tmp/prowl-test-objcache.XXXXXX";
static char prog_a[PATH_MAX], copy_a[PATH_MAX], forged[PATH_MAX];
/* Same build id and same size as each other, other contents: a copy of a with one
 * byte changed in its ELF header's padding; a and forged padded to one size. */
static char a_byte[PATH_MAX], a_pad[PATH_MAX], a_pad_copy[PATH_MAX], forged_pad[PATH_MAX];

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(prog_a, sizeof(prog_a), "%s/a", dir);
	snprintf(copy_a, sizeof(copy_a), "%s/copy-of-a", dir);
	snprintf(forged, sizeof(forged), "%s/forged", dir);
	/* "wait": say so on stdout, then read stdin until it closes, so the test controls
	 * its life (spawn_waiter in testutil.h). */
	if (run_cmd("printf '#include <unistd.h>\\nint main(int c, char **v) { char b; (void)v; if (c > 1 && "
		    "write(1, \"r\", 1) == 1) while (read(0, &b, 1) > 0) ; return 0; }\\n' > %s/a.c", dir) ||
	    run_cmd("printf 'int f(int x) { return x * 3 + 1; }\\nint main(void) { return f(2) - 7; }\\n' > %s/b.c",
		    dir) ||
	    run_cmd("cc -O1 -Wl,--build-id=" BUILD_ID " -o %s %s/a.c", prog_a, dir) ||
	    run_cmd("cc -O1 -Wl,--build-id=" BUILD_ID " -o %s %s/b.c", forged, dir) ||
	    run_cmd("cp %s %s", prog_a, copy_a))
		return -1;
	snprintf(a_byte, sizeof(a_byte), "%s/a-one-byte-off", dir);
	snprintf(a_pad, sizeof(a_pad), "%s/a-padded", dir);
	snprintf(a_pad_copy, sizeof(a_pad_copy), "%s/copy-of-a-padded", dir);
	snprintf(forged_pad, sizeof(forged_pad), "%s/forged-padded", dir);
	if (run_cmd("cp %s %s && printf '\\001' | dd of=%s bs=1 seek=15 conv=notrunc status=none", prog_a, a_byte,
		    a_byte) ||
	    run_cmd("n=$(( $(stat -c %%s %s) + $(stat -c %%s %s) )) && cp %s %s && cp %s %s && truncate -s $n %s %s && "
		    "cp %s %s", prog_a, forged, prog_a, a_pad, forged, forged_pad, a_pad, forged_pad, a_pad, a_pad_copy))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	run_cmd("rm -rf %s", dir);
	return 0;
}

static struct objcache *new_cache(size_t max_idle)
{
	struct objcache_opts o = { .max_idle_bytes = max_idle };
	struct objcache *c;

	assert_int_equal(objcache_new(&o, &c), 0);
	return c;
}

static struct object *get_path(struct objcache *c, const char *path)
{
	struct obj_source src = { .path = path };
	struct object *o = NULL;

	assert_int_equal(objcache_get(c, &src, &o, NULL), 0);
	return o;
}

static struct objcache_stats stats(struct objcache *c)
{
	struct objcache_stats st;

	objcache_get_stats(c, &st);
	return st;
}

/* Copies share one object; a file with the same build id but other contents
 * is another object; facts are read once per object. */
static void test_copies_and_forgery(void **state)
{
	struct objcache *c = new_cache(0);
	struct object *a, *copy, *f, *again;

	(void)state;
	a = get_path(c, prog_a);
	copy = get_path(c, copy_a);
	f = get_path(c, forged);
	assert_ptr_equal(copy, a);
	assert_ptr_not_equal(f, a);
	assert_int_equal(a->f.build_id_len, 20);
	assert_string_equal(a->f.build_id_hex, BUILD_ID + 2);
	assert_string_equal(f->f.build_id_hex, a->f.build_id_hex);
	assert_int_equal(a->f.e_type, ET_DYN);
	assert_true(a->f.nloads >= 2);
	assert_true(a->f.sources & OBJ_SRC_EH_FRAME);
	assert_true(a->f.sources & OBJ_SRC_SYMTAB);
	assert_int_equal(a->nidents, 2);
	assert_int_equal(stats(c).reads, 3);
	assert_int_equal(stats(c).copies, 1);
	/* The same file again: no new read. */
	again = get_path(c, prog_a);
	assert_ptr_equal(again, a);
	assert_int_equal(stats(c).reads, 3);
	assert_int_equal(stats(c).objects, 2);
	for (int i = 0; i < 3; i++)
		object_unref(c, a);
	object_unref(c, f);
	objcache_unref(c);
}

/* Two files that claim one build id and have one size but other contents are two
 * objects: the content hash tells them apart (a copy of a one byte off; two programs
 * padded to one size), whether the second is looked up or opened again as the
 * first's file. An identical copy of the same size is still shared both ways, so the
 * files are ones the cache shares by content at all. */
static void test_forgery_same_size(void **state)
{
	const char *p[2][2] = { { prog_a, a_byte }, { a_pad, forged_pad } };
	struct objcache *c = new_cache(0);
	struct object *x, *y, *copy;
	struct obj_source src;
	struct stat sx, sy;
	struct obj_file f;

	(void)state;
	for (int i = 0; i < 2; i++) {
		struct objcache *c2 = new_cache(0);

		/* Opened again as the first one's file: refused. */
		x = get_path(c2, p[i][0]);
		src = (struct obj_source){ .path = p[i][1] };
		if (objcache_open(c2, x, &src, &f) != -ESTALE) {
			print_error("%s was opened as the file of %s (same build id and size, other contents)\n",
				    p[i][1], p[i][0]);
			fail();
		}
		assert_int_equal(f.fd, -1);
		assert_int_equal(stats(c2).copies, 0);
		object_unref(c2, x);
		objcache_unref(c2);
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(stat(p[i][0], &sx), 0);
		assert_int_equal(stat(p[i][1], &sy), 0);
		assert_int_equal(sx.st_size, sy.st_size);
		x = get_path(c, p[i][0]);
		y = get_path(c, p[i][1]);
		assert_string_equal(x->f.build_id_hex, BUILD_ID + 2);
		assert_string_equal(y->f.build_id_hex, BUILD_ID + 2);
		if (x == y) {
			print_error("%s and %s: one object (same build id and size, other contents)\n", p[i][0],
				    p[i][1]);
			fail();
		}
		assert_int_equal(stats(c).copies, 0);
		object_unref(c, x);
		object_unref(c, y);
	}
	copy = get_path(c, a_pad_copy);
	x = get_path(c, a_pad);
	assert_ptr_equal(copy, x);
	assert_int_equal(stats(c).copies, 1);
	object_unref(c, copy);
	object_unref(c, x);
	objcache_unref(c);
	c = new_cache(0);
	x = get_path(c, a_pad);
	src = (struct obj_source){ .path = a_pad_copy };
	assert_int_equal(objcache_open(c, x, &src, &f), 0);
	obj_file_close(&f);
	assert_int_equal(stats(c).copies, 1);
	object_unref(c, x);
	objcache_unref(c);
}

/* The source of ch's first executable mapping of path (ch from spawn_waiter: its
 * mappings are final). */
static struct obj_source mapping_of(const struct child *ch, const char *path, const char *proc_root)
{
	struct procmaps pm = {};
	char maps[64];
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)ch->pid);
	f = fopen(maps, "re");
	assert_non_null(f);
	assert_int_equal(procmaps_parse(f, PROCMAPS_EXEC_ONLY, &pm, NULL), 0);
	fclose(f);
	for (size_t i = 0; i < pm.n; i++) {
		const struct pm_entry *e = &pm.v[i];

		if (e->path && strcmp(e->path, path) == 0) {
			struct obj_source src = {
				.proc_root = proc_root, .pid = (uint32_t)ch->pid, .start = e->start, .end = e->end,
				.dev = makedev(e->dev_major, e->dev_minor), .ino = e->inode, .path = path,
			};

			procmaps_free(&pm);
			return src;
		}
	}
	procmaps_free(&pm);
	fail_msg("%s does not map %s", maps, path);
	return (struct obj_source){ 0 };
}

/* A mapping seen once is found again without opening the file; the file is
 * handed to the first caller open, with its Elf. */
static void test_mapping_fast_path(void **state)
{
	struct objcache *c = new_cache(0);
	struct child ch = spawn_waiter(copy_a);
	struct obj_source src = mapping_of(&ch, copy_a, "/proc");
	struct obj_file file;
	struct object *o, *o2, *a;

	(void)state;
	assert_int_equal(objcache_get(c, &src, &o, &file), 0);
	assert_true(file.fd >= 0);
	assert_non_null(file.elf);
	assert_int_equal(file.ident.ino, src.ino);
	obj_file_close(&file);
	assert_int_equal(stats(c).hits, 0);
	assert_int_equal(objcache_get(c, &src, &o2, &file), 0);
	assert_ptr_equal(o2, o);
	assert_int_equal(file.fd, -1); /* not opened */
	assert_null(file.elf);
	assert_int_equal(stats(c).hits, 1);
	/* The original is the same object (read second: a copy). */
	a = get_path(c, prog_a);
	assert_ptr_equal(a, o);
	/* objcache_open() through the mapping gives the file again. */
	assert_int_equal(objcache_open(c, o, &src, &file), 0);
	assert_non_null(file.elf);
	obj_file_close(&file);
	reap_child(&ch);
	object_unref(c, o);
	object_unref(c, o2);
	object_unref(c, a);
	objcache_unref(c);
}

/* Without map_files (a /proc that has none: the capability is missing), the
 * process's root gives the path; a file there that is not the one mapped
 * (replaced after the mapping) is refused. */
static void test_opener_checks_identity(void **state)
{
	char fake[PATH_MAX], link[PATH_MAX * 2], moved[PATH_MAX + 16];
	struct child ch = spawn_waiter(copy_a);
	struct obj_source src, real;
	struct obj_file f;

	(void)state;
	/* fake/PID/root -> / : only the root route exists. */
	snprintf(fake, sizeof(fake), "%s/fakeproc", dir);
	real = mapping_of(&ch, copy_a, "/proc");
	snprintf(link, sizeof(link), "%s/%d", fake, (int)ch.pid);
	assert_int_equal(run_cmd("mkdir -p %s && ln -s / %s/root", link, link), 0);
	src = real;
	src.proc_root = fake;
	assert_int_equal(obj_open(&src, &f), 0);
	assert_int_equal(f.ident.ino, real.ino);
	obj_file_close(&f);
	/* Replace the file at the path (the process keeps the old inode). */
	snprintf(moved, sizeof(moved), "%s.old", copy_a);
	assert_int_equal(rename(copy_a, moved), 0);
	assert_int_equal(run_cmd("cp %s %s", prog_a, copy_a), 0);
	assert_int_equal(obj_open(&src, &f), -ESTALE);
	src.try_plain_path = true;
	assert_int_equal(obj_open(&src, &f), -ESTALE);
	/* No inode to compare with: only map_files would do. */
	src.ino = 0;
	assert_int_equal(obj_open(&src, &f), -ENOENT);
	/* The real /proc still reaches the mapped (renamed) file. */
	assert_int_equal(obj_open(&real, &f), 0);
	assert_int_equal(f.ident.ino, real.ino);
	obj_file_close(&f);
	reap_child(&ch);
	assert_int_equal(rename(moved, copy_a), 0);
	/* A FIFO at a path is refused, without blocking. */
	snprintf(moved, sizeof(moved), "%s/fifo", dir);
	assert_int_equal(mkfifo(moved, 0600), 0);
	src = (struct obj_source){ .path = moved };
	assert_int_equal(obj_open(&src, &f), -ENOEXEC);
	unlink(moved);
	run_cmd("rm -rf %s", fake);
}

/* A file changed in place is not its old object any more; an unbound copy
 * with the same content becomes one of the object's files. */
static void test_open_checks_object(void **state)
{
	char path[PATH_MAX], path2[PATH_MAX];
	struct objcache *c = new_cache(0);
	struct obj_source src;
	struct obj_file f;
	struct object *o;

	(void)state;
	snprintf(path, sizeof(path), "%s/changes", dir);
	snprintf(path2, sizeof(path2), "%s/copy2", dir);
	assert_int_equal(run_cmd("cp %s %s && cp %s %s", prog_a, path, prog_a, path2), 0);
	o = get_path(c, path);
	src = (struct obj_source){ .path = path2 };
	assert_int_equal(objcache_open(c, o, &src, &f), 0);
	obj_file_close(&f);
	assert_int_equal(o->nidents, 2);
	/* The same inode, other contents. */
	assert_int_equal(run_cmd("cat %s > %s", forged, path), 0);
	src = (struct obj_source){ .path = path };
	assert_int_equal(objcache_open(c, o, &src, &f), -ESTALE);
	assert_int_equal(f.fd, -1);
	object_unref(c, o);
	objcache_unref(c);
}

/* Idle objects stay within the budget, least recently released evicted
 * first; a referenced object is never evicted. */
static void test_idle_budget(void **state)
{
	struct objcache *c = new_cache(1); /* every idle object is over budget */
	struct object *a, *f;

	(void)state;
	a = get_path(c, prog_a);
	f = get_path(c, forged);
	assert_int_equal(stats(c).objects, 2);
	object_unref(c, f);
	assert_int_equal(stats(c).objects, 1);
	assert_int_equal(stats(c).evictions, 1);
	assert_int_equal(a->refs, 1);
	object_unref(c, a);
	assert_int_equal(stats(c).objects, 0);
	objcache_unref(c);

	c = new_cache(1u << 20);
	a = get_path(c, prog_a);
	object_unref(c, a);
	assert_int_equal(stats(c).idle, 1);
	/* Taken again from the idle list, without reading. */
	assert_ptr_equal(get_path(c, prog_a), a);
	assert_int_equal(stats(c).idle, 0);
	assert_int_equal(stats(c).reads, 1);
	object_unref(c, a);
	objcache_unref(c);
}

/* The process-wide cache is one instance while anybody holds it. */
static void test_shared(void **state)
{
	struct objcache *x = objcache_shared(), *y = objcache_shared();

	(void)state;
	assert_non_null(x);
	assert_ptr_equal(x, y);
	objcache_unref(x);
	objcache_unref(y);
}

static void *hammer(void *arg)
{
	struct objcache *c = arg;
	const char *paths[] = { prog_a, copy_a, forged };

	for (int i = 0; i < 300; i++) {
		struct object *o = get_path(c, paths[i % 3]);

		assert_true(o->f.nloads > 0);
		object_unref(c, o);
	}
	return NULL;
}

/* Two threads at once (the symbolizer's and the unwinder's): the same objects,
 * the references balanced. Run under ASan too. */
static void test_threads(void **state)
{
	struct objcache *c = new_cache(1);
	pthread_t t[2];

	(void)state;
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer, c), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(stats(c).objects, 0); /* all idle, all over the budget */
	assert_int_equal(stats(c).lookups, 600);
	objcache_unref(c);
}

/* A debug file is read for any process that maps its object, whoever named it
 * (a user's binary may name /root/private.debug as its .gnu_debugaltlink):
 * only a file every user could read is opened. */
static void test_trusted_open_needs_a_file_anyone_reads(void **state)
{
	char sub[PATH_MAX + 16], file[PATH_MAX + 32];
	struct obj_file f;

	(void)state;
	snprintf(sub, sizeof(sub), "%s/debug", dir);
	snprintf(file, sizeof(file), "%s/x.debug", sub);
	assert_int_equal(mkdir(sub, 0755), 0);
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(run_cmd("cp %s %s", prog_a, file), 0);
	assert_int_equal(chmod(file, 0644), 0);
	assert_int_equal(obj_open_trusted(file, &f), 0);
	obj_file_close(&f);
	/* Root's only: refused. */
	assert_int_equal(chmod(file, 0600), 0);
	assert_int_equal(obj_open_trusted(file, &f), -EPERM);
	/* Readable, but behind a directory only root may search: refused. */
	assert_int_equal(chmod(file, 0644), 0);
	assert_int_equal(chmod(sub, 0700), 0);
	assert_int_equal(obj_open_trusted(file, &f), -EPERM);
	assert_int_equal(chmod(dir, 0700), 0);
	unlink(file);
	rmdir(sub);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copies_and_forgery),
		cmocka_unit_test(test_trusted_open_needs_a_file_anyone_reads),
		cmocka_unit_test(test_forgery_same_size),
		cmocka_unit_test(test_mapping_fast_path),
		cmocka_unit_test(test_opener_checks_identity),
		cmocka_unit_test(test_open_checks_object),
		cmocka_unit_test(test_idle_budget),
		cmocka_unit_test(test_shared),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

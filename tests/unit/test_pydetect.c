/* test_pydetect.c: what py_detect_elf() reads from objects that are not CPython: glibc's
 * sizeof(struct pthread) (arm64 matches 3.6-3.10's threads by it), against readelf and od. */
#include "testutil.h"

#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pydetect.h"

/* The 4 bytes at glibc's _thread_db_sizeof_pthread, as readelf (its value, and the load
 * segment that holds it) and od (the bytes at that file offset) give them. */
static const char oracle[] =
	"f=$1\n"
	"v=$(readelf -W --dyn-syms \"$f\" | awk '$8 ~ /^_thread_db_sizeof_pthread@/ {print $2; exit}')\n"
	"[ -n \"$v\" ] || exit 3\n"
	"readelf -lW \"$f\" | awk '$1 == \"LOAD\" {print $2, $3, $5}' | while read -r o a n; do\n"
	"  if [ $((0x$v)) -ge $((a)) ] && [ $((0x$v)) -lt $((a + n)) ]; then\n"
	"    od -An -t u4 -j $((0x$v - a + o)) -N 4 \"$f\" | tr -d ' '; break\n"
	"  fi\n"
	"done\n";

static long oracle_size(const char *path)
{
	char script[32], out[64] = "";
	FILE *p = popen_script("sh", oracle, path, script);

	assert_non_null(p);
	if (!fgets(out, sizeof(out), p))
		out[0] = 0;
	pclose(p);
	unlink(script);
	return out[0] ? strtol(out, NULL, 10) : -1;
}

/* py_detect_elf() on the file at path; false when there is no such file. */
static bool detect(const char *path, struct py_elf *pe)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf;

	if (fd < 0)
		return false;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(elf);
	assert_int_equal(py_detect_elf(elf, path, pe), 0);
	elf_end(elf);
	close(fd);
	return true;
}

static void check_libc(const char *path)
{
	struct py_elf pe;
	long want;

	if (!detect(path, &pe))
		skip_because("%s is not here (packaging/install-deps.sh installs the arm64 one)", path);
	want = oracle_size(path);
	assert_true(want >= PY_PTHREAD_SIZE_MIN && want <= PY_PTHREAD_SIZE_MAX);
	assert_false(pe.found); /* libc is no CPython */
	assert_int_equal(pe.pthread_size, want);
}

static void test_glibc_x86_64(void **state)
{
	(void)state;
	check_libc("/lib/x86_64-linux-gnu/libc.so.6");
}

static void test_glibc_arm64(void **state)
{
	(void)state;
	check_libc("/usr/lib/aarch64-linux-gnu/libc.so.6");
}

/* Any other object has none: a program of this machine, and CPython's libpython. */
static void test_other_objects_have_none(void **state)
{
	const char *paths[] = { "/bin/sh", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0" };

	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct py_elf pe;

		if (detect(paths[i], &pe))
			assert_int_equal(pe.pthread_size, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_glibc_x86_64),
		cmocka_unit_test(test_glibc_arm64),
		cmocka_unit_test(test_other_objects_have_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

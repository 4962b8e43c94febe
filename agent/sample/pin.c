/* pin.c: the agent's BPF programs and maps kept in bpffs between its runs, so that a
 * restart skips the verifier; one set, named by a digest of everything its load depends on. */
#include "sample_priv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
/* The direct SHA-256, as in kallsyms_cache.c: EVP would load OpenSSL's providers. */
#define OPENSSL_API_COMPAT 10101
#include <openssl/sha.h>

#include "log.h"

#define PIN_BPF_FS_MAGIC 0xcafe4a11 /* linux/magic.h BPF_FS_MAGIC */
#define PIN_FORMAT       "prowl-pin-2"
/* The most keys of one hash map a reset removes (past them, the rest stays: logged). */
#define PIN_CLEAR_MAX    (1u << 20)

/* The file of map or program name in set dir, under PROWL_PIN_ROOT: "m_NAME" or
 * "p_NAME", with '_' for '.' (bpffs refuses names with a dot). */
static int pin_path(char *buf, size_t size, const char *dir, char kind, const char *name)
{
	int n = snprintf(buf, size, PROWL_PIN_ROOT "/%s/%c_%s", dir, kind, name);

	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	for (char *p = buf + n - strlen(name); *p; p++)
		if (*p == '.')
			*p = '_';
	return 0;
}

static void digest_str(SHA256_CTX *md, const char *s)
{
	SHA256_Update(md, s, strlen(s) + 1);
}

/* The set's name: what makes two loads the same. The object's bytes, its read-only
 * data as user space set it, every map's shape and which programs load as what. A
 * reboot empties bpffs, so the kernel needs no part in it. */
static void pin_key(struct sampler *s, char key[static PIN_KEY_LEN + 1])
{
	unsigned char h[SHA256_DIGEST_LENGTH];
	struct bpf_program *p;
	struct bpf_map *m;
	SHA256_CTX md;
	size_t sz = 0;
	const void *elf = prowl_bpf__elf_bytes(&sz);
	uint32_t lib[2] = { libbpf_major_version(), libbpf_minor_version() };

	SHA256_Init(&md);
	digest_str(&md, PIN_FORMAT);
	SHA256_Update(&md, lib, sizeof(lib));
	SHA256_Update(&md, elf, sz);
	bpf_object__for_each_map(m, s->skel->obj) {
		uint32_t shape[5] = { bpf_map__type(m), bpf_map__key_size(m), bpf_map__value_size(m),
				      bpf_map__max_entries(m), bpf_map__map_flags(m) };
		const void *init;

		digest_str(&md, bpf_map__name(m));
		SHA256_Update(&md, shape, sizeof(shape));
		/* .rodata is frozen at load: its bytes are part of what was verified. */
		if ((bpf_map__map_flags(m) & BPF_F_RDONLY_PROG) && (init = bpf_map__initial_value(m, &sz)))
			SHA256_Update(&md, init, sz);
	}
	bpf_object__for_each_program(p, s->skel->obj) {
		uint32_t how[3] = { bpf_program__autoload(p), bpf_program__type(p),
				    bpf_program__expected_attach_type(p) };

		digest_str(&md, bpf_program__name(p));
		SHA256_Update(&md, how, sizeof(how));
	}
	SHA256_Final(h, &md);
	for (size_t i = 0; i < PIN_KEY_LEN / 2; i++)
		snprintf(key + 2 * i, 3, "%02x", h[i]);
}

/* Removes set name (its pins, then the directory); -errno on the first failure. */
static int remove_set(int root, const char *name)
{
	int fd = openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r = 0;
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return unlinkat(root, name, 0) < 0 ? -errno : 0; /* a stray pin */
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && unlinkat(fd, de->d_name, 0) < 0 && !r)
			r = -errno;
	closedir(d);
	if (unlinkat(root, name, AT_REMOVEDIR) < 0 && !r)
		r = -errno;
	return r;
}

/* Removes every set under the root but keep (NULL: all of them). */
static void remove_others(int root, const char *keep)
{
	int fd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;
	struct dirent *de;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || (keep && !strcmp(de->d_name, keep)))
			continue;
		r = remove_set(root, de->d_name);
		if (r < 0)
			log_warn_errno(r, "cannot remove the BPF pins " PROWL_PIN_ROOT "/%s of an earlier run", de->d_name);
		else
			log_debug("removed the BPF pins " PROWL_PIN_ROOT "/%s of an earlier run", de->d_name);
	}
	closedir(d);
}

/* Opens and locks the root; -errno with nothing to do (logged when it is news). */
static int open_root(void)
{
	struct statfs sfs;
	struct stat st = {};
	int fd, r;

	if (mkdir(PROWL_PIN_ROOT, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		log_info("BPF programs are not kept between runs: cannot create " PROWL_PIN_ROOT ": %s", strerror(-r));
		return r;
	}
	fd = open(PROWL_PIN_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		log_warn("BPF programs are not kept between runs: cannot open " PROWL_PIN_ROOT ": %s", strerror(-r));
		return r;
	}
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != PIN_BPF_FS_MAGIC) {
		log_info("BPF programs are not kept between runs: " PROWL_PIN_ROOT " is not on a BPF file system "
			 "(mount one on /sys/fs/bpf, or in a pod mount the host's)");
		close(fd);
		return -ENOTSUP;
	}
	/* Only root may plant or read pins: whoever else could would choose prowl's programs. */
	if (fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 077)) {
		log_warn("BPF programs are not kept between runs: " PROWL_PIN_ROOT " is owned by uid %u with mode %04o, "
			 "not by root with mode 0700; remove it (rm -r " PROWL_PIN_ROOT ")",
			 (unsigned int)st.st_uid, (unsigned int)(st.st_mode & 07777));
		close(fd);
		return -EPERM;
	}
	/* An agent that is not root (the capabilities alone) may read but not pin. */
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
		log_info("BPF programs are not kept between runs: " PROWL_PIN_ROOT " is not writable by uid %u",
			 (unsigned int)geteuid());
		close(fd);
		return -EACCES;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		r = -errno;
		log_info("BPF programs are not kept between runs: another prowl agent holds " PROWL_PIN_ROOT
			 "; this one loads its own");
		close(fd);
		return r;
	}
	return fd;
}

/* The object's program number of p, or -1. */
static int prog_index(const struct sampler *s, const struct bpf_program *p)
{
	struct bpf_program *q;
	int i = 0;

	bpf_object__for_each_program(q, s->skel->obj) {
		if (q == p)
			return i;
		i++;
	}
	return -1;
}

/* The kernel's object pinned at path if root pinned it; -errno if not. */
static int get_pinned(const char *path)
{
	struct stat st;
	int fd;

	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != 0)
		return -EPERM;
	fd = bpf_obj_get(path);
	return fd < 0 ? -errno : fd;
}

/* Checks that set pin.key holds every map of the object as it is now and every
 * program that loads; their fds go to pin.map_fd and pin.prog_fd. */
static int open_set(struct sampler *s)
{
	char path[PATH_MAX];
	struct bpf_program *p;
	struct bpf_map *m;
	int i = 0, r;

	bpf_object__for_each_map(m, s->skel->obj) {
		struct bpf_map_info info = {};
		__u32 len = sizeof(info);

		if ((r = pin_path(path, sizeof(path), s->pin.key, 'm', bpf_map__name(m))) < 0 ||
		    (r = s->pin.map_fd[i++] = get_pinned(path)) < 0)
			return r;
		if (bpf_obj_get_info_by_fd(r, &info, &len) < 0)
			return -errno;
		if (info.type != bpf_map__type(m) || info.key_size != bpf_map__key_size(m) ||
		    info.value_size != bpf_map__value_size(m) || info.max_entries != bpf_map__max_entries(m) ||
		    info.map_flags != bpf_map__map_flags(m))
			return -ESTALE;
	}
	i = -1;
	bpf_object__for_each_program(p, s->skel->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		i++;
		if (!bpf_program__autoload(p))
			continue;
		if ((r = pin_path(path, sizeof(path), s->pin.key, 'p', bpf_program__name(p))) < 0 ||
		    (r = s->pin.prog_fd[i] = get_pinned(path)) < 0)
			return r;
		if (bpf_obj_get_info_by_fd(r, &info, &len) < 0)
			return -errno;
		if (info.type != bpf_program__type(p) || strncmp(info.name, bpf_program__name(p), sizeof(info.name) - 1))
			return -ESTALE;
	}
	return 0;
}

static void close_fds(struct sampler_pin *pin)
{
	for (size_t i = 0; pin->prog_fd && i < pin->nprogs + pin->nmaps; i++) {
		if (pin->prog_fd[i] >= 0)
			close(pin->prog_fd[i]);
		pin->prog_fd[i] = -1;
	}
}

/* The set is used: its maps replace the object's, and no program loads. The
 * writable data (.bss, .data) as user space set it is kept, to be written over
 * the set's after the load. */
static int use_set(struct sampler *s)
{
	struct bpf_program *p;
	struct bpf_map *m;
	int i = 0;

	bpf_object__for_each_map(m, s->skel->obj) {
		size_t sz = 0;
		const void *init = bpf_map__initial_value(m, &sz);

		if (bpf_map__reuse_fd(m, s->pin.map_fd[i++]))
			return -errno;
		if (!init || (bpf_map__map_flags(m) & BPF_F_RDONLY_PROG))
			continue;
		if (s->pin.nimages == PIN_IMAGES)
			return -E2BIG;
		s->pin.images[s->pin.nimages].data = malloc(sz);
		if (!s->pin.images[s->pin.nimages].data)
			return -ENOMEM;
		memcpy(s->pin.images[s->pin.nimages].data, init, sz);
		s->pin.images[s->pin.nimages].map = m;
		s->pin.images[s->pin.nimages++].size = sz;
	}
	bpf_object__for_each_program(p, s->skel->obj)
		bpf_program__set_autoload(p, false);
	return 0;
}

static int count_objects(struct sampler *s)
{
	struct bpf_program *p;
	struct bpf_map *m;

	bpf_object__for_each_program(p, s->skel->obj)
		s->pin.nprogs++;
	bpf_object__for_each_map(m, s->skel->obj)
		s->pin.nmaps++;
	s->pin.prog_fd = malloc(sizeof(int) * (s->pin.nprogs + s->pin.nmaps));
	if (!s->pin.prog_fd)
		return -ENOMEM;
	s->pin.map_fd = s->pin.prog_fd + s->pin.nprogs;
	for (size_t i = 0; i < s->pin.nprogs + s->pin.nmaps; i++)
		s->pin.prog_fd[i] = -1;
	return 0;
}

int pin_before_load(struct sampler *s)
{
	int r;

	if (!s->opts.pin)
		return 0;
	/* Off-CPU time keeps per-task state (task-local storage) that user space can
	 * neither list nor clear: its programs always load anew. */
	if (s->opts.offcpu) {
		log_debug("BPF programs are not kept between runs with off-CPU time on");
		return 0;
	}
	r = count_objects(s);
	if (r < 0)
		return r;
	r = open_root();
	if (r < 0)
		return 0;
	s->pin.root = r;
	pin_key(s, s->pin.key);
	remove_others(s->pin.root, s->pin.no_reuse ? NULL : s->pin.key);
	if (s->pin.no_reuse || faccessat(s->pin.root, s->pin.key, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* the first run with this load */
	r = open_set(s);
	if (r == 0)
		r = use_set(s);
	if (r < 0) {
		log_warn_errno(r, "the BPF programs pinned in " PROWL_PIN_ROOT "/%s cannot be used; loading them anew",
			       s->pin.key);
		pin_release(s);
		return -ESTALE;
	}
	s->pin.reused = true;
	return 0;
}

/* Empties a hash map: its keys first, then each one deleted. */
static int clear_hash(int fd, uint32_t key_size)
{
	size_t cap = 0, n = 0;
	char *keys = NULL;
	int r = 0;

	for (;;) {
		if (n == cap) {
			char *k;

			if (cap >= PIN_CLEAR_MAX) {
				r = -E2BIG;
				break;
			}
			cap = cap ? 2 * cap : 1024;
			k = realloc(keys, cap * key_size);
			if (!k) {
				r = -ENOMEM;
				break;
			}
			keys = k;
		}
		if (bpf_map_get_next_key(fd, n ? keys + (n - 1) * key_size : NULL, keys + n * key_size) < 0)
			break;
		n++;
	}
	for (size_t i = 0; i < n; i++)
		bpf_map_delete_elem(fd, keys + i * key_size);
	free(keys);
	return r < 0 ? r : (int)n;
}

/* Zeroes every entry of a small array (per CPU: every CPU's copy). */
static int zero_array(int fd, uint32_t value_size, uint32_t max, bool percpu)
{
	int ncpus = percpu ? libbpf_num_possible_cpus() : 1;
	size_t vsz = percpu ? ((value_size + 7u) & ~7u) * (size_t)(ncpus > 0 ? ncpus : 1) : value_size;
	void *zero;
	int r = 0;

	if (max > 4096 || ncpus <= 0)
		return -E2BIG;
	zero = calloc(1, vsz);
	if (!zero)
		return -ENOMEM;
	for (uint32_t k = 0; k < max && !r; k++)
		if (bpf_map_update_elem(fd, &k, zero, BPF_ANY) < 0)
			r = -errno;
	free(zero);
	return r;
}

/* A reused set starts as a fresh load would: what the last run left in its maps
 * goes. The ring buffers are emptied by their readers (sample.c); the program
 * arrays are filled again; the unwinder's row and mapping arrays are reached only
 * through unwind_procs, emptied here. */
static void reset_maps(struct sampler *s)
{
	struct bpf_map *m;
	int r, n = 0;

	for (size_t i = 0; i < s->pin.nimages; i++) {
		size_t sz = 0;
		void *now = (void *)bpf_map__initial_value(s->pin.images[i].map, &sz);

		if (now && sz == s->pin.images[i].size)
			memcpy(now, s->pin.images[i].data, sz);
	}
	bpf_object__for_each_map(m, s->skel->obj) {
		int fd = bpf_map__fd(m);

		switch (bpf_map__type(m)) {
		case BPF_MAP_TYPE_HASH:
		case BPF_MAP_TYPE_LRU_HASH:
		case BPF_MAP_TYPE_PERCPU_HASH:
		case BPF_MAP_TYPE_LRU_PERCPU_HASH:
			r = clear_hash(fd, bpf_map__key_size(m));
			n += r > 0 ? r : 0;
			break;
		case BPF_MAP_TYPE_ARRAY:
		case BPF_MAP_TYPE_PERCPU_ARRAY:
			if (bpf_map__map_flags(m) & (BPF_F_MMAPABLE | BPF_F_RDONLY_PROG))
				continue;
			r = zero_array(fd, bpf_map__value_size(m), bpf_map__max_entries(m),
				       bpf_map__type(m) == BPF_MAP_TYPE_PERCPU_ARRAY);
			break;
		default:
			continue;
		}
		if (r < 0)
			log_warn_errno(r, "cannot reset the pinned BPF map %s", bpf_map__name(m));
	}
	log_debug("BPF: the pinned maps reset (%d entries of the last run removed)", n);
}

/* Pins every map and loaded program in a new directory, then renames it to the key. */
static int pin_set(struct sampler *s)
{
	char tmp[32], path[PATH_MAX];
	struct bpf_program *p;
	struct bpf_map *m;
	int r = 0;

	snprintf(tmp, sizeof(tmp), "new-%d", (int)getpid());
	remove_set(s->pin.root, tmp);
	if (mkdirat(s->pin.root, tmp, 0700) < 0)
		return -errno;
	bpf_object__for_each_map(m, s->skel->obj)
		if (!r && !(r = pin_path(path, sizeof(path), tmp, 'm', bpf_map__name(m))) &&
		    bpf_obj_pin(bpf_map__fd(m), path) < 0)
			r = -errno;
	bpf_object__for_each_program(p, s->skel->obj)
		if (!r && bpf_program__fd(p) >= 0 && !(r = pin_path(path, sizeof(path), tmp, 'p', bpf_program__name(p))) &&
		    bpf_obj_pin(bpf_program__fd(p), path) < 0)
			r = -errno;
	if (!r && renameat(s->pin.root, tmp, s->pin.root, s->pin.key) < 0)
		r = -errno;
	if (r < 0)
		remove_set(s->pin.root, tmp);
	return r;
}

void pin_after_load(struct sampler *s)
{
	int r;

	if (s->pin.reused) {
		reset_maps(s);
		log_info("BPF programs taken from " PROWL_PIN_ROOT "/%s, where an earlier run left them: "
			 "no verifier pass", s->pin.key);
		return;
	}
	if (s->pin.root < 0)
		return;
	r = pin_set(s);
	if (r < 0)
		log_warn_errno(r, "cannot pin the BPF programs in " PROWL_PIN_ROOT "/%s; the next start "
			       "verifies them again", s->pin.key);
	else
		log_debug("BPF programs pinned in " PROWL_PIN_ROOT "/%s for the next start", s->pin.key);
}

int pin_prog_fd(const struct sampler *s, const struct bpf_program *p)
{
	int i;

	if (!s->pin.reused)
		return bpf_program__fd(p);
	i = prog_index(s, p);
	return i >= 0 && s->pin.prog_fd[i] >= 0 ? s->pin.prog_fd[i] : -ENOENT;
}

void pin_release(struct sampler *s)
{
	close_fds(&s->pin);
	free(s->pin.prog_fd);
	s->pin.prog_fd = s->pin.map_fd = NULL;
	s->pin.nprogs = s->pin.nmaps = 0;
	for (size_t i = 0; i < s->pin.nimages; i++)
		free(s->pin.images[i].data);
	s->pin.nimages = 0;
	if (s->pin.root >= 0)
		close(s->pin.root); /* and the lock */
	s->pin.root = -1;
	s->pin.reused = false;
}

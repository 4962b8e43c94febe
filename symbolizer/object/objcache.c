/* objcache.c: objects indexed by file identity (dev, inode) and by content (build id,
 * content hash, size), reference counted, idle ones kept within a byte budget. */
#include "objcache.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "diskcache.h"
#include "intern.h"
#include "log.h"
#include "escape.h"
#include "u64map.h"

#define DEFAULT_MAX_IDLE_BYTES (1u << 20)
#define MALLOC_OVERHEAD 16

struct objcache {
	pthread_mutex_t lock;
	uint32_t users;            /* objcache_shared() references (under caches_lock) */
	size_t max_idle;
	struct u64map by_mapping;  /* mapping_key(dev, ino, path) -> struct object * */
	struct u64map by_ident;    /* ident_key(dev, ino) -> struct object * */
	struct u64map by_content;  /* content_key() -> struct object * */
	struct u64map by_id;       /* id -> struct object *: every object, to free them */
	struct lru_link idle;      /* objects nobody references, most recently released first */
	size_t idle_bytes, bytes;
	uint32_t next_id;
	struct objcache_stats st;
	struct diskcache *disk;    /* products kept across restarts; NULL: none */
};

static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;
static struct objcache *shared;

/* ---- keys ---- */

static uint64_t ident_key(uint64_t dev, uint64_t ino)
{
	uint64_t k[2] = { dev, ino };

	return hash_bytes(k, sizeof(k));
}

static uint64_t mapping_key(uint64_t dev, uint64_t ino, const char *path)
{
	uint64_t k[3] = { dev, ino, path ? hash_bytes(path, strlen(path)) : 0 };

	return hash_bytes(k, sizeof(k));
}

/* Objects with a build id are found by it, their content hash and size; an
 * image (the vdso) by its content hash and size alone. */
static uint64_t content_key(const struct obj_facts *f, uint64_t size, bool image)
{
	uint8_t k[OBJ_BUILD_ID_MAX + 2 * sizeof(uint64_t) + 1];
	size_t n = image ? 0 : f->build_id_len;

	memcpy(k, f->build_id, n);
	memcpy(k + n, &f->content_hash, sizeof(uint64_t));
	memcpy(k + n + sizeof(uint64_t), &size, sizeof(uint64_t));
	k[n + 2 * sizeof(uint64_t)] = image;
	return hash_bytes(k, n + 2 * sizeof(uint64_t) + 1);
}

static bool same_content(const struct object *o, const struct obj_facts *f, uint64_t size, bool image)
{
	return o->image == image && o->f.content_hash == f->content_hash && o->size == size &&
	       (image || (o->f.build_id_len == f->build_id_len &&
			  !memcmp(o->f.build_id, f->build_id, f->build_id_len)));
}

static struct object *map_get(const struct u64map *m, uint64_t key)
{
	uint64_t v;

	return u64map_get(m, key, &v) ? (struct object *)(uintptr_t)v : NULL;
}

/* The ident of o that is (dev, ino), or NULL. */
static const struct obj_ident *ident_of(const struct object *o, uint64_t dev, uint64_t ino)
{
	for (uint32_t i = 0; i < o->nidents; i++)
		if (o->idents[i].dev == dev && o->idents[i].ino == ino)
			return &o->idents[i];
	return NULL;
}

/* The same file, unchanged, and as much to be trusted: a chmod or chown that
 * lets others write it makes it another object. */
static bool same_file(const struct obj_ident *a, const struct obj_ident *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       a->uid == b->uid && a->mode == b->mode && a->trusted == b->trusted;
}

/* Only trusted objects are found by content: a file another user controls
 * can claim any build id and match any head and tail. */
static bool shared_by_content(const struct object *o)
{
	return o->image || (o->trusted && o->f.build_id_len);
}

/* ---- objects ---- */

static size_t object_bytes(const struct object *o)
{
	return sizeof(*o) + MALLOC_OVERHEAD + (o->path ? strlen(o->path) + 1 + MALLOC_OVERHEAD : 0) +
	       o->f.nloads * sizeof(*o->f.loads) + MALLOC_OVERHEAD + o->capidents * sizeof(*o->idents) +
	       MALLOC_OVERHEAD + o->capmkeys * sizeof(*o->mkeys) + MALLOC_OVERHEAD;
}

/* Adds id to o's identities and points the index at o (a file rewritten in
 * place is a new object: the newest one wins). */
static int bind_ident(struct objcache *c, struct object *o, const struct obj_ident *id)
{
	struct obj_ident *known = (struct obj_ident *)ident_of(o, id->dev, id->ino);
	int r;

	if (known) { /* seen again after its index entry was lost to a hash collision */
		*known = *id;
		return u64map_put(&c->by_ident, ident_key(id->dev, id->ino), (uint64_t)(uintptr_t)o);
	}
	if (o->nidents == o->capidents) {
		uint32_t cap = o->capidents ? 2 * o->capidents : 1;
		struct obj_ident *v = reallocarray(o->idents, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->bytes += (cap - o->capidents) * sizeof(*v);
		o->idents = v;
		o->capidents = cap;
	}
	r = u64map_put(&c->by_ident, ident_key(id->dev, id->ino), (uint64_t)(uintptr_t)o);
	if (r < 0)
		return r;
	o->idents[o->nidents++] = *id;
	return 0;
}

/* Points the index of mappings at o for key. o is referenced (not on the idle
 * list, whose byte count would miss the growth); so is it in bind_ident(). */
static int bind_mapping(struct objcache *c, struct object *o, uint64_t key)
{
	for (uint32_t i = 0; i < o->nmkeys; i++)
		if (o->mkeys[i] == key)
			return u64map_put(&c->by_mapping, key, (uint64_t)(uintptr_t)o);
	if (o->nmkeys == o->capmkeys) {
		uint32_t cap = o->capmkeys ? 2 * o->capmkeys : 1;
		uint64_t *v = reallocarray(o->mkeys, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->bytes += (cap - o->capmkeys) * sizeof(*v);
		o->mkeys = v;
		o->capmkeys = cap;
	}
	if (u64map_put(&c->by_mapping, key, (uint64_t)(uintptr_t)o) < 0)
		return -ENOMEM;
	o->mkeys[o->nmkeys++] = key;
	return 0;
}

static void free_object(struct objcache *c, struct object *o)
{
	for (uint32_t i = 0; i < o->nmkeys; i++)
		if (map_get(&c->by_mapping, o->mkeys[i]) == o)
			u64map_del(&c->by_mapping, o->mkeys[i]);
	for (uint32_t i = 0; i < o->nidents; i++) {
		uint64_t k = ident_key(o->idents[i].dev, o->idents[i].ino);

		if (map_get(&c->by_ident, k) == o)
			u64map_del(&c->by_ident, k);
	}
	if (shared_by_content(o)) {
		uint64_t k = content_key(&o->f, o->size, o->image);

		if (map_get(&c->by_content, k) == o)
			u64map_del(&c->by_content, k);
	}
	u64map_del(&c->by_id, o->id);
	c->bytes -= object_bytes(o);
	obj_facts_free(&o->f);
	free(o->idents);
	free(o->mkeys);
	free(o->path);
	free(o);
}

/* A new object owning *facts (emptied), with identity id (a file's, or an
 * image's: size only), and one reference. */
static int new_object(struct objcache *c, const char *path, struct obj_facts *facts, const struct obj_ident *id,
		      bool image, struct object **ret)
{
	struct object *o = calloc(1, sizeof(*o));
	int r = -ENOMEM;

	if (!o)
		return -ENOMEM;
	o->path = strdup(path ? path : "?");
	if (!o->path) {
		free(o);
		return -ENOMEM;
	}
	o->f = *facts;
	o->size = id->size;
	o->image = image;
	o->trusted = image || id->trusted;
	o->refs = 1;
	o->id = ++c->next_id;
	memset(facts, 0, sizeof(*facts));
	c->bytes += object_bytes(o);
	if (u64map_put(&c->by_id, o->id, (uint64_t)(uintptr_t)o) < 0)
		goto fail;
	if (!image && (r = bind_ident(c, o, id)) < 0) /* an image has no file */
		goto fail;
	if (shared_by_content(o) &&
	    u64map_put(&c->by_content, content_key(&o->f, id->size, image), (uint64_t)(uintptr_t)o) < 0) {
		r = -ENOMEM;
		goto fail;
	}
	*ret = o;
	return 0;
fail:
	free_object(c, o);
	return r;
}

/* Takes a reference (under the lock). */
static void take(struct objcache *c, struct object *o)
{
	if (o->refs++ == 0) {
		lru_unlink(&o->idle);
		c->idle_bytes -= object_bytes(o);
		c->st.idle--;
	}
}

/* Drops the least recently released idle objects beyond the budget. */
static void evict_idle(struct objcache *c)
{
	struct lru_link *t;

	while (c->idle_bytes > c->max_idle && (t = lru_tail(&c->idle))) {
		struct object *o = lru_entry(t, struct object, idle);

		lru_unlink(t);
		c->idle_bytes -= object_bytes(o);
		c->st.idle--;
		c->st.evictions++;
		free_object(c, o);
	}
}

/* Gives a reference back (under the lock). */
static void release(struct objcache *c, struct object *o)
{
	if (--o->refs == 0) {
		lru_touch(&c->idle, &o->idle);
		c->idle_bytes += object_bytes(o);
		c->st.idle++;
		evict_idle(c);
	}
}

void object_unref(struct objcache *c, struct object *o)
{
	if (!o)
		return;
	pthread_mutex_lock(&c->lock);
	release(c, o);
	pthread_mutex_unlock(&c->lock);
}

/* ---- lookups ---- */

/* Marks o broken (under the lock), with its one warning; true the first time. */
static bool set_broken(struct objcache *c, struct object *o)
{
	char buf[PATH_MAX];

	if (o->broken)
		return false;
	__atomic_store_n(&o->broken, true, __ATOMIC_RELEASE);
	c->st.broken++;
	log_warn("%s changed on disk while prowl was reading it (truncated or rewritten in place): its frames are "
		 "shown as addresses; a process that maps it again gets it read afresh",
		 printable(o->path, buf, sizeof(buf)));
	return true;
}

/* o, referenced, when it is what a lookup looked for (ok); else NULL. */
static struct object *hit(struct objcache *c, struct object *o, bool ok)
{
	if (!ok)
		return NULL;
	take(c, o);
	c->st.hits++;
	return o;
}

/* Whether the file that o read as known is now id. An untrusted object whose
 * file has another size or mtime now was read, by pread(), from a file that
 * changed since: it is marked broken. */
static bool still_same(struct objcache *c, struct object *o, const struct obj_ident *known,
		       const struct obj_ident *id)
{
	if (same_file(known, id))
		return true;
	if (!o->trusted && (known->size != id->size || known->mtime_ns != id->mtime_ns))
		set_broken(c, o);
	return false;
}

/* The object that is the file (dev, ino) with this size and mtime, or NULL. */
static struct object *find_file(struct objcache *c, const struct obj_ident *id)
{
	struct object *o = map_get(&c->by_ident, ident_key(id->dev, id->ino));
	const struct obj_ident *known = o ? ident_of(o, id->dev, id->ino) : NULL;

	return known && still_same(c, o, known, id) ? o : NULL;
}

/* Reads the facts of the open file f and returns its object: the one f
 * already is, a known object f is a copy of, or a new one. */
static int file_object(struct objcache *c, struct obj_file *f, const char *path, struct object **ret)
{
	struct obj_facts facts;
	struct object *o;
	bool copy = false, fresh = false;
	char buf[PATH_MAX];
	int r = 0;

	pthread_mutex_lock(&c->lock);
	o = find_file(c, &f->ident);
	o = hit(c, o, o != NULL);
	pthread_mutex_unlock(&c->lock);
	if (o) {
		*ret = o;
		return 0;
	}

	/* Read outside the lock: another thread may read the same file meanwhile
	 * (checked again below). A file libelf cannot begin is not an ELF. */
	memset(&facts, 0, sizeof(facts));
	if (obj_file_begin(f) == 0) {
		r = obj_facts_read(f->elf, &facts);
		if (r < 0)
			return r;
	}
	r = obj_content_hash_fd(f->fd, f->ident.size, &facts.content_hash);
	if (r < 0) {
		obj_facts_free(&facts);
		return r;
	}

	pthread_mutex_lock(&c->lock);
	c->st.reads++;
	o = find_file(c, &f->ident);
	if (o) {
		take(c, o);
	} else {
		o = facts.build_id_len && f->ident.trusted ?
			    map_get(&c->by_content, content_key(&facts, f->ident.size, false)) : NULL;
		if (o && o->trusted && same_content(o, &facts, f->ident.size, false)) {
			take(c, o); /* first: the idle list accounts for o's size as it was */
			r = bind_ident(c, o, &f->ident);
			if (r == 0)
				c->st.copies++;
			else
				release(c, o);
			copy = r == 0;
		} else {
			r = new_object(c, path, &facts, &f->ident, false, &o);
			fresh = r == 0;
		}
	}
	pthread_mutex_unlock(&c->lock);
	obj_facts_free(&facts);
	if (r < 0)
		return r;
	/* For whoever wonders where the memory goes: each object read once. */
	if (copy || fresh)
		log_debug("object %s: %s", printable(path ? path : "?", buf, sizeof(buf)),
			  copy ? "a copy of one already read (same build id, content and size): shared" :
			  f->ident.trusted ? "read" : "read (untrusted: not shared with copies)");
	*ret = o;
	return 0;
}

int objcache_get(struct objcache *c, const struct obj_source *src, struct object **ret, struct obj_file *file)
{
	struct obj_file f;
	struct object *o = NULL;
	int r;

	if (file)
		*file = OBJ_FILE_NONE;
	pthread_mutex_lock(&c->lock);
	c->st.lookups++;
	if (src->pid && src->ino) {
		o = map_get(&c->by_mapping, mapping_key(src->dev, src->ino, src->path));
		o = hit(c, o, o && ident_of(o, src->dev, src->ino));
	}
	pthread_mutex_unlock(&c->lock);
	if (o) {
		*ret = o;
		return 0;
	}
	r = obj_open(src, &f);
	if (r < 0)
		return r;
	r = file_object(c, &f, src->path, &o);
	if (r == 0 && src->pid && src->ino && o->trusted) {
		/* The next mapping of this file by this path is found at once. A
		 * failure to remember it only costs that speed. Not for an
		 * untrusted object: its owner may delete it, and a new file of
		 * another user at the same path may get its inode number. */
		pthread_mutex_lock(&c->lock);
		bind_mapping(c, o, mapping_key(src->dev, src->ino, src->path));
		pthread_mutex_unlock(&c->lock);
	}
	if (r == 0 && file && obj_file_begin(&f) == 0) {
		*file = f;
		f = OBJ_FILE_NONE;
	}
	obj_file_close(&f);
	if (r < 0)
		return r;
	*ret = o;
	return 0;
}

int objcache_get_image(struct objcache *c, const void *image, size_t size, struct object **ret)
{
	struct obj_ident id = { .size = size };
	struct obj_facts facts = { .content_hash = hash_bytes(image, size) };
	struct object *o;
	Elf *elf;
	int r = 0;

	pthread_mutex_lock(&c->lock);
	c->st.lookups++;
	o = map_get(&c->by_content, content_key(&facts, size, true));
	o = hit(c, o, o && same_content(o, &facts, size, true));
	pthread_mutex_unlock(&c->lock);
	if (o) {
		*ret = o;
		return 0;
	}
	elf = elf_memory((char *)image, size);
	if (elf) {
		r = obj_facts_read(elf, &facts);
		elf_end(elf);
		if (r < 0)
			return r;
	}
	pthread_mutex_lock(&c->lock);
	c->st.reads++;
	o = map_get(&c->by_content, content_key(&facts, size, true));
	if (o && same_content(o, &facts, size, true))
		take(c, o);
	else
		r = new_object(c, "[vdso]", &facts, &id, true, &o);
	pthread_mutex_unlock(&c->lock);
	obj_facts_free(&facts);
	if (r < 0)
		return r;
	*ret = o;
	return 0;
}

/* Whether the open file f is a copy of o: the same build id, content hash and
 * size (the facts that made copies one object in the first place). */
static bool is_copy(const struct object *o, struct obj_file *f)
{
	const void *id = NULL;
	uint64_t hash;
	ssize_t len;

	if (!o->trusted || !f->ident.trusted || !o->f.build_id_len || f->ident.size != o->size ||
	    obj_file_begin(f) < 0)
		return false;
	len = dwelf_elf_gnu_build_id(f->elf, &id);
	return len == o->f.build_id_len && !memcmp(id, o->f.build_id, (size_t)len) &&
	       obj_content_hash_fd(f->fd, f->ident.size, &hash) == 0 && hash == o->f.content_hash;
}

int objcache_open(struct objcache *c, struct object *o, const struct obj_source *src, struct obj_file *file)
{
	const struct obj_ident *known;
	bool is_o;
	int r;

	*file = OBJ_FILE_NONE;
	if (o->image)
		return -ENOENT;
	if (object_broken(o))
		return -ESTALE;
	r = obj_open(src, file);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->lock);
	known = ident_of(o, file->ident.dev, file->ident.ino);
	is_o = known && still_same(c, o, known, &file->ident);
	pthread_mutex_unlock(&c->lock);
	if (!is_o) {
		/* Another file: fine when it is a copy (a container's layer, a
		 * reinstall of the same build), which then becomes one of o's. A
		 * file changed in place since it was read is not o any more. */
		r = !known && is_copy(o, file) ? 0 : -ESTALE;
		if (r == 0) {
			pthread_mutex_lock(&c->lock);
			if (!find_file(c, &file->ident)) {
				r = bind_ident(c, o, &file->ident);
				c->st.copies += r == 0;
			}
			pthread_mutex_unlock(&c->lock);
		}
	}
	if (r == 0)
		r = obj_file_begin(file);
	if (r < 0)
		obj_file_close(file);
	return r;
}

/* ---- the cache ---- */

int objcache_new(const struct objcache_opts *opts, struct objcache **ret)
{
	struct objcache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	lru_init(&c->idle);
	c->max_idle = opts && opts->max_idle_bytes ? opts->max_idle_bytes : DEFAULT_MAX_IDLE_BYTES;
	c->users = 1;
	elf_version(EV_CURRENT);
	*ret = c;
	return 0;
}

struct objcache *objcache_shared(void)
{
	struct objcache *c;

	pthread_mutex_lock(&caches_lock);
	if (shared)
		shared->users++;
	else if (objcache_new(NULL, &shared) < 0)
		shared = NULL;
	c = shared;
	pthread_mutex_unlock(&caches_lock);
	return c;
}

struct objcache *objcache_ref(struct objcache *c)
{
	pthread_mutex_lock(&caches_lock);
	c->users++;
	pthread_mutex_unlock(&caches_lock);
	return c;
}

void objcache_unref(struct objcache *c)
{
	uint32_t pos = 0;
	uint64_t k, v;
	bool last;

	if (!c)
		return;
	pthread_mutex_lock(&caches_lock);
	last = --c->users == 0;
	if (last && c == shared)
		shared = NULL;
	pthread_mutex_unlock(&caches_lock);
	if (!last)
		return;
	/* Objects still referenced belong to users that did not give them back:
	 * freed all the same, the cache being gone. */
	while (u64map_next(&c->by_id, &pos, &k, &v)) {
		struct object *o = (struct object *)(uintptr_t)v;

		obj_facts_free(&o->f);
		free(o->idents);
		free(o->mkeys);
		free(o->path);
		free(o);
	}
	u64map_free(&c->by_mapping);
	u64map_free(&c->by_ident);
	u64map_free(&c->by_content);
	u64map_free(&c->by_id);
	diskcache_free(c->disk);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void objcache_set_disk(struct objcache *c, struct diskcache *d)
{
	pthread_mutex_lock(&c->lock);
	diskcache_free(c->disk);
	c->disk = d;
	pthread_mutex_unlock(&c->lock);
}

bool object_disk_key(const struct object *o, uint32_t kind, struct diskcache_key *ret)
{
	if (!o || !o->trusted || o->image || o->broken)
		return false;
	memset(ret, 0, sizeof(*ret));
	ret->kind = kind;
	ret->build_id_len = o->f.build_id_len;
	memcpy(ret->build_id, o->f.build_id, o->f.build_id_len);
	ret->content_hash = o->f.content_hash;
	ret->size = o->size;
	return true;
}

struct diskcache *objcache_disk(struct objcache *c)
{
	struct diskcache *d;

	pthread_mutex_lock(&c->lock);
	d = c->disk;
	pthread_mutex_unlock(&c->lock);
	return d;
}

bool objcache_mark_broken(struct objcache *c, struct object *o)
{
	bool first;

	pthread_mutex_lock(&c->lock);
	first = set_broken(c, o);
	pthread_mutex_unlock(&c->lock);
	return first;
}

void objcache_get_stats(struct objcache *c, struct objcache_stats *ret)
{
	pthread_mutex_lock(&c->lock);
	*ret = c->st;
	ret->objects = c->by_id.count;
	ret->bytes = c->bytes + u64map_mem_bytes(&c->by_mapping) + u64map_mem_bytes(&c->by_ident) +
		     u64map_mem_bytes(&c->by_content) +
		     u64map_mem_bytes(&c->by_id) + sizeof(*c);
	pthread_mutex_unlock(&c->lock);
}

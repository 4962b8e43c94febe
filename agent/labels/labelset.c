/* labelset.c: the label set of one process while it is discovered and relabeled:
 * a plain array (tens of labels), searched linearly, with owned strings. */
#include "labelset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct label *find(const struct labelset *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].name, name) == 0)
			return &s->v[i];
	return NULL;
}

const char *labelset_get(const struct labelset *s, const char *name)
{
	struct label *l = find(s, name);

	return l ? l->value : NULL;
}

const char *labelset_value(const struct labelset *s, const char *name)
{
	const char *v = labelset_get(s, name);

	return v ? v : "";
}

int labelset_setn(struct labelset *s, const char *name, const char *value, size_t vlen)
{
	struct label *l;
	char *v;

	if (!vlen) {
		labelset_del(s, name);
		return 0;
	}
	v = strndup(value, vlen);
	if (!v)
		return -ENOMEM;
	l = find(s, name);
	if (l) {
		free(l->value);
		l->value = v;
		return 0;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct label *nv = realloc(s->v, cap * sizeof(*nv));

		if (!nv) {
			free(v);
			return -ENOMEM;
		}
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n].name = strdup(name);
	if (!s->v[s->n].name) {
		free(v);
		return -ENOMEM;
	}
	s->v[s->n++].value = v;
	return 0;
}

int labelset_set(struct labelset *s, const char *name, const char *value)
{
	return labelset_setn(s, name, value ? value : "", value ? strlen(value) : 0);
}

static void remove_at(struct labelset *s, size_t i)
{
	free(s->v[i].name);
	free(s->v[i].value);
	memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(s->v[0]));
	s->n--;
}

void labelset_del(struct labelset *s, const char *name)
{
	struct label *l = find(s, name);

	if (l)
		remove_at(s, (size_t)(l - s->v));
}

void labelset_drop_internal(struct labelset *s)
{
	for (size_t i = s->n; i-- > 0;)
		if (strncmp(s->v[i].name, "__", 2) == 0)
			remove_at(s, i);
}

int labelset_copy(struct labelset *ret, const struct labelset *src)
{
	labelset_clear(ret);
	for (size_t i = 0; i < src->n; i++) {
		int r = labelset_set(ret, src->v[i].name, src->v[i].value);

		if (r < 0)
			return r;
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct label *)a)->name, ((const struct label *)b)->name);
}

void labelset_sort(struct labelset *s)
{
	if (s->n > 1)
		qsort(s->v, s->n, sizeof(s->v[0]), by_name);
}

void labelset_clear(struct labelset *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].name);
		free(s->v[i].value);
	}
	s->n = 0;
}

void labelset_free(struct labelset *s)
{
	labelset_clear(s);
	free(s->v);
	*s = (struct labelset){};
}

size_t labelset_mem_bytes(const struct labelset *s)
{
	size_t b = s->cap * sizeof(s->v[0]);

	for (size_t i = 0; i < s->n; i++)
		b += strlen(s->v[i].name) + strlen(s->v[i].value) + 2;
	return b;
}

bool label_name_valid(const char *s, size_t len)
{
	if (!len || (*s >= '0' && *s <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

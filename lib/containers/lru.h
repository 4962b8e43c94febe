/* lru.h: an intrusive circular doubly linked list used as an LRU order (head = most
 * recently used, tail = the next victim), O(1) each; for every bounded cache of prowl. */
#ifndef PROWL_LRU_H
#define PROWL_LRU_H

#include <stdbool.h>
#include <stddef.h>

struct lru_link {
	struct lru_link *prev, *next;
};

/* A list head is a sentinel link; an unlinked member has prev == next == NULL. */
static inline void lru_init(struct lru_link *head)
{
	head->prev = head->next = head;
}

static inline bool lru_linked(const struct lru_link *l)
{
	return l->next != NULL;
}

static inline bool lru_empty(const struct lru_link *head)
{
	return head->next == head;
}

static inline void lru_unlink(struct lru_link *l)
{
	if (!l->next)
		return;
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = NULL;
}

/* Links l (linked or not) at the head: the most recently used position. */
static inline void lru_touch(struct lru_link *head, struct lru_link *l)
{
	lru_unlink(l);
	l->next = head->next;
	l->prev = head;
	head->next->prev = l;
	head->next = l;
}

/* The least recently used member, or NULL. */
static inline struct lru_link *lru_tail(struct lru_link *head)
{
	return head->prev == head ? NULL : head->prev;
}

#define lru_entry(link, type, member) ((type *)(void *)((char *)(link) - offsetof(type, member)))

#endif

/* rules_priv.h: the recording rules' internal layout, shared by rules.c (compile,
 * reload, render) and rules_eval.c (counting a window). */
#ifndef PROWL_RULES_PRIV_H
#define PROWL_RULES_PRIV_H

#include <regex.h>
#include <stdbool.h>

#include "intern.h"
#include "lru.h"
#include "prowl_limits.h"
#include "rules.h"
#include "u64map.h"

#define RULES_WORDS ((RULES_MAX + 63) / 64) /* most bit words: one bit per function rule */


/* The function cache: at most this many names and bytes, least recently used out first. */
#define RULES_FCACHE_MAX_NAMES 65536
#define RULES_FCACHE_MAX_BYTES (8u << 20)

/* Default evaluation budget per window (rules_opts.eval_budget_ns). */
#define RULES_DEFAULT_BUDGET_NS 100000000ull

/* A label set's counter. */
struct rule_value {
	double seconds;
	uint64_t seen;         /* the last window (rules.windows) that added to it */
	bool overflow;         /* an overflow series ("other"), not counted in nnormal */
};

/* One metric's counters: label sets (values joined by '\0', in the family's
 * label order) -> CPU seconds. */
struct rule_counters {
	struct intern *keys;
	struct rule_value *v;  /* indexed by key id */
	uint32_t v_cap;
	uint32_t nnormal;      /* label sets made within the cap */
	uint64_t overflow_samples;
	uint64_t refused;      /* new label sets refused by the cap (once per window each) */
	uint64_t deferred_samples; /* samples left out: a name in their stack not evaluated in time */
	uint64_t freed;        /* label sets freed after a window without samples, to make room */
	bool warned, refused_now;
};

/* A metric: the rules sharing its name (same labels) add into one set of counters. */
struct rule_family {
	char *metric;
	char **labels;         /* label order of keys and output */
	size_t nlabels;
	int fn_pos, svc_pos;   /* positions of "function" and "service_name", or -1 */
	char *identity;        /* its rules' definitions, for reloads */
	char *help;
	struct rule_counters ct;
};

struct rule_matcher {
	char *label;
	enum rule_match_op op;
	char *value;
	regex_t rx;            /* RE and NRE */
	bool has_rx;
};

struct rule {
	struct rule_family *fam;
	struct rule_matcher *m;
	size_t nm;
	bool has_fn, self;
	regex_t fn;
	uint32_t fn_bit;       /* bit among the function rules */
};

struct rules_fcache {
	struct u64map index;   /* hash of the name -> first entry of that hash */
	struct lru_link lru;
	size_t nwords;
	uint32_t max_names, count;
	size_t max_bytes, bytes;
	uint64_t window;       /* the current window, set by rules_count */
	uint64_t evictions;    /* names dropped for room */
	uint64_t refused;      /* names not kept: every cached name was in use this window */
};

struct rules {
	struct rules_opts o;
	struct rule *rules;    /* the built-in counter first */
	size_t nrules;
	struct rule_family *fams;
	size_t nfams;
	uint32_t nfn;          /* rules with a function regex */
	uint32_t nwords;       /* bit words in use: (nfn + 63) / 64, at least 1 */
	uint64_t self_mask[RULES_WORDS];
	struct rule_family *bit_fam[RULES_MAX]; /* the family of each function rule */

	/* Function name (its first PROWL_NAME_MAX bytes) -> bits of the function rules
	 * that match it, kept across windows. */
	struct rules_fcache fcache;

	/* Scratch of rules_count, sized to the largest profile seen. */
	uint64_t *fb;          /* nwords per profile function id: its rules' bits */
	uint8_t *known;        /* per profile function id: fb holds its bits */
	uint32_t *acc;         /* [function rule][profile function id] samples */
	size_t fb_cap, known_cap, acc_cap;
	char *keybuf;
	size_t keybuf_cap;

	/* The current window's evaluation: started at (thread CPU time), budget used up. */
	uint64_t window_t0;
	bool budget_spent, warned_budget;

	uint64_t windows, eval_ns;
	uint64_t names_evaluated, names_deferred;
};

/* Writes into *ret a copy of the unanchored regex re without the leading and
 * trailing `.*` (and `^.*`, `.*$`) of its top-level branches, which cannot change
 * whether it matches somewhere in a name but make glibc's regexec quadratic; NULL
 * when there is nothing to drop or the text is not understood. 0 or -ENOMEM. */
int rules_regex_simplify(const char *re, char **ret);

void rules_fcache_init(struct rules_fcache *c, size_t nwords, uint32_t max_names, size_t max_bytes);
void rules_fcache_free(struct rules_fcache *c);
/* The bits of name (len bytes), or NULL; marks it used. */
const uint64_t *rules_fcache_find(struct rules_fcache *c, const char *name, size_t len);
/* Adds name with bits (nwords), evicting the least recently used names not used in
 * c->window to stay in bounds; when there are none, name is not kept. 0 or -ENOMEM. */
int rules_fcache_add(struct rules_fcache *c, const char *name, size_t len, const uint64_t *bits);
size_t rules_fcache_mem_bytes(const struct rules_fcache *c);

#endif

/* rules_priv.h: the recording rules' internal layout, shared by rules.c (compile,
 * reload, render) and rules_eval.c (counting a window). */
#ifndef PROWL_RULES_PRIV_H
#define PROWL_RULES_PRIV_H

#include <regex.h>
#include <stdbool.h>

#include "intern.h"
#include "rules.h"

#define RULES_WORDS ((RULES_MAX + 63) / 64) /* most bit words: one bit per function rule */

/* One metric's counters: label sets (values joined by '\0', in the family's
 * label order) -> CPU seconds. */
struct rule_counters {
	struct intern *keys;
	double *vals;          /* indexed by key id */
	uint32_t vals_cap;
	uint32_t nnormal;      /* label sets made within the cap */
	uint64_t overflow_samples;
	bool warned;
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

struct rules {
	struct rules_opts o;
	struct rule *rules;    /* the built-in counter first */
	size_t nrules;
	struct rule_family *fams;
	size_t nfams;
	uint32_t nfn;          /* rules with a function regex */
	uint32_t nwords;       /* bit words in use: (nfn + 63) / 64, at least 1 */
	uint64_t self_mask[RULES_WORDS];

	/* Function name -> bits of the function rules that match it, kept across
	 * windows and cleared when it grows too large. */
	struct intern *fcache;
	uint64_t *fbits;       /* nwords per cache id */
	uint32_t fbits_cap;

	/* Scratch of rules_count, sized to the largest profile seen. */
	uint32_t *fidx;        /* profile function id -> cache id */
	uint32_t *acc;         /* [function rule][profile function id] samples */
	size_t fidx_cap, acc_cap;
	char *keybuf;
	size_t keybuf_cap;

	uint64_t windows, eval_ns;
};

#endif

/* relabel.c: applies relabel_configs to a label set with Prometheus's semantics
 * (anchored regexes, $N expansion as Go's regexp, MD5 hashmod), on POSIX ERE. */
#include "relabel.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

#include <openssl/evp.h>

#include "log.h"
#include "escape.h"
#include "regex_re2.h"

/* A regex sees at most this many bytes: glibc's matcher is not linear in the
 * worst case, and label values come from processes and the API server. */
#define SUBJECT_MAX 4096
#define OUT_MAX     (2 * LABEL_VALUE_MAX)
#define GROUPS_MAX  64 /* groups a replacement can reference */

struct rule {
	enum relabel_action action;
	char **sources;
	size_t nsources;
	char *separator, *target, *replacement;
	uint64_t modulus;
	regex_t rx;
	bool has_rx;
};

struct relabel {
	struct rule *rules;
	size_t n;
	locale_t utf8; /* for lowercase/uppercase beyond ASCII; 0 when unavailable */
};

/* Appends s[0..n) to out[*o..size) (cut when full). */
static void put(char *out, size_t size, size_t *o, const char *s, size_t n)
{
	if (*o + n >= size)
		n = *o + 1 < size ? size - 1 - *o : 0;
	memcpy(out + *o, s, n);
	*o += n;
}

static bool name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

void relabel_expand(const char *t, const char *subject, const regmatch_t *m, size_t nm, char *out, size_t outsz)
{
	size_t o = 0;

	while (*t) {
		const char *name;
		size_t n = 0;
		bool brace;
		long num = 0;

		if (*t != '$') {
			put(out, outsz, &o, t++, 1);
			continue;
		}
		if (t[1] == '$') {
			put(out, outsz, &o, "$", 1);
			t += 2;
			continue;
		}
		brace = t[1] == '{';
		name = t + 1 + brace;
		while (name_char((unsigned char)name[n]))
			n++;
		if (!n || (brace && name[n] != '}')) {
			put(out, outsz, &o, "$", 1); /* malformed: the '$' is text */
			t++;
			continue;
		}
		t = name + n + brace;
		/* A number (no leading zero) names a group; any other name would be
		 * a named group, which POSIX ERE does not have: it expands to "". */
		for (size_t i = 0; i < n && num >= 0; i++)
			num = name[i] >= '0' && name[i] <= '9' && num < 100000000 ? num * 10 + (name[i] - '0') : -1;
		if (name[0] == '0' && n > 1)
			num = -1;
		if (num < 0)
			continue;
		/* The regex is ^(re)$: the user's group N is ours N + 1, $0 the whole. */
		if (num > 0)
			num++;
		if ((size_t)num < nm && m[num].rm_so >= 0)
			put(out, outsz, &o, subject + m[num].rm_so, (size_t)(m[num].rm_eo - m[num].rm_so));
	}
	out[o] = 0;
}

static void free_rules(struct rule *rules, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct rule *r = &rules[i];

		for (size_t s = 0; s < r->nsources; s++)
			free(r->sources[s]);
		free(r->sources);
		free(r->separator);
		free(r->target);
		free(r->replacement);
		if (r->has_rx)
			regfree(&r->rx);
	}
	free(rules);
}

int relabel_new(const struct relabel_config *c, struct relabel **ret)
{
	struct relabel *rl = calloc(1, sizeof(*rl));
	char err[256];
	int rc = 0;

	if (!rl)
		return -ENOMEM;
	rl->rules = calloc(c->n ? c->n : 1, sizeof(*rl->rules));
	if (!rl->rules) {
		free(rl);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->n && rc == 0; i++) {
		const struct relabel_rule_config *cfg = &c->rules[i];
		struct rule *r = &rl->rules[i];

		rl->n++;
		r->action = cfg->action;
		r->modulus = cfg->modulus;
		r->separator = strdup(cfg->separator);
		r->target = strdup(cfg->target_label);
		r->replacement = strdup(cfg->replacement);
		r->sources = calloc(cfg->nsource ? cfg->nsource : 1, sizeof(*r->sources));
		if (!r->separator || !r->target || !r->replacement || !r->sources) {
			rc = -ENOMEM;
			break;
		}
		for (size_t s = 0; s < cfg->nsource; s++) {
			r->sources[s] = strdup(cfg->source_labels[s]);
			if (!r->sources[s]) {
				rc = -ENOMEM;
				break;
			}
			r->nsources++;
		}
		rc = rc < 0 ? rc : relabel_regex_compile(cfg->regex, &r->rx, err, sizeof(err));
		r->has_rx = rc == 0;
		if (rc == -EINVAL)
			log_error("relabel_configs[%zu]: regex '%s' does not compile: %s", i, cfg->regex, err);
	}
	if (rc < 0) {
		free_rules(rl->rules, rl->n);
		free(rl);
		return rc;
	}
	rl->utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	*ret = rl;
	return 0;
}

void relabel_free(struct relabel *rl)
{
	if (!rl)
		return;
	free_rules(rl->rules, rl->n);
	if (rl->utf8)
		freelocale(rl->utf8);
	free(rl);
}

size_t relabel_count(const struct relabel *rl)
{
	return rl ? rl->n : 0;
}

/* The source labels' values joined by the separator, cut at SUBJECT_MAX. */
static char *join_sources(const struct rule *r, const struct labelset *s)
{
	char *v = malloc(SUBJECT_MAX + 1);
	size_t o = 0;

	if (!v)
		return NULL;
	for (size_t i = 0; i < r->nsources; i++) {
		const char *x = labelset_value(s, r->sources[i]);

		if (i)
			put(v, SUBJECT_MAX + 1, &o, r->separator, strlen(r->separator));
		put(v, SUBJECT_MAX + 1, &o, x, strlen(x));
	}
	v[o] = 0;
	return v;
}

static bool matches(const struct rule *r, const char *subject)
{
	return regexec(&r->rx, subject, 0, NULL, 0) == 0;
}

/* cp (<= U+10FFFF) as UTF-8 in out (room for 4); returns the length. */
static size_t encode(uint32_t cp, char *out)
{
	unsigned char *o = (unsigned char *)out;

	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xc0 | cp >> 6);
		o[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xe0 | cp >> 12);
		o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | cp >> 18);
	o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Go's strings.ToLower/ToUpper: Unicode case mapping, invalid bytes as U+FFFD. */
static void map_case(const struct relabel *rl, const char *in, bool upper, char *out, size_t outsz)
{
	const unsigned char *u = (const unsigned char *)in;
	size_t o = 0, n = strlen(in);

	for (size_t i = 0; i < n;) {
		uint32_t cp = 0xfffd;
		size_t len = utf8_seq_len(u + i, n - i, &cp);
		char enc[4];

		if (cp < 0x80)
			cp = upper ? (cp >= 'a' && cp <= 'z' ? cp - 32 : cp) : (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
		else if (rl->utf8)
			cp = upper ? (uint32_t)towupper_l((wint_t)cp, rl->utf8) : (uint32_t)towlower_l((wint_t)cp, rl->utf8);
		put(out, outsz, &o, enc, encode(cp, enc));
		i += len ? len : 1;
	}
	out[o] = 0;
}

/* Prometheus's hashmod: the last 8 bytes of MD5(value), big-endian, mod m. */
static uint64_t hashmod(const char *v, uint64_t m)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	uint64_t h = 0;

	if (!EVP_Digest(v, strlen(v), md, &len, EVP_md5(), NULL) || len != 16)
		return 0;
	for (int i = 8; i < 16; i++)
		h = h << 8 | md[i];
	return h % m;
}

/* labelmap, labeldrop and labelkeep: the regex against every label name, over
 * a copy of the names, since the set changes underneath. */
static int by_names(const struct rule *r, struct labelset *s)
{
	struct labelset snap = {};
	regmatch_t m[GROUPS_MAX];
	char name[OUT_MAX];
	int rc = labelset_copy(&snap, s);

	for (size_t i = 0; rc == 0 && i < snap.n; i++) {
		const char *ln = snap.v[i].name;
		bool hit;

		if (r->action != RELABEL_LABELMAP) {
			hit = matches(r, ln);
			if (hit == (r->action == RELABEL_LABELDROP))
				labelset_del(s, ln);
			continue;
		}
		if (regexec(&r->rx, ln, GROUPS_MAX, m, 0) != 0)
			continue;
		relabel_expand(r->replacement, ln, m, GROUPS_MAX, name, sizeof(name));
		rc = labelset_set(s, name, snap.v[i].value);
	}
	labelset_free(&snap);
	return rc;
}

static int apply_one(const struct relabel *rl, const struct rule *r, struct labelset *s)
{
	regmatch_t m[GROUPS_MAX];
	char target[OUT_MAX], value[OUT_MAX];
	char *v;
	int rc = 1;

	if (r->action == RELABEL_LABELMAP || r->action == RELABEL_LABELDROP || r->action == RELABEL_LABELKEEP)
		return by_names(r, s) < 0 ? -ENOMEM : 1;
	v = join_sources(r, s);
	if (!v)
		return -ENOMEM;
	switch (r->action) {
	case RELABEL_KEEP:
		rc = matches(r, v);
		break;
	case RELABEL_DROP:
		rc = !matches(r, v);
		break;
	case RELABEL_KEEPEQUAL:
		rc = strcmp(labelset_value(s, r->target), v) == 0;
		break;
	case RELABEL_DROPEQUAL:
		rc = strcmp(labelset_value(s, r->target), v) != 0;
		break;
	case RELABEL_REPLACE:
		if (regexec(&r->rx, v, GROUPS_MAX, m, 0) != 0)
			break;
		relabel_expand(r->target, v, m, GROUPS_MAX, target, sizeof(target));
		if (!label_name_valid(target, strlen(target)))
			break;
		relabel_expand(r->replacement, v, m, GROUPS_MAX, value, sizeof(value));
		rc = labelset_set(s, target, value) < 0 ? -ENOMEM : 1;
		break;
	case RELABEL_LOWERCASE:
	case RELABEL_UPPERCASE:
		map_case(rl, v, r->action == RELABEL_UPPERCASE, value, sizeof(value));
		rc = labelset_set(s, r->target, value) < 0 ? -ENOMEM : 1;
		break;
	case RELABEL_HASHMOD:
		snprintf(value, sizeof(value), "%" PRIu64, hashmod(v, r->modulus));
		rc = labelset_set(s, r->target, value) < 0 ? -ENOMEM : 1;
		break;
	default:
		break;
	}
	free(v);
	return rc;
}

int relabel_apply(const struct relabel *rl, struct labelset *s)
{
	for (size_t i = 0; rl && i < rl->n; i++) {
		int rc = apply_one(rl, &rl->rules[i], s);

		if (rc <= 0)
			return rc;
	}
	return 1;
}

/* config_priv.h: what the agent's configuration loader shares between its files: the
 * key schema's types, where a value came from, and the load in progress. */
#ifndef PROWL_CONFIG_PRIV_H
#define PROWL_CONFIG_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "array_size.h"
#include "config.h"

#define MAX_FILE_BYTES   (1u << 20)
#define MAX_STRING_BYTES 4096
#define MAX_LABELS       64
#define MAX_LABEL_NAME   128
#define MAX_LABEL_VALUE  1024
#define MAX_KEY_PATH     128
#define MAX_DEPTH        64   /* nesting of mappings and lists in the file */
#define MAX_ANCHORS      256  /* anchors and aliases: libyaml looks each up in a list */

#define MS_PER_S ((uint64_t)1000)
#define MS_PER_M (60 * MS_PER_S)
#define MS_PER_H (60 * MS_PER_M)
#define KIB      ((uint64_t)1024)
#define MIB      (1024 * KIB)
#define GIB      (1024 * MIB)
#define TIB      (1024 * GIB)

enum key_type {
	K_BOOL,
	K_UINT,
	K_DURATION, /* stored in ms */
	K_SIZE,     /* stored in bytes */
	K_ENUM,     /* stored in an int-sized enum */
	K_STRING,
	K_SECRET,   /* a string never printed */
	K_URL,
	K_PATH,
	K_FILE,     /* a path that must be readable when its exporter is enabled */
	K_ADDRESS,
	K_LABELS,
	K_RULES,    /* recording_rules: a list, from the file only */
	K_RELABEL,  /* relabel_configs: a list, from the file only */
};

struct key_def {
	const char *path;         /* dotted, as in the file: "exporters.pyroscope.timeout" */
	enum key_type type;
	size_t off, size;         /* of the field in struct agent_config */
	const char *def;          /* default, parsed like any other value */
	uint64_t min, max;        /* K_UINT: value; K_DURATION: ms; K_SIZE: bytes */
	const char *what;         /* K_UINT, K_ENUM: noun for messages */
	const char *unit;         /* K_UINT: e.g. "Hz" */
	const char *const *names; /* K_ENUM: NULL-terminated, index = value */
	bool zero_ok;             /* K_DURATION, K_SIZE: "0" means no limit */
};
#define MAX_KEYS 160 /* bound of the schema, checked where it is defined */

struct renamed_key {
	const char *old, *now;
};

extern const struct key_def cfg_keys[];
extern const size_t cfg_nkeys;
extern const struct renamed_key cfg_renamed[];
extern const size_t cfg_nrenamed;

enum origin_kind { ORIGIN_DEFAULT = 0, ORIGIN_FILE, ORIGIN_ENV, ORIGIN_FLAG };

/* Where a value came from, for messages. Strings point into argv, envp or the YAML
 * document, which outlive the load. */
struct origin {
	enum origin_kind kind;
	unsigned long line;  /* ORIGIN_FILE */
	const char *env;     /* ORIGIN_ENV: the whole "NAME=value" entry */
	const char *flag;    /* ORIGIN_FLAG: "--frequency" */
};

struct load {
	struct agent_config *cfg;
	const char *path;               /* the config file, for messages */
	struct origin origins[MAX_KEYS];   /* of each key's current value */
	bool secret_in_file;
	char **envp;
};

/* A flag's setting, applied after the file and the environment. */
struct pending {
	const struct key_def *key;
	const char *value;
	const char *flag;
};

/* config_schema.c */
const struct key_def *cfg_find_key(const char *path);
bool cfg_is_section(const char *path);
void cfg_env_name(const struct key_def *k, char *buf, size_t size);
void *cfg_field(struct agent_config *c, const struct key_def *k);
const void *cfg_cfield(const struct agent_config *c, const struct key_def *k);
uint64_t cfg_load_uint(const void *p, size_t size);
void cfg_store_uint(void *p, size_t size, uint64_t v);
int __attribute__((format(printf, 5, 6)))
cfg_error(const struct load *l, const struct origin *o, const char *key, bool secret, const char *fmt, ...);
const char *cfg_enum_choices(const char *const *names, char *buf, size_t size);
void cfg_format_duration(uint64_t ms, char *buf, size_t size);
void cfg_format_size(uint64_t v, char *buf, size_t size);
bool cfg_parse_bool(const char *s, bool *ret);
int cfg_label_set(struct load *l, const struct origin *o, const char *name, const char *value);
int cfg_labels_parse(struct load *l, const struct origin *o, const char *s, bool list);
int cfg_set_value(struct load *l, const struct key_def *k, const char *s, const struct origin *o);

/* config_yaml.c */
int cfg_load_file(struct load *l);

/* config_args.c */
const char *cfg_env_lookup(char **envp, const char *name);
int cfg_load_env(struct load *l, char **envp);
int cfg_parse_flags(int argc, char **argv, struct agent_config *c, struct pending *pend, size_t *npend);

#endif

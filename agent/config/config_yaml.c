/* config_yaml.c: reads the agent's YAML file with libyaml, bounded in size, depth and
 * anchors, and walks it into the schema's keys with file:line in every error. */
#include "config_priv.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "escape.h"
#include "netaddr.h"
#include "labels/discover.h"
#include "parse.h"
#include "unwinder.h"
#include "url.h"


static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE: return "a mapping";
	case YAML_SEQUENCE_NODE: return "a list";
	default: return "a single value";
	}
}

static const char *type_noun(const struct key_def *k)
{
	switch (k->type) {
	case K_BOOL: return "true or false";
	case K_UINT: return "a number";
	case K_DURATION: return "a duration";
	case K_SIZE: return "a size";
	case K_ENUM: return "a word";
	case K_URL: return "a URL";
	case K_PATH: case K_FILE: return "a path";
	case K_ADDRESS: return "host:port";
	case K_LABELS: return "a mapping of name: value";
	case K_RULES: case K_RELABEL: return "a list of rules";
	default: return "a string";
	}
}

/* A plain ~, null or empty value. */
static bool is_null(const yaml_node_t *n)
{
	const char *s = (const char *)n->data.scalar.value;

	return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
		strcmp(s, "NULL") == 0);
}

static struct origin file_origin(const yaml_node_t *n)
{
	return (struct origin){ .kind = ORIGIN_FILE, .line = (unsigned long)n->start_mark.line + 1 };
}

/* The names a mapping at prefix may hold, for the unknown-key message. */
static void known_keys(const char *prefix, char *buf, size_t size)
{
	size_t plen = strlen(prefix), n = 0;

	buf[0] = 0;
	for (size_t i = 0; i < cfg_nkeys && n < size; i++) {
		const char *name = cfg_keys[i].path;
		size_t len;
		bool seen = false;

		if (plen) {
			if (strncmp(name, prefix, plen) != 0 || name[plen] != '.')
				continue;
			name += plen + 1;
		}
		len = strcspn(name, ".");
		for (size_t j = 0; j < i && !seen; j++) {
			const char *other = cfg_keys[j].path;

			if (plen) {
				if (strncmp(other, prefix, plen) != 0 || other[plen] != '.')
					continue;
				other += plen + 1;
			}
			seen = strncmp(other, name, len) == 0 && (other[len] == '.' || !other[len]);
		}
		if (!seen)
			n += (size_t)snprintf(buf + n, size - n, "%s%.*s", n ? ", " : "", (int)len, name);
	}
}

static int walk_labels(struct load *l, yaml_document_t *d, yaml_node_t *map)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(d, p->key), *vn = yaml_document_get_node(d, p->value);
		struct origin o = file_origin(kn);
		const char *name;
		int r;

		if (kn->type != YAML_SCALAR_NODE)
			return cfg_error(l, &o, "labels", false, "a label name must be a single word, not %s",
					 node_kind(kn));
		name = (const char *)kn->data.scalar.value;
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *prev = yaml_document_get_node(d, q->key);

			if (prev->type == YAML_SCALAR_NODE && strcmp((const char *)prev->data.scalar.value, name) == 0)
				return cfg_error(l, &o, "labels", false, "duplicate label '%s' (first at line %lu)",
						 name, (unsigned long)prev->start_mark.line + 1);
		}
		if (vn->type != YAML_SCALAR_NODE) {
			char key[MAX_KEY_PATH];

			snprintf(key, sizeof(key), "labels.%s", name);
			o = file_origin(vn);
			return cfg_error(l, &o, key, false, "expected a string, got %s", node_kind(vn));
		}
		r = cfg_label_set(l, &o, name, is_null(vn) ? "" : (const char *)vn->data.scalar.value);
		if (r < 0)
			return r;
	}
	return 0;
}

static int walk_mapping(struct load *l, yaml_document_t *d, yaml_node_t *map, const char *prefix)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(d, p->key), *vn = yaml_document_get_node(d, p->value);
		struct origin o = file_origin(kn);
		const struct key_def *k = NULL;
		char path[MAX_KEY_PATH], known[512];
		const char *name;
		int r, len;

		if (kn->type != YAML_SCALAR_NODE)
			return cfg_error(l, &o, NULL, false, "a key must be a single word, not %s", node_kind(kn));
		name = (const char *)kn->data.scalar.value;
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *prev = yaml_document_get_node(d, q->key);

			if (prev->type == YAML_SCALAR_NODE && strcmp((const char *)prev->data.scalar.value, name) == 0)
				return cfg_error(l, &o, NULL, false, "duplicate key '%s%s%s' (first at line %lu)",
						 prefix, *prefix ? "." : "", name,
						 (unsigned long)prev->start_mark.line + 1);
		}
		len = snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", name);
		if (len > 0 && (size_t)len < sizeof(path) && !strchr(name, '.') && *name)
			k = cfg_find_key(path);
		if (k && k->type == K_RULES) {
			r = rules_config_parse(l->path, d, vn, &l->cfg->recording_rules);
		} else if (k && k->type == K_RELABEL) {
			r = relabel_config_parse(l->path, d, vn, &l->cfg->relabel);
		} else if (k && k->type == K_LABELS) {
			if (is_null(vn))
				continue;
			if (vn->type != YAML_MAPPING_NODE) {
				o = file_origin(vn);
				return cfg_error(l, &o, path, false, "expected %s, got %s", type_noun(k), node_kind(vn));
			}
			r = walk_labels(l, d, vn);
		} else if (k) {
			o = file_origin(vn);
			if (vn->type != YAML_SCALAR_NODE)
				return cfg_error(l, &o, path, false, "expected %s, got %s", type_noun(k), node_kind(vn));
			r = cfg_set_value(l, k, is_null(vn) ? "" : (const char *)vn->data.scalar.value, &o);
		} else if (len > 0 && (size_t)len < sizeof(path) && *name && !strchr(name, '.') && cfg_is_section(path)) {
			if (is_null(vn))
				continue;
			if (vn->type != YAML_MAPPING_NODE) {
				o = file_origin(vn);
				return cfg_error(l, &o, path, false, "expected a mapping of settings, got %s",
						 node_kind(vn));
			}
			r = walk_mapping(l, d, vn, path);
		} else {
			for (size_t i = 0; i < cfg_nrenamed; i++)
				if (strcmp(cfg_renamed[i].old, path) == 0)
					return cfg_error(l, &o, NULL, false, "'%s' was replaced by '%s' (top level): "
							 "rename it", path, cfg_renamed[i].now);
			known_keys(prefix, known, sizeof(known));
			return cfg_error(l, &o, NULL, false, "unknown key '%s%s%s' (known: %s)", prefix,
					 *prefix ? "." : "", name, known);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static unsigned long line_of_offset(const char *buf, size_t len, size_t off)
{
	unsigned long line = 1;

	for (size_t i = 0; i < off && i < len; i++)
		line += buf[i] == '\n';
	return line;
}

static int yaml_error(const struct load *l, yaml_parser_t *p, const char *buf, size_t len)
{
	unsigned long line = (unsigned long)p->problem_mark.line + 1;

	if (p->error == YAML_MEMORY_ERROR)
		return log_error_errno(-ENOMEM, "%s: cannot parse", l->path);
	if (p->error == YAML_READER_ERROR)
		line = line_of_offset(buf, len, p->problem_offset);
	/* A problem found at the end of the file belongs to its last line. */
	else if (p->problem_mark.index >= len && len && buf[len - 1] == '\n' && line > 1)
		line--;
	if (p->context)
		log_error("%s:%lu: invalid YAML: %s (%s started at line %lu)", l->path, line,
			  p->problem ? p->problem : "syntax error", p->context,
			  (unsigned long)p->context_mark.line + 1);
	else
		log_error("%s:%lu: invalid YAML: %s", l->path, line, p->problem ? p->problem : "syntax error");
	return -EINVAL;
}

static int read_file(const char *path, char **ret_buf, size_t *ret_len, mode_t *ret_mode)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, r = 0;

	/* O_NONBLOCK: a FIFO named as the config file must not hang the agent. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto out;
	}
	if (st.st_size > MAX_FILE_BYTES) {
		r = -EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = 0;
	*ret_buf = buf;
	*ret_len = len;
	*ret_mode = st.st_mode;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return r;
}

/* Walks the file's events once before libyaml builds the document, and refuses a
 * file nested deeper than MAX_DEPTH or with more than MAX_ANCHORS anchors and
 * aliases: building such a document costs time that grows with their square (5 s
 * for 40,000 levels). Syntax errors are left to the load, which meets them as soon. */
static int check_shape(const struct load *l, const char *buf, size_t len)
{
	yaml_parser_t p;
	yaml_event_t ev;
	unsigned int depth = 0, anchors = 0;
	int r = 0;

	if (!yaml_parser_initialize(&p))
		return log_error_errno(-ENOMEM, "cannot load the configuration");
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	while (r == 0 && yaml_parser_parse(&p, &ev)) {
		yaml_event_type_t type = ev.type;
		unsigned long line = (unsigned long)ev.start_mark.line + 1;

		if (type == YAML_MAPPING_START_EVENT || type == YAML_SEQUENCE_START_EVENT) {
			anchors += (type == YAML_MAPPING_START_EVENT ? ev.data.mapping_start.anchor
								      : ev.data.sequence_start.anchor) != NULL;
			if (++depth > MAX_DEPTH) {
				log_error("%s:%lu: nested more than %d levels deep: a configuration needs at most 4",
					  l->path, line, MAX_DEPTH);
				r = -EINVAL;
			}
		} else if (type == YAML_MAPPING_END_EVENT || type == YAML_SEQUENCE_END_EVENT) {
			depth--;
		} else if (type == YAML_ALIAS_EVENT || (type == YAML_SCALAR_EVENT && ev.data.scalar.anchor)) {
			anchors++;
		}
		if (r == 0 && anchors > MAX_ANCHORS) {
			log_error("%s:%lu: more than %d anchors and aliases (&name, *name): write the values out",
				  l->path, line, MAX_ANCHORS);
			r = -EINVAL;
		}
		yaml_event_delete(&ev);
		if (type == YAML_STREAM_END_EVENT)
			break;
	}
	yaml_parser_delete(&p);
	return r;
}

int cfg_load_file(struct load *l)
{
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	yaml_node_t *root;
	bool have_doc = false;
	char *buf = NULL;
	size_t len = 0;
	mode_t mode = 0;
	int r;

	r = read_file(l->path, &buf, &len, &mode);
	if (r < 0) {
		log_error("cannot read config file '%s': %s", l->path,
			  r == -EFBIG ? "larger than 1 MiB" : r == -EINVAL ? "not a regular file" : strerror(-r));
		return r == -ENOMEM ? r : -EINVAL;
	}
	r = check_shape(l, buf, len);
	if (r < 0) {
		free(buf);
		return r;
	}
	if (!yaml_parser_initialize(&parser)) {
		free(buf);
		return log_error_errno(-ENOMEM, "cannot load the configuration");
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&parser, &doc)) {
		r = yaml_error(l, &parser, buf, len);
		goto out;
	}
	have_doc = true;
	root = yaml_document_get_root_node(&doc);
	if (root) {
		/* Only one document: a second one is most likely a mistake. */
		if (!yaml_parser_load(&parser, &extra)) {
			r = yaml_error(l, &parser, buf, len);
			goto out;
		}
		if (yaml_document_get_root_node(&extra)) {
			unsigned long line = (unsigned long)extra.start_mark.line + 1;

			yaml_document_delete(&extra);
			log_error("%s:%lu: invalid YAML: only one document is allowed", l->path, line);
			r = -EINVAL;
			goto out;
		}
		yaml_document_delete(&extra);
	}
	if (root && !is_null(root)) {
		if (root->type != YAML_MAPPING_NODE) {
			struct origin o = file_origin(root);

			r = cfg_error(l, &o, NULL, false, "expected a mapping of settings (key: value), got %s",
				      node_kind(root));
			goto out;
		}
		r = walk_mapping(l, &doc, root, "");
		if (r < 0)
			goto out;
	}
	if (l->secret_in_file && (mode & S_IROTH))
		log_warn("%s holds secrets but every user can read it: chmod o-r %s", l->path, l->path);
	r = 0;
out:
	if (have_doc)
		yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	free(buf);
	return r;
}

/* log.h: the one logging funnel for prowl; library code returns -errno and the
 * caller reports it here, so every message a person sees passes through log_emit(). */
#ifndef PROWL_LOG_H
#define PROWL_LOG_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
/* Prefix for every line, e.g. "prowl". */
void log_set_prefix(const char *prefix);

/* plain: "prowl: error: msg" for the CLI; logfmt and json: one structured record
 * per line with a timestamp, for the agent and its log collectors. */
enum log_format { LOG_FMT_PLAIN = 0, LOG_FMT_LOGFMT, LOG_FMT_JSON };
void log_set_format(enum log_format fmt);
/* Parses "error|warn|info|debug" and "plain|logfmt|json"; -EINVAL otherwise. */
int log_level_from_string(const char *s, enum log_level *ret);
int log_format_from_string(const char *s, enum log_format *ret);
void log_emit(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_emitv(enum log_level lvl, const char *fmt, va_list ap);

#define log_error(...) log_emit(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_emit(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_emit(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_get_level() >= LOG_LVL_DEBUG) log_emit(LOG_LVL_DEBUG, __VA_ARGS__); } while (0)

/* Logs "<msg>: <strerror(-r)>" and returns r (a negative errno), systemd-style. */
int log_error_errno(int r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int log_warn_errno(int r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

/* log.c: leveled one-line messages on stderr, always valid UTF-8 (escape.c).
 * Errors returned as -errno anywhere in prowl are turned into words here. */
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "escape.h"

static enum log_level cur_level = LOG_LVL_INFO;
static enum log_format cur_format = LOG_FMT_PLAIN;
static const char *cur_prefix = "prowl";
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void log_set_format(enum log_format fmt) { cur_format = fmt; }

int log_level_from_string(const char *s, enum log_level *ret)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };

	for (unsigned int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0) {
			*ret = (enum log_level)i;
			return 0;
		}
	return -EINVAL;
}

int log_format_from_string(const char *s, enum log_format *ret)
{
	static const char *const names[] = { "plain", "logfmt", "json" };

	for (unsigned int i = 0; i < 3; i++)
		if (strcmp(s, names[i]) == 0) {
			*ret = (enum log_format)i;
			return 0;
		}
	return -EINVAL;
}

void log_set_level(enum log_level lvl) { cur_level = lvl; }
enum log_level log_get_level(void) { return cur_level; }
void log_set_prefix(const char *prefix) { cur_prefix = prefix; }

static const char *level_word(enum log_level lvl)
{
	switch (lvl) {
	case LOG_LVL_ERROR: return "error";
	case LOG_LVL_WARN: return "warning";
	case LOG_LVL_INFO: return NULL;
	default: return "debug";
	}
}

void log_emitv(enum log_level lvl, const char *fmt, va_list ap)
{
	char buf[1024], safe[sizeof(buf)];
	const char *w;

	if (lvl > cur_level)
		return;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	w = level_word(lvl);
	pthread_mutex_lock(&log_lock);
	if (cur_format == LOG_FMT_PLAIN) {
		/* Names in the message may hold anything: one line, nothing a terminal acts on. */
		const char *text = printable(buf, safe, sizeof(safe));

		if (w)
			fprintf(stderr, "%s: %s: %s\n", cur_prefix, w, text);
		else
			fprintf(stderr, "%s: %s\n", cur_prefix, text);
	} else {
		static const char *const lvls[] = { "error", "warn", "info", "debug" };
		char ts[40];
		struct timespec now;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &now);
		gmtime_r(&now.tv_sec, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
		if (cur_format == LOG_FMT_JSON) {
			fprintf(stderr, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":", ts, now.tv_nsec / 1000000, lvls[lvl]);
			escape_json(stderr, buf);
			fputs("}\n", stderr);
		} else {
			fprintf(stderr, "ts=%s.%03ldZ level=%s msg=", ts, now.tv_nsec / 1000000, lvls[lvl]);
			escape_json(stderr, buf);
			fputc('\n', stderr);
		}
	}
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
}

void log_emit(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emitv(lvl, fmt, ap);
	va_end(ap);
}

static int log_errno_v(enum log_level lvl, int r, const char *fmt, va_list ap)
{
	char buf[900];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	log_emit(lvl, "%s: %s", buf, strerror(r < 0 ? -r : r));
	return r < 0 ? r : -r;
}

int log_error_errno(int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	r = log_errno_v(LOG_LVL_ERROR, r, fmt, ap);
	va_end(ap);
	return r;
}

int log_warn_errno(int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	r = log_errno_v(LOG_LVL_WARN, r, fmt, ap);
	va_end(ap);
	return r;
}

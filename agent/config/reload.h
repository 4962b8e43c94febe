/* reload.h: SIGHUP's configuration load on a thread of its own, so that reading and
 * validating a file never holds up sampling; the main loop picks up the result. */
#ifndef PROWL_RELOAD_H
#define PROWL_RELOAD_H

#include "config.h"

struct reloader;

/* argv and envp must outlive the reloader (they are main's). */
int reloader_new(int argc, char **argv, char **envp, struct reloader **ret);
/* Asks for a load of the configuration. One already running is followed by one
 * more, so that the file as it is after the last request is what gets loaded. */
void reloader_request(struct reloader *r);
/* Never blocks. 0: no load finished since the last call; 1: a load succeeded and
 * *ret holds the new configuration (the caller owns it); negative errno: a load
 * failed, its error already logged. */
int reloader_poll(struct reloader *r, struct agent_config *ret);
/* Waits for a load under way (bounded by the file limits) and frees r; accepts NULL. */
void reloader_free(struct reloader *r);

#endif

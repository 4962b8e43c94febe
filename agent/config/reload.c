/* reload.c: the configuration loader thread: waits for a request, runs
 * agent_config_load() into a fresh struct and leaves the result for the main loop. */
#include "reload.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>

struct reloader {
	int argc;
	char **argv, **envp;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool requested, stop;
	bool done;                 /* a result waits in cfg/rc */
	int rc;
	struct agent_config cfg;
};

static void *loader(void *arg)
{
	struct reloader *r = arg;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct agent_config c = {};
		int rc;

		while (!r->requested && !r->stop)
			pthread_cond_wait(&r->cond, &r->lock);
		if (r->stop)
			break;
		r->requested = false;
		pthread_mutex_unlock(&r->lock);
		rc = agent_config_load(r->argc, r->argv, r->envp, &c);
		pthread_mutex_lock(&r->lock);
		/* A newer result replaces one the main loop has not picked up yet. */
		if (r->done)
			agent_config_free(&r->cfg);
		r->cfg = c;
		r->rc = rc == 0 ? 1 : rc < 0 ? rc : -EINVAL; /* 1 would be --help: not from a file */
		r->done = true;
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int reloader_new(int argc, char **argv, char **envp, struct reloader **ret)
{
	struct reloader *r = calloc(1, sizeof(*r));
	sigset_t all, old;
	int e;

	if (!r)
		return -ENOMEM;
	r->argc = argc;
	r->argv = argv;
	r->envp = envp;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	/* Signals belong to the main thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&r->thread, NULL, loader, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		pthread_cond_destroy(&r->cond);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return -e;
	}
	pthread_setname_np(r->thread, "config");
	*ret = r;
	return 0;
}

void reloader_request(struct reloader *r)
{
	pthread_mutex_lock(&r->lock);
	r->requested = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

int reloader_poll(struct reloader *r, struct agent_config *ret)
{
	int rc = 0;

	if (pthread_mutex_trylock(&r->lock) != 0)
		return 0; /* the loader is handing over a result: next time */
	if (r->done) {
		rc = r->rc;
		*ret = r->cfg;
		r->cfg = (struct agent_config){};
		r->done = false;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

void reloader_free(struct reloader *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	if (r->done)
		agent_config_free(&r->cfg);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

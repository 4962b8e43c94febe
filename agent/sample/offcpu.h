/* offcpu.h: the off-CPU programs of the sample stage (offcpu.c): set up before
 * the BPF object loads, chained after, attached by sampler_start(). */
#ifndef PROWL_OFFCPU_H
#define PROWL_OFFCPU_H

struct sampler;

/* Before load: which off-CPU programs load, and the threshold. 0 or -errno (logged). */
int offcpu_setup(struct sampler *s);
/* After load: the bounded unwinder's chain. 0 or -errno (logged). */
int offcpu_loaded(struct sampler *s);
/* Attaches the programs (nothing without opts.offcpu). 0 or -errno (logged). */
int offcpu_start(struct sampler *s);
/* Detaches them; no-op when not attached. */
void offcpu_stop(struct sampler *s);

#endif

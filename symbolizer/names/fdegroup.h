/* fdegroup.h: the start of the .eh_frame FDE around an address, which names the frames of
 * code no symbol covers: one row per function (`lib.so+0x16900`), not one per address. */
#ifndef PROWL_FDEGROUP_H
#define PROWL_FDEGROUP_H

#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>

struct fde_groups;

/* The FDE ranges of elf's .eh_frame inside its executable segments (ELF
 * virtual addresses). Returns 0, -ENOENT when there are none, -EBADMSG when
 * the table lies (two FDEs overlap: no grouping can be trusted), -ENOMEM. */
int fde_groups_build(Elf *elf, struct fde_groups **ret);
/* The start of the FDE covering addr. */
bool fde_groups_find(const struct fde_groups *g, uint64_t addr, uint64_t *ret_start);
size_t fde_groups_bytes(const struct fde_groups *g);
void fde_groups_free(struct fde_groups *g); /* accepts NULL */

#endif

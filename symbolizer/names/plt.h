/* plt.h: the stubs of an object's .plt, .plt.sec and .plt.got sections and the function
 * each one jumps to, read from the dynamic relocations, so a frame there is `name@plt`. */
#ifndef PROWL_PLT_H
#define PROWL_PLT_H

#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

/* One stub: [addr, addr + size) in ELF virtual addresses. */
struct obj_plt_stub {
	uint64_t addr;
	uint32_t size;
	uint32_t name;  /* offset of "target@plt" in names */
};

struct obj_plt {
	struct obj_plt_stub *v; /* sorted by addr, not overlapping */
	size_t n;
	char *names;
	size_t names_len;
};

/* Reads the stubs of an x86_64 ELF (other machines: none). A stub whose jump
 * target no relocation names is left out, so its address falls back to raw
 * naming rather than to a guess. Returns 0 (ret filled, possibly empty) or
 * -ENOMEM. */
int obj_plt_read(Elf *elf, struct obj_plt *ret);
static inline const char *obj_plt_name(const struct obj_plt *p, const struct obj_plt_stub *s)
{
	return p->names + s->name;
}
void obj_plt_free(struct obj_plt *p);

#endif

/* jvmscope.c: finds the PcDesc of a pc in an nmethod and walks its scope records (sender,
 * method index, bci) through the metadata table; every bound read from the JVM is checked. */
#include "jvmscope.h"

#include <errno.h>
#include <string.h>

#define U5_NEW_JDK     20          /* UNSIGNED5: every byte stored plus one */
#define REGION_MAX     (4u << 20)  /* a region of debug information past this is garbage */
#define PCDESC_CHUNK   256         /* PcDescs read per call */
#define SCOPE_READ     32          /* bytes read for one scope record (6 integers of <= 5) */
#define SERIALIZED_NULL 0          /* DebugInformationRecorder::serialized_null */

unsigned int jvm_u5_x(unsigned int jdk_major)
{
	return jdk_major >= U5_NEW_JDK;
}

/* Each byte weighs 64 times the one before; a byte below L = 192 - x ends it; at most 5. */
int jvm_u5_read(const uint8_t *tab, size_t len, size_t *pos, unsigned int x, uint32_t *ret)
{
	uint32_t sum = 0, shift = 0, l = 192 - x;

	for (int i = 0; i < 5; i++) {
		uint32_t b;

		if (*pos >= len || tab[*pos] < x)
			return -1;
		b = tab[(*pos)++] - x;
		sum += b << shift;
		if (b < l)
			break;
		shift += 6;
	}
	*ret = sum;
	return 0;
}

static int rd(const struct jvm_mem *mem, uint64_t addr, void *buf, size_t len)
{
	if (addr & 0xffff000000000000ull)
		return -EFAULT;
	return mem->read(mem->ctx, addr, buf, len) < 0 ? -EFAULT : 0;
}

static int rd_i32(const struct jvm_mem *mem, uint64_t addr, int64_t *ret)
{
	int32_t v;

	if (rd(mem, addr, &v, 4) < 0)
		return -EFAULT;
	*ret = v;
	return 0;
}

static int rd_u64(const struct jvm_mem *mem, uint64_t addr, uint64_t *ret)
{
	return rd(mem, addr, ret, 8);
}

struct regions {
	uint64_t pcs, pcs_end, data, data_end, meta, meta_end;
};

/* The three regions of the nmethod at blob (jvmproc.c's scopes_fill() says which
 * field is which), each checked: ordered, aligned where HotSpot aligns, bounded. */
static int regions_read(const struct jvm_mem *mem, const struct prowl_java_proc *jp, uint64_t blob,
			struct regions *g)
{
	int64_t pcs, pcs_end, data_end, meta, meta_end, data = 0;
	uint64_t base = blob, mbase = blob, p;

	if (jp->flags & PROWL_JAVA_SCOPES_NEW) {
		if (rd_u64(mem, blob + jp->sc_base, &base) < 0 || rd_u64(mem, blob + jp->sc_meta_base, &mbase) < 0 ||
		    rd_i32(mem, blob + jp->sc_data, &data) < 0 || rd_i32(mem, blob + jp->sc_meta_end, &meta_end) < 0)
			return -EFAULT;
		g->data = base + (uint64_t)data;
		g->meta_end = mbase + (uint64_t)meta_end;
		if (data < 0 || meta_end < 0)
			return -EBADMSG;
	} else {
		if (rd_u64(mem, blob + jp->sc_data, &g->data) < 0 || rd_u64(mem, blob + jp->sc_meta_end, &p) < 0)
			return -EFAULT;
		g->meta_end = p;
	}
	if (rd_i32(mem, blob + jp->sc_pcs, &pcs) < 0 || rd_i32(mem, blob + jp->sc_pcs_end, &pcs_end) < 0 ||
	    rd_i32(mem, blob + jp->sc_data_end, &data_end) < 0 || rd_i32(mem, blob + jp->sc_meta, &meta) < 0)
		return -EFAULT;
	if (pcs < 0 || pcs_end < 0 || data_end < 0 || meta < 0)
		return -EBADMSG;
	g->pcs = base + (uint64_t)pcs;
	g->pcs_end = base + (uint64_t)pcs_end;
	g->data_end = base + (uint64_t)data_end;
	g->meta = mbase + (uint64_t)meta;
	if (g->pcs > g->pcs_end || g->pcs_end - g->pcs > REGION_MAX || (g->pcs_end - g->pcs) % jp->pd_size ||
	    g->data >= g->data_end || g->data_end - g->data > REGION_MAX || g->meta > g->meta_end ||
	    g->meta_end - g->meta > REGION_MAX || ((g->meta | g->meta_end) & 7))
		return -EBADMSG;
	return 0;
}

/* The scope decode offset of the first PcDesc at or past target; PcDescs are sorted
 * by pc offset (HotSpot's approximate lookup). */
static int pcdesc_find(const struct jvm_mem *mem, const struct prowl_java_proc *jp, const struct regions *g,
		       int64_t target, uint32_t *ret)
{
	uint8_t buf[PCDESC_CHUNK * 64];
	size_t n = (g->pcs_end - g->pcs) / jp->pd_size, per = sizeof(buf) / jp->pd_size;
	int64_t last = INT64_MIN;

	if (jp->pd_pc + 4 > jp->pd_size || jp->pd_scope + 4 > jp->pd_size)
		return -EBADMSG;
	for (size_t i = 0; i < n; i += per) {
		size_t k = n - i < per ? n - i : per;

		if (rd(mem, g->pcs + i * jp->pd_size, buf, k * jp->pd_size) < 0)
			return -EFAULT;
		for (size_t j = 0; j < k; j++) {
			int32_t pc, scope;

			memcpy(&pc, buf + j * jp->pd_size + jp->pd_pc, 4);
			memcpy(&scope, buf + j * jp->pd_size + jp->pd_scope, 4);
			if (pc < last)
				return -EBADMSG; /* not sorted: not HotSpot's table */
			last = pc;
			if (pc >= target) {
				if (scope < 0)
					return -EBADMSG;
				*ret = (uint32_t)scope;
				return 0;
			}
		}
	}
	return -ENOENT;
}

int jvm_scope_chain(const struct jvm_mem *mem, const struct prowl_java_proc *jp, uint64_t blob, uint32_t off,
		    int leaf, struct jvm_scope *out, size_t cap, size_t *ret_n)
{
	unsigned int x = jvm_u5_x(jp->jdk_major);
	struct regions g;
	uint32_t dec;
	size_t n = 0;
	int r;

	*ret_n = 0;
	if (!(jp->flags & PROWL_JAVA_SCOPES) || jp->pd_size < 8 || jp->pd_size > 64)
		return -ENOENT;
	if ((r = regions_read(mem, jp, blob, &g)) < 0 ||
	    (r = pcdesc_find(mem, jp, &g, (int64_t)off + (leaf ? 0 : 1), &dec)) < 0)
		return r;
	/* Innermost first; each record names its sender (the caller it was inlined into). */
	while (dec != SERIALIZED_NULL && n < cap) {
		uint8_t rec[SCOPE_READ];
		size_t len = sizeof(rec), pos = 0;
		uint32_t sender, idx, bci;
		uint64_t method;

		if (dec >= g.data_end - g.data)
			return -EBADMSG;
		if (len > g.data_end - g.data - dec)
			len = g.data_end - g.data - dec;
		if (rd(mem, g.data + dec, rec, len) < 0)
			return -EFAULT;
		if (jvm_u5_read(rec, len, &pos, x, &sender) < 0 || jvm_u5_read(rec, len, &pos, x, &idx) < 0 ||
		    jvm_u5_read(rec, len, &pos, x, &bci) < 0)
			return -EBADMSG;
		/* A method index counts from 1 (0 is null); the sender lies before the
		 * record (the recorder writes callers first), so the walk ends. */
		if (!idx || idx > (g.meta_end - g.meta) / 8 || (sender != SERIALIZED_NULL && sender >= dec))
			return -EBADMSG;
		if (rd_u64(mem, g.meta + 8ull * (idx - 1), &method) < 0)
			return -EFAULT;
		if (!method || (method & 7))
			return -EBADMSG;
		/* Stored as bci - InvocationEntryBci (-1): 0 is the method's entry. */
		out[n++] = (struct jvm_scope){ method, bci ? bci - 1 : JVM_SCOPE_BCI_NONE };
		dec = sender;
	}
	*ret_n = n;
	return n ? 0 : -ENOENT;
}

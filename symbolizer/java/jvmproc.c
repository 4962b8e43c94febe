/* jvmproc.c: builds a JVM process's java_procs entry: the code heaps (bounds, segment
 * maps), the interpreter's code and the offsets of the frame walk, read and checked. */
#include "jvmproc.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "jvmimage.h"
#include "log.h"

#define F(id) (m->field[JVM_F_##id])
#define JVM_META_TRIES 4 /* reads of a libjvm's metadata before it counts as unreadable */
#define HAS(id) jvm_has_field(m, JVM_F_##id)

static int rd64(const struct jvm_mem *mem, uint64_t addr, uint64_t *ret)
{
	return mem->read(mem->ctx, addr, ret, 8);
}

static int rd32(const struct jvm_mem *mem, uint64_t addr, int32_t *ret)
{
	return mem->read(mem->ctx, addr, ret, 4);
}

/* An offset the BPF walk reads at: 16 bits. */
static bool fits16(uint64_t v)
{
	return v < 0x10000;
}

/* Where an nmethod's debug information lies (jvmscope.h): JDK 9-22 keep it in the
 * blob (PcDescs to _dependencies_offset, scopes from _scopes_data_begin, metadata
 * from _metadata_offset); JDK 25 in _immutable_data (PcDescs, then scopes to its
 * end) and _mutable_data (relocations, then metadata). Other layouts (JDK 23, 24)
 * get no inlined frames and no lines in compiled code. */
static void scopes_fill(const struct jvm_meta *m, struct prowl_java_proc *ret)
{
	uint64_t v[8];

	if (!HAS(PD_PC) || !HAS(PD_SCOPE) || !((m->has_type >> JVM_T_PC_DESC) & 1) || !HAS(NM_SCOPES_PCS))
		return;
	if (HAS(CM_SCOPES_DATA) && HAS(NM_DEPS) && HAS(NM_METADATA)) {
		v[0] = F(NM_SCOPES_PCS), v[1] = F(NM_DEPS), v[2] = F(CM_SCOPES_DATA), v[3] = F(NM_SCOPES_PCS);
		v[4] = PROWL_JAVA_NONE, v[5] = F(NM_METADATA), v[6] = PROWL_JAVA_NONE, v[7] = F(CM_SCOPES_DATA);
	} else if (HAS(NM_IMMUTABLE) && HAS(NM_SCOPES_DATA) && HAS(NM_IMMUTABLE_SIZE) && HAS(CB_MUTABLE) &&
		   HAS(CB_MUTABLE_SIZE) && HAS(CB_RELOC_SIZE)) {
		v[0] = F(NM_SCOPES_PCS), v[1] = F(NM_SCOPES_DATA), v[2] = F(NM_SCOPES_DATA), v[3] = F(NM_IMMUTABLE_SIZE);
		v[4] = F(NM_IMMUTABLE), v[5] = F(CB_RELOC_SIZE), v[6] = F(CB_MUTABLE), v[7] = F(CB_MUTABLE_SIZE);
		ret->flags |= PROWL_JAVA_SCOPES_NEW;
	} else {
		return;
	}
	for (int i = 0; i < 8; i++)
		if (v[i] >= PROWL_JAVA_NONE && !((i == 4 || i == 6) && v[i] == PROWL_JAVA_NONE))
			return;
	if (!fits16(F(PD_PC)) || !fits16(F(PD_SCOPE)) || m->type_size[JVM_T_PC_DESC] < 8 ||
	    m->type_size[JVM_T_PC_DESC] > 64)
		return;
	ret->sc_pcs = (uint16_t)v[0], ret->sc_pcs_end = (uint16_t)v[1], ret->sc_data = (uint16_t)v[2];
	ret->sc_data_end = (uint16_t)v[3], ret->sc_base = (uint16_t)v[4], ret->sc_meta = (uint16_t)v[5];
	ret->sc_meta_base = (uint16_t)v[6], ret->sc_meta_end = (uint16_t)v[7];
	ret->pd_size = (uint16_t)m->type_size[JVM_T_PC_DESC];
	ret->pd_pc = (uint16_t)F(PD_PC);
	ret->pd_scope = (uint16_t)F(PD_SCOPE);
	ret->flags |= PROWL_JAVA_SCOPES;
}

int jvm_proc_fill(const struct jvm_mem *mem, const struct jvm_meta *m, uint64_t bias, uint32_t gen,
		  struct prowl_java_proc *ret)
{
	uint64_t heaps, data, sq, buf;
	int32_t len, limit, log2;
	unsigned int nh = 0;

	memset(ret, 0, sizeof(*ret));
	ret->gen = gen;
	ret->cb_name = (uint16_t)F(CB_NAME);
	ret->cb_frame_size = (uint16_t)F(CB_FRAME_SIZE);
	ret->cb_frame_complete = (uint16_t)F(CB_FRAME_COMPLETE);
	ret->cb_code = (uint16_t)(HAS(CB_CODE_BEGIN) ? F(CB_CODE_BEGIN) : F(CB_CODE_OFFSET));
	ret->nm_compile_id = (uint16_t)F(NM_COMPILE_ID);
	ret->m_const_method = (uint16_t)F(M_CONST_METHOD);
	ret->const_method_size = (uint16_t)m->type_size[JVM_T_CONST_METHOD];
	ret->heap_block = (uint8_t)m->type_size[JVM_T_HEAP_BLOCK];
	ret->nm_method = (uint16_t)(HAS(NM_METHOD) ? F(NM_METHOD) : F(NM_METHOD_OLD));
	ret->cm_constants = (uint16_t)F(CM_CONSTANTS);
	ret->cm_name_index = (uint16_t)F(CM_NAME_INDEX);
	ret->cm_sig_index = (uint16_t)F(CM_SIG_INDEX);
	ret->cm_code_size = (uint16_t)F(CM_CODE_SIZE);
	ret->cm_flags = (uint16_t)(HAS(CM_FLAGS) ? F(CM_FLAGS) : HAS(CM_FLAGS_NEW) ? F(CM_FLAGS_NEW) : PROWL_JAVA_NONE);
	ret->has_lines = (uint16_t)(m->has_int & (1u << JVM_I_HAS_LINES)       ? m->int_value[JVM_I_HAS_LINES]
				    : m->has_int & (1u << JVM_I_HAS_LINES_NEW) ? m->int_value[JVM_I_HAS_LINES_NEW]
									       : 0);
	ret->cp_holder = (uint16_t)F(CP_HOLDER);
	ret->cp_size = (uint16_t)m->type_size[JVM_T_CONSTANT_POOL];
	ret->cp_source_file = (uint16_t)(HAS(CP_SOURCE_FILE) ? F(CP_SOURCE_FILE) : PROWL_JAVA_NONE);
	ret->ik_source_file = (uint16_t)(HAS(IK_SOURCE_FILE) ? F(IK_SOURCE_FILE) : PROWL_JAVA_NONE);
	ret->k_name = (uint16_t)F(K_NAME);
	ret->sym_length = (uint16_t)F(SYM_LENGTH);
	ret->sym_body = (uint16_t)F(SYM_BODY);
	ret->hb_used = HAS(HB_USED) && F(HB_USED) < m->type_size[JVM_T_HEAP_BLOCK] ? (uint16_t)F(HB_USED)
										 : PROWL_JAVA_NONE;
	if (!HAS(CB_CODE_BEGIN))
		ret->flags |= PROWL_JAVA_CODE_OFFSET;
	if (m->width[JVM_F_CB_FRAME_COMPLETE] == 2)
		ret->flags |= PROWL_JAVA_FC_16;
	if (!fits16(F(CB_NAME)) || !fits16(F(CB_FRAME_SIZE)) || !fits16(F(CB_FRAME_COMPLETE)) ||
	    !fits16(ret->cb_code) || !fits16(F(NM_COMPILE_ID)) || !fits16(F(M_CONST_METHOD)) ||
	    !fits16(m->type_size[JVM_T_CONST_METHOD]) || m->type_size[JVM_T_HEAP_BLOCK] > 64 ||
	    !fits16(F(NM_METHOD) | F(NM_METHOD_OLD) | F(CM_CONSTANTS) | F(CM_NAME_INDEX) | F(CM_SIG_INDEX) |
		    F(CM_CODE_SIZE) | F(CP_HOLDER) | F(K_NAME) | F(SYM_LENGTH) | F(SYM_BODY)) ||
	    !fits16(m->type_size[JVM_T_CONSTANT_POOL]))
		return -EBADMSG;

	scopes_fill(m, ret);
	if (HAS(VM_MAJOR)) {
		int32_t major = 0;

		if (rd32(mem, F(VM_MAJOR) + bias, &major) == 0 && major > 0 && major < 1000)
			ret->jdk_major = (uint16_t)major;
	}
	/* The code heaps: CodeCache::_heaps, a GrowableArray<CodeHeap*>. Not set up
	 * yet while the JVM starts: registered, not ready. */
	if (rd64(mem, F(CC_HEAPS) + bias, &heaps) < 0)
		return -EFAULT;
	if (!heaps)
		return 0;
	if (rd32(mem, heaps + (HAS(GA_LEN) ? F(GA_LEN) : F(GA_LEN_OLD)), &len) < 0 ||
	    rd64(mem, heaps + F(GA_DATA), &data) < 0)
		return -EFAULT;
	if (len <= 0 || !data)
		return 0;
	ret->cc_low = UINT64_MAX;
	for (int i = 0; i < len && nh < PROWL_JAVA_HEAPS; i++) {
		struct prowl_java_heap *h = &ret->heap[nh];
		uint64_t heap, lo, hi, segmap;

		if (rd64(mem, data + 8 * (uint64_t)i, &heap) < 0 || !heap ||
		    rd64(mem, heap + F(CH_MEMORY) + F(VS_LOW_BOUNDARY), &lo) < 0 ||
		    rd64(mem, heap + F(CH_MEMORY) + F(VS_HIGH_BOUNDARY), &hi) < 0 ||
		    rd64(mem, heap + F(CH_SEGMAP) + F(VS_LOW_BOUNDARY), &segmap) < 0 ||
		    rd32(mem, heap + F(CH_LOG2_SEG), &log2) < 0)
			return -EFAULT;
		*h = (struct prowl_java_heap){ lo, hi, segmap };
		if (h->low >= h->high || !h->segmap || log2 < 4 || log2 > 16 || (nh && log2 != ret->log2_seg))
			return -EBADMSG;
		ret->log2_seg = (uint8_t)log2;
		if (h->low < ret->cc_low)
			ret->cc_low = h->low;
		if (h->high > ret->cc_high)
			ret->cc_high = h->high;
		nh++;
	}
	if (!nh)
		return 0;
	/* The interpreter: AbstractInterpreter::_code, a StubQueue. */
	if (rd64(mem, F(AI_CODE) + bias, &sq) < 0)
		return -EFAULT;
	if (!sq)
		return 0;
	if (rd64(mem, sq + F(SQ_BUFFER), &buf) < 0 || rd32(mem, sq + F(SQ_LIMIT), &limit) < 0)
		return -EFAULT;
	if (!buf || limit <= 0)
		return 0;
	ret->interp_low = buf;
	ret->interp_high = buf + (uint64_t)limit;
	ret->flags |= PROWL_JAVA_READY;
	return 0;
}

int jvm_proc_register(const struct maps_io *io, uint32_t pid, struct jvm_file *jf, uint64_t bias, uint32_t gen,
		      const char *path)
{
	struct jvm_proc_mem pm = { .pid = pid };
	struct jvm_mem mem = { jvm_proc_read, &pm };
	struct prowl_java_proc jp;
	int r;

	if (!jf->meta_state) {
		r = jvm_meta_read(&mem, &jf->elf, bias, &jf->meta, NULL, NULL);
		if (r == -ESRCH)
			return r; /* gone: the next process that maps it reads it */
		if (r == -EFAULT && ++jf->faults < JVM_META_TRIES) {
			/* libjvm mapped but not relocated yet (dlopen under way): ask again */
			struct prowl_java_proc starting = { .gen = gen };

			r = io->java_proc_set(io->ctx, pid, &starting);
			return r < 0 ? r : -EAGAIN;
		}
		jf->meta_state = r < 0 ? r : 1;
		if (r == -ENOENT)
			log_warn("java: %s lacks %s in its serviceability tables: its processes get native frames "
				 "only", path, jvm_meta_missing(&jf->meta));
		else if (r < 0)
			log_warn("java: cannot read the JVM metadata of %s (pid %" PRIu32 "): %s: its processes get "
				 "native frames only", path, pid, strerror(-r));
		else
			log_debug("java: %s: %u fields, %u types, %u int and %u long constants", path,
				  jf->meta.entries[0], jf->meta.entries[1], jf->meta.entries[2], jf->meta.entries[3]);
	}
	if (jf->meta_state < 0) {
		io->java_proc_del(io->ctx, pid);
		return jf->meta_state;
	}
	r = jvm_proc_fill(&mem, &jf->meta, bias, gen, &jp);
	if (r < 0) {
		if (!jf->logged && r != -ESRCH)
			log_warn("java: pid %" PRIu32 " (%s): its code cache cannot be read: %s: native frames only",
				 pid, path, strerror(-r));
		jf->logged = jf->logged || r != -ESRCH;
		io->java_proc_del(io->ctx, pid);
		return r;
	}
	r = io->java_proc_set(io->ctx, pid, &jp);
	if (r < 0)
		return r;
	log_debug("java: pid %" PRIu32 ": %s%s", pid, path, jp.flags & PROWL_JAVA_READY ? "" : " (starting)");
	return (jp.flags & PROWL_JAVA_READY) ? 0 : -EAGAIN;
}

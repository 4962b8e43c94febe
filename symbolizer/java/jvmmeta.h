/* jvmmeta.h: reads HotSpot's serviceability tables (gHotSpotVMStructs, Types, Int and
 * Long constants) from a JVM's memory into the offsets the Java walk and naming use. */
#ifndef PROWL_JVMMETA_H
#define PROWL_JVMMETA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jvmdetect.h"

/* Memory of the JVM: read exactly len bytes at addr, 0 or a negative errno. The
 * reader of a live process is process_vm_readv(); tests and fuzzers read an image. */
struct jvm_mem {
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
};

/* The fields read, X(id, type name, field name): a non-static field's offset in
 * its type, or a static field's address (minus the load bias: per libjvm file). */
#define JVM_FIELDS(X)                                              \
	X(CC_HEAPS, "CodeCache", "_heaps")                         \
	X(CC_LOW, "CodeCache", "_low_bound")                       \
	X(CC_HIGH, "CodeCache", "_high_bound")                     \
	X(GA_DATA, "GrowableArray<int>", "_data")            \
	X(GA_LEN, "GrowableArrayBase", "_len")                     \
	X(GA_LEN_OLD, "GenericGrowableArray", "_len")              \
	X(CH_MEMORY, "CodeHeap", "_memory")                        \
	X(CH_SEGMAP, "CodeHeap", "_segmap")                        \
	X(CH_LOG2_SEG, "CodeHeap", "_log2_segment_size")           \
	X(VS_LOW_BOUNDARY, "VirtualSpace", "_low_boundary")        \
	X(VS_HIGH_BOUNDARY, "VirtualSpace", "_high_boundary")      \
	X(VS_LOW, "VirtualSpace", "_low")                          \
	X(VS_HIGH, "VirtualSpace", "_high")                        \
	X(CB_NAME, "CodeBlob", "_name")                            \
	X(CB_SIZE, "CodeBlob", "_size")                            \
	X(CB_FRAME_SIZE, "CodeBlob", "_frame_size")                \
	X(CB_FRAME_COMPLETE, "CodeBlob", "_frame_complete_offset") \
	X(CB_CODE_BEGIN, "CodeBlob", "_code_begin")                \
	X(CB_CODE_OFFSET, "CodeBlob", "_code_offset")              \
	X(NM_METHOD, "nmethod", "_method")                         \
	X(NM_METHOD_OLD, "CompiledMethod", "_method")              \
	X(NM_COMPILE_ID, "nmethod", "_compile_id")                 \
	X(NM_ENTRY_BCI, "nmethod", "_entry_bci")                   \
	X(M_CONST_METHOD, "Method", "_constMethod")                \
	X(CM_CONSTANTS, "ConstMethod", "_constants")               \
	X(CM_NAME_INDEX, "ConstMethod", "_name_index")             \
	X(CM_SIG_INDEX, "ConstMethod", "_signature_index")         \
	X(CM_CODE_SIZE, "ConstMethod", "_code_size")               \
	X(CM_FLAGS, "ConstMethod", "_flags")                       \
	X(CM_FLAGS_NEW, "ConstMethod", "_flags._flags")            \
	X(CP_HOLDER, "ConstantPool", "_pool_holder")               \
	X(CP_SOURCE_FILE, "ConstantPool", "_source_file_name_index") \
	X(IK_SOURCE_FILE, "InstanceKlass", "_source_file_name_index") \
	X(K_NAME, "Klass", "_name")                                \
	X(SYM_LENGTH, "Symbol", "_length")                         \
	X(SYM_BODY, "Symbol", "_body")                             \
	X(AI_CODE, "AbstractInterpreter", "_code")                 \
	X(SQ_BUFFER, "StubQueue", "_stub_buffer")                  \
	X(SQ_LIMIT, "StubQueue", "_buffer_limit")                  \
	X(VM_MAJOR, "Abstract_VM_Version", "_vm_major_version")    \
	X(PD_PC, "PcDesc", "_pc_offset")                           \
	X(PD_SCOPE, "PcDesc", "_scope_decode_offset")              \
	X(NM_METADATA, "nmethod", "_metadata_offset")              \
	X(NM_SCOPES_PCS, "nmethod", "_scopes_pcs_offset")          \
	X(NM_DEPS, "nmethod", "_dependencies_offset")              \
	X(NM_SCOPES_DATA, "nmethod", "_scopes_data_offset")        \
	X(CM_SCOPES_DATA, "CompiledMethod", "_scopes_data_begin")  \
	X(NM_IMMUTABLE, "nmethod", "_immutable_data")              \
	X(NM_IMMUTABLE_SIZE, "nmethod", "_immutable_data_size")    \
	X(CB_MUTABLE, "CodeBlob", "_mutable_data")                 \
	X(CB_MUTABLE_SIZE, "CodeBlob", "_mutable_data_size")       \
	X(CB_RELOC_SIZE, "CodeBlob", "_relocation_size")          \
	X(HB_USED, "HeapBlock::Header", "_used")

/* The type sizes read, X(id, type name). */
#define JVM_TYPES(X)                         \
	X(T_CONST_METHOD, "ConstMethod")     \
	X(T_CONSTANT_POOL, "ConstantPool")   \
	X(T_HEAP_BLOCK, "HeapBlock")         \
	X(T_METHOD, "Method")                \
	X(T_PC_DESC, "PcDesc")

/* The integer constants read, X(id, name). */
#define JVM_INTS(X)                                                          \
	X(I_HAS_LINES, "ConstMethod::_has_linenumber_table")                 \
	X(I_HAS_LINES_NEW, "ConstMethodFlags::_misc_has_linenumber_table")

#define JVM_EF(id, type, field) JVM_F_##id,
#define JVM_EN(id, name) JVM_##id,
enum jvm_field { JVM_FIELDS(JVM_EF) JVM_F__N };
enum jvm_type { JVM_TYPES(JVM_EN) JVM_T__N };
enum jvm_int { JVM_INTS(JVM_EN) JVM_I__N };
#undef JVM_EF
#undef JVM_EN
_Static_assert(JVM_F__N <= 64, "has_field holds one bit per field");

/* Bounds on the tables: entries looked at per table, bytes of a name compared. */
#define JVM_MAX_ENTRIES 20000
#define JVM_NAME_MAX    64

struct jvm_meta {
	/* has_* bit i: entry i was found. Static fields hold address - bias. */
	uint64_t field[JVM_F__N];
	uint8_t width[JVM_F__N]; /* bytes of a field's type (from its type string); 0: unknown */
	uint64_t type_size[JVM_T__N];
	int64_t int_value[JVM_I__N];
	uint64_t has_field, has_type, has_int;
	uint32_t entries[4]; /* entries read per table (structs, types, ints, longs) */
};

static inline bool jvm_has_field(const struct jvm_meta *m, enum jvm_field f)
{
	return (m->has_field >> f) & 1;
}

/* Every entry the tables hold, for tools and tests: kind 0..3 = struct field,
 * type, int constant, long constant; name is "Type::field" for a field. value is
 * the offset, the address (static: is_static), the size or the constant. */
typedef void (*jvm_meta_visit_fn)(void *ctx, int kind, const char *name, uint64_t value, bool is_static);

/* Reads the tables of the libjvm whose symbols are je, loaded with bias (runtime
 * address - ELF virtual address), from mem. visit (may be NULL) sees every entry.
 * Returns 0, or a negative errno: -EFAULT (memory unreadable), -EBADMSG (a stride,
 * offset or table that is not HotSpot's shape), -ENOENT (a field the walk needs is
 * missing: jvm_meta_missing() names it). */
int jvm_meta_read(const struct jvm_mem *mem, const struct jvm_elf *je, uint64_t bias, struct jvm_meta *ret,
		  jvm_meta_visit_fn visit, void *visit_ctx);

/* The first field, type or constant the walk needs that m lacks, as "Type::field";
 * NULL when none is missing. */
const char *jvm_meta_missing(const struct jvm_meta *m);

#endif

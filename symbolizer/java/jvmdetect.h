/* jvmdetect.h: tells whether an ELF object is HotSpot's libjvm from the serviceability
 * symbols it exports (gHotSpotVMStructs and the strides and offsets of its entries). */
#ifndef PROWL_JVMDETECT_H
#define PROWL_JVMDETECT_H

#include <stdbool.h>
#include <stdint.h>
#include <gelf.h>

/* The exported symbols, X(index, name): four table pointers, then per table the
 * stride and the offsets of its entry's fields (each a uint64_t in libjvm). */
#define JVM_SYMS(X)                                                     \
	X(STRUCTS, "gHotSpotVMStructs")                                 \
	X(TYPES, "gHotSpotVMTypes")                                     \
	X(INTS, "gHotSpotVMIntConstants")                               \
	X(LONGS, "gHotSpotVMLongConstants")                             \
	X(S_STRIDE, "gHotSpotVMStructEntryArrayStride")                 \
	X(S_TYPE, "gHotSpotVMStructEntryTypeNameOffset")                \
	X(S_FIELD, "gHotSpotVMStructEntryFieldNameOffset")              \
	X(S_STATIC, "gHotSpotVMStructEntryIsStaticOffset")              \
	X(S_OFFSET, "gHotSpotVMStructEntryOffsetOffset")                \
	X(S_ADDRESS, "gHotSpotVMStructEntryAddressOffset")              \
	X(S_TSTRING, "gHotSpotVMStructEntryTypeStringOffset")           \
	X(T_STRIDE, "gHotSpotVMTypeEntryArrayStride")                   \
	X(T_TYPE, "gHotSpotVMTypeEntryTypeNameOffset")                  \
	X(T_SIZE, "gHotSpotVMTypeEntrySizeOffset")                      \
	X(I_STRIDE, "gHotSpotVMIntConstantEntryArrayStride")            \
	X(I_NAME, "gHotSpotVMIntConstantEntryNameOffset")               \
	X(I_VALUE, "gHotSpotVMIntConstantEntryValueOffset")             \
	X(L_STRIDE, "gHotSpotVMLongConstantEntryArrayStride")           \
	X(L_NAME, "gHotSpotVMLongConstantEntryNameOffset")              \
	X(L_VALUE, "gHotSpotVMLongConstantEntryValueOffset")

enum jvm_sym {
#define JVM_SYM_ENUM(id, name) JVM_SYM_##id,
	JVM_SYMS(JVM_SYM_ENUM)
#undef JVM_SYM_ENUM
	JVM_SYM__N,
};

struct jvm_elf {
	bool found;                /* it exports every symbol of JVM_SYMS */
	uint64_t sym[JVM_SYM__N];  /* their ELF virtual addresses */
};

/* The name of symbol i (JVM_SYMS), or NULL. */
const char *jvm_sym_name(unsigned int i);

/* Fills *ret from elf's dynamic symbols. Returns 0 (ret->found says whether it is
 * libjvm) or a negative errno. */
int jvm_detect_elf(Elf *elf, struct jvm_elf *ret);

#endif

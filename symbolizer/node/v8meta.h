/* v8meta.h: reads V8's post-mortem metadata (the v8dbg_* constants: frame slots, frame
 * types, instance types, object layouts) from a node binary's ELF file, checked and bounded. */
#ifndef PROWL_V8META_H
#define PROWL_V8META_H

#include <stdbool.h>
#include <stdint.h>
#include <gelf.h>

/* The constants read, X(id, kind, need, name, older names or NULL). The names are the
 * symbols without "v8dbg_", as V8 11 spells them (V8 12's "__Tagged_T_" and "__Address"
 * type suffixes are read as "__T" and "__uintptr_t"); older names: space-separated, each
 * V8's own at some version; kind says which values are sane (V8K_*); need: 1 = the
 * BPF walk needs it, 2 = naming needs it, 0 = used when there. */
#define V8_CONSTS(X)                                                                            \
	X(FP_CONTEXT, FP, 1, "off_fp_context_or_frame_type", "off_fp_context")                  \
	X(FP_FUNCTION, FP, 1, "off_fp_function", NULL)                                          \
	X(FP_BYTECODE_ARRAY, FP, 1, "off_fp_bytecode_array", NULL)                              \
	X(FP_BYTECODE_OFFSET, FP, 1, "off_fp_bytecode_offset", NULL)                            \
	X(FT_ENTRY, FTYPE, 1, "frametype_EntryFrame", NULL)                                     \
	X(FT_CONSTRUCT_ENTRY, FTYPE, 1, "frametype_ConstructEntryFrame", NULL)                  \
	X(FT_EXIT, FTYPE, 1, "frametype_ExitFrame", NULL)                                       \
	X(FT_BUILTIN_EXIT, FTYPE, 0, "frametype_BuiltinExitFrame", NULL)                        \
	X(FT_INTERPRETED, FTYPE, 1, "frametype_InterpretedFrame", NULL)                         \
	X(FT_BASELINE, FTYPE, 0, "frametype_BaselineFrame", NULL)                               \
	X(FT_MAGLEV, FTYPE, 0, "frametype_MaglevFrame", NULL)                                   \
	X(FT_TURBOFAN, FTYPE, 1, "frametype_TurbofanFrame", "frametype_OptimizedFrame")         \
	X(FT_STUB, FTYPE, 1, "frametype_StubFrame", NULL)                                       \
	X(FT_INTERNAL, FTYPE, 1, "frametype_InternalFrame", NULL)                               \
	X(FT_CONSTRUCT, FTYPE, 0, "frametype_ConstructFrame", NULL)                             \
	X(FT_BUILTIN, FTYPE, 0, "frametype_BuiltinFrame", NULL)                                 \
	X(SMI_TAG, SMALL, 1, "SmiTag", NULL)                                                    \
	X(SMI_TAG_MASK, SMALL, 1, "SmiTagMask", NULL)                                           \
	X(SMI_SHIFT, SMALL, 1, "SmiShiftSize", NULL)                                            \
	X(HEAP_TAG, SMALL, 1, "HeapObjectTag", NULL)                                            \
	X(HEAP_TAG_MASK, SMALL, 1, "HeapObjectTagMask", NULL)                                   \
	X(POINTER_SIZE, SMALL, 1, "SystemPointerSize", NULL)                                    \
	X(TAGGED_SIZE, SMALL, 0, "TaggedSize", NULL)                                            \
	X(T_JS_FUNCTION, ITYPE, 1, "type_JSFunction__JS_FUNCTION_TYPE", NULL)                   \
	X(T_SFI, ITYPE, 2, "type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", NULL)          \
	X(T_SCRIPT, ITYPE, 2, "type_Script__SCRIPT_TYPE", NULL)                                 \
	X(T_BYTECODE_ARRAY, ITYPE, 2, "type_BytecodeArray__BYTECODE_ARRAY_TYPE", NULL)          \
	X(T_CODE, ITYPE, 0, "type_Code__CODE_TYPE", NULL)                                       \
	X(T_SCOPE_INFO, ITYPE, 0, "type_ScopeInfo__SCOPE_INFO_TYPE", NULL)                      \
	X(FIRST_NONSTRING, ITYPE, 2, "FirstNonstringType", NULL)                                \
	X(STR_NOT_STRING_MASK, ANY, 2, "IsNotStringMask", NULL)                                 \
	X(STR_TAG, SMALL, 2, "StringTag", NULL)                                                 \
	X(STR_ENCODING_MASK, SMALL, 2, "StringEncodingMask", NULL)                              \
	X(STR_REPR_MASK, SMALL, 2, "StringRepresentationMask", NULL)                            \
	X(STR_SEQ, SMALL, 2, "SeqStringTag", NULL)                                              \
	X(STR_CONS, SMALL, 2, "ConsStringTag", NULL)                                            \
	X(STR_THIN, SMALL, 0, "ThinStringTag", NULL)                                            \
	X(STR_ONE_BYTE, SMALL, 2, "OneByteStringTag", NULL)                                     \
	X(STR_TWO_BYTE, SMALL, 2, "TwoByteStringTag", NULL)                                     \
	X(O_MAP, OFF, 1, "class_HeapObject__map__Map", NULL)                                    \
	X(O_MAP_TYPE, OFF, 1, "class_Map__instance_type__uint16_t", NULL)                       \
	X(O_FN_SHARED, OFF, 1, "class_JSFunction__shared__SharedFunctionInfo", NULL)            \
	X(O_SFI_NAME, OFF, 2, "class_SharedFunctionInfo__name_or_scope_info__Object", NULL)     \
	X(O_SFI_SCRIPT, OFF, 2, "class_SharedFunctionInfo__script_or_debug_info__HeapObject",   \
	  "class_SharedFunctionInfo__script_or_debug_info__Object "                             \
	  "class_SharedFunctionInfo__raw_script__Object")                                       \
	X(O_SFI_DATA, OFF, 0, "class_SharedFunctionInfo__function_data__Object", NULL)          \
	X(O_SCRIPT_NAME, OFF, 2, "class_Script__name__Object", NULL)                            \
	X(O_SCRIPT_SOURCE, OFF, 0, "class_Script__source__Object", NULL)                        \
	X(O_SCRIPT_LINE_ENDS, OFF, 0, "class_Script__line_ends__Object", NULL)                  \
	X(O_STR_LENGTH, OFF, 2, "class_String__length__int32_t", NULL)                          \
	X(O_SEQ1_CHARS, OFF, 2, "class_SeqOneByteString__chars__char", NULL)                    \
	X(O_SEQ2_CHARS, OFF, 2, "class_SeqTwoByteString__chars__char", NULL)                    \
	X(O_CONS_FIRST, OFF, 2, "class_ConsString__first__String", NULL)                        \
	X(O_CONS_SECOND, OFF, 2, "class_ConsString__second__String", NULL)                      \
	X(O_THIN_ACTUAL, OFF, 0, "class_ThinString__actual__String", NULL)                      \
	X(O_FA_LENGTH, OFF, 0, "class_FixedArrayBase__length__SMI", NULL)                       \
	X(O_FA_DATA, OFF, 0, "class_FixedArray__data__uintptr_t", NULL)                          \
	X(O_BYTECODE_DATA, OFF, 0, "class_BytecodeArray__data__uintptr_t", NULL)                \
	X(T_BYTE_ARRAY, ITYPE, 0, "type_ByteArray__BYTE_ARRAY_TYPE", NULL)                      \
	X(T_FIXED_ARRAY, ITYPE, 0, "type_FixedArray__FIXED_ARRAY_TYPE", NULL)                   \
	X(SI_FIRST_VARS, SMALL, 0, "scopeinfo_idx_first_vars", NULL)                            \
	X(SI_NCONTEXT_LOCALS, SMALL, 0, "scopeinfo_idx_ncontextlocals", NULL)                    \
	X(T_INTERNALIZED, ITYPE, 0, "type_InternalizedString__ONE_BYTE_INTERNALIZED_STRING_TYPE",      \
	  "type_InternalizedString__INTERNALIZED_ONE_BYTE_STRING_TYPE")                         \
	X(T_INSTRUCTION_STREAM, ITYPE, 0, "type_InstructionStream__INSTRUCTION_STREAM_TYPE", NULL) \
	X(O_IS_START, OFF, 0, "class_InstructionStream__instruction_start__uintptr_t", NULL)    \
	X(O_CODE_DEOPT, OFF, 0, "class_Code__deoptimization_data__FixedArray", NULL)            \
	X(O_CODE_SPT, OFF, 0, "class_Code__source_position_table__ByteArray", NULL)             \
	X(DD_INLINED_COUNT, SMALL, 0, "DeoptimizationDataInlinedFunctionCountIndex", NULL)      \
	X(DD_LITERALS, SMALL, 0, "DeoptimizationDataLiteralArrayIndex", NULL)                   \
	X(DD_SFI, SMALL, 0, "DeoptimizationDataSharedFunctionInfoIndex", NULL)                  \
	X(DD_INLINING_POSITIONS, SMALL, 0, "DeoptimizationDataInliningPositionsIndex", NULL)    \
	X(CODE_KIND_MASK, SMALL, 0, "CodeKindFieldMask", NULL)                                  \
	X(CODE_KIND_BASELINE, SMALL, 0, "CodeKindBaseline", NULL)                               \
	X(O_CODE_START, OFF, 0, "class_Code__instruction_start__uintptr_t", NULL)               \
	X(O_CODE_SIZE, OFF, 0, "class_Code__instruction_size__int", NULL)                       \
	X(O_CODE_FLAGS, OFF, 0, "class_Code__flags__uint32_t", NULL)                            \
	X(O_CODE_WRAPPER, OFF, 0, "class_Code__wrapper__CodeWrapper", NULL)                     \
	X(O_CODE_ISTREAM, OFF, 0, "class_Code__instruction_stream__InstructionStream", NULL)     \
	X(T_TRUSTED_FIXED_ARRAY, ITYPE, 0, "type_TrustedFixedArray__TRUSTED_FIXED_ARRAY_TYPE", NULL) \
	X(T_TRUSTED_BYTE_ARRAY, ITYPE, 0, "type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE", NULL) \
	X(O_BA_WRAPPER, OFF, 0, "class_BytecodeArray__wrapper__BytecodeWrapper", NULL)

#define V8_CONST_ENUM(id, kind, need, name, old) V8_##id,
enum v8_const { V8_CONSTS(V8_CONST_ENUM) V8__N };
#undef V8_CONST_ENUM

/* What a sane value of each kind is (a forged table gets no further). */
enum v8_kind {
	V8K_FP,    /* a frame slot: a multiple of 8 within 256 bytes of the frame pointer */
	V8K_FTYPE, /* a frame type: 0..63 (on the stack as a marker, type << 1) */
	V8K_ITYPE, /* an instance type: 0..0xffff */
	V8K_OFF,   /* a field's offset in its object: 0..1023 */
	V8K_SMALL, /* a tag, mask or size: 0..255 */
	V8K_ANY,
};

/* The v8dbg_ symbols looked at (a forged binary may have any number). */
#define V8_MAX_SYMS 100000

struct v8_meta {
	bool found;              /* a V8 whose metadata the walk can use */
	bool is_v8;              /* V8's embedded builtins (Builtins_*) are there */
	int32_t v[V8__N];        /* the values */
	uint8_t has[V8__N];      /* 1: read */
	uint32_t nsyms;          /* v8dbg_ symbols seen */
	uint64_t builtins_lo, builtins_hi; /* ELF vaddrs of the Builtins_* code (is_v8) */
	uint64_t bc_sizes;       /* ELF vaddr of Bytecodes::kBytecodeSizes (0: not found) */
	uint32_t bc_count;       /* its row length: V8's bytecode count */
	int bad;                 /* the constant that failed the check, or -1 */
};

/* Fills *ret from elf's symbol tables (.dynsym, else .symtab) and the bytes of the
 * sections they point into. Returns 0 when elf is no V8 (ret->is_v8 and ret->nsyms 0)
 * or a V8 prowl can walk (ret->found); a negative errno when it is a V8 prowl cannot:
 * -ENODATA (no v8dbg_ symbols: built without post-mortem support), -ENOENT (a constant
 * the walk or naming needs is missing), -EBADMSG (a value out of its kind's range),
 * -EOPNOTSUPP (pointer compression or 32-bit pointers). v8_meta_why() says which. */
int v8_meta_read(Elf *elf, struct v8_meta *ret);

/* One line for the warning of error r of v8_meta_read (m as it filled it), in buf. */
const char *v8_meta_why(const struct v8_meta *m, int r, char *buf, size_t len);

/* The name of constant i without "v8dbg_", or NULL. */
const char *v8_const_name(unsigned int i);

/* Frame type t as it stands in a frame's context slot (a small integer, tagged). */
static inline uint64_t v8_frame_marker(const struct v8_meta *m, enum v8_const t)
{
	return ((uint64_t)(uint32_t)m->v[t] << 1) | (uint32_t)m->v[V8_SMI_TAG];
}

#endif

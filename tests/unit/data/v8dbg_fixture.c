/* v8dbg_fixture.c: V8's post-mortem constants as Node 20 (V8 11.3) exports them, for the
 * tests of symbolizer/node/v8meta.c: cc -shared -fPIC, with -D knobs to forge or drop some. */
#ifndef FP_FUNCTION
#define FP_FUNCTION (-16)
#endif
#ifndef TAGGED_SIZE
#define TAGGED_SIZE 8
#endif

int v8dbg_off_fp_context_or_frame_type = -8;
#ifndef DROP_FP_FUNCTION
int v8dbg_off_fp_function = FP_FUNCTION;
#endif
int v8dbg_off_fp_bytecode_array = -32;
int v8dbg_off_fp_bytecode_offset = -40;
int v8dbg_frametype_EntryFrame = 1;
int v8dbg_frametype_ConstructEntryFrame = 2;
int v8dbg_frametype_ExitFrame = 3;
int v8dbg_frametype_BuiltinExitFrame = 25;
int v8dbg_frametype_InterpretedFrame = 13;
int v8dbg_frametype_BaselineFrame = 14;
int v8dbg_frametype_MaglevFrame = 15;
#ifdef OLD_NAMES
int v8dbg_frametype_OptimizedFrame = 16;
#else
int v8dbg_frametype_TurbofanFrame = 16;
#endif
int v8dbg_frametype_StubFrame = 17;
int v8dbg_frametype_InternalFrame = 22;
int v8dbg_frametype_ConstructFrame = 23;
int v8dbg_frametype_BuiltinFrame = 24;
int v8dbg_SmiTag; /* zero: in .bss, as in node */
int v8dbg_SmiTagMask = 1;
int v8dbg_SmiShiftSize = 31;
int v8dbg_HeapObjectTag = 1;
int v8dbg_HeapObjectTagMask = 3;
int v8dbg_SystemPointerSize = 8;
int v8dbg_TaggedSize = TAGGED_SIZE;
int v8dbg_type_JSFunction__JS_FUNCTION_TYPE = 2066;
int v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE = 262;
int v8dbg_type_Script__SCRIPT_TYPE = 167;
int v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE = 191;
int v8dbg_type_Code__CODE_TYPE = 245;
int v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE = 261;
int v8dbg_FirstNonstringType = 128;
int v8dbg_IsNotStringMask = -128;
int v8dbg_StringTag; /* zero: in .bss, as in node */
int v8dbg_StringEncodingMask = 8;
int v8dbg_StringRepresentationMask = 7;
int v8dbg_SeqStringTag; /* zero: in .bss, as in node */
int v8dbg_ConsStringTag = 1;
int v8dbg_ThinStringTag = 5;
int v8dbg_OneByteStringTag = 8;
int v8dbg_TwoByteStringTag; /* zero: in .bss, as in node */
int v8dbg_class_HeapObject__map__Map; /* zero: in .bss, as in node */
int v8dbg_class_Map__instance_type__uint16_t = 12;
int v8dbg_class_JSFunction__shared__SharedFunctionInfo = 24;
#ifdef V8_12_NAMES /* Node 22's spelling: "Tagged_T_" types, script as raw_script */
int v8dbg_class_SharedFunctionInfo__name_or_scope_info__Tagged_Object_ = 16;
int v8dbg_class_SharedFunctionInfo__raw_script__Tagged_Object_ = 32;
#else
int v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object = 16;
int v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject = 32;
#endif
int v8dbg_class_SharedFunctionInfo__function_data__Object = 8;
int v8dbg_class_Script__name__Object = 16;
int v8dbg_class_Script__source__Object = 8;
int v8dbg_class_Script__line_ends__Object = 56;
int v8dbg_class_String__length__int32_t = 12;
int v8dbg_class_SeqOneByteString__chars__char = 16;
int v8dbg_class_SeqTwoByteString__chars__char = 16;
int v8dbg_class_ConsString__first__String = 16;
int v8dbg_class_ConsString__second__String = 24;
int v8dbg_class_ThinString__actual__String = 16;
int v8dbg_class_FixedArrayBase__length__SMI = 8;
int v8dbg_class_FixedArray__data__uintptr_t = 16;
int v8dbg_class_BytecodeArray__data__uintptr_t = 54;
int v8dbg_type_ByteArray__BYTE_ARRAY_TYPE = 190;
int v8dbg_type_FixedArray__FIXED_ARRAY_TYPE = 175;
int v8dbg_scopeinfo_idx_first_vars = 3;
int v8dbg_scopeinfo_idx_ncontextlocals = 2;
#ifdef V8_12_NAMES
int v8dbg_type_InternalizedString__INTERNALIZED_ONE_BYTE_STRING_TYPE = 8;
#else
int v8dbg_type_InternalizedString__ONE_BYTE_INTERNALIZED_STRING_TYPE = 8;
#endif
int v8dbg_type_InstructionStream__INSTRUCTION_STREAM_TYPE = 252;
int v8dbg_class_InstructionStream__instruction_start__uintptr_t = 16;
int v8dbg_class_Code__deoptimization_data__FixedArray = 16;
int v8dbg_class_Code__source_position_table__ByteArray = 24;
int v8dbg_DeoptimizationDataInlinedFunctionCountIndex = 1;
int v8dbg_DeoptimizationDataLiteralArrayIndex = 2;
int v8dbg_DeoptimizationDataSharedFunctionInfoIndex = 6;
int v8dbg_DeoptimizationDataInliningPositionsIndex = 7;
int v8dbg_CodeKindFieldMask = 15;
int v8dbg_CodeKindBaseline = 11;
/* Node 18's (V8 10.2's Code in code space; Node 20 has none of these). */
int v8dbg_class_Code__instruction_start__uintptr_t = 128;
int v8dbg_class_Code__instruction_size__int = 40;
int v8dbg_class_Code__flags__uint32_t = 48;
/* Node 22's (V8 12.4's Code beside its InstructionStream, its arrays in trusted space). */
int v8dbg_class_Code__wrapper__Tagged_CodeWrapper_ = 24;
int v8dbg_class_Code__instruction_stream__Tagged_InstructionStream_ = 32;
int v8dbg_type_TrustedFixedArray__TRUSTED_FIXED_ARRAY_TYPE = 213;
int v8dbg_type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE = 212;
int v8dbg_class_BytecodeArray__wrapper__Tagged_BytecodeWrapper_ = 16;

/* V8's embedded builtins, which name the binary as a V8 with or without the constants
 * (-DNO_BUILTINS: their symbols stripped). */
#ifndef NO_BUILTINS
void Builtins_InterpreterEntryTrampoline(void) {}
void Builtins_JSEntry(void) {}
#endif

/* V8's bytecode lengths (uint8_t[3][count]), read by symbol, not from v8dbg_. */
#ifndef NO_BYTECODE_SIZES
const unsigned char _ZN2v88internal11interpreter9Bytecodes14kBytecodeSizesE[3][6] = {
	{ 1, 1, 1, 1, 2, 3 }, { 1, 1, 1, 1, 3, 5 }, { 1, 1, 1, 1, 5, 9 },
};
#endif

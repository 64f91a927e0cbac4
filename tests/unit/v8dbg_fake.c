/* V8's postmortem constants as node 20's V8 (11.3) exports them, for
 * test_v8.c to read back from a shared object built of this file:
 * -DTAGGED=4 says pointer compression, -DNO_SCRIPT_NAME leaves one constant
 * out, -DV8_13 spells and places what differs as node 24's V8 (13.6) does
 * (the SharedFunctionInfo's fields as Tagged_T_, JSFunction::shared
 * further, a ScopeInfo's positions in fixed slots before its variables).
 * Not V8: values only. */
#ifndef TAGGED
#define TAGGED 8
#endif
#define K(name, v) __attribute__((used)) const int v8dbg_##name = v;
K(TaggedSize, TAGGED)
K(HeapObjectTag, 1)
K(HeapObjectTagMask, 3)
K(SmiTagMask, 1)
K(off_fp_function, -16)
K(off_fp_context, -8)
K(class_Map__instance_type__uint16_t, 12)
#ifdef V8_13
K(class_JSFunction__shared__SharedFunctionInfo, 32)
K(class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_, 24)
K(class_SharedFunctionInfo__raw_script__Tagged_Object_, 40)
K(class_SharedFunctionInfo__script__Tagged_HeapObject_, 40)
#else
K(class_JSFunction__shared__SharedFunctionInfo, 24)
K(class_SharedFunctionInfo__name_or_scope_info__Object, 16)
K(class_SharedFunctionInfo__script_or_debug_info__HeapObject, 32)
#endif
#ifndef NO_SCRIPT_NAME
K(class_Script__name__Object, 16)
#endif
K(class_Script__source__Object, 8)
K(class_Script__line_ends__Object, 56)
K(class_FixedArrayBase__length__SMI, 8)
K(class_FixedArray__data__uintptr_t, 16)
K(class_String__length__int32_t, 12)
K(class_SeqOneByteString__chars__char, 16)
K(class_SeqTwoByteString__chars__char, 16)
K(class_ConsString__first__String, 16)
K(class_ConsString__second__String, 24)
K(class_ThinString__actual__String, 16)
K(class_SlicedString__parent__String, 16)
K(class_SlicedString__offset__SMI, 24)
K(scopeinfo_idx_ncontextlocals, 2)
#ifdef V8_13
K(scopeinfo_idx_first_vars, 5)
#else
K(scopeinfo_idx_first_vars, 3)
#endif
K(type_JSFunction__JS_FUNCTION_TYPE, 2066)
K(type_JSAtomicsCondition__JS_ATOMICS_CONDITION_TYPE, 2097)
K(type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE, 262)
K(type_ScopeInfo__SCOPE_INFO_TYPE, 261)
K(type_Script__SCRIPT_TYPE, 167)
K(type_FixedArray__FIXED_ARRAY_TYPE, 175)
K(FirstNonstringType, 128)
K(StringRepresentationMask, 7)
K(StringEncodingMask, 8)
K(SeqStringTag, 0)
K(ConsStringTag, 1)
K(SlicedStringTag, 3)
K(ThinStringTag, 5)
K(OneByteStringTag, 8)

/* array_size.h: ARRAY_SIZE, the number of elements of an array (not of a pointer:
 * that fails to compile), defined once for every stage. */
#ifndef PROWL_ARRAY_SIZE_H
#define PROWL_ARRAY_SIZE_H

/* 0 for an array, a compile error for a pointer (GCC and clang builtins). */
#define ARRAY_SIZE_MUST_BE_ARRAY(a) \
	(sizeof(struct { int _: 1 - 2 * __builtin_types_compatible_p(__typeof__(a), __typeof__(&(a)[0])); }) * 0)
/* libiberty's demangle.h has one too: this one wins where both are included (after it). */
#undef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]) + ARRAY_SIZE_MUST_BE_ARRAY(a))

#endif

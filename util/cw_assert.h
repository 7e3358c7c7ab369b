/*
 * Invariants said in code, not in comments.  CW_ASSERT(cond) is on where
 * NDEBUG is not defined: debug builds and the sanitizer builds
 * (debugoptimized); meson's b_ndebug=if-release turns it off in release
 * builds, where @p cond is not evaluated (but still compiled, so that what
 * it names stays in use).  A failed assertion prints where and what on
 * stderr and aborts.
 */
#ifndef CW_ASSERT_H
#define CW_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#ifdef NDEBUG
#define CW_ASSERTS      0
#define CW_ASSERT(cond) ((void)sizeof((cond) ? 1 : 0))
#else
#define CW_ASSERTS 1
#define CW_ASSERT(cond)                                                        \
    ((cond) ? (void)0 : cw_assert_fail(#cond, __FILE__, __LINE__, __func__))
#endif

/** Report a failed CW_ASSERT and abort. */
static inline _Noreturn void cw_assert_fail(const char *expr, const char *file,
                                            int line, const char *func)
{
    fprintf(stderr, "causeway: %s:%d: %s: assertion failed: %s\n", file, line,
            func, expr);
    fflush(stderr);
    abort();
}

#endif /* CW_ASSERT_H */

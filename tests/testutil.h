/* Shared by the cmocka test programs: cmocka needs these headers first, in this order. */
#ifndef LATHE_TESTUTIL_H
#define LATHE_TESTUTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

/* Asserts that haystack contains needle, printing both when it does not. */
#define assert_contains(haystack, needle)                                                                              \
  do {                                                                                                                 \
    const char *h_ = (haystack), *n_ = (needle);                                                                       \
    if (!h_ || !strstr(h_, n_)) fail_msg("expected to find \"%s\" in:\n%s", n_, h_ ? h_ : "(null)");                   \
  } while (0)
#endif

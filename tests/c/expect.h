/* SPDX-License-Identifier: Apache-2.0 */
/* expect.h - EXPECT(cond) for the strict-C11 tests: counts failures, printing each with the C ABI's last error. */
#ifndef TERNJIT_TESTS_C_EXPECT_H
#define TERNJIT_TESTS_C_EXPECT_H

#include <stdio.h>

#include "ternjit/ternjit.h"

/* The failures so far; main returns non-zero when any. */
static int failures = 0;
#define EXPECT(cond)                                                              \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s:%d: FAILED: %s (%s)\n", __FILE__, __LINE__, #cond,      \
              ternjit_last_error());                                              \
      ++failures;                                                                 \
    }                                                                             \
  } while (0)

#endif

// SPDX-License-Identifier: Apache-2.0
// intrinsics.h - <immintrin.h> for the x86 step files written with compiler intrinsics. Private.
//
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() as an unused merge source, which
// -Wuninitialized / -Wmaybe-uninitialized report (a false positive). The warnings are off
// while the header is read and stay off for the rest of the including file, where the
// intrinsics are inlined (the warning is reported there). Include it only from .cpp files.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

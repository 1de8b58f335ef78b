// SPDX-License-Identifier: Apache-2.0
// test_main.cpp - doctest's main for every unit-test binary.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

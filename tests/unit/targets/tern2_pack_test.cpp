// SPDX-License-Identifier: Apache-2.0
// tern2_pack_test.cpp - the CPU targets' shared tern2 packing steps (targets/common/tern2_pack.h)
// against one-field-at-a-time definitions, at every start alignment and length tail.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "targets/common/tern2_pack.h"

namespace ternjit {
namespace {

int field(const std::vector<std::uint8_t>& bytes, std::size_t i) { return (bytes[i / 4] >> (2 * (i % 4))) & 3; }

std::vector<std::uint8_t> random_tern2(std::size_t weights, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> b((weights + 3) / 4);
  for (std::size_t i = 0; i < weights; ++i) b[i / 4] |= static_cast<std::uint8_t>((rng() % 3) << (2 * (i % 4)));
  return b;
}

TEST_CASE("tern2_fields: every start alignment and length, the SSE2 blocks and the tails") {
  const std::vector<std::uint8_t> bytes = random_tern2(1000, 1);
  for (std::size_t i0 : {0, 1, 2, 3, 4, 5, 63, 64, 130})
    for (std::size_t n : {0, 1, 3, 4, 5, 63, 64, 65, 127, 128, 200, 600}) {
      std::vector<std::uint8_t> out(n + 1, 0xee);
      targets::tern2_fields(bytes.data(), i0, n, out.data());
      for (std::size_t c = 0; c < n; ++c)
        if (out[c] != field(bytes, i0 + c)) FAIL("i0 " << i0 << " n " << n << ": code " << c << " is " << int(out[c]));
      CHECK(out[n] == 0xee);  // nothing written past n
    }
}

TEST_CASE("tern2_first_invalid finds the first field 3 wherever it is, and only there") {
  const std::size_t total = 700;
  const std::vector<std::uint8_t> clean = random_tern2(total, 2);
  for (std::size_t i0 : {0, 1, 3, 4, 37})
    for (std::size_t n : {1, 5, 31, 32, 33, 64, 300, 600}) {
      CHECK(targets::tern2_first_invalid(clean.data(), i0, n) == n);
      for (std::size_t at : {std::size_t{0}, n / 3, n - 1}) {
        std::vector<std::uint8_t> bad = clean;
        const std::size_t i = i0 + at;
        bad[i / 4] |= static_cast<std::uint8_t>(3 << (2 * (i % 4)));
        // A second bad field later: the first one is reported.
        if (at + 7 < n) bad[(i + 7) / 4] |= static_cast<std::uint8_t>(3 << (2 * ((i + 7) % 4)));
        CHECK_MESSAGE(targets::tern2_first_invalid(bad.data(), i0, n) == at, "i0 " << i0 << " n " << n << " at " << at);
        // Outside the range it is not seen.
        if (at == 0 && i0 > 0) CHECK(targets::tern2_first_invalid(bad.data(), 0, i0) == i0);
      }
    }
}

TEST_CASE("interleave_codes4: byte 4 j + r holds row r's codes at columns j, L + j, 2L + j, 3L + j") {
  std::mt19937 rng(3);
  for (int L : {4, 8, 16, 12}) {
    const std::ptrdiff_t stride = 4 * L + 5;  // rows farther apart than one group
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(4 * stride));
    for (auto& c : codes) c = static_cast<std::uint8_t>(rng() % 4);  // 3 included: the interleave never looks
    std::vector<std::uint8_t> out(static_cast<std::size_t>(4 * L + 1), 0xee);
    targets::interleave_codes4(codes.data(), stride, L, out.data());
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < L; ++j) {
        const std::uint8_t* c = codes.data() + r * stride;
        const int want = c[j] | c[L + j] << 2 | c[2 * L + j] << 4 | c[3 * L + j] << 6;
        CHECK_MESSAGE(out[static_cast<std::size_t>(4 * j + r)] == want, "L " << L << " r " << r << " j " << j);
      }
    CHECK(out[static_cast<std::size_t>(4 * L)] == 0xee);
  }
}

TEST_CASE("interleave_tern2_group: the bytes interleave_codes4 makes from the same rows' codes, L = 8 and 16") {
  std::mt19937 rng(5);
  CHECK(targets::tern2_direct_columns(130, 16) == 0);  // rows not on whole bytes: never direct
  for (int L : {8, 16}) {
    const std::size_t G = static_cast<std::size_t>(4 * L), N = 3 * G + 8, K = 9;
    const std::size_t direct = targets::tern2_direct_columns(N, L);
    if (direct == 0) {
      MESSAGE("no direct tern2 interleave for L = " << L << " on this host");
      continue;
    }
    CHECK(direct == 3 * G);  // whole groups only: the last 8 columns go through the codes
    for (int rep = 0; rep < 20; ++rep) {
      // A K x N matrix of random bytes: every field value, 3 included (a pure permutation
      // of fields either way).
      std::vector<std::uint8_t> bytes(K * N / 4);
      for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
      for (std::size_t k0 : {std::size_t{0}, std::size_t{5}})
        for (std::size_t c0 = 0; c0 + G <= direct; c0 += G) {
          std::vector<std::uint8_t> codes(4 * G);
          for (std::size_t r = 0; r < 4; ++r) targets::tern2_fields(bytes.data(), (k0 + r) * N + c0, G, codes.data() + r * G);
          std::vector<std::uint8_t> want(G), got(G + 1, 0xee);
          targets::interleave_codes4(codes.data(), static_cast<std::ptrdiff_t>(G), L, want.data());
          targets::interleave_tern2_group(bytes.data(), N, k0, c0, L, got.data());
          CHECK(got[G] == 0xee);
          got.pop_back();
          CHECK_MESSAGE(got == want, "L " << L << " rep " << rep << " k0 " << k0 << " c0 " << c0);
        }
    }
  }
}

TEST_CASE("interleave_base3_codes4: byte 4 j + r is row r's five codes L apart in base 3") {
  std::mt19937 rng(4);
  for (int L : {16, 8, 4}) {
    const std::ptrdiff_t stride = 5 * L + 3;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(4 * stride));
    for (auto& c : codes) c = static_cast<std::uint8_t>(rng() % 3);
    codes[0] = codes[static_cast<std::size_t>(L)] = codes[static_cast<std::size_t>(2 * L)] = 2;  // byte 242: the largest
    codes[static_cast<std::size_t>(3 * L)] = codes[static_cast<std::size_t>(4 * L)] = 2;
    std::vector<std::uint8_t> out(static_cast<std::size_t>(4 * L + 1), 0xee);
    targets::interleave_base3_codes4(codes.data(), stride, L, out.data());
    CHECK(out[0] == 242);
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < L; ++j) {
        const std::uint8_t* c = codes.data() + r * stride;
        const int want = c[j] + 3 * c[L + j] + 9 * c[2 * L + j] + 27 * c[3 * L + j] + 81 * c[4 * L + j];
        CHECK_MESSAGE(out[static_cast<std::size_t>(4 * j + r)] == want, "L " << L << " r " << r << " j " << j);
      }
    CHECK(out[static_cast<std::size_t>(4 * L)] == 0xee);
  }
}

}  // namespace
}  // namespace ternjit

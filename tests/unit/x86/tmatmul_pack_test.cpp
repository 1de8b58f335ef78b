// SPDX-License-Identifier: Apache-2.0
// tmatmul_pack_test.cpp - packing tern2 codes (a byte of four codes at a time) gives the same panels as packing
// int8 values, at every alignment of a weight row; invalid codes are still found and named.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "ir/stored_tensor.h"
#include "ir/tensor.h"
#include "targets/x86/isa.h"
#include "targets/x86/tmatmul.h"

namespace ternjit::targets::x86 {
namespace {

TEST_CASE("tmatmul i8 pack: tern2 codes and int8 values give the same bytes, odd K and N, every variant") {
  struct Shape {
    std::int64_t K, N;
  };
  for (const Shape s : {Shape{1, 1}, Shape{7, 13}, Shape{64, 64}, Shape{100, 37}, Shape{257, 130}, Shape{33, 300}}) {
    const std::vector<std::int8_t> values =
        ir::HostTensor::random(ElemKind::T2, {s.K * s.N}, static_cast<std::uint64_t>(s.K * 31 + s.N)).to_i8();
    auto codes = ir::pack_tern2(values);
    REQUIRE(codes.ok());
    for (Isa isa : {Isa::Avx2, Isa::Avx512Vnni})
      for (TMatMulVariant v : {TMatMulVariant::Dot, TMatMulVariant::MaskDot, TMatMulVariant::Base3})
        for (std::int64_t M : {1, 8}) {
          CAPTURE(s.K);
          CAPTURE(s.N);
          CAPTURE(isa_name(isa));
          CAPTURE(M);
          TMatMulProblem p;
          p.M = M;
          p.K = s.K;
          p.N = s.N;
          TMatMulConfig c = default_config(p, isa, 1);
          c.variant = v;
          if (v == TMatMulVariant::Base3) c.n_block = 160;  // base3 panels are whole 80-column groups
          if (!validate(p, c).ok()) continue;  // base3: avx512_vnni with VBMI, K <= 131071
          auto k = TMatMulKernel::create(p, c, /*allow_foreign_isa=*/true);
          REQUIRE(k.ok());
          auto a = (*k)->pack(values);
          auto b = (*k)->pack(TernaryWeights::tern2(codes.value(), values.size()));
          REQUIRE(a.ok());
          REQUIRE(b.ok());
          REQUIRE(a->size == b->size);
          CHECK(std::memcmp(a->data(), b->data(), a->size) == 0);
        }
  }
}

TEST_CASE("tmatmul i8 pack: an invalid tern2 code anywhere is an error naming its index") {
  TMatMulProblem p;
  p.K = 64;
  p.N = 65;
  auto k = TMatMulKernel::create(p, default_config(p, Isa::Avx2, 1), true);
  REQUIRE(k.ok());
  const std::size_t n = static_cast<std::size_t>(p.K * p.N);
  for (std::size_t bad : {std::size_t{0}, std::size_t{5}, std::size_t{37}, std::size_t{2000}, n - 1}) {
    CAPTURE(bad);
    std::vector<std::uint8_t> codes(ir::tern2_size(n), 0x55);  // all zeros
    codes[bad / 4] |= static_cast<std::uint8_t>(3u << (2 * (bad % 4)));
    auto r = (*k)->pack(TernaryWeights::tern2(codes, n));
    REQUIRE(!r.ok());
    CHECK_MESSAGE(r.error().message.find("index " + std::to_string(bad) + " ") != std::string::npos,
                  r.error().message);
  }
}

}  // namespace
}  // namespace ternjit::targets::x86

// SPDX-License-Identifier: Apache-2.0
// interpret_ops_test.cpp - the semantics of every op on small hand-computed examples.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "ir/builder.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/verify.h"

namespace ternjit::ir {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr ElemKind F32 = ElemKind::F32;
constexpr ElemKind F16 = ElemKind::F16;
constexpr ElemKind BF16 = ElemKind::BF16;
constexpr ElemKind I8 = ElemKind::I8;
constexpr ElemKind U8 = ElemKind::U8;
constexpr ElemKind I32 = ElemKind::I32;
constexpr ElemKind T2 = ElemKind::T2;
constexpr ElemKind Bool = ElemKind::Bool;

Type ty(ElemKind k, std::vector<Dim> dims) { return Type{k, std::move(dims)}; }
Dim fx(std::int64_t e) { return Dim::fixed(e); }

HostTensor T(ElemKind k, std::vector<std::int64_t> shape, std::vector<double> v) {
  return HostTensor::from_values(k, std::move(shape), v);
}

Type static_type(const HostTensor& t) {
  Type out{t.kind, {}};
  for (std::int64_t e : t.shape) out.shape.push_back(fx(e));
  return out;
}

void expect_eq(const HostTensor& want, const HostTensor& got, double rtol = 0, double atol = 0) {
  auto mm = compare(want, got, rtol, atol);
  CHECK_MESSAGE(!mm.has_value(), (mm ? mm->message : std::string()));
}

// Builds @f(%a0: static type of args[0], ...) { %r... = op(%a0, ...); ret %r... } with
// ir::Builder and interprets it.
Result<std::vector<HostTensor>> run_op(Op op, const std::vector<HostTensor>& args, Attrs attrs = NoAttrs{},
                                       std::vector<Type> declared = {}, const ParamValues& params = {}) {
  Module m;
  Function& f = m.functions().emplace_back("f");
  BlockId b = f.add_block("entry");
  std::vector<ValueId> vals;
  for (const HostTensor& a : args) vals.push_back(f.add_block_arg(b, static_type(a)));
  Builder bld(m, f);
  bld.set_block(b);
  auto r = bld.create(op, vals, std::move(attrs), std::move(declared));
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  std::vector<Type> rt;
  for (ValueId v : *r) rt.push_back(f.type_of(v));
  f.set_result_types(rt);
  REQUIRE(bld.create(Op::Ret, *r).ok());
  REQUIRE(verify_module(m).empty());  // the tests run valid IR only
  return interpret(m, f, args, params);
}

// run_op for ops with one result; requires success.
HostTensor run1(Op op, const std::vector<HostTensor>& args, Attrs attrs = NoAttrs{}, std::vector<Type> declared = {}) {
  auto r = run_op(op, args, std::move(attrs), std::move(declared));
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  REQUIRE(r->size() == 1);
  return r->front();
}

std::vector<double> iota(int n, double start = 0) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(start + i);
  return v;
}

double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

// ---------------------------------------------------------------- binary

TEST_CASE("binary ops broadcast like NumPy") {
  // [2, 10] + [10]
  HostTensor a = T(F32, {2, 10}, iota(20));
  HostTensor b = T(F32, {10}, iota(10, 100));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 10; ++j) want.push_back(i * 10 + j + 100 + j);
  expect_eq(T(F32, {2, 10}, want), run1(Op::Add, {a, b}));

  // [3, 1] * [1, 4] -> [3, 4] outer product
  HostTensor c = T(F32, {3, 1}, {1, 2, 3});
  HostTensor d = T(F32, {1, 4}, {1, 10, 100, 1000});
  expect_eq(T(F32, {3, 4}, {1, 10, 100, 1000, 2, 20, 200, 2000, 3, 30, 300, 3000}), run1(Op::Mul, {c, d}));

  // scalar - [2, 2] and [2, 2] / scalar
  HostTensor s = HostTensor::scalar(F32, 10);
  HostTensor m = T(F32, {2, 2}, {1, 2, 4, 8});
  expect_eq(T(F32, {2, 2}, {9, 8, 6, 2}), run1(Op::Sub, {s, m}));
  expect_eq(T(F32, {2, 2}, {0.1, 0.2, 0.4, 0.8}), run1(Op::Div, {m, s}));
  expect_eq(T(F32, {2, 2}, {10, 10, 10, 10}), run1(Op::Max, {m, s}));
  expect_eq(T(F32, {2, 2}, {1, 2, 4, 8}), run1(Op::Min, {s, m}));
}

TEST_CASE("binary ops with a symbolic batch dim [N x 10] + [10]") {
  Module m;
  Function& f = m.functions().emplace_back("f");
  SymbolId n = f.symbol("N");
  BlockId b = f.add_block();
  ValueId x = f.add_block_arg(b, ty(F32, {Dim::symbolic(n), fx(10)}), "x");
  ValueId bias = f.add_block_arg(b, ty(F32, {fx(10)}), "bias");
  f.set_result_types({ty(F32, {Dim::symbolic(n), fx(10)})});
  Builder bld(m, f);
  bld.set_block(b);
  auto y = bld.create1(Op::Add, {x, bias});
  REQUIRE(y.ok());
  REQUIRE(bld.create(Op::Ret, {*y}).ok());
  for (std::int64_t rows : {1, 3}) {
    HostTensor xs = HostTensor::zeros(F32, {rows, 10});
    auto r = interpret(m, f, std::vector<HostTensor>{xs, T(F32, {10}, iota(10))}, {});
    REQUIRE(r.ok());
    std::vector<double> want;
    for (std::int64_t i = 0; i < rows; ++i)
      for (int j = 0; j < 10; ++j) want.push_back(j);
    expect_eq(T(F32, {rows, 10}, want), r->front());
  }
}

TEST_CASE("integer arithmetic wraps to the result width") {
  expect_eq(T(I8, {2}, {-56, 127}), run1(Op::Add, {T(I8, {2}, {100, -128}), T(I8, {2}, {100, -1})}));
  expect_eq(T(I8, {1}, {-127 + 0}), run1(Op::Sub, {T(I8, {1}, {-128}), T(I8, {1}, {-1})}));
  expect_eq(T(I8, {1}, {127}), run1(Op::Sub, {T(I8, {1}, {-128}), T(I8, {1}, {1})}));
  expect_eq(T(U8, {2}, {255, 44}), run1(Op::Sub, {T(U8, {2}, {0, 200}), T(U8, {2}, {1, 156})}));
  expect_eq(T(I32, {2}, {0, -2}), run1(Op::Mul, {T(I32, {2}, {65536, 2147483647}), T(I32, {2}, {65536, 2})}));
  expect_eq(T(I32, {1}, {-2147483648.0}), run1(Op::Add, {T(I32, {1}, {2147483647}), T(I32, {1}, {1})}));
  // i8 * i8 stays i8 (promote) and wraps: 16 * 16 = 256 -> 0.
  expect_eq(T(I8, {1}, {0}), run1(Op::Mul, {T(I8, {1}, {16}), T(I8, {1}, {16})}));
  // Mixed integer kinds and t2/bool promote to i32.
  HostTensor mixed = run1(Op::Add, {T(I8, {2}, {127, -128}), T(T2, {2}, {1, -1})});
  expect_eq(T(I32, {2}, {128, -129}), mixed);
  expect_eq(T(I32, {2}, {2, 1}), run1(Op::Add, {T(Bool, {2}, {1, 0}), T(Bool, {2}, {1, 1})}));
  expect_eq(T(I32, {2}, {5, -3}), run1(Op::Max, {T(I32, {2}, {5, -7}), T(I8, {2}, {-3, -3})}));
  expect_eq(T(I32, {2}, {-3, -7}), run1(Op::Min, {T(I32, {2}, {5, -7}), T(I8, {2}, {-3, -3})}));
}

TEST_CASE("integer division truncates toward zero and division by zero is an error") {
  expect_eq(T(I32, {4}, {-3, -3, 3, 3}), run1(Op::Div, {T(I32, {4}, {-7, 7, 7, -7}), T(I32, {4}, {2, -2, 2, -2})}));
  expect_eq(T(I32, {1}, {-2147483648.0}), run1(Op::Div, {T(I32, {1}, {-2147483648.0}), T(I32, {1}, {-1})}));
  expect_eq(T(I8, {1}, {-128}), run1(Op::Div, {T(I8, {1}, {-128}), T(I8, {1}, {-1})}));

  auto r = run_op(Op::Div, {T(I32, {2, 2}, {1, 2, 3, 4}), T(I32, {2}, {1, 0})});
  REQUIRE(!r.ok());
  CHECK(r.error().message == "'div' divides by zero at element [0, 1]");

  // Float division by zero is IEEE.
  expect_eq(T(F32, {3}, {kInf, -kInf, kNaN}), run1(Op::Div, {T(F32, {3}, {1, -1, 0}), T(F32, {3}, {0, 0, 0})}));
}

TEST_CASE("float binary ops compute in f32 and round to the result kind") {
  // f32: 0.1f + 0.2f computed in f32 (not double).
  expect_eq(T(F32, {1}, {static_cast<double>(0.1f + 0.2f)}), run1(Op::Add, {T(F32, {1}, {0.1}), T(F32, {1}, {0.2})}));
  // f16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 and goes to even (1); 1 + 3 * 2^-11
  // is a tie between 1 + 2^-10 and 1 + 2^-9 and goes to even (1 + 2^-9).
  expect_eq(T(F16, {2}, {1, 1 + std::ldexp(1.0, -9)}),
            run1(Op::Add, {T(F16, {2}, {1, 1}), T(F16, {2}, {std::ldexp(1.0, -11), std::ldexp(3.0, -11)})}));
  // f16 overflow goes to inf.
  expect_eq(T(F16, {1}, {kInf}), run1(Op::Mul, {T(F16, {1}, {300}), T(F16, {1}, {300})}));
  // bf16: 1.5 * 1.0078125 = 1.51171875 needs 9 mantissa bits; bf16 keeps 8 -> ties to even 1.515625.
  expect_eq(T(BF16, {1}, {1.515625}), run1(Op::Mul, {T(BF16, {1}, {1.5}), T(BF16, {1}, {1.0078125})}));
  // Mixed f16 + bf16 -> f32; i8 + f16 -> f16.
  HostTensor mixed = run1(Op::Add, {T(F16, {1}, {0.5}), T(BF16, {1}, {0.25})});
  expect_eq(T(F32, {1}, {0.75}), mixed);
  expect_eq(T(F16, {1}, {2048}), run1(Op::Add, {T(I32, {1}, {2047}), T(F16, {1}, {1})}));
  expect_eq(T(F16, {1}, {2048}), run1(Op::Add, {T(I32, {1}, {2048}), T(F16, {1}, {1})}));  // 2049 -> even
  // Operands are rounded to the result kind first: i32 2049 becomes f16 2048, + 1 = 2049 -> 2048
  // (converting straight to f32 would give 2050, an f16 value).
  expect_eq(T(F16, {1}, {2048}), run1(Op::Add, {T(I32, {1}, {2049}), T(F16, {1}, {1})}));
}

TEST_CASE("max and min propagate NaN and order signed zeros") {
  HostTensor a = T(F32, {4}, {kNaN, 1, -0.0, 0.0});
  HostTensor b = T(F32, {4}, {1, kNaN, 0.0, -0.0});
  HostTensor mx = run1(Op::Max, {a, b});
  HostTensor mn = run1(Op::Min, {a, b});
  CHECK(std::isnan(mx.data[0]));
  CHECK(std::isnan(mx.data[1]));
  CHECK(std::isnan(mn.data[0]));
  CHECK(std::isnan(mn.data[1]));
  CHECK(!std::signbit(mx.data[2]));
  CHECK(!std::signbit(mx.data[3]));
  CHECK(std::signbit(mn.data[2]));
  CHECK(std::signbit(mn.data[3]));
  // NaN flows through arithmetic too.
  CHECK(std::isnan(run1(Op::Add, {T(F32, {1}, {kNaN}), T(F32, {1}, {1})}).data[0]));
}

// ---------------------------------------------------------------- unary

TEST_CASE("neg abs and relu on floats and integers") {
  HostTensor x = T(F32, {4}, {-1.5, 0, 2, kNaN});
  HostTensor n = run1(Op::Neg, {x});
  CHECK(n.data[0] == 1.5);
  CHECK(n.data[2] == -2);
  CHECK(std::isnan(n.data[3]));
  expect_eq(T(F32, {4}, {1.5, 0, 2, kNaN}), run1(Op::Abs, {x}));
  expect_eq(T(F32, {4}, {0, 0, 2, kNaN}), run1(Op::Relu, {x}));

  expect_eq(T(I8, {3}, {-128, 127, -5}), run1(Op::Neg, {T(I8, {3}, {-128, -127, 5})}));
  expect_eq(T(I8, {3}, {-128, 127, 5}), run1(Op::Abs, {T(I8, {3}, {-128, -127, 5})}));
  expect_eq(T(I32, {3}, {-2147483648.0, 0, 3}), run1(Op::Neg, {T(I32, {3}, {-2147483648.0, 0, -3})}));
  expect_eq(T(I32, {3}, {0, 0, 5}), run1(Op::Relu, {T(I32, {3}, {-3, 0, 5})}));
  expect_eq(T(T2, {3}, {1, 0, -1}), run1(Op::Neg, {T(T2, {3}, {-1, 0, 1})}));
  expect_eq(T(T2, {3}, {0, 0, 1}), run1(Op::Relu, {T(T2, {3}, {-1, 0, 1})}));
}

TEST_CASE("transcendental unary ops are computed in double and rounded once") {
  HostTensor x = T(F32, {3}, {-1, 0, 1});
  expect_eq(T(F32, {3}, {f32(0.2689414213699951), 0.5, f32(0.7310585786300049)}), run1(Op::Sigmoid, {x}));
  expect_eq(T(F32, {3}, {f32(-0.7615941559557649), 0, f32(0.7615941559557649)}), run1(Op::Tanh, {x}));
  expect_eq(T(F32, {3}, {f32(-0.15865525393145707), 0, f32(0.8413447460685429)}), run1(Op::Gelu, {x}));
  expect_eq(T(F32, {3}, {f32(-0.2689414213699951), 0, f32(0.7310585786300049)}), run1(Op::Silu, {x}));
  expect_eq(T(F32, {3}, {f32(0.36787944117144233), 1, f32(2.718281828459045)}), run1(Op::Exp, {x}));

  HostTensor p = T(F32, {4}, {1, 4, 0, -1});
  HostTensor lg = run1(Op::Log, {p});
  CHECK(lg.data[0] == 0);
  CHECK(lg.data[1] == f32(1.3862943611198906));
  CHECK(lg.data[2] == -kInf);
  CHECK(std::isnan(lg.data[3]));
  HostTensor sq = run1(Op::Sqrt, {p});
  CHECK(sq.data[1] == 2);
  CHECK(sq.data[2] == 0);
  CHECK(std::isnan(sq.data[3]));
  HostTensor rs = run1(Op::Rsqrt, {p});
  CHECK(rs.data[0] == 1);
  CHECK(rs.data[1] == 0.5);
  CHECK(rs.data[2] == kInf);

  // f16: exp(1) rounds to the nearest f16 (2.71875).
  expect_eq(T(F16, {1}, {2.71875}), run1(Op::Exp, {T(F16, {1}, {1})}));
  // Large inputs saturate without overflow trouble in sigmoid.
  expect_eq(T(F32, {2}, {0, 1}), run1(Op::Sigmoid, {T(F32, {2}, {-1000, 1000})}));
}

TEST_CASE("cast rounds half to even and saturates and clamps to t2 and tests != 0 for bool") {
  HostTensor x = T(F32, {8}, {2.5, 3.5, -2.5, 300, -300, kNaN, 0.49999997, kInf});
  expect_eq(T(I8, {8}, {2, 4, -2, 127, -128, 0, 0, 127}), run1(Op::Cast, {x}, CastAttrs{I8}));
  expect_eq(T(U8, {8}, {2, 4, 0, 255, 0, 0, 0, 255}), run1(Op::Cast, {x}, CastAttrs{U8}));
  expect_eq(T(I32, {8}, {2, 4, -2, 300, -300, 0, 0, 2147483647}), run1(Op::Cast, {x}, CastAttrs{I32}));
  expect_eq(T(T2, {4}, {1, 0, -1, 1}), run1(Op::Cast, {T(F32, {4}, {2.5, -0.4, -3, 0.6})}, CastAttrs{T2}));
  expect_eq(T(Bool, {4}, {0, 1, 1, 0}), run1(Op::Cast, {T(F32, {4}, {0, 2, -0.1, kNaN})}, CastAttrs{Bool}));
  // int -> float rounds to the kind: 2049 and 4097 are not f16 values.
  expect_eq(T(F16, {3}, {2048, 4096, -2}), run1(Op::Cast, {T(I32, {3}, {2049, 4097, -2})}, CastAttrs{F16}));
  // float -> float: 1 + 2^-8 is a bf16 tie -> 1.
  expect_eq(T(BF16, {1}, {1}), run1(Op::Cast, {T(F32, {1}, {1.00390625})}, CastAttrs{BF16}));
  // int -> int saturates.
  expect_eq(T(I8, {2}, {127, -128}), run1(Op::Cast, {T(I32, {2}, {300, -1000})}, CastAttrs{I8}));
  expect_eq(T(F32, {3}, {-1, 0, 1}), run1(Op::Cast, {T(T2, {3}, {-1, 0, 1})}, CastAttrs{F32}));
}

// ---------------------------------------------------------------- shape

TEST_CASE("transpose reshape and broadcast move data") {
  HostTensor a = T(F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_eq(T(F32, {3, 2}, {1, 4, 2, 5, 3, 6}), run1(Op::Transpose, {a}, PermAttrs{{1, 0}}));
  // [2, 3, 2] with perm [2, 0, 1]: out[k][i][j] = in[i][j][k].
  HostTensor b = T(I32, {2, 3, 2}, iota(12));
  expect_eq(T(I32, {2, 2, 3}, {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}), run1(Op::Transpose, {b}, PermAttrs{{2, 0, 1}}));
  expect_eq(T(F32, {3, 2}, {1, 2, 3, 4, 5, 6}), run1(Op::Reshape, {a}, NoAttrs{}, {ty(F32, {fx(3), fx(2)})}));
  expect_eq(T(F32, {6}, {1, 2, 3, 4, 5, 6}), run1(Op::Reshape, {a}, NoAttrs{}, {ty(F32, {fx(6)})}));
  expect_eq(T(F32, {2, 3}, {1, 2, 3, 1, 2, 3}),
            run1(Op::Broadcast, {T(F32, {3}, {1, 2, 3})}, NoAttrs{}, {ty(F32, {fx(2), fx(3)})}));
  expect_eq(T(T2, {3, 2}, {1, 1, 0, 0, -1, -1}),
            run1(Op::Broadcast, {T(T2, {3, 1}, {1, 0, -1})}, NoAttrs{}, {ty(T2, {fx(3), fx(2)})}));
  expect_eq(T(I8, {2, 2}, {7, 7, 7, 7}), run1(Op::Broadcast, {HostTensor::scalar(I8, 7)}, NoAttrs{}, {ty(I8, {fx(2), fx(2)})}));
}

// ---------------------------------------------------------------- matmul

TEST_CASE("matmul follows numpy.matmul for all operand ranks") {
  HostTensor a = T(F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor b = T(F32, {3, 2}, {7, 8, 9, 10, 11, 12});
  expect_eq(T(F32, {2, 2}, {58, 64, 139, 154}), run1(Op::MatMul, {a, b}));
  // vector @ matrix, matrix @ vector, vector @ vector.
  HostTensor v = T(F32, {3}, {1, 0, -1});
  expect_eq(T(F32, {2}, {-4, -4}), run1(Op::MatMul, {v, b}));
  expect_eq(T(F32, {2}, {-2, -2}), run1(Op::MatMul, {a, v}));
  expect_eq(T(F32, {}, {-4}), run1(Op::MatMul, {v, T(F32, {3}, {1, 2, 5})}));
  // Batched with a broadcast rhs: [2, 2, 3] @ [3, 2].
  HostTensor batch = T(F32, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0});
  expect_eq(T(F32, {2, 2, 2}, {58, 64, 139, 154, 7, 8, 9, 10}), run1(Op::MatMul, {batch, b}));
  // Batch dims broadcast against each other: [2, 1, 1, 2] @ [3, 2, 1] -> [2, 3, 1, 1].
  HostTensor l = T(F32, {2, 1, 1, 2}, {1, 2, 3, 4});
  HostTensor r = T(F32, {3, 2, 1}, {1, 1, 0, 1, 1, 0});
  expect_eq(T(F32, {2, 3, 1, 1}, {3, 2, 1, 7, 4, 3}), run1(Op::MatMul, {l, r}));
  // Batched lhs with a vector rhs: [2, 2, 3] @ [3] -> [2, 2].
  expect_eq(T(F32, {2, 2}, {-2, -2, 1, 0}), run1(Op::MatMul, {batch, v}));
}

TEST_CASE("integer matmul is exact and wraps to i32 and float matmul rounds once") {
  // i8 activations x t2 weights -> exact i32.
  HostTensor x = T(I8, {1, 4}, {127, -128, 5, 0});
  HostTensor w = T(T2, {4, 2}, {1, -1, -1, -1, 1, 1, 0, 1});
  expect_eq(T(I32, {1, 2}, {127 + 128 + 5, -127 + 128 + 5}), run1(Op::MatMul, {x, w}));
  // 65536 * 65536 + 1 * 1 = 2^32 + 1 wraps to 1.
  expect_eq(T(I32, {}, {1}), run1(Op::MatMul, {T(I32, {2}, {65536, 1}), T(I32, {2}, {65536, 1})}));
  // Large sums stay exact before wrapping: 4 * (2^31 - 1)^2 mod 2^32 = 4.
  HostTensor big = T(I32, {4}, {2147483647, 2147483647, 2147483647, 2147483647});
  expect_eq(T(I32, {}, {4}), run1(Op::MatMul, {big, big}));
  // f16: products summed exactly then rounded once; naive f16 accumulation would give 1.
  HostTensor h = T(F16, {3}, {1, std::ldexp(1.0, -11), std::ldexp(1.0, -11)});
  expect_eq(T(F16, {}, {1 + std::ldexp(1.0, -10)}), run1(Op::MatMul, {h, T(F16, {3}, {1, 1, 1})}));
  // f32 x t2 -> f32 with the double sum rounded once: 1 + 2^-24 + 2^-24 = 1 + 2^-23.
  HostTensor f = T(F32, {3}, {1, std::ldexp(1.0, -24), std::ldexp(1.0, -24)});
  expect_eq(T(F32, {}, {1 + std::ldexp(1.0, -23)}), run1(Op::MatMul, {f, T(T2, {3}, {1, 1, 1})}));
}

// ---------------------------------------------------------------- reductions

TEST_CASE("reduce_sum reduce_mean and reduce_max along an axis with keepdims") {
  HostTensor a = T(F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_eq(T(F32, {3}, {5, 7, 9}), run1(Op::ReduceSum, {a}, AxisAttrs{0, false}));
  expect_eq(T(F32, {2, 1}, {6, 15}), run1(Op::ReduceSum, {a}, AxisAttrs{1, true}));
  expect_eq(T(F32, {2}, {2, 5}), run1(Op::ReduceMean, {a}, AxisAttrs{1, false}));
  expect_eq(T(F32, {1, 3}, {2.5, 3.5, 4.5}), run1(Op::ReduceMean, {a}, AxisAttrs{0, true}));
  expect_eq(T(F32, {2}, {3, 6}), run1(Op::ReduceMax, {a}, AxisAttrs{1, false}));
  // Middle axis of a rank-3 tensor.
  HostTensor c = T(I32, {2, 2, 2}, iota(8));
  expect_eq(T(I32, {2, 2}, {2, 4, 10, 12}), run1(Op::ReduceSum, {c}, AxisAttrs{1, false}));
  // Integer sums are i32 and exact (i8 does not wrap), then wrap at 32 bits.
  expect_eq(T(I32, {}, {381}), run1(Op::ReduceSum, {T(I8, {3}, {127, 127, 127})}, AxisAttrs{0, false}));
  expect_eq(T(I32, {}, {-2147483648.0}), run1(Op::ReduceSum, {T(I32, {2}, {2147483647, 1})}, AxisAttrs{0, false}));
  expect_eq(T(I32, {1}, {2}), run1(Op::ReduceSum, {T(T2, {1, 4}, {1, 1, -1, 1})}, AxisAttrs{1, false}));
  expect_eq(T(I8, {}, {-3}), run1(Op::ReduceMax, {T(I8, {3}, {-7, -3, -100})}, AxisAttrs{0, false}));
  // Float sums accumulate in double and round once: 1 + 2^-24 + 2^-24 -> 1 + 2^-23.
  expect_eq(T(F32, {}, {1 + std::ldexp(1.0, -23)}),
            run1(Op::ReduceSum, {T(F32, {3}, {1, std::ldexp(1.0, -24), std::ldexp(1.0, -24)})}, AxisAttrs{0, false}));
  // NaN propagates through max.
  HostTensor mx = run1(Op::ReduceMax, {T(F32, {3}, {1, kNaN, 2})}, AxisAttrs{0, false});
  CHECK(std::isnan(mx.data[0]));
}

TEST_CASE("reductions over an empty axis") {
  HostTensor e = HostTensor::zeros(F32, {2, 0});
  expect_eq(T(F32, {2}, {0, 0}), run1(Op::ReduceSum, {e}, AxisAttrs{1, false}));
  HostTensor mean = run1(Op::ReduceMean, {e}, AxisAttrs{1, false});
  CHECK(std::isnan(mean.data[0]));
  auto r = run_op(Op::ReduceMax, {e}, AxisAttrs{1, false});
  REQUIRE(!r.ok());
  CHECK(r.error().message == "'reduce_max' over axis 1 of extent 0 of f32[2, 0] has no maximum");
  // Reducing the non-empty axis of an empty tensor is fine (no output elements).
  CHECK(run_op(Op::ReduceMax, {e}, AxisAttrs{0, false}).ok());
}

TEST_CASE("softmax rows sum to 1 and match hand values") {
  HostTensor x = T(F32, {2, 3}, {1, 2, 3, 0, 0, 0});
  HostTensor y = run1(Op::Softmax, {x}, AxisAttrs{1, false});
  expect_eq(T(F32, {2, 3}, {f32(0.09003057317038046), f32(0.24472847105479767), f32(0.6652409557748219), f32(1.0 / 3),
                            f32(1.0 / 3), f32(1.0 / 3)}),
            y);
  for (int r = 0; r < 2; ++r)
    CHECK(y.data[static_cast<std::size_t>(3 * r)] + y.data[static_cast<std::size_t>(3 * r + 1)] +
              y.data[static_cast<std::size_t>(3 * r + 2)] ==
          doctest::Approx(1.0).epsilon(1e-6));
  // Along axis 0, large values (no overflow thanks to the max shift) and -inf.
  expect_eq(T(F32, {2, 2}, {0.5, 0, 0.5, 1}), run1(Op::Softmax, {T(F32, {2, 2}, {1000, -kInf, 1000, 0})}, AxisAttrs{0, false}));
  HostTensor n = run1(Op::Softmax, {T(F32, {2}, {kNaN, 1})}, AxisAttrs{0, false});
  CHECK(std::isnan(n.data[0]));
  CHECK(std::isnan(n.data[1]));
}

TEST_CASE("rmsnorm normalizes over the last axis") {
  // Row [3, 4]: mean of squares 12.5, y = x / sqrt(12.5) * gamma.
  HostTensor x = T(F32, {2, 2}, {3, 4, 0, 0});
  HostTensor g = T(F32, {2}, {1, 2});
  HostTensor y = run1(Op::RmsNorm, {x, g}, EpsAttrs{0.0});
  expect_eq(T(F32, {2, 2}, {f32(3 / std::sqrt(12.5)), f32(4 / std::sqrt(12.5) * 2), kNaN, kNaN}), y);
  // With eps the zero row stays zero: 0 / sqrt(0 + 1) = 0.
  HostTensor z = run1(Op::RmsNorm, {x, g}, EpsAttrs{1.0});
  expect_eq(T(F32, {2, 2}, {f32(3 / std::sqrt(13.5)), f32(4 / std::sqrt(13.5) * 2), 0, 0}), z);
  // f16 input with f32 gamma gives f32 (promote).
  HostTensor h = run1(Op::RmsNorm, {T(F16, {2}, {1, -1}), T(F32, {2}, {0.5, 0.5})}, EpsAttrs{0.0});
  expect_eq(T(F32, {2}, {0.5, -0.5}), h);
}

// ---------------------------------------------------------------- quantization

TEST_CASE("quantize_int8 is per-row absmax fake quantization") {
  // Row 0: amax 127 -> scale 1: [1, -2, 0.5, 127] -> [1, -2, 0 (half to even), 127].
  // Row 1: all zero -> scale 0 -> zeros. Row 2: amax 254 -> scale 2: 127 / 2 = 63.5 -> 64 -> 128.
  HostTensor x = T(F32, {3, 4}, {1, -2, 0.5, 127, 0, 0, 0, 0, 127, -254, 1, 3});
  expect_eq(T(F32, {3, 4}, {1, -2, 0, 127, 0, 0, 0, 0, 128, -254, 0, 4}), run1(Op::QuantizeInt8, {x}));
  // Rank 1 is one row; f16 results are rounded to f16.
  expect_eq(T(F16, {4}, {1, -2, 0, 127}), run1(Op::QuantizeInt8, {T(F16, {4}, {1, -2, 0.5, 127})}));
}

TEST_CASE("ternarize keeps sign(x) where |x| > threshold") {
  HostTensor x = T(F32, {6}, {0.6, -0.7, 0.5, -0.2, kNaN, -0.5});
  expect_eq(T(F32, {6}, {1, -1, 0, 0, 0, 0}), run1(Op::Ternarize, {x}, ThresholdAttrs{0.5}));
  expect_eq(T(F32, {3}, {1, 0, -1}), run1(Op::Ternarize, {T(F32, {3}, {1e-30, 0, -1e-30})}, ThresholdAttrs{0.0}));
}

TEST_CASE("ternarize_absmean uses one gamma per tensor") {
  // gamma = (0.2 + 1 + 0.5 + 0.1) / 4 = 0.45; x / gamma = [0.44, -2.2, 1.1, 0.22] -> [0, -1, 1, 0].
  HostTensor x = T(F32, {2, 2}, {0.2, -1.0, 0.5, 0.1});
  const double gamma = f32(0.45);
  expect_eq(T(F32, {2, 2}, {0, -gamma, gamma, 0}), run1(Op::TernarizeAbsmean, {x}));
  expect_eq(T(F32, {2}, {0, 0}), run1(Op::TernarizeAbsmean, {T(F32, {2}, {0, 0})}));
}

TEST_CASE("quantize returns i8 values and f32 per-row scales") {
  HostTensor x = T(F32, {2, 2}, {127, -254, 0, 0});
  auto r = run_op(Op::Quantize, {x});
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  expect_eq(T(I8, {2, 2}, {64, -127, 0, 0}), (*r)[0]);
  expect_eq(T(F32, {2, 1}, {2, 0}), (*r)[1]);
}

TEST_CASE("quantize of a row holding NaN or inf: scale NaN, values 0; quantize_int8 gives NaN rows") {
  const double nan = std::nan(""), inf = HUGE_VAL;
  HostTensor x = T(F32, {4, 2}, {1, nan, inf, 2, -inf, 0, 127, -254});
  auto r = run_op(Op::Quantize, {x});
  REQUIRE(r.ok());
  expect_eq(T(I8, {4, 2}, {0, 0, 0, 0, 0, 0, 64, -127}), (*r)[0]);
  expect_eq(T(F32, {4, 1}, {nan, nan, nan, 2}), (*r)[1]);
  expect_eq(T(F32, {4, 2}, {nan, nan, nan, nan, nan, nan, 128, -254}), run1(Op::QuantizeInt8, {x}));
}

TEST_CASE("tmatmul with a grouped w_scale scales each group's sum before adding the groups") {
  // K = 5, group 2: groups {0, 1}, {2, 3}, {4} (partial); x = [1, 2, 3, 4, 5], w column 0
  // all +1, column 1 alternating: sums per group [3, 7, 5] and [1 - 2, 3 - 4, 5] = [-1, -1, 5].
  HostTensor x = T(I8, {1, 5}, {1, 2, 3, 4, 5});
  HostTensor w = T(T2, {5, 2}, {1, 1, 1, -1, 1, 1, 1, -1, 1, 1});
  HostTensor s = T(F32, {3, 2}, {0.5, 2, 0.25, 4, 2, -1});
  TMatMulAttrs a;
  a.w_scale = true;
  a.group = 2;
  // column 0: 3 * 0.5 + 7 * 0.25 + 5 * 2 = 13.25; column 1: -1 * 2 + -1 * 4 + 5 * -1 = -11.
  expect_eq(T(F32, {1, 2}, {13.25, -11}), run1(Op::TMatMul, {x, w, s}, a));
  // Then x_scale and bias, as after an ungrouped accumulation; float x the same way.
  a.x_scale = a.bias = true;
  expect_eq(T(F32, {1, 2}, {13.25 * 2 + 1, -11 * 2 + 1}),
            run1(Op::TMatMul, {x, w, T(F32, {1, 1}, {2}), s, T(F32, {2}, {1, 1})}, a));
  TMatMulAttrs f;
  f.w_scale = true;
  f.group = 2;
  expect_eq(T(F32, {1, 2}, {13.25, -11}), run1(Op::TMatMul, {T(F32, {1, 5}, {1, 2, 3, 4, 5}), w, s}, f));
  // Run unspecialized, K and G come from the arguments: a G that is not ceil(K / group)
  // is an error of the run, not a crash.
  auto m = parse_module(
      "func @f<K, G>(%x: f32[1, K], %w: t2[K, 2], %s: f32[G, 2]) -> f32[1, 2] {\n^entry:\n"
      "  %y = tmatmul %x, %w, %s {x_scale = false, w_scale = true, group = 2, bias = false, residual = false, "
      "act = none} : f32[1, 2]\n  ret %y\n}\n",
      "g.tir");
  REQUIRE(m.ok());
  const std::vector<HostTensor> args{T(F32, {1, 5}, {1, 2, 3, 4, 5}), w, T(F32, {2, 2}, {1, 1, 1, 1})};
  auto bad = interpret(*m, "f", args, ParamValues{});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("'tmatmul' grouped w_scale needs 3 rows (ceil(5 / 2)) of 2, got f32[2, 2]") !=
        std::string::npos);
  // One group covering all of K (group >= K) is a per-channel scale.
  f.group = 8;
  expect_eq(T(F32, {1, 2}, {15 * 0.5, 3 * 2}),
            run1(Op::TMatMul, {T(F32, {1, 5}, {1, 2, 3, 4, 5}), w, T(F32, {1, 2}, {0.5, 2})}, f));
}

TEST_CASE("tquantize returns t2 values and one f32 scale") {
  auto r = run_op(Op::TQuantize, {T(F32, {4}, {0.2, -1.0, 0.5, 0.1})});
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  expect_eq(T(T2, {4}, {0, -1, 1, 0}), (*r)[0]);
  expect_eq(T(F32, {}, {f32(0.45)}), (*r)[1]);
}

TEST_CASE("dequantize multiplies values by broadcast scales in f32") {
  expect_eq(T(F32, {2, 2}, {128, -254, 0, 0}),
            run1(Op::Dequantize, {T(I8, {2, 2}, {64, -127, 0, 5}), T(F32, {2, 1}, {2, 0})}));
  expect_eq(T(F32, {3}, {-0.25, 0, 0.25}), run1(Op::Dequantize, {T(T2, {3}, {-1, 0, 1}), T(F32, {}, {0.25})}));
  // f16(0.1) * 3 = 0.2999267578125 exactly, a tie between f16 neighbours -> even 0.2998046875.
  expect_eq(T(F16, {1}, {0.2998046875}),
            run1(Op::Dequantize, {T(I32, {1}, {3}), T(F16, {1}, {0.0999755859375})}));
  // q goes to f32 unrounded: 2051 * 1.5 = 3076.5 -> f16 tie -> 3076 (rounding q to f16
  // first would give 2052 * 1.5 = 3078).
  expect_eq(T(F16, {1}, {3076}), run1(Op::Dequantize, {T(I32, {1}, {2051}), T(F16, {1}, {1.5})}));
}

// ---------------------------------------------------------------- structure

TEST_CASE("const splat and dense values are rounded to the kind") {
  Module m;
  Function& f = m.functions().emplace_back("c");
  BlockId b = f.add_block();
  f.set_result_types({ty(F16, {fx(2), fx(2)}), ty(I8, {fx(3)})});
  Builder bld(m, f);
  bld.set_block(b);
  auto splat = bld.constant(ty(F16, {fx(2), fx(2)}), {0.1});
  auto dense = bld.constant(ty(I8, {fx(3)}), {1, -2, 3});
  REQUIRE(splat.ok());
  REQUIRE(dense.ok());
  REQUIRE(bld.create(Op::Ret, {*splat, *dense}).ok());
  auto r = interpret(m, f, {}, {});
  REQUIRE(r.ok());
  expect_eq(T(F16, {2, 2}, {0.1, 0.1, 0.1, 0.1}), (*r)[0]);
  CHECK((*r)[0].data[0] == 0.0999755859375);
  expect_eq(T(I8, {3}, {1, -2, 3}), (*r)[1]);
}

// ---------------------------------------------------------------- coverage

// Builds and runs one tiny function for `op` and checks its result. The switch has
// no default, so adding an op to ops.def breaks this file until it is covered here.
void run_tiny(Op op) {
  CAPTURE(op_name(op));
  const HostTensor v2 = T(F32, {2}, {-1, 4});
  switch (op) {
    case Op::Const: {
      Module m;
      Function& f = m.functions().emplace_back("f");
      BlockId b = f.add_block();
      f.set_result_types({ty(I32, {fx(2)})});
      Builder bld(m, f);
      bld.set_block(b);
      auto c = bld.constant(ty(I32, {fx(2)}), {5, 6});
      REQUIRE(c.ok());
      REQUIRE(bld.create(Op::Ret, {*c}).ok());
      auto r = interpret(m, f, {}, {});
      REQUIRE(r.ok());
      expect_eq(T(I32, {2}, {5, 6}), r->front());
      return;
    }
    case Op::Param: {
      Module m;
      m.params().push_back(ParamDecl{"p", ty(F32, {fx(2)}), {}, {}});
      Function& f = m.functions().emplace_back("f");
      BlockId b = f.add_block();
      f.set_result_types({ty(F32, {fx(2)})});
      Builder bld(m, f);
      bld.set_block(b);
      auto p = bld.param("p");
      REQUIRE(p.ok());
      REQUIRE(bld.create(Op::Ret, {*p}).ok());
      ParamValues pv;
      pv.set("p", v2);
      auto r = interpret(m, f, {}, pv);
      REQUIRE(r.ok());
      expect_eq(v2, r->front());
      return;
    }
    case Op::Call: case Op::Ret: case Op::Br: case Op::CondBr: {
      // @id(%x) { ret %x }; @f(%c: bool[], %x: f32[2]) { cond_br %c, ^a(%x), ^b(%x) ... } where
      // ^a calls @id and ^b negates, both joining ^out with br.
      Module m;
      m.functions().emplace_back("id");
      m.functions().emplace_back("f");
      {
        Function& g = m.functions()[0];
        BlockId b = g.add_block();
        ValueId x = g.add_block_arg(b, ty(F32, {fx(2)}));
        g.set_result_types({ty(F32, {fx(2)})});
        Builder bld(m, g);
        bld.set_block(b);
        REQUIRE(bld.create(Op::Ret, {x}).ok());
      }
      Function& f = m.functions()[1];
      BlockId entry = f.add_block("entry"), ba = f.add_block("a"), bb = f.add_block("b"), out = f.add_block("out");
      ValueId c = f.add_block_arg(entry, ty(Bool, {}));
      ValueId x = f.add_block_arg(entry, ty(F32, {fx(2)}));
      ValueId xa = f.add_block_arg(ba, ty(F32, {fx(2)}));
      ValueId xb = f.add_block_arg(bb, ty(F32, {fx(2)}));
      ValueId res = f.add_block_arg(out, ty(F32, {fx(2)}));
      f.set_result_types({ty(F32, {fx(2)})});
      Builder bld(m, f);
      bld.set_block(entry);
      REQUIRE(bld.create(Op::CondBr, {c}, NoAttrs{}, {}, {}, {BlockCall{ba, {x}}, BlockCall{bb, {x}}}).ok());
      bld.set_block(ba);
      auto called = bld.create1(Op::Call, {xa}, CallAttrs{"id"});
      REQUIRE(called.ok());
      REQUIRE(bld.create(Op::Br, {}, NoAttrs{}, {}, {}, {BlockCall{out, {*called}}}).ok());
      bld.set_block(bb);
      auto neg = bld.create1(Op::Neg, {xb});
      REQUIRE(neg.ok());
      REQUIRE(bld.create(Op::Br, {}, NoAttrs{}, {}, {}, {BlockCall{out, {*neg}}}).ok());
      bld.set_block(out);
      REQUIRE(bld.create(Op::Ret, {res}).ok());
      REQUIRE(verify_module(m).empty());
      auto yes = interpret(m, f, std::vector<HostTensor>{HostTensor::scalar(Bool, 1), v2}, {});
      auto no = interpret(m, f, std::vector<HostTensor>{HostTensor::scalar(Bool, 0), v2}, {});
      REQUIRE(yes.ok());
      REQUIRE(no.ok());
      expect_eq(v2, yes->front());
      expect_eq(T(F32, {2}, {1, -4}), no->front());
      return;
    }
    case Op::Add: expect_eq(T(F32, {2}, {-2, 8}), run1(op, {v2, v2})); return;
    case Op::Sub: expect_eq(T(F32, {2}, {0, 0}), run1(op, {v2, v2})); return;
    case Op::Mul: expect_eq(T(F32, {2}, {1, 16}), run1(op, {v2, v2})); return;
    case Op::Div: expect_eq(T(F32, {2}, {1, 1}), run1(op, {v2, v2})); return;
    case Op::Max: expect_eq(T(F32, {2}, {0, 4}), run1(op, {v2, T(F32, {}, {0})})); return;
    case Op::Min: expect_eq(T(F32, {2}, {-1, 0}), run1(op, {v2, T(F32, {}, {0})})); return;
    case Op::Neg: expect_eq(T(F32, {2}, {1, -4}), run1(op, {v2})); return;
    case Op::Abs: expect_eq(T(F32, {2}, {1, 4}), run1(op, {v2})); return;
    case Op::Relu: expect_eq(T(F32, {2}, {0, 4}), run1(op, {v2})); return;
    case Op::Sigmoid: expect_eq(T(F32, {1}, {0.5}), run1(op, {T(F32, {1}, {0})})); return;
    case Op::Tanh: expect_eq(T(F32, {1}, {0}), run1(op, {T(F32, {1}, {0})})); return;
    case Op::Gelu: expect_eq(T(F32, {2}, {f32(-0.15865525393145707), f32(3.9998733150326675)}), run1(op, {v2})); return;
    case Op::Silu: expect_eq(T(F32, {2}, {f32(-0.2689414213699951), f32(3.928055160151634)}), run1(op, {v2})); return;
    case Op::Exp: expect_eq(T(F32, {1}, {1}), run1(op, {T(F32, {1}, {0})})); return;
    case Op::Log: expect_eq(T(F32, {1}, {0}), run1(op, {T(F32, {1}, {1})})); return;
    case Op::Sqrt: expect_eq(T(F32, {1}, {3}), run1(op, {T(F32, {1}, {9})})); return;
    case Op::Rsqrt: expect_eq(T(F32, {1}, {0.25}), run1(op, {T(F32, {1}, {16})})); return;
    case Op::Cast: expect_eq(T(I8, {2}, {-1, 4}), run1(op, {v2}, CastAttrs{I8})); return;
    case Op::Transpose: expect_eq(T(F32, {2, 1}, {-1, 4}), run1(op, {T(F32, {1, 2}, {-1, 4})}, PermAttrs{{1, 0}})); return;
    case Op::Reshape: expect_eq(T(F32, {1, 2}, {-1, 4}), run1(op, {v2}, NoAttrs{}, {ty(F32, {fx(1), fx(2)})})); return;
    case Op::Broadcast:
      expect_eq(T(F32, {2, 2}, {-1, 4, -1, 4}), run1(op, {v2}, NoAttrs{}, {ty(F32, {fx(2), fx(2)})}));
      return;
    case Op::MatMul: expect_eq(T(F32, {}, {17}), run1(op, {v2, v2})); return;
    case Op::ReduceSum: expect_eq(T(F32, {}, {3}), run1(op, {v2}, AxisAttrs{0, false})); return;
    case Op::ReduceMean: expect_eq(T(F32, {}, {1.5}), run1(op, {v2}, AxisAttrs{0, false})); return;
    case Op::ReduceMax: expect_eq(T(F32, {}, {4}), run1(op, {v2}, AxisAttrs{0, false})); return;
    case Op::Softmax: expect_eq(T(F32, {2}, {0.5, 0.5}), run1(op, {T(F32, {2}, {3, 3})}, AxisAttrs{0, false})); return;
    case Op::RmsNorm:
      // ms = (1 + 16) / 2 = 8.5.
      expect_eq(T(F32, {2}, {f32(-1 / std::sqrt(8.5)), f32(4 / std::sqrt(8.5))}),
                run1(op, {v2, T(F32, {2}, {1, 1})}, EpsAttrs{0.0}));
      return;
    case Op::QuantizeInt8:  // scale 2: -63.5 rounds to even -64
      expect_eq(T(F32, {2}, {-128, 254}), run1(op, {T(F32, {2}, {-127, 254})}));
      return;
    case Op::Ternarize: expect_eq(T(F32, {2}, {0, 1}), run1(op, {v2}, ThresholdAttrs{1.0})); return;
    case Op::TernarizeAbsmean: expect_eq(T(F32, {2}, {0, 2.5}), run1(op, {v2})); return;  // gamma 2.5
    case Op::Quantize: {
      auto r = run_op(op, {v2});
      REQUIRE(r.ok());
      expect_eq(T(I8, {2}, {-32, 127}), (*r)[0]);  // -1 / (4/127) = -31.75 -> -32
      expect_eq(T(F32, {1}, {f32(4.0 / 127)}), (*r)[1]);
      return;
    }
    case Op::TQuantize: {
      auto r = run_op(op, {v2});
      REQUIRE(r.ok());
      expect_eq(T(T2, {2}, {0, 1}), (*r)[0]);
      expect_eq(T(F32, {}, {2.5}), (*r)[1]);
      return;
    }
    case Op::Dequantize: expect_eq(T(F32, {2}, {-2, 2}), run1(op, {T(T2, {2}, {-1, 1}), T(F32, {}, {2})})); return;
    case Op::TMatMul:  // [-1, 4] @ [[1, 0], [-1, 1]] = [-5, 4], then relu
      expect_eq(T(F32, {2}, {0, 4}), run1(op, {v2, T(T2, {2, 2}, {1, 0, -1, 1})},
                                           TMatMulAttrs{false, false, false, false, Activation::Relu}));
      return;
    case Op::Ewise:  // neg(mul(a, b))
      expect_eq(T(F32, {2}, {-1, -16}), run1(op, {v2, v2}, EwiseAttrs{{{Op::Mul, 0, 1}, {Op::Neg, 2, -1}}}));
      return;
    // The decoder ops: one small case each (decoder_ops_test.cpp has the rest).
    case Op::Gather: expect_eq(T(F32, {1, 2}, {-1, 4}), run1(op, {T(F32, {2, 2}, {0, 0, -1, 4}), T(I32, {1}, {1})}, AxisAttrs{})); return;
    case Op::Slice: expect_eq(T(F32, {1}, {4}), run1(op, {v2}, SliceAttrs{0, 1, 1})); return;
    case Op::Concat: expect_eq(T(F32, {4}, {-1, 4, -1, 4}), run1(op, {v2, v2}, AxisAttrs{})); return;
    case Op::LayerNorm:  // mean 1.5, var 6.25: (x - 1.5) / 2.5
      expect_eq(T(F32, {2}, {-1, 1}), run1(op, {v2, T(F32, {2}, {1, 1}), T(F32, {2}, {0, 0})}, EpsAttrs{0.0}));
      return;
    case Op::Rope:  // position 0: the identity
      expect_eq(T(F32, {1, 1, 2}, {-1, 4}), run1(op, {T(F32, {1, 1, 2}, {-1, 4}), T(I32, {}, {0})}, RopeAttrs{}));
      return;
    case Op::CausalSoftmax:  // pos 0: row 0 keeps t = 0 only
      expect_eq(T(F32, {1, 2}, {1, 0}), run1(op, {T(F32, {1, 2}, {-1, 4}), T(I32, {}, {0})}));
      return;
    case Op::KvWrite:
      expect_eq(T(F32, {1, 2, 1, 2}, {0, 0, -1, 4}),
                run1(op, {T(F32, {1, 2, 1, 2}, {0, 0, 0, 0}), T(F32, {1, 1, 2}, {-1, 4}), T(I32, {}, {1})}, LayerAttrs{}));
      return;
    case Op::Attention:  // one cache row: its value
      expect_eq(T(F32, {1, 1, 2}, {-1, 4}), run1(op, {T(F32, {1, 1, 2}, {1, 1}), T(F32, {1, 1, 1, 2}, {2, 3}),
                                                     T(F32, {1, 1, 1, 2}, {-1, 4}), T(I32, {}, {0})},
                                                 AttentionAttrs{0, 1.0}));
      return;
  }
  FAIL("op not covered");
}

TEST_CASE("every op in ops.def runs through the interpreter") {
  std::set<std::string> seen;
  for (Op op : all_ops()) {
    run_tiny(op);
    seen.insert(std::string(op_name(op)));
  }
  CHECK(seen.size() == all_ops().size());
}

}  // namespace
}  // namespace ternjit::ir

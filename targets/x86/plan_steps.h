// SPDX-License-Identifier: Apache-2.0
// plan_steps.h - the step classes of plan.cpp (tmatmul, dense and int8 matmul, rank-2 transpose,
// eltwise, reference, copy). Private to targets/x86; included by plan.cpp only.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/interpret.h"
#include "targets/x86/eltwise.h"
#include "targets/x86/matmul.h"
#include "targets/x86/plan_internal.h"
#include "targets/x86/tmatmul.h"

namespace ternjit::targets::x86 {
namespace {

inline std::vector<std::int64_t> extents(const ir::Type& t) {
  std::vector<std::int64_t> s;
  for (const ir::Dim& d : t.shape) s.push_back(d.extent);
  return s;
}

// ------------------------------------------------------------ tmatmul steps

class TMatMulStep final : public Step {
 public:
  TMatMulStep(std::unique_ptr<TMatMulKernel> k, std::shared_ptr<const PackedWeights> w, std::vector<Loc> locs,
              std::string summary)
      : kernel_(std::move(k)), w_(std::move(w)), locs_(std::move(locs)), summary_(std::move(summary)) {}
  // locs_: x, x_scale?, w_scale?, bias?, residual? (only those present, in order), then y.
  Result<void> run(const Frame& fr) const override {
    const TMatMulProblem& p = kernel_->problem();
    TMatMulArgs a;
    std::size_t i = 0;
    a.x = fr.ptr(locs_[i++]);
    a.w = w_.get();
    if (p.x_scale) a.x_scale = static_cast<const float*>(fr.ptr(locs_[i++]));
    if (p.w_scale) a.w_scale = static_cast<const float*>(fr.ptr(locs_[i++]));
    if (p.bias) a.bias = fr.ptr(locs_[i++]);
    if (p.residual) a.residual = fr.ptr(locs_[i++]);
    a.y = fr.ptr(locs_[i]);
    // x's leading dims are flattened into the kernel's M: rows_max of them at most.
    a.rows = fr.rows > 0 ? fr.rows * (p.M / fr.rows_max) : 0;
    kernel_->run(a, *fr.parallel);
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    StepCode c{"tmatmul", summary_, kernel_->config().str(), {}};
    for (const auto& b : kernel_->code()) c.blobs.push_back({b.label, {b.code.begin(), b.code.end()}});
    return c;
  }

 private:
  std::unique_ptr<TMatMulKernel> kernel_;
  std::shared_ptr<const PackedWeights> w_;
  std::vector<Loc> locs_;
  std::string summary_;
};

// A dense f32 matmul: a (or its transpose's source), b (as given, or packed at load
// time when it is a load-time value), c.
class MatMulStep final : public Step {
 public:
  MatMulStep(std::unique_ptr<MatMulKernel> k, std::shared_ptr<const MatMulPackedB> packed, Loc a, Loc b, Loc c,
             std::string summary)
      : kernel_(std::move(k)), packed_(std::move(packed)), a_(a), b_(b), c_(c), summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    // Run-time rows: A's leading dims are flattened into M (rows_max of them at most).
    const std::int64_t rows = fr.rows > 0 ? fr.rows * (kernel_->problem().M / fr.rows_max) : 0;
    kernel_->run(static_cast<const float*>(fr.ptr(a_)), packed_ ? nullptr : static_cast<const float*>(fr.ptr(b_)),
                 packed_.get(), static_cast<float*>(fr.ptr(c_)), *fr.parallel, rows);
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    StepCode c{"matmul", summary_, kernel_->describe(packed_ != nullptr), {}};
    for (const auto& b : kernel_->code()) c.blobs.push_back({b.label, {b.code.begin(), b.code.end()}});
    return c;
  }

 private:
  std::unique_ptr<MatMulKernel> kernel_;
  std::shared_ptr<const MatMulPackedB> packed_;
  Loc a_, b_, c_;
  std::string summary_;
};

// The int8 weight-gradient matmul with its scale epilogue (matmul.h, Int8MatMulKernel):
// the sources of the two transposes, the scales u (or none) and t, the chain's result.
class Int8MatMulStep final : public Step {
 public:
  Int8MatMulStep(std::unique_ptr<Int8MatMulKernel> k, Loc a, Loc b, std::optional<Loc> u, Loc t, Loc c,
                 std::string summary)
      : kernel_(std::move(k)), a_(a), b_(b), u_(u), t_(t), c_(c), summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    kernel_->run(static_cast<const std::int8_t*>(fr.ptr(a_)), static_cast<const std::int8_t*>(fr.ptr(b_)),
                 u_ ? static_cast<const float*>(fr.ptr(*u_)) : nullptr, static_cast<const float*>(fr.ptr(t_)),
                 static_cast<float*>(fr.ptr(c_)), *fr.parallel);
    return success();
  }
  [[nodiscard]] StepCode describe() const override { return StepCode{"matmul", summary_, kernel_->describe(), {}}; }

 private:
  std::unique_ptr<Int8MatMulKernel> kernel_;
  Loc a_, b_;
  std::optional<Loc> u_;
  Loc t_, c_;
  std::string summary_;
};

// A matrix transpose (rank 2, perm [1, 0]) of 1-, 2- or 4-byte elements, in 32 x 32
// blocks (what the int8_dw backward's `quantize(transpose(g))` reads): a copy, exact.
class TransposeStep final : public Step {
 public:
  TransposeStep(Loc in, Loc out, std::int64_t rows, std::int64_t cols, std::size_t elem_bytes, std::string summary)
      : in_(in), out_(out), rows_(rows), cols_(cols), bytes_(elem_bytes), summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    const auto* src = static_cast<const std::uint8_t*>(fr.ptr(in_));
    auto* dst = static_cast<std::uint8_t*>(fr.ptr(out_));
    switch (bytes_) {
      case 1: blocked(src, dst, std::uint8_t{}); break;
      case 2: blocked(src, dst, std::uint16_t{}); break;
      default: blocked(src, dst, std::uint32_t{}); break;
    }
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    return StepCode{"transpose", summary_, "transpose " + std::to_string(rows_) + "x" + std::to_string(cols_) +
                                               " blocks=32x32 bytes=" + std::to_string(bytes_), {}};
  }

 private:
  template <class T>
  void blocked(const std::uint8_t* src, std::uint8_t* dst, T) const {
    const T* s = reinterpret_cast<const T*>(src);
    T* d = reinterpret_cast<T*>(dst);
    constexpr std::int64_t kB = 32;
    for (std::int64_t r0 = 0; r0 < rows_; r0 += kB)
      for (std::int64_t c0 = 0; c0 < cols_; c0 += kB)
        for (std::int64_t r = r0; r < std::min(rows_, r0 + kB); ++r)
          for (std::int64_t c = c0; c < std::min(cols_, c0 + kB); ++c) d[c * rows_ + r] = s[r * cols_ + c];
  }
  Loc in_, out_;
  std::int64_t rows_, cols_;
  std::size_t bytes_;
  std::string summary_;
};

class EltwiseStep final : public Step {
 public:
  EltwiseStep(std::string op, std::unique_ptr<EltwiseKernel> k, std::vector<Loc> in, std::vector<Loc> out,
              std::string summary)
      : op_(std::move(op)), kernel_(std::move(k)), in_(std::move(in)), out_(std::move(out)), summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    std::vector<const void*> in;
    std::vector<void*> out;
    in.reserve(in_.size());
    out.reserve(out_.size());
    for (const Loc& l : in_) in.push_back(fr.ptr(l));
    for (const Loc& l : out_) out.push_back(fr.ptr(l));
    kernel_->run(in, out, *fr.parallel, fr.rows, fr.rows_max);
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    StepCode c{op_, summary_, kernel_->describe(), {}};
    for (const auto& b : kernel_->code()) c.blobs.push_back({b.label, {b.code.begin(), b.code.end()}});
    return c;
  }

 private:
  std::string op_;
  std::unique_ptr<EltwiseKernel> kernel_;
  std::vector<Loc> in_, out_;
  std::string summary_;
};

// One op run by its reference implementation: a scratch module holding the
// instruction alone (operands as arguments), interpreted per call.
class ReferenceStep final : public Step {
 public:
  ReferenceStep(ir::Module m, std::vector<Loc> in, std::vector<ir::Type> in_types, std::vector<Loc> out,
                std::vector<std::size_t> out_bytes, std::string op, std::string summary)
      : module_(std::move(m)),
        in_(std::move(in)),
        in_types_(std::move(in_types)),
        out_(std::move(out)),
        out_bytes_(std::move(out_bytes)),
        op_(std::move(op)),
        summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    std::vector<ir::HostTensor> args;
    args.reserve(in_.size());
    for (std::size_t i = 0; i < in_.size(); ++i) {
      if (in_[i].kind == LocKind::Const) {
        args.push_back((*fr.consts)[in_[i].index].tensor());
        continue;
      }
      const auto* p = static_cast<const std::uint8_t*>(fr.ptr(in_[i]));
      TERNJIT_TRY(ir::HostTensor t, ir::HostTensor::from_bytes(in_types_[i].elem, extents(in_types_[i]),
                                                              {p, static_bytes(in_types_[i])}));
      args.push_back(std::move(t));
    }
    TERNJIT_TRY(auto outs, ir::interpret(module_, module_.functions()[0], args, ir::ParamValues{}));
    TERNJIT_CHECK(outs.size() == out_.size(), "reference step returned the wrong number of results");
    for (std::size_t j = 0; j < outs.size(); ++j) {
      const std::vector<std::uint8_t> b = outs[j].to_bytes();
      TERNJIT_CHECK(b.size() == out_bytes_[j], "reference step result has the wrong size");
      if (!b.empty()) std::memcpy(fr.ptr(out_[j]), b.data(), b.size());
    }
    return success();
  }
  [[nodiscard]] StepCode describe() const override { return StepCode{op_ + " (reference)", summary_, "reference", {}}; }

 private:
  ir::Module module_;
  std::vector<Loc> in_;
  std::vector<ir::Type> in_types_;
  std::vector<Loc> out_;
  std::vector<std::size_t> out_bytes_;
  std::string op_, summary_;
};

// Copies a value into an output slot (a returned argument, constant, alias or a value
// returned twice).
class CopyStep final : public Step {
 public:
  CopyStep(Loc from, Loc to, std::size_t bytes, std::string summary)
      : from_(from), to_(to), bytes_(bytes), summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    // With run-time rows the value is rows-leading (PlanOptions::rows_max): a prefix.
    const std::size_t n = fr.rows > 0 ? bytes_ / static_cast<std::size_t>(fr.rows_max) * static_cast<std::size_t>(fr.rows)
                                      : bytes_;
    if (n != 0) std::memmove(fr.ptr(to_), fr.ptr(from_), n);
    return success();
  }
  [[nodiscard]] StepCode describe() const override { return StepCode{"copy", summary_, "memmove", {}}; }

 private:
  Loc from_, to_;
  std::size_t bytes_;
  std::string summary_;
};


}  // namespace
}  // namespace ternjit::targets::x86

// SPDX-License-Identifier: Apache-2.0
// plan_check.h - runs one function of a module text on an x86 plan (any element kinds, 0xAB-poisoned
// outputs) and on the interpreter, for the step tests (dense_test.cpp, data_ops_test.cpp, ...).
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/x86/isa.h"
#include "targets/x86/plan.h"
#include "tests/unit/x86/x86_testing.h"

namespace ternjit::targets::x86::testing {

/// What one case produced: the plan's results and the interpreter's, the plan's steps.
struct PlanRun {
  std::vector<ir::HostTensor> got, want;
  std::vector<StepCode> steps;
  std::size_t load_time_evaluated = 0;
  Result<void> run_status = success();  ///< the plan's run (an error Result is a result too)
  bool want_ok = true;                  ///< the interpreter succeeded
};

/// The ISAs with distinct step code paths (256- and 512-bit) that this host runs.
inline std::vector<Isa> step_isas() {
  std::vector<Isa> r;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (host_isas().supports(isa)) r.push_back(isa);
    else MESSAGE("skipped for " << isa_name(isa) << ": host lacks it");
  return r;
}

/// Builds @f of `text` for `isa`/`threads`, runs it on `args` (outputs poisoned with 0xAB bytes)
/// and the interpreter on the same. `out_init`: initial output bytes instead of poison (for
/// in-place cases), by result index.
inline PlanRun run_plan(const std::string& text, const std::vector<ir::HostTensor>& args,
                        const ir::ParamValues& params, Isa isa, int threads, const std::string& what,
                        const std::vector<std::vector<std::uint8_t>>& out_init = {}) {
  PlanRun r;
  auto m = ir::parse_module(text, "plan_check.tir");
  REQUIRE_MESSAGE(m.ok(), what << ": " << (m.ok() ? "" : m.error().message) << "\n" << text);
  PlanOptions o;
  o.isa = isa;
  o.threads = threads;
  auto plan = Plan::build(m.value(), "f", params, o, nullptr);
  REQUIRE_MESSAGE(plan.ok(), what << ": " << (plan.ok() ? "" : plan.error().message));
  r.steps = plan.value()->describe();
  r.load_time_evaluated = plan.value()->load_time_evaluated();
  auto want = ir::interpret(m.value(), "f", args, params);
  r.want_ok = want.ok();
  if (want.ok()) r.want = want.value();

  const ir::Function* f = m.value().find_function("f");
  std::vector<std::vector<std::uint8_t>> in, out;
  std::vector<void*> buffers;
  for (const ir::HostTensor& t : args) in.push_back(t.to_bytes());
  for (auto& v : in) buffers.push_back(v.data());
  const auto results = f->result_types();
  for (std::size_t j = 0; j < results.size(); ++j) {
    const ir::Type& t = results[j];
    const std::size_t n = static_cast<std::size_t>(t.static_numel().value_or(0) * elem_bits(t.elem) / 8);
    out.push_back(j < out_init.size() && !out_init[j].empty() ? out_init[j] : std::vector<std::uint8_t>(n, 0xAB));
    out.back().reserve(n + 1);
  }
  for (auto& v : out) buffers.push_back(v.data());
  r.run_status = plan.value()->run(buffers.data(), std_threads(threads));
  if (!r.run_status.ok()) return r;
  for (std::size_t j = 0; j < results.size(); ++j) {
    std::vector<std::int64_t> shape;
    for (const ir::Dim& d : results[j].shape) shape.push_back(d.extent);
    auto t = ir::HostTensor::from_bytes(results[j].elem, shape, out[j]);
    REQUIRE(t.ok());
    r.got.push_back(std::move(t).value());
  }
  return r;
}

/// No step of `steps` is a reference step.
inline void check_no_reference_step(const std::vector<StepCode>& steps, const std::string& what) {
  for (const StepCode& st : steps)
    CHECK_MESSAGE(st.op.find("(reference)") == std::string::npos, what << ": step " << st.op << ": " << st.summary);
}

/// Element-wise comparison: `tol(i)` is the allowed |got - want| of element i (0: equal);
/// NaN must meet NaN, an infinity the same infinity.
inline void check_close(const ir::HostTensor& want, const ir::HostTensor& got,
                        const std::function<double(std::size_t)>& tol, const std::string& what) {
  REQUIRE_MESSAGE(want.data.size() == got.data.size(), what);
  REQUIRE_MESSAGE(want.kind == got.kind, what);
  int bad = 0;
  for (std::size_t i = 0; i < want.data.size() && bad < 5; ++i) {
    const double w = want.data[i], g = got.data[i];
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::isfinite(g) && std::fabs(g - w) <= tol(i);
    if (!ok) {
      ++bad;
      FAIL_CHECK(what << ": element " << i << " want " << w << " got " << g << " tol " << tol(i));
    }
  }
}

/// Bit-exact (NaN meets any NaN).
inline void check_exact(const ir::HostTensor& want, const ir::HostTensor& got, const std::string& what) {
  check_close(want, got, [](std::size_t) { return 0.0; }, what);
}

/// "f32[2, 3]".
inline std::string ty(ElemKind k, const std::vector<std::int64_t>& s) {
  std::string r = std::string(elem_name(k)) + "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace ternjit::targets::x86::testing

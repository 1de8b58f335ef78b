// SPDX-License-Identifier: Apache-2.0
// gpu_programs.h - the small programs the GPU target tests compile (IR text per kernel op and tests/dsl layers, specialized and optimized), their random inputs and result checks.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <cmath>
#include <cstring>

#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "targets/common/device_weights.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/common/device_weights.h"
#include "targets/target.h"

namespace ternjit::gpu_testing {

/// One program: a specialized module after the O2 pipeline, the function to compile,
/// and whether the SIMT generator must support it (every IR case and the ternary layers).
struct Program {
  std::string name;
  ir::Module module;
  std::string function;
  bool must_support = true;
};

inline std::string sh(std::initializer_list<std::int64_t> d) {
  std::string s = "[";
  for (auto it = d.begin(); it != d.end(); ++it) s += (it == d.begin() ? "" : ", ") + std::to_string(*it);
  return s + "]";
}

/// A tmatmul with every epilogue operand (or w_scale alone), i8 or f32 activations.
inline std::string tmatmul_tir(std::int64_t M, std::int64_t K, std::int64_t N, const std::string& x,
                               const std::string& act, bool epilogue) {
  const std::string xs = sh({M, K}), ys = sh({M, N});
  std::string t = "param @w : t2" + sh({K, N}) + "\nparam @ws : f32" + sh({N}) + "\nfunc @f(%q: " + x + xs;
  if (epilogue) t += ", %xs: f32" + sh({M, 1}) + ", %b: f32" + sh({N}) + ", %r: f32" + ys;
  t += ") -> f32" + ys + " {\n^entry:\n  %w = param @w : t2" + sh({K, N}) + "\n  %ws = param @ws : f32" + sh({N}) + "\n";
  if (epilogue)
    t += "  %y = tmatmul %q, %w, %xs, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, residual = true, act = " +
         act + "} : f32" + ys + "\n";
  else
    t += "  %y = tmatmul %q, %w, %ws {x_scale = false, w_scale = true, bias = false, residual = false, act = " + act +
         "} : f32" + ys + "\n";
  return t + "  ret %y\n}\n";
}

/// A grouped-scale tmatmul (w_scale f32[G, N]).
inline std::string grouped_tir(std::int64_t M, std::int64_t K, std::int64_t N, std::int64_t group, const std::string& x) {
  const std::int64_t G = (K + group - 1) / group;
  return "param @w : t2" + sh({K, N}) + "\nparam @s : f32" + sh({G, N}) + "\nfunc @f(%q: " + x + sh({M, K}) +
         ") -> f32" + sh({M, N}) + " {\n^entry:\n  %w = param @w : t2" + sh({K, N}) + "\n  %s = param @s : f32" +
         sh({G, N}) + "\n  %y = tmatmul %q, %w, %s {x_scale = false, w_scale = true, bias = false, residual = false, "
         "act = none, group = " + std::to_string(group) + "} : f32" + sh({M, N}) + "\n  ret %y\n}\n";
}

/// The IR programs: one per kernel op family, odd shapes.
inline std::vector<std::pair<std::string, std::string>> ir_programs() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("tmatmul i8 M=1 relu", tmatmul_tir(1, 37, 21, "i8", "relu", false));
  out.emplace_back("tmatmul i8 M=3 epilogue gelu", tmatmul_tir(3, 130, 17, "i8", "gelu", true));
  out.emplace_back("tmatmul i8 M=17 epilogue silu", tmatmul_tir(17, 256, 65, "i8", "silu", true));
  out.emplace_back("tmatmul f32 M=2", tmatmul_tir(2, 45, 9, "f32", "none", true));
  out.emplace_back("grouped i8", grouped_tir(3, 300, 17, 256, "i8"));
  out.emplace_back("grouped f32", grouped_tir(2, 100, 9, 32, "f32"));
  const std::string t = sh({5, 7});
  out.emplace_back("quantize", "func @f(%x: f32" + t + ") -> (i8" + t + ", f32[5, 1], f32" + t +
                                   ") {\n^entry:\n  %q, %s = quantize %x : i8" + t +
                                   ", f32[5, 1]\n  %fq = quantize_int8 %x : f32" + t + "\n  ret %q, %s, %fq\n}\n");
  const std::string r = sh({3, 5, 7});
  out.emplace_back("rmsnorm", "func @f(%x: f32" + r + ", %g: f32[7]) -> f32" + r +
                                  " {\n^entry:\n  %y = rmsnorm %x, %g {eps = 1e-05} : f32" + r + "\n  ret %y\n}\n");
  out.emplace_back("softmax and reductions",
                   "func @f(%x: f32" + r + ") -> (f32" + r + ", f32[3, 1, 7], f32[3, 5, 1], f32[1, 5, 7]) {\n^entry:\n"
                   "  %s = softmax %x {axis = 2} : f32" + r + "\n  %a = reduce_sum %x {axis = 1, keepdims = true} : "
                   "f32[3, 1, 7]\n  %m = reduce_mean %x {axis = 2, keepdims = true} : f32[3, 5, 1]\n"
                   "  %x1 = reduce_max %x {axis = 0, keepdims = true} : f32[1, 5, 7]\n  ret %s, %a, %m, %x1\n}\n");
  out.emplace_back("ewise", "func @f(%a: f32[5, 11], %b: f32[11], %c: f32[5, 11]) -> f32[5, 11] {\n^entry:\n"
                            "  %y = ewise %a, %b, %c {steps = [mul(0, 1), add(3, 2), silu(4)]} : f32[5, 11]\n"
                            "  ret %y\n}\n");
  out.emplace_back("elementwise broadcasts",
                   "func @f(%a: f32[3, 7], %b: f32[7], %c: f32[3, 1]) -> (f32[3, 7], f32[3, 7], f32[3, 7]) {\n^entry:\n"
                   "  %x = add %a, %b : f32[3, 7]\n  %y = div %a, %c : f32[3, 7]\n  %z = tanh %x : f32[3, 7]\n"
                   "  ret %x, %y, %z\n}\n");
  out.emplace_back("copies", "func @f(%a: f32[3, 4]) -> (f32[3, 4], f32[3, 4], f32[12]) {\n^entry:\n"
                             "  %e = neg %a : f32[3, 4]\n  %r = reshape %e : f32[12]\n  ret %e, %a, %r\n}\n");
  return out;
}

/// The tests/dsl layers with shapes (the function, its file, its symbols).
struct DslCase {
  const char* file;
  const char* function;
  std::map<std::string, std::int64_t> shapes;
  bool must_support;
};

inline std::vector<DslCase> dsl_cases() {
  return {
      {"bitlinear.tri", "BitLinear.forward", {{"M", 3}, {"K", 37}, {"N", 21}}, true},
      {"bitlinear.tri", "BitLinear.forward", {{"M", 1}, {"K", 256}, {"N", 64}}, true},
      {"grouped_matmul.tri", "GLinear.forward", {{"M", 2}, {"K", 300}, {"N", 17}, {"G", 2}, {"H", 10}}, true},
      {"grouped_matmul.tri", "GLinear.small_groups", {{"M", 2}, {"K", 300}, {"N", 17}, {"G", 2}, {"H", 10}}, true},
      {"linear_classifier.tri", "LinearClassifier.forward", {{"N", 3}}, false},
      {"several_layers.tri", "Body.forward", {{"N", 5}}, false},
      {"several_layers.tri", "Head.probs", {{"N", 5}}, false},
      {"all_builtins.tri", "Builtins.unary", {{"R", 3}, {"D", 7}}, false},
      {"all_builtins.tri", "Builtins.axes", {{"R", 3}, {"D", 7}}, false},
      {"mlp_composition.tri", "MLP.forward", {{"B", 2}, {"T", 3}, {"K", 32}, {"BitLinear.N", 16}}, false},
  };
}

/// Every program, parsed or compiled, specialized and run through the O2 pipeline.
inline std::vector<Program> programs() {
  std::vector<Program> out;
  for (auto& [name, tir] : ir_programs()) {
    auto m = ir::parse_module(tir, name + ".tir");
    REQUIRE_MESSAGE(m.ok(), name << ": " << (m.ok() ? "" : m.error().message));
    out.push_back(Program{name, std::move(*m), "f", true});
  }
  for (const DslCase& c : dsl_cases()) {
    const std::string path = std::string(TERNJIT_SOURCE_DIR) + "/tests/dsl/" + c.file;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    auto m = dsl::compile_tri(text.str(), path);
    REQUIRE_MESSAGE(m.ok(), path << ": " << (m.ok() ? "" : m.error().message));
    auto spec = passes::specialize_function(*m, c.function, c.shapes, /*require_static=*/true);
    REQUIRE_MESSAGE(spec.ok(), c.function << ": " << (spec.ok() ? "" : spec.error().message));
    passes::PipelineOptions popts;
    auto report = passes::run_pipeline(*spec, passes::default_pipeline(passes::OptLevel::O2), popts);
    REQUIRE_MESSAGE(report.ok(), c.function << ": " << (report.ok() ? "" : report.error().message));
    out.push_back(Program{std::string(c.file) + " " + c.function, std::move(*spec), c.function, c.must_support});
  }
  return out;
}

/// Random values (seeds `seed`, `seed` + 1, ...; `seed` is advanced) for every parameter of
/// `m` whose shape is static.
inline ir::ParamValues random_params(const ir::Module& m, std::uint64_t& seed) {
  ir::ParamValues params;
  for (const ir::ParamDecl& d : m.params()) {
    std::vector<std::int64_t> shape;
    bool static_shape = true;
    for (const ir::Dim& dim : d.type.shape) {
      static_shape = static_shape && dim.is_static();
      shape.push_back(dim.extent);
    }
    if (static_shape) params.values.emplace(d.name, ir::StoredTensor::random(d.type.elem, shape, seed++));
  }
  return params;
}

/// Random inputs for every argument of `f` (static shapes), seeded as random_params.
inline std::vector<ir::HostTensor> random_args(const ir::Function& f, std::uint64_t& seed) {
  std::vector<ir::HostTensor> args;
  for (ir::ValueId v : f.args()) {
    std::vector<std::int64_t> shape;
    for (const ir::Dim& dim : f.type_of(v).shape) shape.push_back(dim.extent);
    args.push_back(ir::HostTensor::random(f.type_of(v).elem, shape, seed++));
  }
  return args;
}

/// The host buffers of one call: the bytes of `args`, outputs sized like `want`, and the
/// pointer table a kernel's run() takes (inputs, then outputs).
struct HostBuffers {
  std::vector<std::vector<std::uint8_t>> in, out;
  std::vector<void*> pointers;
  HostBuffers(const std::vector<ir::HostTensor>& args, const std::vector<ir::HostTensor>& want) {
    for (const ir::HostTensor& a : args) in.push_back(a.to_bytes());
    for (auto& b : in) pointers.push_back(b.data());
    for (const ir::HostTensor& w : want) out.emplace_back(w.to_bytes().size(), std::uint8_t{0});
    for (auto& b : out) pointers.push_back(b.data());
  }
  /// Fills every output with `byte` (a result the kernel does not write shows).
  void poison(std::uint8_t byte) {
    for (auto& b : out) std::memset(b.data(), byte, b.size());
  }
};

/// Requires result `j` (bytes `got`) to equal `want` bit for bit, naming the first
/// byte that differs.
inline void require_same_bytes(const ir::HostTensor& want, const std::vector<std::uint8_t>& got, std::size_t j) {
  const std::vector<std::uint8_t> wb = want.to_bytes();
  REQUIRE(wb.size() == got.size());
  if (wb == got) return;
  std::size_t at = 0;
  while (at < wb.size() && wb[at] == got[at]) ++at;
  FAIL("result " << j << " differs first at byte " << at << " of " << wb.size());
}

/// Checks f32 result `j` (bytes `got`) element by element against `want`: |got - want|
/// <= abs + rel |want| (+ per[i] when `per` is not empty); a NaN matches a NaN and an
/// infinity itself. Reports at most five elements.
inline void check_f32_result(const ir::HostTensor& want, const std::vector<std::uint8_t>& got, std::size_t j,
                             double abs, double rel, const std::vector<double>& per) {
  std::vector<float> values(want.data.size());
  std::memcpy(values.data(), got.data(), values.size() * 4);
  int fails = 0;
  for (std::size_t i = 0; i < values.size() && fails < 5; ++i) {
    const double wv = want.data[i];
    double bound = abs + rel * std::fabs(wv);
    if (!per.empty()) bound += per[i];
    if (std::isnan(wv) && std::isnan(values[i])) continue;
    if (std::isinf(wv) && static_cast<double>(values[i]) == wv) continue;
    if (!(std::fabs(values[i] - wv) <= bound)) {
      ++fails;
      FAIL_CHECK("result " << j << "[" << i << "] = " << values[i] << ", want " << wv << " (bound " << bound << ")");
    }
  }
}

/// Compiles every program `target` supports, runs it on the target's device on random
/// inputs with poisoned (0xAB) outputs and compares with ir::interpret; loads it a
/// second time in the same Program to see the weights shared. `usage_fragment`, when
/// not empty, must be in the artifact's "usage" metadata. Returns how many ran.
inline int run_on_device(const targets::Target& t, const std::string& usage_fragment) {
  int ran = 0;
  for (const Program& p : programs()) {
    CAPTURE(p.name);
    const ir::Function& f = *p.module.find_function(p.function);
    if (!t.check_supported(f).ok()) continue;
    std::uint64_t seed = 7;
    const ir::ParamValues params = random_params(p.module, seed);
    const std::vector<ir::HostTensor> args = random_args(f, seed);
    auto want = ir::interpret(p.module, p.function, args, params);
    REQUIRE_MESSAGE(want.ok(), (want.ok() ? "" : want.error().message));
    auto a = t.compile(p.module, p.function, {});
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    if (!usage_fragment.empty()) CHECK(a->metadata.at("usage").find(usage_fragment) != std::string::npos);
    auto state = t.new_program_state();
    targets::LoadContext lc;
    lc.params = &params;
    lc.state = state.get();
    auto k = t.load(*a, lc);
    REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
    HostBuffers buffers(args, *want);
    auto& out = buffers.out;
    for (int rep = 0; rep < 2; ++rep) {  // twice: nothing of the first call may leak into the second
      buffers.poison(rep ? 0xAB : 0x5A);
      auto r = k->run(k->state, buffers.pointers.data());
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
      for (std::size_t j = 0; j < out.size(); ++j) {
        const ir::HostTensor& w = (*want)[j];
        if (w.kind != ElemKind::F32) {
          CHECK_MESSAGE(w.to_bytes() == out[j], "result " << j << " differs (integer result: bit for bit)");
          continue;
        }
        // A device smoke check: the exact per-op bounds are held by tests/unit/simt on the
        // same source under the SIMT emulator; here 1e-5 relative plus 1e-5 absolute
        // covers the f32 epilogues, activations and row reductions of these small shapes.
        std::vector<float> got(w.data.size());
        std::memcpy(got.data(), out[j].data(), got.size() * 4);
        for (std::size_t i = 0; i < got.size(); ++i) {
          if (std::isnan(w.data[i]) && std::isnan(got[i])) continue;
          CHECK_MESSAGE(std::fabs(got[i] - w.data[i]) <= 1e-5 + 1e-5 * std::fabs(w.data[i]),
                        "result " << j << "[" << i << "] = " << got[i] << ", want " << w.data[i]);
        }
      }
    }
    auto* weights = dynamic_cast<targets::DeviceWeights*>(state.get());
    REQUIRE(weights != nullptr);
    const std::size_t resident = weights->size();
    auto k2 = t.load(*a, lc);  // a second kernel of the same Program shares the weights
    REQUIRE(k2.ok());
    CHECK(weights->size() == resident);
    ++ran;
  }
  return ran;
}

}  // namespace ternjit::gpu_testing

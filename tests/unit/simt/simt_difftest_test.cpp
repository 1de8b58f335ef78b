// SPDX-License-Identifier: Apache-2.0
// simt_difftest_test.cpp - the random programs of tests/difftest (target mode) through the SIMT generator and emulator.
//
// Each program (difftest::generate_program, target options) goes through the O2 pipeline
// prepared for a GPU target (int8 dot, plain t2 weights), and when simt::supported()
// takes @main, its generated source runs under the emulator (CUDA warp 32 for even
// seeds, HIP warp 64 for odd ones, with and without the dot instruction) against
// ir::interpret of the unoptimized program, compared with difftest's target tolerance
// (tests/difftest/targets.h: exact integers, floats within rtol/atol 2e-4 scaled by the
// generator's magnitude bounds). Programs simt refuses as Unsupported are counted, not
// failed; at least an eighth of them must be checked (the spirv difftest asks 15%), so a generator that refused
// everything could not pass. TERNJIT_SIMT_PROGRAMS sets the count (default 160).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "ir/interpret.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "targets/simt/generate.h"
#include "targets/load_value.h"
#include "tests/difftest/gen.h"
#include "tests/difftest/targets.h"
#include "tests/simt/simt_runtime.h"

namespace ternjit {
namespace {

namespace simt = targets::simt;

TEST_CASE("simt difftest: random programs through the generator and the emulator match the interpreter") {
  const std::string cxx = simt_emu::find_compiler();
  if (cxx.empty()) {
    std::printf("SKIP: no host C++ compiler (g++, clang++-19) to run the SIMT emulator\n");
    return;
  }
  int programs = 160;
  if (const char* e = std::getenv("TERNJIT_SIMT_PROGRAMS")) programs = std::max(1, std::atoi(e));
  int checked = 0, refused = 0;
  std::map<std::string, int> reasons;
  for (int i = 0; i < programs; ++i) {
    const std::uint64_t seed = 7000 + static_cast<std::uint64_t>(i);
    CAPTURE(seed);
    const ir::Module ref = difftest::generate_program(seed, difftest::target_gen_options());
    const difftest::Inputs inputs = difftest::make_inputs(ref, seed);
    auto want = ir::interpret(ref, std::string(difftest::kMainFunction), inputs.args, inputs.params);
    if (!want.ok()) continue;  // the program's own error (the checker's business)
    ir::Module opt = difftest::generate_program(seed, difftest::target_gen_options());
    passes::PipelineOptions po;
    auto piped = passes::run_pipeline(opt, passes::default_pipeline(passes::OptLevel::O2), po);
    REQUIRE_MESSAGE(piped.ok(), (piped.ok() ? "" : piped.error().message));
    const ir::Function& f = *opt.find_function(difftest::kMainFunction);
    if (auto s = simt::supported(f); !s.ok()) {
      ++refused;
      REQUIRE(s.error().code == ErrorCode::Unsupported);
      reasons[s.error().message.substr(0, 60)]++;
      continue;
    }
    simt::SimtOptions o;
    o.dialect = i % 2 == 0 ? simt::Dialect::Cuda : simt::Dialect::Hip;
    o.warp_size = i % 2 == 0 ? 32 : 64;
    o.int_dot = i % 4 < 2;
    auto p = simt::generate(opt, difftest::kMainFunction, o);
    REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
    auto lv = targets::evaluate_load_time(f, p->plan, inputs.params, false);
    REQUIRE_MESSAGE(lv.ok(), (lv.ok() ? "" : lv.error().message));
    std::vector<std::string> names;
    for (const auto& k : p->kernels) names.push_back(k.name);
    auto mod = simt_emu::Module::build(p->source, names, cxx);
    REQUIRE_MESSAGE(mod.ok(), (mod.ok() ? "" : mod.error().message));
    std::vector<std::vector<std::uint8_t>> in, out;
    for (const ir::HostTensor& a : inputs.args) in.push_back(a.to_bytes());
    auto r = simt_emu::run_program(**mod, *p, *lv, in, out);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    std::vector<ir::HostTensor> got;
    for (std::size_t j = 0; j < out.size(); ++j) {
      const ir::Type& t = f.result_types()[j];
      std::vector<std::int64_t> shape;
      for (const ir::Dim& d : t.shape) shape.push_back(d.extent);
      auto h = ir::HostTensor::from_bytes(t.elem, shape, out[j]);
      REQUIRE_MESSAGE(h.ok(), (h.ok() ? "" : h.error().message));
      got.push_back(std::move(*h));
    }
    const auto mismatch = difftest::compare_target_results(*want, got, difftest::output_bounds(ref), {});
    CHECK_MESSAGE(!mismatch, (mismatch ? *mismatch : "") << "\n" << ir::print_module(opt));
    ++checked;
  }
  std::string why;
  for (const auto& [k, n] : reasons) why += "  " + std::to_string(n) + "x " + k + "\n";
  MESSAGE(checked << " programs checked, " << refused << " refused:\n" << why);
  CHECK(checked * 8 >= programs);
}

}  // namespace
}  // namespace ternjit

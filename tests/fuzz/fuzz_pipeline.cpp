// SPDX-License-Identifier: Apache-2.0
// fuzz_pipeline.cpp - libFuzzer harness: the O2 pass pipeline against the interpreter.
//
// Input: IR text. A module that parses (and is small) runs through the O2 pipeline,
// verified after every pass (a failure aborts: TERNJIT_CHECK). Each function that the
// interpreter runs on small random inputs (every symbol 2, or what its constraints ask)
// must give the same results after the pipeline, within the tolerance of a kind
// (fusion reassociates float arithmetic).
#include <algorithm>
#include <span>
#include <string>
#include <string_view>

#include "formats/run_inputs.h"
#include "ir/bind.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "tests/fuzz/fuzz_testing.h"
#include "tests/unit/passes/small_shapes.h"

namespace {

using namespace ternjit;

// Small inputs only: the fuzzer should spend its time on shapes of IR, not arithmetic.
// Modules past kMaxInterpretedInsts still run through the pipeline (the passes must
// stay linear on large input) but are not interpreted.
constexpr std::int64_t kMaxInputElements = 1 << 12;
constexpr std::size_t kMaxInterpretedInsts = 256;

double rtol_for(ElemKind k) {
  switch (k) {
    case ElemKind::F32: return 1e-5;
    case ElemKind::F16: case ElemKind::BF16: return 1e-2;
    default: return 0;
  }
}

// True when `t` has at most kMaxInputElements elements with its symbols bound by `b`
// (an unbound one counts 2): prepare_run draws such tensors at random.
bool fits(const ir::Type& t, std::span<const std::string> symbols, std::string_view layer,
          const ir::ShapeBindings& b) {
  std::int64_t n = 1;
  for (const ir::Dim& d : t.shape) {
    const std::int64_t e = d.is_static() ? d.extent : b.lookup(layer, symbols[d.sym.index]).value_or(2);
    auto p = ir::mul_extents(n, e);
    if (!p || *p > kMaxInputElements) return false;
    n = *p;
  }
  return true;
}

// The inputs prepare_run draws for `f` are all small.
bool small_inputs(const ir::Module& m, const ir::Function& f, const ir::ShapeBindings& b) {
  for (ir::ValueId v : f.args())
    if (!fits(f.type_of(v), f.symbols(), ir::layer_of(f.name()), b)) return false;
  for (const ir::ParamDecl& p : m.params())
    if (!fits(p.type, p.symbols, ir::layer_of(p.name), b)) return false;
  return true;
}

bool small_module(const ir::Module& m) {
  std::size_t insts = 0;
  for (const ir::Function& f : m.functions())
    for (ir::BlockId b : f.blocks()) insts += f.insts(b).size();
  return insts <= kMaxInterpretedInsts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto parsed = ir::parse_module(fuzz::as_text(data, size), "fuzz.tir");
  if (!parsed.ok()) return 0;
  const ir::Module before = *parsed;
  ir::Module after = before;
  // A user error (a call tree too large to inline) is a fine outcome; a bug aborts.
  if (!passes::run_pipeline(after, passes::default_pipeline(passes::OptLevel::O2), {}).ok()) return 0;
  if (!small_module(before)) return 0;

  ir::InterpretOptions options;
  options.max_steps = 20'000;
  options.max_elements = 1 << 16;
  options.max_work = 1 << 24;  // a loop of large ops stops in well under the -timeout
  for (const ir::Function& f : before.functions()) {
    formats::PrepareOptions po;
    po.seed = size;
    const ir::ShapeBindings shapes = testing::small_shapes(before, f);
    if (!small_inputs(before, f, shapes)) continue;
    auto inputs = formats::prepare_run(before, f, nullptr, nullptr, shapes, po);
    if (!inputs.ok()) continue;
    auto want = ir::interpret(before, f, inputs->args, inputs->params, options);
    if (!want.ok()) continue;
    const ir::Function* g = after.find_function(f.name());
    if (!g) continue;
    auto got = ir::interpret(after, *g, inputs->args, inputs->params, options);
    if (!got.ok()) {
      // More steps after inlining (a `br` per inlined `ret`) is no wrong answer.
      if (got.error().message.find("execution exceeded") != std::string::npos) continue;
      fuzz::finding("@" + f.name() + " ran before the pipeline but fails after it: " + got.error().message +
                    "\n" + ir::print_module(after));
    }
    if (got->size() != want->size()) fuzz::finding("@" + f.name() + " returns another number of results");
    for (std::size_t k = 0; k < got->size(); ++k) {
      const double rtol = rtol_for((*want)[k].kind);
      if (auto mismatch = ir::compare((*want)[k], (*got)[k], rtol, rtol / 10))
        fuzz::finding("@" + f.name() + " result " + std::to_string(k) + " differs after the pipeline: " +
                      mismatch->message + "\n" + ir::print_module(after));
    }
  }
  return 0;
}

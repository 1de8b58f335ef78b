// SPDX-License-Identifier: Apache-2.0
// simt_golden_test.cpp - golden files of the generated CUDA/HIP source: two shapes per op, the preludes, the launch plans.
//
// tests/unit/simt/golden/<op>_<shape>.cu holds the kernels (the source after the
// dialect's prelude) and the launch plan of a CUDA program (warp 32); a few programs also
// have a .hip file (HIP, warp 64); prelude_<variant>.cu hold the preludes. A change of
// the generated text fails here until the files are regenerated on purpose:
//   TERNJIT_UPDATE_GOLDEN=1 build/tests/unit_simt --test-case='*golden*'
// (then review the diff like any other change).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/parse.h"
#include "targets/simt/generate.h"
#include "tests/unit/simt/simt_programs.h"

namespace ternjit {
namespace {

namespace simt = targets::simt;
namespace fs = std::filesystem;

const fs::path kDir = fs::path(TERNJIT_SOURCE_DIR) / "tests/unit/simt/golden";

std::string arg_text(const simt::KernelArg& a) {
  switch (a.kind) {
    case simt::KernelArg::Kind::Input: return "in" + std::to_string(a.index);
    case simt::KernelArg::Kind::Output: return "out" + std::to_string(a.index);
    case simt::KernelArg::Kind::Const: return "const" + std::to_string(a.index);
    case simt::KernelArg::Kind::Weight: return "weight" + std::to_string(a.index);
    case simt::KernelArg::Kind::Scratch: return "scratch" + std::to_string(a.index);
    case simt::KernelArg::Kind::Scalar: return "u32:" + std::to_string(a.scalar);
  }
  return "?";
}

// The launch plan as comment lines.
std::string plan_text(const simt::KernelSet& p) {
  std::ostringstream o;
  o << "// plan: " << simt::dialect_name(p.dialect) << " warp " << p.warp_size << "\n";
  for (const simt::KernelLaunch& k : p.kernels) {
    o << "// launch " << k.name << " grid (" << k.grid.x << ", " << k.grid.y << ", " << k.grid.z << ") block ("
      << k.block.x << ", " << k.block.y << ", " << k.block.z << ") shared " << k.shared_bytes << " args";
    for (const simt::KernelArg& a : k.args) o << " " << arg_text(a);
    if (k.tmatmul >= 0) o << " config " << simt::config_text(p.configs[static_cast<std::size_t>(k.tmatmul)]);
    o << "\n";
  }
  for (std::size_t s = 0; s < p.scratch_bytes.size(); ++s)
    o << "// scratch" << s << " " << p.scratch_bytes[s] << " bytes\n";
  for (std::size_t w = 0; w < p.weights.size(); ++w)
    o << "// weight" << w << " const" << p.weights[w].load_time << " @" << p.weights[w].param << " [" << p.weights[w].k
      << ", " << p.weights[w].n << "] " << simt::layout_name(p.weights[w].layout) << " " << simt::packed_weight_bytes(p.weights[w].k, p.weights[w].n, p.weights[w].layout)
      << " bytes\n";
  return o.str();
}

// The line of `s` holding byte `at`.
std::string line_at(const std::string& s, std::size_t at) {
  const std::size_t b = at == 0 ? 0 : s.rfind('\n', at - 1) == std::string::npos ? 0 : s.rfind('\n', at - 1) + 1;
  return s.substr(b, s.find('\n', b) == std::string::npos ? std::string::npos : s.find('\n', b) - b);
}

// Compares `text` with golden file `name` (or rewrites it under TERNJIT_UPDATE_GOLDEN).
void golden(const std::string& name, const std::string& text) {
  CAPTURE(name);
  const fs::path file = kDir / name;
  if (const char* u = std::getenv("TERNJIT_UPDATE_GOLDEN"); u != nullptr && std::string(u) == "1") {
    fs::create_directories(kDir);
    std::ofstream(file, std::ios::binary) << text;
    return;
  }
  std::ifstream in(file, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "no golden file " << file.string() << " (TERNJIT_UPDATE_GOLDEN=1 writes it)");
  const std::string want((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (want != text) {
    std::size_t at = 0;
    while (at < want.size() && at < text.size() && want[at] == text[at]) ++at;
    const std::size_t line = static_cast<std::size_t>(std::count(want.begin(), want.begin() + static_cast<long>(at), '\n')) + 1;
    FAIL_CHECK(file.string() << " differs at line " << line << ":\n  golden: " << line_at(want, at)
                             << "\n  now:    " << line_at(text, at));
  }
}

simt::KernelSet gen(const std::string& tir, simt::Dialect d, std::uint32_t warp, bool dot, bool tensor_cores = false) {
  simt::SimtOptions o;
  o.dialect = d;
  o.warp_size = warp;
  o.int_dot = dot;
  o.tensor_cores = tensor_cores;
  return simt_test::generate(tir, o);
}

// The prelude: everything before the first kernel.
std::size_t prelude_end(const std::string& src) { return src.find("\nextern \"C\" __global__"); }

TEST_CASE("simt golden: the generated kernels and launch plans of two shapes per op, the preludes") {
  for (const simt_test::OpProgram& op : simt_test::op_programs()) {
    const simt::KernelSet p = gen(op.tir, simt::Dialect::Cuda, 32, true);
    const std::size_t at = prelude_end(p.source);
    REQUIRE(at != std::string::npos);
    golden(op.name + ".cu", plan_text(p) + p.source.substr(at + 1));
  }
  // The tensor-core form: from the mma helpers (after the prelude) on.
  for (const simt_test::OpProgram& op : simt_test::mma_programs()) {
    const simt::KernelSet p = gen(op.tir, simt::Dialect::Cuda, 32, true, true);
    const std::size_t at = p.source.find("\n#ifndef TJEMU_MMA");
    REQUIRE(at != std::string::npos);
    golden(op.name + ".cu", plan_text(p) + p.source.substr(at + 1));
  }
  for (const char* name : {"tmatmul_i8_1x2560x6912", "bitlinear_ffn_8x2560x6912"}) {
    for (const simt_test::OpProgram& op : simt_test::op_programs()) {
      if (op.name != name) continue;
      const simt::KernelSet p = gen(op.tir, simt::Dialect::Hip, 64, true);
      golden(op.name + ".hip", plan_text(p) + p.source.substr(prelude_end(p.source) + 1));
    }
  }
  const std::string any = simt_test::op_programs()[0].tir;
  struct V {
    const char* name;
    simt::Dialect d;
    std::uint32_t warp;
    bool dot;
  };
  for (const V v : {V{"prelude_cuda.cu", simt::Dialect::Cuda, 32, true}, V{"prelude_cuda_scalar.cu", simt::Dialect::Cuda, 32, false},
                    V{"prelude_hip64.cu", simt::Dialect::Hip, 64, true}}) {
    const simt::KernelSet p = gen(any, v.d, v.warp, v.dot);
    golden(v.name, p.source.substr(0, prelude_end(p.source) + 1));
  }
}

}  // namespace
}  // namespace ternjit

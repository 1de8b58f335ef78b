// SPDX-License-Identifier: Apache-2.0
// simt_rtc_test.cpp - every generated CUDA variant through NVRTC (sm_80, sm_90: PTX and cubin), HIP through hiprtc (gfx90a; wave32: gfx1030).
//
// The libraries are opened here with dlopen (test-local, through the targets' helpers in
// targets/simt/driver_library.h; nothing is linked): libnvrtc.so.13/.12 (also under
// /usr/local/cuda/lib64) and hiprtc inside libamdhip64.so.5 (ROCm 5.2) or libhiprtc.so. A machine without them reports the case
// SKIPPED with the reason. hiprtc of ROCm 5.2 aborts the process for offload archs it does
// not know: only gfx90a and gfx1030 (both in targets/hip's list) are asked for.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "ir/parse.h"
#include "targets/simt/driver_library.h"
#include "targets/simt/generate.h"
#include "targets/simt/tuning_space.h"
#include "tests/unit/simt/simt_programs.h"

namespace ternjit {
namespace {

namespace simt = targets::simt;

struct Nvrtc {
  using Prog = void*;
  int (*create)(Prog*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(Prog, int, const char* const*) = nullptr;
  int (*log_size)(Prog, std::size_t*) = nullptr;
  int (*log)(Prog, char*) = nullptr;
  int (*ptx_size)(Prog, std::size_t*) = nullptr;
  int (*cubin_size)(Prog, std::size_t*) = nullptr;
  int (*destroy)(Prog*) = nullptr;
  bool ok = false;
};

const Nvrtc& nvrtc() {
  static const Nvrtc n = [] {
    Nvrtc r;
    std::string found, tried;
    void* h = simt::open_first({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                                "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12",
                                "/usr/local/cuda/lib64/libnvrtc.so"},
                               found, tried);
    if (h == nullptr) return r;
    simt::SymbolTable sym(h);
    sym.get(r.create, "nvrtcCreateProgram");
    sym.get(r.compile, "nvrtcCompileProgram");
    sym.get(r.log_size, "nvrtcGetProgramLogSize");
    sym.get(r.log, "nvrtcGetProgramLog");
    sym.get(r.ptx_size, "nvrtcGetPTXSize");
    sym.get(r.cubin_size, "nvrtcGetCUBINSize");
    sym.get(r.destroy, "nvrtcDestroyProgram");
    r.ok = sym.missing().empty();
    return r;
  }();
  return n;
}

struct Hiprtc {
  using Prog = void*;
  int (*create)(Prog*, const char*, const char*, int, const char**, const char**) = nullptr;
  int (*compile)(Prog, int, const char**) = nullptr;
  int (*log_size)(Prog, std::size_t*) = nullptr;
  int (*log)(Prog, char*) = nullptr;
  int (*code_size)(Prog, std::size_t*) = nullptr;
  int (*destroy)(Prog*) = nullptr;
  bool ok = false;
};

const Hiprtc& hiprtc() {
  static const Hiprtc n = [] {
    Hiprtc r;
    std::string found, tried;
    void* h = simt::open_first({"libhiprtc.so", "libamdhip64.so.5", "libamdhip64.so"}, found, tried);
    if (h == nullptr) return r;
    simt::SymbolTable sym(h);
    sym.get(r.create, "hiprtcCreateProgram");
    sym.get(r.compile, "hiprtcCompileProgram");
    sym.get(r.log_size, "hiprtcGetProgramLogSize");
    sym.get(r.log, "hiprtcGetProgramLog");
    sym.get(r.code_size, "hiprtcGetCodeSize");
    sym.get(r.destroy, "hiprtcDestroyProgram");
    r.ok = sym.missing().empty();
    return r;
  }();
  return n;
}

// The generated programs compiled here: every kernel op, both tmatmul paths, grouped.
std::vector<simt::KernelSet> programs(simt::Dialect d, std::uint32_t warp, bool int_dot) {
  std::vector<simt::KernelSet> out;
  for (const std::string& tir : simt_test::program_texts()) {
    simt::SimtOptions o;
    o.dialect = d;
    o.warp_size = warp;
    o.int_dot = int_dot;
    out.push_back(simt_test::generate(tir, o));
  }
  // CUDA: the tensor-core (mma.sync) form, by default and under every mma candidate of
  // the odd shape (each compiled with no spills).
  if (d == simt::Dialect::Cuda && int_dot)
    for (const simt_test::OpProgram& op : simt_test::mma_programs()) {
      auto m = ir::parse_module(op.tir, "rtc.tir");
      REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
      const auto shapes = simt::tmatmul_shapes(*m->find_function("f"));
      std::vector<std::vector<std::string>> decisions = {{}};
      if (shapes.size() == 1)
        for (const simt::TMatMulConfig& c : simt::candidate_configs(shapes[0], 32, true))
          if (c.mma != 0) decisions.push_back({simt::config_text(c)});
      for (const auto& dec : decisions) {
        simt::SimtOptions o;
        o.tensor_cores = true;
        o.decisions = dec;
        auto p = simt::generate(*m, "f", o);
        REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
        for (const simt::TMatMulConfig& c : p->configs) REQUIRE(c.mma == 1);
        REQUIRE(p->source.find("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") != std::string::npos);
        out.push_back(std::move(*p));
      }
    }
  return out;
}

TEST_CASE("simt: NVRTC compiles every generated CUDA program for sm_80 and sm_90 (PTX and cubin, no spills)") {
  const Nvrtc& n = nvrtc();
  if (!n.ok) {
    std::printf("SKIP: libnvrtc.so.13/.12 not found (no CUDA toolkit)\n");  // ctest: SKIP_REGULAR_EXPRESSION
    return;
  }
  for (bool dot : {true, false})
    for (const simt::KernelSet& p : programs(simt::Dialect::Cuda, 32, dot))
      for (const char* arch : {"--gpu-architecture=sm_80", "--gpu-architecture=sm_90"}) {
        CAPTURE(arch);
        Nvrtc::Prog prog = nullptr;
        REQUIRE(n.create(&prog, p.source.c_str(), "tj.cu", 0, nullptr, nullptr) == 0);
        const char* opts[] = {arch, "--std=c++17", "--ptxas-options=-v"};
        const int rc = n.compile(prog, 3, opts);
        std::size_t ls = 0;
        n.log_size(prog, &ls);
        std::string log(ls, '\0');
        n.log(prog, log.data());
        CAPTURE(log);
        CHECK_MESSAGE(rc == 0, p.source);
        std::size_t ptx = 0, cubin = 0;
        // The default configurations keep every value in registers: ptxas reports no
        // spill (a spill of a kernel here is a performance defect of the generator).
        int spill_lines = 0;
        for (std::size_t at = log.find("bytes spill stores"); at != std::string::npos;
             at = log.find("bytes spill stores", at + 1)) {
          const std::size_t start = log.rfind(' ', at - 2) + 1;
          CHECK_MESSAGE(log.substr(start, at - 1 - start) == "0", log.substr(start, 60));
          ++spill_lines;
        }
        CHECK(spill_lines >= static_cast<int>(p.kernels.size()));  // ptxas -v reports every kernel
        if (rc == 0) {
          CHECK(n.ptx_size(prog, &ptx) == 0);
          CHECK(n.cubin_size(prog, &cubin) == 0);
          CHECK(ptx > 100);
          CHECK(cubin > 100);
        }
        n.destroy(&prog);
      }
}

// Compiles `p` with hiprtc for `arch`; the log on failure.
void hip_compile(const Hiprtc& h, const simt::KernelSet& p, const char* arch) {
  CAPTURE(arch);
  Hiprtc::Prog prog = nullptr;
  REQUIRE(h.create(&prog, p.source.c_str(), "tj.hip", 0, nullptr, nullptr) == 0);
  const char* opts[] = {arch, "-O3"};
  const int rc = h.compile(prog, 2, opts);
  std::size_t ls = 0;
  h.log_size(prog, &ls);
  std::string log(ls, '\0');
  if (ls > 0) h.log(prog, log.data());
  CAPTURE(log);
  CHECK_MESSAGE(rc == 0, p.source);
  std::size_t code = 0;
  if (rc == 0) {
    CHECK(h.code_size(prog, &code) == 0);
    CHECK(code > 100);
  }
  h.destroy(&prog);
}

TEST_CASE("simt: hiprtc compiles every generated HIP program for gfx90a (wave64), some wave32 ones for gfx1030") {
  const Hiprtc& h = hiprtc();
  if (!h.ok) {
    std::printf("SKIP: hiprtc not found (libamdhip64.so.5 / libhiprtc.so)\n");  // ctest: SKIP_REGULAR_EXPRESSION
    return;
  }
  struct V {
    std::uint32_t warp;
    bool dot;
  };
  for (const V v : {V{64, true}, V{64, false}})
    for (const simt::KernelSet& p : programs(simt::Dialect::Hip, v.warp, v.dot)) hip_compile(h, p, "--offload-arch=gfx90a");
  // RDNA runs wave32: the tmatmul and row-op programs with TJ_WARP 32.
  const auto w32 = programs(simt::Dialect::Hip, 32, true);
  for (std::size_t i : {0u, 1u, 9u, 15u}) hip_compile(h, w32.at(i), "--offload-arch=gfx1030");
}

}  // namespace
}  // namespace ternjit

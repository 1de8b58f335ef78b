// SPDX-License-Identifier: Apache-2.0
// decoder_ops_unsupported_test.cpp - the GPU generators (CUDA, HIP, SPIR-V) have no kernel
// for the decoder ops: check_supported refuses each one as Unsupported naming the op (so
// `auto` runs such a function elsewhere), and compile() fails without crashing. Runs
// everywhere (no toolchain or device is needed to refuse).
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "ir/parse.h"
#include "targets/cuda/cuda_target.h"
#include "targets/hip/hip_target.h"
#include "targets/spirv/spirv_target.h"

namespace ternjit {
namespace {

struct OpCase {
  const char* op;
  const char* sig;   // arguments
  const char* body;  // defines %z
  const char* type;  // of %z
};

constexpr OpCase kCases[] = {
    {"gather", "%t: f32[5, 4], %i: i32[3]", "gather %t, %i {axis = 0}", "f32[3, 4]"},
    {"slice", "%x: f32[3, 4]", "slice %x {axis = 1, start = 1, size = 2}", "f32[3, 2]"},
    {"concat", "%x: f32[3, 4], %y: f32[3, 2]", "concat %x, %y {axis = 1}", "f32[3, 6]"},
    {"layernorm", "%x: f32[3, 4], %g: f32[4]", "layernorm %x, %g, %g {eps = 1e-05}", "f32[3, 4]"},
    {"rope", "%x: f32[3, 2, 4], %p: i32[]", "rope %x, %p {theta = 10000, mode = norm}", "f32[3, 2, 4]"},
    {"causal_softmax", "%x: f32[3, 4], %p: i32[]", "causal_softmax %x, %p", "f32[3, 4]"},
    {"kv_write", "%c: f32[2, 4, 2, 4], %x: f32[3, 2, 4], %p: i32[]", "kv_write %c, %x, %p {layer = 1}", "f32[2, 4, 2, 4]"},
    {"attention", "%q: f32[3, 2, 4], %c: f16[2, 4, 1, 4], %p: i32[]", "attention %q, %c, %c, %p {layer = 0, scale = 0.5}",
     "f32[3, 2, 4]"},
};

TEST_CASE("cuda, hip and spirv refuse each decoder op as Unsupported, naming it") {
  std::unique_ptr<targets::Target> gpus[] = {targets::make_cuda_target(), targets::make_hip_target(),
                                             targets::make_spirv_target()};
  for (const OpCase& c : kCases) {
    CAPTURE(c.op);
    const std::string text = std::string("func @f(") + c.sig + ") -> " + c.type + " {\n^entry:\n  %z = " + c.body + " : " +
                             c.type + "\n  ret %z\n}\n";
    auto m = ir::parse_module(text, "op.tir");
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : m.error().message));
    for (const auto& t : gpus) {
      CAPTURE(t->name());
      auto r = t->check_supported(*m->find_function("f"));
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == ErrorCode::Unsupported);
      CHECK_MESSAGE(r.error().message.find(std::string("'") + c.op + "'") != std::string::npos, r.error().message);
      CHECK_FALSE(t->compile(*m, "f", {}).ok());  // never a crash, whatever else it lacks here
    }
  }
}

}  // namespace
}  // namespace ternjit

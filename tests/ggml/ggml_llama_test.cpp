// SPDX-License-Identifier: Apache-2.0
// ggml_llama_test.cpp - llama.cpp with libggml-ternjit loaded computes the same model as
// stock llama.cpp: the synthetic silu `bitnet` file of e2e/llama_cpp (TQ2_0, from
// ternjit::write_synthetic_bitnet) and the same file re-encoded by the pinned llama.cpp's
// own llama-quantize as TQ1_0 and Q2_0 (lossless: every block holds a +-1 at its scale), each
// run by stock llama.cpp first and then, in the same process, with the backend loaded
// (ggml_backend_load, as GGML_BACKEND_PATH does): every position's logits.
//
// The bound. The two differ only in how the activations entering each ternary matmul are
// rounded: ggml-cpu's Q8_K (one int8 scale per 256 values) against ternjit's int8 with one
// scale per row (GGML_TERNJIT_ACTIVATIONS=int8, the default; BitNet b1.58's own
// activation quantization) or none (f32): the difference e2e/llama_cpp measures between
// llama.cpp and ternjit's own decoder (its comment derives it: up to half a quantization
// step of either grid per value, random-signed, through 7 projections per block), so its
// bound is asserted: max |a - b| <= 3% of the row's largest |logit| and cosine >= 0.999 for
// every row. The test is not vacuous: the backend must have packed every ternary weight of
// each model (7 per block), so the logits compared are ternjit's.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ternjit/bitnet.h"
#include "tests/llama_cpp/llama_logits.h"
#include "tools/llama_cpp/llama_cpp_runner.h"

namespace {

using namespace ternjit;

std::string g_backend;    // libggml-ternjit.so
std::string g_quantize;   // llama-quantize

using llama_cpp_test::kContext;
using llama_cpp_test::TempDir;

constexpr std::int64_t kVocab = 50;
constexpr std::int64_t kBlocks = 2;

std::size_t packed_weights();

// Every position's logits (llama_cpp_test::llama_logits). With the backend loaded, *packed is
// the number of weights it holds packed at the end (the model still alive).
std::vector<float> logits(const std::string& path, int threads, std::size_t* packed = nullptr) {
  return llama_cpp_test::llama_logits(path, threads, [&](const llama_cpp::Model&) {
    if (packed) *packed = packed_weights();
  });
}

// Runs llama-quantize (no shell): IN -> OUT of `type`, the embedding and head kept f16.
void requantize(const std::string& in, const std::string& out, const std::string& type) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    ::execl(g_quantize.c_str(), g_quantize.c_str(), "--allow-requantize", "--token-embedding-type", "f16",
            "--output-tensor-type", "f16", in.c_str(), out.c_str(), type.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), "llama-quantize to " << type << " failed");
}

std::size_t packed_weights() {
  ggml_backend_reg_t reg = ggml_backend_reg_by_name("TERNJIT");
  REQUIRE(reg);
  using Memory = void (*)(size_t*, size_t*, size_t*);
  auto memory = reinterpret_cast<Memory>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_ternjit_memory"));
  REQUIRE(static_cast<bool>(memory));
  size_t weights = 0, packed = 0, source = 0;
  memory(&weights, &packed, &source);
  MESSAGE("packed: " << weights << " weights, " << packed << " bytes in ternjit's layout from " << source
                     << " bytes of GGUF blocks");
  return weights;
}

TEST_CASE("llama.cpp with the ternjit backend and stock llama.cpp: the same logits, TQ2_0, TQ1_0 and Q2_0") {
  TempDir dir("ternjit_ggml_llama_test_");
  const std::string tq2 = (dir.path / "tiny-tq2_0.gguf").string();
  BitNetConfig c{kBlocks, 256, 4, 2, 512, kVocab, kContext};
  c.ffn_activation = BitNetActivation::Silu;
  REQUIRE(write_synthetic_bitnet(tq2, c, 7).ok());
  struct File {
    const char* type;
    std::string path;
  };
  std::vector<File> files = {{"TQ2_0", tq2}};
  for (const char* type : {"TQ1_0", "Q2_0"}) {
    files.push_back({type, (dir.path / (std::string("tiny-") + type + ".gguf")).string()});
    requantize(tq2, files.back().path, type);
  }
  // Stock llama.cpp first: once loaded, the backend serves every later model of the process.
  std::vector<std::vector<float>> stock;
  for (const File& f : files) stock.push_back(logits(f.path, 1));
  auto loaded = llama_cpp::load_backend(g_backend);
  REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
  for (int threads : {1, 2})
    for (std::size_t i = 0; i < files.size(); ++i) {
      const std::string type = files[i].type;
      CAPTURE(type);
      CAPTURE(threads);
      std::size_t packed = 0;
      const std::vector<float> got = logits(files[i].path, threads, &packed);
      // Every ternary weight of this model is packed while it lives (and forgotten when its
      // buffers are freed with it: the next model starts from none).
      CHECK(packed == static_cast<std::size_t>(7 * kBlocks));
      CHECK(packed_weights() == 0);
      const llama_cpp_test::RowDiff w = llama_cpp_test::compare_rows(got, stock[i], kVocab);
      MESSAGE(type << ", " << threads << " thread(s): worst row max|ternjit - stock| = " << w.rel * 100
                   << "% of its largest |logit|, cosine " << w.cosine);
      CHECK(w.rel <= 0.03);
      CHECK(w.cosine >= 0.999);
    }
}

}  // namespace

int main(int argc, char** argv) {
  if (!llama_cpp::available()) {
    std::printf("SKIP: %s\n", llama_cpp::unavailable_reason().c_str());
    return 77;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LIBGGML_TERNJIT LLAMA_QUANTIZE [doctest options]\n", argv[0]);
    return 2;
  }
  g_backend = argv[1];
  g_quantize = argv[2];
  std::vector<char*> args = {argv[0]};
  args.insert(args.end(), argv + 3, argv + argc);
  doctest::Context ctx(static_cast<int>(args.size()), args.data());
  return ctx.run();
}

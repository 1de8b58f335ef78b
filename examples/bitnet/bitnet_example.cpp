// SPDX-License-Identifier: Apache-2.0
// bitnet_example.cpp - a BitNet b1.58 model from a llama.cpp `bitnet` GGUF file or a Hugging
// Face checkpoint directory, run through the public API only (include/ternjit): prefill on
// given token ids, then greedy decoding with the host-owned KV cache updated in place
// (docs/bitnet.md).
//
//   bitnet_example [--model FILE.gguf | --hf DIR] [--tiny] [--dir DIR] [--tokens 1,2,3] [--decode N]
//                  [--target auto|x86|llvm|reference] [--threads T] [--context C]
//
// --hf DIR reads a transformers BitNetForCausalLM checkpoint (config.json + safetensors,
// packed or bf16 master weights: ternjit::read_hf_bitnet_config, bind_hf_bitnet).
// Without --model or --hf it writes a synthetic model (random ternary weights, llama.cpp names and
// metadata) into DIR (default: a fresh temporary directory, removed at exit): the 2B4T
// shapes, or with --tiny a 2-block E 256 model. It prints the generated token ids and the
// prefill and decode tokens per second. A bad argument or any failure is a message on stderr
// and exit status 1 (--help: the options).
#include <CLI/CLI.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include <string>
#include <vector>

#include "ternjit/bitnet.h"
#include "ternjit/engine.h"

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "bitnet_example: %s\n", what.c_str());
  return 1;
}

// A CLI11 check: the value is a whole number in [lo, hi] (CLI::Range alone calls "x" out of range).
CLI::Validator whole_number(std::int64_t lo, std::int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return {[lo, hi, range](std::string& s) -> std::string {
            std::int64_t v = 0;
            const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return "'" + s + "' is not a whole number";
            if (v < lo || v > hi) return s + " is outside " + range;
            return {};
          },
          "INT in " + range};
}

// The index of the largest logit (greedy decoding).
std::int32_t argmax(const float* row, std::int64_t n) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return static_cast<std::int32_t>(best);
}

}  // namespace

int run(int argc, char** argv) {
  std::string model, hf, dir, target = "auto";
  std::vector<std::int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  int decode = 16, threads = 0;
  bool tiny = false;
  std::int64_t context = 0;
  // CLI11 (as the ternjit CLI): typed options, so "--tokens 1,2,x" or "--decode -1" is a
  // message, never an exception escaping main.
  CLI::App app{"bitnet_example - a BitNet b1.58 model (a llama.cpp `bitnet` GGUF file, a Hugging Face checkpoint "
               "directory or a synthetic model): prefill, then greedy decoding with the KV cache in place",
               "bitnet_example"};
  auto* model_opt = app.add_option("--model", model, "a llama.cpp `bitnet` GGUF file (default: a synthetic model)");
  app.add_option("--hf", hf, "a Hugging Face BitNetForCausalLM checkpoint directory")->excludes(model_opt);
  app.add_flag("--tiny", tiny, "the synthetic model has 2 blocks of E 256 (default: the 2B4T shapes)");
  app.add_option("--dir", dir, "where the synthetic model is written (default: a temporary directory)");
  app.add_option("--tokens", prompt, "the prompt's token ids, comma-separated (default 1,2,...,8)")
      ->delimiter(',')
      ->check(whole_number(0, INT32_MAX));
  app.add_option("--decode", decode, "greedy tokens to generate (default 16)")->check(whole_number(0, 1 << 20));
  app.add_option("--target", target, "auto, x86, llvm, reference, ... (default auto)");
  app.add_option("--threads", threads, "kernel threads, 0 for the default")->check(whole_number(0, 1 << 16));
  app.add_option("--context", context, "KV cache rows (default: prompt + decode)")
      ->check(whole_number(0, std::int64_t{1} << 31));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return fail(std::string(e.what()) + " (--help lists the options)");
  }
  if (prompt.empty()) return fail("--tokens needs at least one id");

  // The model file: given, or a synthetic one written now.
  std::filesystem::path tmp;
  if (model.empty() && hf.empty()) {
    ternjit::BitNetConfig cfg;
    if (tiny) cfg = {2, 256, 4, 2, 512, 50, 64, 500000.0, 1e-5};
    if (dir.empty()) {
      tmp = std::filesystem::temp_directory_path() / ("ternjit_bitnet_example_" + std::to_string(::getpid()));
      std::filesystem::create_directories(tmp);
      dir = tmp.string();
    }
    model = (std::filesystem::path(dir) / (tiny ? "bitnet-tiny-synthetic.gguf" : "bitnet-2b4t-synthetic.gguf")).string();
    const auto t0 = std::chrono::steady_clock::now();
    if (auto w = ternjit::write_synthetic_bitnet(model, cfg, 1); !w.ok()) return fail(w.error().message);
    std::printf("wrote synthetic model %s in %.1f s\n", model.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  struct Cleanup {
    std::filesystem::path p;
    ~Cleanup() {
      std::error_code ec;
      if (!p.empty()) std::filesystem::remove_all(p, ec);
    }
  } cleanup{tmp};

  // The decoder's configuration: the GGUF file's metadata, or the checkpoint's config.json.
  ternjit::HfBitNetConfig checkpoint;
  if (!hf.empty()) {
    auto r = ternjit::read_hf_bitnet_config(hf);
    if (!r.ok()) return fail(r.error().message);
    checkpoint = std::move(r.value());
  } else {
    auto r = ternjit::read_bitnet_config(model);
    if (!r.ok()) return fail(r.error().message);
    checkpoint.decoder = r.value();
  }
  const ternjit::BitNetConfig& c = checkpoint.decoder;
  const auto total = static_cast<std::int64_t>(prompt.size()) + decode;
  if (context == 0) context = total;
  if (context < total) return fail("--context " + std::to_string(context) + " < prompt + decode = " + std::to_string(total));
  for (std::int32_t id : prompt)
    if (id < 0 || id >= c.vocab) return fail("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                             std::to_string(c.vocab) + ")");
  std::printf("model: %lld blocks, hidden %lld, heads %lld/%lld, ffn %lld, vocab %lld; context %lld\n",
              static_cast<long long>(c.blocks), static_cast<long long>(c.hidden), static_cast<long long>(c.heads),
              static_cast<long long>(c.kv_heads), static_cast<long long>(c.ffn), static_cast<long long>(c.vocab),
              static_cast<long long>(context));

  ternjit::EngineOptions o;
  o.target = target;
  o.threads = threads;
  auto engine = ternjit::Engine::create(o);
  if (!engine.ok()) return fail(engine.error().message);
  auto source = ternjit::bitnet_tri_source(c, context);
  if (!source.ok()) return fail(source.error().message);
  auto program = engine->compile(*source, "bitnet.tri");
  if (!program.ok()) return fail(program.error().message);
  if (!hf.empty()) {
    if (auto b = ternjit::bind_hf_bitnet(*program, checkpoint); !b.ok()) return fail(b.error().message);
  } else if (auto b = program->bind_file(model, ternjit::bitnet_name_map("BitNet")); !b.ok()) {
    return fail(b.error().message);
  }

  // The host-owned caches [blocks, context, kv_heads, head_dim] of f16, passed as input and
  // output of every step (updated in place: only rows [pos, pos + M) are written).
  const std::int64_t d = c.hidden / c.heads;
  const std::vector<std::int64_t> cache_shape = {c.blocks, context, c.kv_heads, d};
  std::vector<std::uint16_t> k_cache(static_cast<std::size_t>(c.blocks * context * c.kv_heads * d));
  std::vector<std::uint16_t> v_cache(k_cache.size());
  std::vector<float> logits;
  auto step = [&](const std::vector<std::int32_t>& ids, std::int32_t pos) -> ternjit::Result<void> {
    const auto m = static_cast<std::int64_t>(ids.size());
    logits.assign(static_cast<std::size_t>(m * c.vocab), 0.0f);
    const ternjit::TensorView in[] = {{const_cast<std::int32_t*>(ids.data()), ternjit::ElemKind::I32, {m}},
                                      {&pos, ternjit::ElemKind::I32, {}},
                                      {k_cache.data(), ternjit::ElemKind::F16, cache_shape},
                                      {v_cache.data(), ternjit::ElemKind::F16, cache_shape}};
    ternjit::TensorView out[] = {{logits.data(), ternjit::ElemKind::F32, {m, c.vocab}},
                                 {k_cache.data(), ternjit::ElemKind::F16, cache_shape},
                                 {v_cache.data(), ternjit::ElemKind::F16, cache_shape}};
    return program->run("BitNet.forward", in, out);
  };

  // Prefill (the first call also compiles the M = prompt step; timed separately).
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  if (auto k = program->kernel("BitNet.forward", std::vector<ternjit::TensorView>{
                                                     {nullptr, ternjit::ElemKind::I32, {static_cast<std::int64_t>(prompt.size())}},
                                                     {nullptr, ternjit::ElemKind::I32, {}},
                                                     {nullptr, ternjit::ElemKind::F16, cache_shape},
                                                     {nullptr, ternjit::ElemKind::F16, cache_shape}});
      !k.ok())
    return fail(k.error().message);
  if (decode > 0)
    if (auto k = program->kernel("BitNet.forward", std::vector<ternjit::TensorView>{
                                                       {nullptr, ternjit::ElemKind::I32, {1}},
                                                       {nullptr, ternjit::ElemKind::I32, {}},
                                                       {nullptr, ternjit::ElemKind::F16, cache_shape},
                                                       {nullptr, ternjit::ElemKind::F16, cache_shape}});
        !k.ok())
      return fail(k.error().message);
  const double compile_s = std::chrono::duration<double>(Clock::now() - t0).count();
  t0 = Clock::now();
  if (auto r = step(prompt, 0); !r.ok()) return fail(r.error().message);
  const double prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<std::int32_t> generated{argmax(logits.data() + (prompt.size() - 1) * static_cast<std::size_t>(c.vocab), c.vocab)};
  t0 = Clock::now();
  for (int t = 1; t < decode; ++t) {
    if (auto r = step({generated.back()}, static_cast<std::int32_t>(prompt.size()) + t - 1); !r.ok())
      return fail(r.error().message);
    generated.push_back(argmax(logits.data(), c.vocab));
  }
  const double decode_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (decode == 0) generated.clear();

  std::printf("target %s; compile (M = %zu and M = 1) %.2f s\n", engine->target_name().c_str(), prompt.size(), compile_s);
  std::printf("tokens:");
  for (std::int32_t id : generated) std::printf(" %d", id);
  std::printf("\nprefill: %zu tokens in %.3f s = %.2f tokens/s\n", prompt.size(), prefill_s,
              static_cast<double>(prompt.size()) / prefill_s);
  if (decode > 1)
    std::printf("decode: %d tokens in %.3f s = %.2f tokens/s\n", decode - 1, decode_s,
                static_cast<double>(decode - 1) / decode_s);
  return 0;
}

// Every failure the program reports is a status; anything else (out of memory, a filesystem
// error) ends here with a message and exit 1, never as an uncaught exception's abort.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    return fail(std::string("error: ") + e.what());
  }
}

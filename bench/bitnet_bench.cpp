// SPDX-License-Identifier: Apache-2.0
// bitnet_bench.cpp - the 2B4T-shaped BitNet model's weights and ternary projections through the
// public API (Engine -> Program::bind_file of a llama.cpp `bitnet` GGUF file), against the
// streaming read of the file's weight bytes, in one process.
//
// The file: $TERNJIT_BITNET_GGUF, else a synthetic 2B4T model (ternjit::write_synthetic_bitnet,
// about 1.3 GB) written once into a temporary directory and removed at exit. Cases, in order:
//   stream/t<threads>        ceilings' stream_sum over the file's data section, page-aligned
//                            chunks, one per thread: the decode floor (every weight byte read once)
//   blocks/M<m>/t<threads>   the 30 blocks without attention: rmsnorm, int8 quantization and the
//                            seven ternary projections of each block, relu^2 gate, residuals
//                            (k and v folded in by a row sum) - the ternary projections' lower bound
//   decode/M1/t<threads>     the whole decoder (ternjit::bitnet_tri_source, KV capacity 256): one
//                            token at pos 128, the f16 caches updated in place
//   prefill/M128/t<threads>  the same, 128 tokens at pos 0
//   llama.cpp/decode/M1/t<threads>, llama.cpp/prefill/M128/t<threads>   llama.cpp (this build has
//                            it when tools/build-llama-cpp ran before configuring) on the same file
//                            and the same steps: 128 positions in its cache then one token; 128
//                            tokens at pos 0, logits of every row as ternjit's step returns them;
//                            vs_ternjit = llama.cpp's time / ternjit's of that step in this run.
//                            Its FFN gate is silu whatever the file says (docs/bitnet.md): the
//                            same cost as relu^2.
//   head/M<m>/t<threads>     rmsnorm + the tied head `h @ transpose(token_embd)` (f16 [V, E] read as
//                            stored, bound from the file without a copy)
// Counters: ms per call, tok/s (M / time), GB/s of the bytes the case reads once, vs_stream =
// stream time / case time for M = 1 (1 is the floor), rss_gb (resident memory after binding
// and the first run). blocks (+ head) is the part of a decode step that the ternary
// projections (and the head) cost: decode - blocks - head is attention, RoPE, the cache
// writes and the glue.
// Run: build/bench/bench_bitnet [--benchmark_filter=...]. Absolute times depend on the load:
// compare rows of one run.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/tbb_parallel.h"
#include "formats/gguf.h"
#include "formats/mapped_file.h"
#include "targets/x86/ceilings.h"
#include "ternjit/bitnet.h"
#include "ternjit/engine.h"
#include "tools/llama_cpp/llama_cpp_runner.h"

namespace {

using namespace ternjit;

std::filesystem::path g_tmp;
std::string g_path;
BitNetConfig g_cfg;
std::uint64_t g_ternary_bytes = 0, g_head_bytes = 0;
std::map<int, double> g_stream_ms;
std::map<std::pair<int, std::int64_t>, double> g_model_ms;  // ternjit's decode / prefill, by (threads, M)

double rss_gb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024 / 1e9;
  return 0;
}

bool prepare() {
  if (const char* p = std::getenv("TERNJIT_BITNET_GGUF")) {
    g_path = p;
  } else {
    g_tmp = std::filesystem::temp_directory_path() / ("ternjit_bitnet_bench_" + std::to_string(::getpid()));
    std::filesystem::create_directories(g_tmp);
    g_path = (g_tmp / "bitnet-2b4t-synthetic.gguf").string();
    const auto t0 = std::chrono::steady_clock::now();
    if (auto w = write_synthetic_bitnet(g_path, BitNetConfig{}, 1); !w.ok()) {
      std::fprintf(stderr, "writing the synthetic model failed: %s\n", w.error().message.c_str());
      return false;
    }
    std::fprintf(stderr, "wrote %s in %.1f s\n", g_path.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  auto c = read_bitnet_config(g_path);
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.error().message.c_str());
    return false;
  }
  g_cfg = c.value();
  auto g = formats::read_gguf(g_path);
  if (!g.ok()) return false;
  for (const formats::GgufTensor& t : g->tensors) {
    if (t.type == formats::GgufTensorType::TQ2_0 || t.type == formats::GgufTensorType::TQ1_0) g_ternary_bytes += t.bytes.size();
    if (t.name == "token_embd.weight") g_head_bytes = t.bytes.size();
  }
  return true;
}

// The model without attention, generated for the file's configuration.
std::string blocks_source() {
  const BitNetConfig& c = g_cfg;
  const std::int64_t d = c.hidden / c.heads, q = c.heads * d, kv = c.kv_heads * d;
  auto s = [](std::int64_t v) { return std::to_string(v); };
  std::string t = "layer Block {\n  param attn_norm: Tensor[" + s(c.hidden) + "]\n  param ffn_norm: Tensor[" +
                  s(c.hidden) + "]\n  param attn_sub_norm: Tensor[" + s(q) + "]\n  param ffn_sub_norm: Tensor[" +
                  s(c.ffn) + "]\n";
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> proj[] = {
      {"attn_q", {c.hidden, q}},     {"attn_k", {c.hidden, kv}},   {"attn_v", {c.hidden, kv}},
      {"attn_output", {q, c.hidden}}, {"ffn_gate", {c.hidden, c.ffn}}, {"ffn_up", {c.hidden, c.ffn}},
      {"ffn_down", {c.ffn, c.hidden}}};
  for (const auto& [name, kn] : proj)
    t += std::string("  param ") + name + ": TernaryTensor[" + s(kn.first) + ", " + s(kn.second) + "]\n  param " +
         name + "_scale: Tensor[" + s(kn.second) + "]\n";
  t += "}\nlayer BitNet {\n  param blk: Block[" + s(c.blocks) + "]\n  param output_norm: Tensor[" + s(c.hidden) +
       "]\n  param token_embd: Tensor<f16>[" + s(c.vocab) + ", " + s(c.hidden) + "]\n";
  t += "  fn blocks(h0: Tensor[M, " + s(c.hidden) + "]) -> Tensor[M, " + s(c.hidden) + "] {\n    let h = h0\n";
  t += "    for i in 0.." + s(c.blocks) + " {\n";
  t += "      let x = quantize_int8(rmsnorm(h, blk[i].attn_norm, 1e-5))\n";
  t += "      let q = x @ blk[i].attn_q * blk[i].attn_q_scale\n";
  t += "      let k = x @ blk[i].attn_k * blk[i].attn_k_scale\n";
  t += "      let v = x @ blk[i].attn_v * blk[i].attn_v_scale\n";
  t += "      let h = h + quantize_int8(rmsnorm(q, blk[i].attn_sub_norm, 1e-5)) @ blk[i].attn_output * "
       "blk[i].attn_output_scale + reshape(sum(k + v, 1), [-1, 1])\n";
  t += "      let y = quantize_int8(rmsnorm(h, blk[i].ffn_norm, 1e-5))\n";
  t += "      let f = square(relu(y @ blk[i].ffn_gate * blk[i].ffn_gate_scale)) * (y @ blk[i].ffn_up * "
       "blk[i].ffn_up_scale)\n";
  t += "      let h = h + quantize_int8(rmsnorm(f, blk[i].ffn_sub_norm, 1e-5)) @ blk[i].ffn_down * blk[i].ffn_down_scale\n";
  t += "    }\n    return h\n  }\n";
  t += "  fn head(h: Tensor[M, " + s(c.hidden) + "]) -> Tensor[M, " + s(c.vocab) + "] {\n";
  t += "    return rmsnorm(h, output_norm, 1e-5) @ transpose(token_embd)\n  }\n}\n";
  return t;
}

struct Loaded {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Program> program;
  double rss = 0;
};

constexpr std::int64_t kContext = 256;  // the KV cache rows of the model rows: prefill 128, decode at pos 128

// The whole decoder (ternjit::bitnet_tri_source) per thread count, bound once.
Result<Program*> model(int threads) {
  static std::map<int, std::pair<std::unique_ptr<Engine>, std::unique_ptr<Program>>> cache;
  auto it = cache.find(threads);
  if (it != cache.end()) return it->second.second.get();
  EngineOptions o;
  o.target = "x86";
  o.threads = threads;
  o.cache_dir = "off";
  o.runtime_rows = false;
  TERNJIT_TRY(Engine e, Engine::create(o));
  TERNJIT_TRY(std::string source, bitnet_tri_source(g_cfg, kContext));
  TERNJIT_TRY(Program p, e.compile(source, "bitnet.tri"));
  const std::vector<std::string> map = bitnet_name_map("BitNet");
  TERNJIT_TRY_VOID(p.bind_file(g_path, map));
  auto& slot = cache[threads];
  slot.first = std::make_unique<Engine>(std::move(e));
  slot.second = std::make_unique<Program>(std::move(p));
  return slot.second.get();
}

// One forward step of M tokens at `pos` with the f16 caches updated in place.
void bm_model(benchmark::State& s, std::int64_t M, std::int32_t pos, int threads) {
  auto p = model(threads);
  if (!p.ok()) return s.SkipWithError(p.error().message.c_str());
  const std::int64_t d = g_cfg.hidden / g_cfg.heads;
  const std::vector<std::int64_t> shape = {g_cfg.blocks, kContext, g_cfg.kv_heads, d};
  std::vector<std::uint16_t> kc(static_cast<std::size_t>(g_cfg.blocks * kContext * g_cfg.kv_heads * d), 0x3C00),
      vc(kc.size(), 0x3800);  // rows below pos: 1.0 and 0.5 (f16)
  std::vector<std::int32_t> ids(static_cast<std::size_t>(M));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7919) % static_cast<std::size_t>(g_cfg.vocab));
  std::vector<float> logits(static_cast<std::size_t>(M * g_cfg.vocab));
  const TensorView in[] = {{ids.data(), ElemKind::I32, {M}}, {&pos, ElemKind::I32, {}},
                           {kc.data(), ElemKind::F16, shape}, {vc.data(), ElemKind::F16, shape}};
  TensorView out[] = {{logits.data(), ElemKind::F32, {M, g_cfg.vocab}}, {kc.data(), ElemKind::F16, shape},
                      {vc.data(), ElemKind::F16, shape}};
  if (auto r = p.value()->run("BitNet.forward", in, out); !r.ok()) return s.SkipWithError(r.error().message.c_str());
  double ms = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!p.value()->run("BitNet.forward", in, out).ok()) return s.SkipWithError("run failed");
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    s.SetIterationTime(ms / 1e3);
  }
  s.counters["ms"] = ms;
  s.counters["tok/s"] = static_cast<double>(M) / ms * 1e3;
  s.counters["rss_gb"] = rss_gb();
  if (M == 1 && g_stream_ms.count(threads)) s.counters["vs_stream"] = g_stream_ms[threads] / ms;
  g_model_ms[{threads, M}] = ms;
}

// llama.cpp on the same file (tools/llama_cpp): the same step as bm_model - M tokens at pos
// with positions < pos in its KV cache, logits of every row (as ternjit's step returns).
// vs_ternjit = this time / ternjit's time of the same step in this run (> 1: ternjit faster).
void bm_llama(benchmark::State& s, std::int64_t M, std::int32_t pos, int threads) {
  static std::map<int, llama_cpp::Model> models;
  auto it = models.find(threads);
  if (it == models.end()) {
    auto m = llama_cpp::Model::load(g_path, threads, static_cast<int>(kContext));
    if (!m.ok()) return s.SkipWithError(m.error().message.c_str());
    it = models.emplace(threads, std::move(m.value())).first;
  }
  llama_cpp::Model& m = it->second;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(M)), before(static_cast<std::size_t>(pos));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7919) % static_cast<std::size_t>(g_cfg.vocab));
  for (std::size_t i = 0; i < before.size(); ++i) before[i] = static_cast<std::int32_t>((i * 104729) % static_cast<std::size_t>(g_cfg.vocab));
  m.truncate(0);
  if (pos > 0)
    if (auto r = m.decode(before, 0, false); !r.ok()) return s.SkipWithError(r.error().message.c_str());
  double ms = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = m.decode(ids, pos, true);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!r.ok()) return s.SkipWithError(r.error().message.c_str());
    s.SetIterationTime(ms / 1e3);
    m.truncate(pos);
  }
  s.counters["ms"] = ms;
  s.counters["tok/s"] = static_cast<double>(M) / ms * 1e3;
  s.counters["rss_gb"] = rss_gb();
  if (g_model_ms.count({threads, M})) s.counters["vs_ternjit"] = ms / g_model_ms[{threads, M}];
  if (M == 1 && g_stream_ms.count(threads)) s.counters["vs_stream"] = g_stream_ms[threads] / ms;
}

// One engine and program per thread count (x86, cache off), bound once.
Result<Loaded*> loaded(int threads) {
  static std::map<int, Loaded> cache;
  auto it = cache.find(threads);
  if (it != cache.end()) return &it->second;
  EngineOptions o;
  o.target = "x86";
  o.threads = threads;
  o.cache_dir = "off";
  o.runtime_rows = false;
  TERNJIT_TRY(Engine e, Engine::create(o));
  TERNJIT_TRY(Program p, e.compile(blocks_source(), "bitnet_blocks.tri"));
  const std::vector<std::string> map = bitnet_name_map("BitNet");
  TERNJIT_TRY_VOID(p.bind_file(g_path, map));
  Loaded l{std::make_unique<Engine>(std::move(e)), std::make_unique<Program>(std::move(p)), 0};
  return &cache.emplace(threads, std::move(l)).first->second;
}

void bm_stream(benchmark::State& s, int threads) {
  auto bytes = formats::map_file(g_path);
  if (!bytes.ok()) return s.SkipWithError(bytes.error().message.c_str());
  const std::uint8_t* data = bytes->data();
  const std::size_t size = bytes->size();
  // The data section: everything past the first page-aligned address after the header
  // (the header is a few MB of vocabulary at most; the weights are the rest).
  auto* base = reinterpret_cast<const std::uint8_t*>((reinterpret_cast<std::uintptr_t>(data) + size - g_ternary_bytes -
                                                      g_head_bytes + 4095) & ~std::uintptr_t{4095});
  const std::size_t n = static_cast<std::size_t>(data + size - base) / 4096 * 4096;
  const std::size_t chunk = n / static_cast<std::size_t>(threads) / 4096 * 4096;
  const targets::Parallel par = ternjit::bench::parallel_for_threads(threads);
  std::vector<std::uint64_t> sink(static_cast<std::size_t>(threads));
  double ms = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    par.for_each(threads, [&](std::int64_t i) {
      sink[static_cast<std::size_t>(i)] += targets::x86::stream_sum(base + static_cast<std::size_t>(i) * chunk, chunk);
    });
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    s.SetIterationTime(ms / 1e3);
  }
  benchmark::DoNotOptimize(sink.data());
  g_stream_ms[threads] = ms;
  s.counters["ms"] = ms;
  s.counters["GB/s"] = static_cast<double>(chunk) * threads / ms / 1e6;
}

void bm_fn(benchmark::State& s, const char* fn, std::int64_t M, int threads) {
  auto l = loaded(threads);
  if (!l.ok()) return s.SkipWithError(l.error().message.c_str());
  const std::int64_t out_cols = std::string(fn) == "BitNet.head" ? g_cfg.vocab : g_cfg.hidden;
  std::vector<float> h(static_cast<std::size_t>(M * g_cfg.hidden)), y(static_cast<std::size_t>(M * out_cols));
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(static_cast<int>(i * 7919 % 201) - 100) / 100.0f;
  const TensorView in[] = {TensorView{h.data(), ElemKind::F32, {M, g_cfg.hidden}}};
  TensorView out[] = {TensorView{y.data(), ElemKind::F32, {M, out_cols}}};
  if (auto r = l.value()->program->run(fn, in, out); !r.ok()) return s.SkipWithError(r.error().message.c_str());
  double ms = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!l.value()->program->run(fn, in, out).ok()) return s.SkipWithError("run failed");
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    s.SetIterationTime(ms / 1e3);
  }
  const std::uint64_t read = std::string(fn) == "BitNet.head" ? g_head_bytes : g_ternary_bytes;
  s.counters["ms"] = ms;
  s.counters["tok/s"] = static_cast<double>(M) / ms * 1e3;
  s.counters["GB/s"] = static_cast<double>(read) / ms / 1e6;
  s.counters["rss_gb"] = rss_gb();
  if (M == 1 && g_stream_ms.count(threads))
    s.counters["vs_stream"] = g_stream_ms[threads] * static_cast<double>(read) /
                              static_cast<double>(g_ternary_bytes + g_head_bytes) / ms;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!prepare()) return 1;
  if (llama_cpp::available()) benchmark::AddCustomContext("llama.cpp", llama_cpp::version());
  else std::fprintf(stderr, "no llama.cpp rows: %s\n", llama_cpp::unavailable_reason().c_str());
  for (int threads : {1, 2}) {
    benchmark::RegisterBenchmark(("stream/t" + std::to_string(threads)).c_str(),
                                 [threads](benchmark::State& s) { bm_stream(s, threads); })
        ->UseManualTime()
        ->Iterations(5);
    benchmark::RegisterBenchmark(("decode/M1/t" + std::to_string(threads)).c_str(),
                                 [threads](benchmark::State& s) { bm_model(s, 1, 128, threads); })
        ->UseManualTime()
        ->Iterations(5);
    benchmark::RegisterBenchmark(("prefill/M128/t" + std::to_string(threads)).c_str(),
                                 [threads](benchmark::State& s) { bm_model(s, 128, 0, threads); })
        ->UseManualTime()
        ->Iterations(1);
    if (llama_cpp::available()) {
      benchmark::RegisterBenchmark(("llama.cpp/decode/M1/t" + std::to_string(threads)).c_str(),
                                   [threads](benchmark::State& s) { bm_llama(s, 1, 128, threads); })
          ->UseManualTime()
          ->Iterations(5);
      benchmark::RegisterBenchmark(("llama.cpp/prefill/M128/t" + std::to_string(threads)).c_str(),
                                   [threads](benchmark::State& s) { bm_llama(s, 128, 0, threads); })
          ->UseManualTime()
          ->Iterations(1);
    }
    for (std::int64_t M : {1, 128}) {
      benchmark::RegisterBenchmark(("blocks/M" + std::to_string(M) + "/t" + std::to_string(threads)).c_str(),
                                   [M, threads](benchmark::State& s) { bm_fn(s, "BitNet.blocks", M, threads); })
          ->UseManualTime()
          ->Iterations(M == 1 ? 5 : 1);
      benchmark::RegisterBenchmark(("head/M" + std::to_string(M) + "/t" + std::to_string(threads)).c_str(),
                                   [M, threads](benchmark::State& s) { bm_fn(s, "BitNet.head", M, threads); })
          ->UseManualTime()
          ->Iterations(M == 1 ? 5 : 1);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!g_tmp.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(g_tmp, ec);
  }
  return 0;
}

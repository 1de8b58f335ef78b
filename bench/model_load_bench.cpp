// SPDX-License-Identifier: Apache-2.0
// model_load_bench.cpp - loading a 2560 x 6912 TQ2_0 GGUF tensor: import speed and resident memory.
//
// Goal (issue 13): binding a real ternary tensor from a GGUF file is never the slow part of
// starting a model (>= 1 GB/s of file bytes) and costs at most 3x the tensor's file bytes
// of resident memory after bind + x86 compile. The file is written once by the project's
// GGUF writer to a temporary directory. Rows, in one process:
//   BM_StreamRead     read() of the whole file into a reused buffer (page cache warm):
//                     the baseline, what merely touching the bytes costs;
//   BM_WeightFileLoad WeightFile::open + load of the ternary tensor and its scales (the
//                     import: mapping, bounds checks, TQ2_0 -> tern2 [K, N] re-coding);
//   BM_BindFile       Program::bind_file on a compiled program (the same, through the engine);
//   BM_BindCompileRss one bind_file + first x86 run in a fresh program: counters rss_x =
//                     resident growth / file bytes, peak_x the same for the peak.
// Counters: GBps = file bytes / time; vs_read = t_read / t (1 = as fast as read()).
// Run: build/bench/bench_model_load --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/weight_file.h"
#include "ir/numeric.h"
#include "ternjit/engine.h"

namespace {

constexpr std::size_t kK = 2560, kN = 6912;
constexpr const char* kLayer =
    "layer L {\n"
    "    param gamma: Tensor[K]\n"
    "    param w: TernaryTensor[K, N]\n"
    "    param w_scale: Tensor[N]\n"
    "    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {\n"
    "        let h = rmsnorm(x, gamma, 1e-5)\n"
    "        let q = quantize_int8(h)\n"
    "        return (q @ w) * w_scale\n"
    "    }\n"
    "}\n";

// The temporary GGUF file, written once; removed at exit.
struct ModelFile {
  std::filesystem::path dir;
  std::string path;
  double bytes = 0;  // the file's size

  ModelFile() {
    dir = std::filesystem::temp_directory_path() / ("ternjit_model_load_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    path = (dir / "w.gguf").string();
    // TQ2_0 blocks with pseudo-random codes 0..2 and one f16 scale per row.
    std::vector<std::uint8_t> data;
    data.reserve(kN * (kK / 256) * 66);
    std::uint32_t s = 12345;
    for (std::size_t n = 0; n < kN; ++n) {
      const std::uint16_t d = ternjit::ir::f32_to_f16_bits(0.01f + 0.0001f * static_cast<float>(n % 97));
      for (std::size_t b = 0; b < kK / 256; ++b) {
        for (int i = 0; i < 64; ++i) {
          unsigned byte = 0;
          for (int f = 0; f < 4; ++f) {
            s = s * 1664525u + 1013904223u;
            byte |= ((s >> 24) % 3) << (2 * f);
          }
          data.push_back(static_cast<std::uint8_t>(byte));
        }
        data.push_back(static_cast<std::uint8_t>(d & 0xFF));
        data.push_back(static_cast<std::uint8_t>(d >> 8));
      }
    }
    ternjit::formats::GgufTensor t;
    t.name = "w";
    t.type = ternjit::formats::GgufTensorType::TQ2_0;
    t.dims = {kK, kN};
    t.bytes = ternjit::ir::SharedBytes::adopt(std::move(data));
    if (!ternjit::formats::write_gguf(path, {}, std::vector{t}).ok()) std::abort();
    bytes = static_cast<double>(std::filesystem::file_size(path));
  }
  ~ModelFile() { std::filesystem::remove_all(dir); }
};

ModelFile& model() {
  static ModelFile f;  // benchmark-local; the library has no globals
  return f;
}

double g_read_seconds = 0;  // BM_StreamRead's time per iteration, for vs_read

void report(benchmark::State& state, double seconds_per_iter) {
  state.counters["GBps"] = model().bytes / seconds_per_iter / 1e9;
  if (g_read_seconds > 0) state.counters["vs_read"] = g_read_seconds / seconds_per_iter;
}

template <typename Fn>
double timed(benchmark::State& state, Fn&& fn) {
  double total = 0;
  std::int64_t n = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++n;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(model().bytes) * n);
  return n > 0 ? total / static_cast<double>(n) : 0;
}

void BM_StreamRead(benchmark::State& state) {
  std::vector<char> buf(1 << 20);
  const double s = timed(state, [&] {
    const int fd = ::open(model().path.c_str(), O_RDONLY);
    if (fd < 0) std::abort();
    std::size_t total = 0;
    for (ssize_t got; (got = ::read(fd, buf.data(), buf.size())) > 0;) total += static_cast<std::size_t>(got);
    ::close(fd);
    benchmark::DoNotOptimize(total);
  });
  g_read_seconds = s;
  report(state, s);
}

void BM_WeightFileLoad(benchmark::State& state) {
  const double s = timed(state, [&] {
    auto f = ternjit::formats::WeightFile::open(model().path);
    if (!f.ok()) std::abort();
    auto w = f->load(*f->find("w").value(), ternjit::ElemKind::T2, {kK, kN}, "w");
    auto sc = f->load(*f->find("w_scale").value(), ternjit::ElemKind::F32, {kN}, "w_scale");
    if (!w.ok() || !sc.ok()) std::abort();
    benchmark::DoNotOptimize(w->bytes().data());
  });
  report(state, s);
}

ternjit::Engine make_engine() {
  ternjit::EngineOptions o;
  o.target = "x86";
  o.cache_dir = "off";
  o.threads = 1;
  auto e = ternjit::Engine::create(o);
  if (!e.ok()) std::abort();
  return std::move(e.value());
}

void BM_BindFile(benchmark::State& state) {
  ternjit::Engine engine = make_engine();
  const double s = timed(state, [&] {
    auto p = engine.compile(kLayer, "l.tri");
    if (!p.ok() || !p->bind_file(model().path).ok()) std::abort();
  });
  report(state, s);
}

struct Memory {
  double rss = 0, peak = 0;
};
Memory memory() {
  Memory m;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) m.rss = std::stod(line.substr(6)) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) m.peak = std::stod(line.substr(6)) * 1024;
  }
  return m;
}

void BM_BindCompileRss(benchmark::State& state) {
  ternjit::Engine engine = make_engine();
  std::vector<float> gamma(kK, 1.0f), x(kK, 0.25f), y(kN);
  double rss = 0, peak = 0;
  for (auto _ : state) {
    auto p = engine.compile(kLayer, "l.tri");
    if (!p.ok()) std::abort();
    const Memory before = memory();
    if (!p->bind_file(model().path).ok()) std::abort();
    if (!p->bind("L.gamma", {gamma.data(), ternjit::ElemKind::F32, {static_cast<std::int64_t>(kK)}}).ok()) std::abort();
    std::vector<ternjit::TensorView> in{{x.data(), ternjit::ElemKind::F32, {1, static_cast<std::int64_t>(kK)}}};
    std::vector<ternjit::TensorView> out{{y.data(), ternjit::ElemKind::F32, {1, static_cast<std::int64_t>(kN)}}};
    if (!p->run("L.forward", in, out).ok()) std::abort();
    const Memory after = memory();
    rss = after.rss - before.rss;
    peak = after.peak - std::max(before.peak, before.rss);
  }
  state.counters["file_MB"] = model().bytes / 1e6;
  state.counters["rss_x"] = rss / model().bytes;
  state.counters["peak_x"] = peak / model().bytes;
}

BENCHMARK(BM_StreamRead)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_WeightFileLoad)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BindFile)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BindCompileRss)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();

// SPDX-License-Identifier: Apache-2.0
// llama_cpp_logits.cpp - every position's logits of a `bitnet` GGUF file as llama.cpp computes
// them (tools/llama_cpp/llama_cpp_runner.h), on this host or across llama.cpp RPC servers, and
// the comparison of two such runs (tests/e2e/ggml_rpc.sh, docs/ggml.md):
//
//   llama_cpp_logits MODEL.gguf --out FILE [--rpc HOST:PORT,HOST:PORT] [--threads N]
//                    [--backend LIB] [--prefill P] [--decode D] [--warmup]
//       runs a fixed token sequence: a prefill of P tokens (logits of every one), then D
//       single-token decodes, and writes the P + D rows of logits to FILE; prints where
//       llama.cpp put the model and the prefill's and the decode steps' tokens/s. --warmup
//       runs the sequence once before, untimed (the cache emptied between the two).
//   llama_cpp_logits --compare A B [--max-rel X]
//       per row: max|a - b| / max|b|; whether the files are bit-identical; exit 1 when a row
//       differs by more than X (default 0) or holds a value that is not finite.
//   llama_cpp_logits --write-bitnet FILE [--blocks N] [--hidden E] [--ffn F] [--vocab V] [--seed S]
//       writes a synthetic silu `bitnet` model (ternjit's write_synthetic_bitnet): N blocks of
//       E/64 query and E/128 key-value heads of 64, FFN width F, vocabulary V; by default 4 blocks
//       of E 256, F 512, V 50 (e2e/llama_cpp's model, 4 blocks deep).
//
// The logits file: the 8 bytes "TJLOGIT1", rows and vocab as little-endian int64, then rows x
// vocab little-endian f32. Errors are one line on stderr and exit status 1.
#include <CLI/CLI.hpp>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "formats/bitnet_gguf.h"
#include "tools/llama_cpp/llama_cpp_runner.h"

namespace {

static_assert(std::endian::native == std::endian::little, "the logits file is little-endian, as this host");

constexpr char kMagic[8] = {'T', 'J', 'L', 'O', 'G', 'I', 'T', '1'};

int fail(const std::string& what) {
  std::fprintf(stderr, "llama_cpp_logits: %s\n", what.c_str());
  return 1;
}

struct Logits {
  std::int64_t rows = 0, vocab = 0;
  std::vector<float> values;  // rows x vocab
};

ternjit::Result<void> write_logits(const std::string& path, const Logits& l) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(kMagic, sizeof kMagic);
  f.write(reinterpret_cast<const char*>(&l.rows), sizeof l.rows);
  f.write(reinterpret_cast<const char*>(&l.vocab), sizeof l.vocab);
  f.write(reinterpret_cast<const char*>(l.values.data()),
          static_cast<std::streamsize>(l.values.size() * sizeof(float)));
  f.close();
  if (!f) return ternjit::make_error(ternjit::ErrorCode::IoError, "cannot write " + path);
  return {};
}

ternjit::Result<Logits> read_logits(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return ternjit::make_error(ternjit::ErrorCode::IoError, "cannot open " + path);
  char magic[sizeof kMagic] = {};
  Logits l;
  f.read(magic, sizeof magic);
  f.read(reinterpret_cast<char*>(&l.rows), sizeof l.rows);
  f.read(reinterpret_cast<char*>(&l.vocab), sizeof l.vocab);
  if (!f || std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    return ternjit::make_error(ternjit::ErrorCode::InvalidInput, path + " is not a logits file (no TJLOGIT1 header)");
  f.seekg(0, std::ios::end);
  const auto bytes =
      static_cast<std::int64_t>(f.tellg()) - static_cast<std::int64_t>(sizeof kMagic + 2 * sizeof(std::int64_t));
  if (l.rows < 1 || l.vocab < 1 || l.rows > bytes || l.vocab > bytes ||
      bytes != l.rows * l.vocab * static_cast<std::int64_t>(sizeof(float)))
    return ternjit::make_error(ternjit::ErrorCode::InvalidInput,
                               path + ": its header says " + std::to_string(l.rows) + " x " + std::to_string(l.vocab) +
                                   " logits, its size " + std::to_string(bytes) + " bytes of them");
  l.values.resize(static_cast<std::size_t>(l.rows * l.vocab));
  f.seekg(static_cast<std::streamoff>(sizeof kMagic + 2 * sizeof(std::int64_t)));
  f.read(reinterpret_cast<char*>(l.values.data()), bytes);
  if (!f) return ternjit::make_error(ternjit::ErrorCode::IoError, "cannot read " + path);
  return l;
}

// The fixed sequence: e2e/llama_cpp's 9 ids, then a deterministic walk, all below `vocab`.
std::vector<std::int32_t> token_ids(std::int64_t n, std::int64_t vocab) {
  static constexpr std::int32_t kFirst[] = {1, 7, 13, 2, 45, 33, 8, 21, 3};
  std::vector<std::int32_t> ids;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t id = i < 9 ? kFirst[i] : (11 + 37 * i + 5 * i * i);
    ids.push_back(static_cast<std::int32_t>(id % vocab));
  }
  return ids;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

struct RunOptions {
  std::string model, out, rpc, backend;
  int threads = 1, prefill = 4, decode = 12;
  bool warmup = false;
};

// The sequence once: its logits and the prefill's and the decode steps' seconds.
struct Pass {
  std::vector<float> logits;
  double prefill_s = 0, decode_s = 0;
};

ternjit::Result<Pass> run_sequence(ternjit::llama_cpp::Model& m, const std::vector<std::int32_t>& ids, int prefill) {
  using Clock = std::chrono::steady_clock;
  Pass p;
  m.truncate(0);
  const auto p0 = Clock::now();
  auto first = m.decode({ids.begin(), ids.begin() + prefill}, 0, true);
  if (!first.ok()) return first.error();
  p.prefill_s = std::chrono::duration<double>(Clock::now() - p0).count();
  p.logits = std::move(first.value());
  const auto d0 = Clock::now();
  for (std::size_t t = static_cast<std::size_t>(prefill); t < ids.size(); ++t) {
    auto r = m.decode({ids[t]}, static_cast<std::int32_t>(t), false);
    if (!r.ok()) return r.error();
    p.logits.insert(p.logits.end(), r->begin(), r->end());
  }
  p.decode_s = std::chrono::duration<double>(Clock::now() - d0).count();
  return p;
}

int run(const RunOptions& o) {
  using Clock = std::chrono::steady_clock;
  if (!o.backend.empty()) {
    if (auto b = ternjit::llama_cpp::load_backend(o.backend); !b.ok()) return fail(b.error().message);
    std::printf("backend: %s loaded\n", o.backend.c_str());
  }
  ternjit::llama_cpp::LoadOptions lo;
  lo.threads = o.threads;
  lo.context = o.prefill + o.decode;
  if (!o.rpc.empty()) lo.rpc_servers = split_commas(o.rpc);
  const auto t0 = Clock::now();
  auto m = ternjit::llama_cpp::Model::load(o.model, lo);
  if (!m.ok()) return fail(m.error().message);
  std::printf("load: %.2f s (%s)\n", std::chrono::duration<double>(Clock::now() - t0).count(),
              o.rpc.empty() ? "this host" : ("RPC servers " + o.rpc).c_str());
  for (const std::string& line : m->placement()) std::printf("placement: %s\n", line.c_str());

  Logits l;
  l.vocab = m->vocab();
  l.rows = o.prefill + o.decode;
  const std::vector<std::int32_t> ids = token_ids(l.rows, l.vocab);
  if (o.warmup) {
    auto w = run_sequence(*m, ids, o.prefill);
    if (!w.ok()) return fail(w.error().message);
    std::printf("warm-up: the sequence once, untimed: prefill %.2f ms, decode %.2f ms\n", w->prefill_s * 1e3,
                w->decode_s * 1e3);
  }
  auto p = run_sequence(*m, ids, o.prefill);
  if (!p.ok()) return fail(p.error().message);
  l.values = std::move(p->logits);
  std::printf("prefill: %d tokens in %.2f ms: %.1f tokens/s\n", o.prefill, p->prefill_s * 1e3,
              o.prefill / p->prefill_s);
  if (o.decode > 0)
    std::printf("decode: %d tokens in %.2f ms: %.1f tokens/s\n", o.decode, p->decode_s * 1e3, o.decode / p->decode_s);
  if (auto w = write_logits(o.out, l); !w.ok()) return fail(w.error().message);
  std::printf("wrote %lld x %lld logits to %s\n", static_cast<long long>(l.rows), static_cast<long long>(l.vocab),
              o.out.c_str());
  return 0;
}

int compare(const std::string& a_path, const std::string& b_path, double max_rel) {
  auto a = read_logits(a_path);
  if (!a.ok()) return fail(a.error().message);
  auto b = read_logits(b_path);
  if (!b.ok()) return fail(b.error().message);
  if (a->rows != b->rows || a->vocab != b->vocab)
    return fail("the files hold " + std::to_string(a->rows) + " x " + std::to_string(a->vocab) + " and " +
                std::to_string(b->rows) + " x " + std::to_string(b->vocab) + " logits");
  const bool identical = std::memcmp(a->values.data(), b->values.data(), a->values.size() * sizeof(float)) == 0;
  double worst = 0;
  bool finite = true;
  for (std::int64_t r = 0; r < a->rows; ++r) {
    double d = 0, mx = 0;
    for (std::int64_t i = 0; i < a->vocab; ++i) {
      const double x = a->values[static_cast<std::size_t>(r * a->vocab + i)];
      const double y = b->values[static_cast<std::size_t>(r * a->vocab + i)];
      if (!std::isfinite(x) || !std::isfinite(y)) finite = false;
      d = std::max(d, std::fabs(x - y));
      mx = std::max(mx, std::fabs(y));
    }
    const double rel = d == 0 ? 0 : (mx > 0 ? d / mx : INFINITY);
    worst = std::max(worst, rel);
    std::printf("row %lld: max|a - b| = %.6g, max|b| = %.6g, relative %.3g\n", static_cast<long long>(r), d, mx, rel);
  }
  std::printf("%lld rows x %lld: bit-identical: %s; worst row max|a - b| / max|b| = %.3g (allowed %.3g)\n",
              static_cast<long long>(a->rows), static_cast<long long>(a->vocab), identical ? "yes" : "no", worst,
              max_rel);
  if (!finite) return fail("a logit is not finite");
  if (!(worst <= max_rel)) {
    char allowed[32];
    std::snprintf(allowed, sizeof allowed, "%g", max_rel);
    return fail(std::string("the logits differ by more than --max-rel ") + allowed);
  }
  return 0;
}

int write_bitnet(const std::string& path, ternjit::BitNetConfig c, std::uint64_t seed) {
  c.heads = c.hidden / 64;
  c.kv_heads = c.heads / 2;
  c.ffn_activation = ternjit::BitNetActivation::Silu;  // what llama.cpp's `bitnet` graph computes
  if (auto w = ternjit::formats::write_synthetic_bitnet(path, c, seed); !w.ok()) return fail(w.error().message);
  std::printf("wrote a synthetic silu bitnet model (%lld blocks, E %lld, F %lld, V %lld) to %s\n",
              static_cast<long long>(c.blocks), static_cast<long long>(c.hidden), static_cast<long long>(c.ffn),
              static_cast<long long>(c.vocab), path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "llama_cpp_logits - every position's logits of a bitnet GGUF file as llama.cpp computes them, "
      "on this host or across llama.cpp RPC servers; and the comparison of two such runs"};
  RunOptions o;
  std::vector<std::string> compare_files;
  std::string bitnet_out;
  double max_rel = 0;
  ternjit::BitNetConfig shape = ternjit::formats::tiny_bitnet_config();
  shape.blocks = 4;
  std::uint64_t seed = 7;
  app.add_option("model", o.model, "the GGUF model to run");
  app.add_option("--out", o.out, "where to write the logits (with a model)");
  app.add_option("--rpc", o.rpc, "llama.cpp RPC servers host:port,host:port that hold the layers");
  app.add_option("--threads", o.threads, "this process's threads (default 1)")->check(CLI::Range(1, 1024));
  app.add_option("--backend", o.backend, "a ggml backend library to load first (libggml-ternjit.so)");
  app.add_option("--prefill", o.prefill, "tokens of the prefill (default 4)")->check(CLI::Range(1, 4096));
  app.add_option("--decode", o.decode, "single-token decode steps after it (default 12)")->check(CLI::Range(0, 4096));
  app.add_flag("--warmup", o.warmup,
               "run the sequence once untimed first (kernels compiled, caches warm), then the timed run written");
  app.add_option("--compare", compare_files, "compare two logits files A B")->expected(2);
  app.add_option("--max-rel", max_rel, "with --compare: the largest max|a - b| / max|b| of a row allowed (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--write-bitnet", bitnet_out, "write a synthetic silu bitnet model to this file");
  app.add_option("--blocks", shape.blocks, "with --write-bitnet: its blocks (default 4)")->check(CLI::Range(1, 256));
  app.add_option("--hidden", shape.hidden, "with --write-bitnet: its width E, a multiple of 256 (default 256)")
      ->check(CLI::Range(256, 16384));
  app.add_option("--ffn", shape.ffn, "with --write-bitnet: its FFN width, a multiple of 256 (default 512)")
      ->check(CLI::Range(256, 65536));
  app.add_option("--vocab", shape.vocab, "with --write-bitnet: its vocabulary (default 50)")
      ->check(CLI::Range(50, 1 << 20));
  app.add_option("--seed", seed, "with --write-bitnet: its seed (default 7)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  try {
    const int modes = !o.model.empty() + !compare_files.empty() + !bitnet_out.empty();
    if (modes != 1) return fail("give one of: a MODEL.gguf to run, --compare A B, --write-bitnet FILE (--help)");
    if (!compare_files.empty()) return compare(compare_files[0], compare_files[1], max_rel);
    if (!bitnet_out.empty()) return write_bitnet(bitnet_out, shape, seed);
    if (o.out.empty()) return fail("running " + o.model + " needs --out FILE");
    return run(o);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

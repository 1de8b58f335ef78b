// SPDX-License-Identifier: Apache-2.0
// llama_logits.h - what the llama.cpp side-by-side tests share (e2e/llama_cpp, e2e/ggml_llama):
// a temporary directory, the token sequence, llama.cpp's logits of every position of it, and
// the per-row comparison of two sets of logits.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tools/llama_cpp/llama_cpp_runner.h"

namespace ternjit::llama_cpp_test {

/// A directory of its own under the system's temporary directory, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix) {
    path = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

inline constexpr int kContext = 64;
/// The sequence: a prefill of its first 4 tokens, then one token at a time.
inline const std::vector<std::int32_t> kIds = {1, 7, 13, 2, 45, 33, 8, 21, 3};

/// llama.cpp's logits of every position of kIds for the model at `path`, on `threads`
/// threads; `model_done` (if given) runs with the model still loaded.
inline std::vector<float> llama_logits(const std::string& path, int threads,
                                       const std::function<void(const llama_cpp::Model&)>& model_done = {}) {
  auto m = llama_cpp::Model::load(path, threads, kContext);
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  const std::vector<std::int32_t> prefill(kIds.begin(), kIds.begin() + 4);
  auto first = m->decode(prefill, 0, true);
  REQUIRE_MESSAGE(first.ok(), (first.ok() ? "" : first.error().message));
  std::vector<float> all = first.value();
  for (std::size_t t = 4; t < kIds.size(); ++t) {
    auto r = m->decode({kIds[t]}, static_cast<std::int32_t>(t), false);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    all.insert(all.end(), r->begin(), r->end());
  }
  if (model_done) model_done(*m);
  return all;
}

struct RowDiff {
  double rel = 0, cosine = 1;  // max |a - b| / max |b| and cos(a, b), the worst row
};

/// The worst row of `a` against `b` (rows of `vocab` logits, all finite).
inline RowDiff compare_rows(const std::vector<float>& a, const std::vector<float>& b, std::int64_t vocab) {
  REQUIRE(a.size() == b.size());
  RowDiff w;
  for (std::size_t r = 0; r * static_cast<std::size_t>(vocab) < a.size(); ++r) {
    double d = 0, mx = 0, ab = 0, aa = 0, bb = 0;
    for (std::int64_t i = 0; i < vocab; ++i) {
      const double x = a[r * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(i)];
      const double y = b[r * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(i)];
      REQUIRE(std::isfinite(x));
      REQUIRE(std::isfinite(y));
      d = std::max(d, std::fabs(x - y));
      mx = std::max(mx, std::fabs(y));
      ab += x * y, aa += x * x, bb += y * y;
    }
    w.rel = std::max(w.rel, d / mx);
    w.cosine = std::min(w.cosine, ab / std::sqrt(aa * bb));
  }
  return w;
}

}  // namespace ternjit::llama_cpp_test

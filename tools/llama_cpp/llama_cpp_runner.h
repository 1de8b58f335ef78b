// SPDX-License-Identifier: Apache-2.0
// llama_cpp_runner.h - llama.cpp run beside ternjit on the same GGUF file: the side-by-side
// decoder checks (tests/llama_cpp) and bench_bitnet's llama.cpp rows (docs/bitnet.md).
//
// llama.cpp is not a Debian package: tools/build-llama-cpp builds its CPU libraries from the
// pinned llama-cpp-python source distribution into .deps/llama.cpp, and CMake builds this
// runner with them when they are there (TERNJIT_LLAMA_CPP_DIR). Without them, available() is
// false and unavailable_reason() says what is missing and how to get it; nothing else of
// ternjit depends on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ternjit/result.h"

namespace ternjit::llama_cpp {

/// Whether this build has llama.cpp (tools/build-llama-cpp ran before CMake configured).
bool available();
/// Why not, with the command that fixes it; empty when available.
std::string unavailable_reason();
/// "llama-cpp-python <version> llama.cpp <commit>" of the libraries linked, or "".
std::string version();

/// One llama.cpp model and context (CPU only, the file memory-mapped as llama.cpp does by
/// default), its KV cache holding `context` positions of one sequence.
class Model {
 public:
  /// Loads `path` with `threads` threads (prefill and decode alike). Errors: llama.cpp's
  /// load or context creation failing (its log's last error lines in the message).
  static Result<Model> load(const std::string& path, int threads, int context);
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  /// Runs tokens `ids` at positions [pos, pos + ids.size()) of the sequence (the cache holds
  /// positions < pos from earlier calls) and returns the logits of every token (all_rows) or
  /// of the last one: rows x vocab() floats.
  Result<std::vector<float>> decode(const std::vector<std::int32_t>& ids, std::int32_t pos, bool all_rows);
  /// Drops positions >= pos from the KV cache (the next decode starts at pos; 0 empties it).
  void truncate(std::int32_t pos);
  [[nodiscard]] std::int64_t vocab() const;

 private:
  struct State;
  explicit Model(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace ternjit::llama_cpp

// SPDX-License-Identifier: Apache-2.0
// llama_cpp_runner.h - llama.cpp run beside ternjit on the same GGUF file: the side-by-side
// decoder checks (tests/llama_cpp) and bench_bitnet's llama.cpp rows (docs/bitnet.md).
//
// llama.cpp is not a Debian package: tools/build-llama-cpp builds its CPU libraries from the
// pinned llama-cpp-python source distribution into .deps/llama.cpp, and CMake builds this
// runner with them when they are there (TERNJIT_LLAMA_CPP_DIR). Without them, available() is
// false and unavailable_reason() says what is missing and how to get it; nothing else of
// ternjit depends on it.
//
// Across hosts (docs/ggml.md): LoadOptions::rpc_servers puts the model's layers on the devices
// of llama.cpp RPC servers (ggml-rpc-server), split across them by llama.cpp; load_backend
// loads a ggml backend library (libggml-ternjit.so) into this process.
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

/// Loads the ggml backend library at `library_path` into this process (ggml_backend_load: its
/// devices are registered with ggml, and the contexts of models loaded afterwards use an
/// ACCEL device beside the CPU, as llama.cpp does with BLAS). Loading the same path again does
/// nothing. Errors: Unavailable with llama.cpp's reason (no such file, not a ggml backend, an
/// incompatible backend API version, not supported on this CPU).
Result<void> load_backend(const std::string& library_path);

/// How Model::load runs a model.
struct LoadOptions {
  int threads = 1;   ///< this process's CPU threads (prefill and decode alike)
  int context = 64;  ///< KV cache positions of the one sequence
  /// llama.cpp RPC servers ("host:port", IPv4 or a host name; ggml-rpc-server): when given,
  /// every layer and the output head go to their devices, split across them by llama.cpp's
  /// default (layer split, in proportion to each device's free memory, in this order); the
  /// token embedding stays on this host's CPU. Empty: everything on this host's CPU.
  std::vector<std::string> rpc_servers;
};

/// One llama.cpp model and context (the file memory-mapped as llama.cpp does by default), its
/// KV cache holding `context` positions of one sequence: on this host's CPU (and a loaded
/// ACCEL backend), or across RPC servers.
class Model {
 public:
  /// Loads `path`. Errors: InvalidArgument for threads or context < 1 or a server that is not
  /// "host:port"; Unavailable for a server that does not accept a connection within 5 s or
  /// offers no device, or a llama.cpp without its RPC backend; llama.cpp's load or context
  /// creation failing (its log's last error lines in the message). A server that accepts the
  /// connection but does not speak llama.cpp's RPC protocol (of this version) makes llama.cpp
  /// abort the process: its RPC client has no error path.
  static Result<Model> load(const std::string& path, const LoadOptions& options);
  /// load(path, {threads, context}): on this host's CPU.
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
  /// Where llama.cpp put the model: its log lines of this load naming each buffer and its size
  /// ("RPC0[10.0.0.1:50052] model buffer size = 1.02 MiB", "CPU KV buffer size = ..."), and how
  /// many layers went to the RPC devices; empty without llama.cpp.
  [[nodiscard]] const std::vector<std::string>& placement() const;

 private:
  struct State;
  explicit Model(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace ternjit::llama_cpp

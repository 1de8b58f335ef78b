// SPDX-License-Identifier: Apache-2.0
// llama_cpp_runner.cpp - llama_cpp_runner.h over llama.cpp's C API (llama.h of the version
// tools/build-llama-cpp built; TERNJIT_HAVE_LLAMA_CPP), or the unavailable answers without it.
#include "tools/llama_cpp/llama_cpp_runner.h"

#include <algorithm>
#include <mutex>

#if TERNJIT_HAVE_LLAMA_CPP
#include <ggml.h>
#include <llama.h>
#endif

namespace ternjit::llama_cpp {

#if TERNJIT_HAVE_LLAMA_CPP

namespace {

// llama.cpp logs every tensor it loads; keep only the last warnings and errors, for messages.
std::mutex g_log_mutex;
std::string g_log_tail;

void on_log(ggml_log_level level, const char* text, void*) {
  if (level != GGML_LOG_LEVEL_WARN && level != GGML_LOG_LEVEL_ERROR) return;
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_log_tail += text;
  if (g_log_tail.size() > 2000) g_log_tail.erase(0, g_log_tail.size() - 2000);
}

std::string take_log() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::string s;
  s.swap(g_log_tail);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.empty() ? s : " (llama.cpp: " + s + ")";
}

void init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(on_log, nullptr);
    // The CPU backend is linked (libggml-cpu, built for this CPU), registered with ggml at load.
    llama_backend_init();
  });
}

}  // namespace

struct Model::State {
  llama_model* model = nullptr;
  llama_context* ctx = nullptr;
  std::int64_t vocab = 0;
  int context = 0;
  ~State() {
    if (ctx) llama_free(ctx);
    if (model) llama_model_free(model);
  }
};

bool available() { return true; }
std::string unavailable_reason() { return {}; }
std::string version() { return TERNJIT_LLAMA_CPP_VERSION; }

Result<Model> Model::load(const std::string& path, int threads, int context) {
  if (threads < 1 || context < 1) return make_error(ErrorCode::InvalidArgument, "llama.cpp: threads and context must be >= 1");
  init_once();
  auto s = std::make_unique<State>();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  s->model = llama_model_load_from_file(path.c_str(), mp);
  if (!s->model) return make_error(ErrorCode::InvalidInput, "llama.cpp cannot load " + path + take_log());
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<std::uint32_t>(context);
  cp.n_batch = cp.n_ubatch = static_cast<std::uint32_t>(context);
  cp.n_threads = cp.n_threads_batch = threads;
  cp.no_perf = true;
  s->ctx = llama_init_from_model(s->model, cp);
  if (!s->ctx) return make_error(ErrorCode::Internal, "llama.cpp cannot create a context for " + path + take_log());
  s->vocab = llama_vocab_n_tokens(llama_model_get_vocab(s->model));
  s->context = context;
  return Model(std::move(s));
}

Result<std::vector<float>> Model::decode(const std::vector<std::int32_t>& ids, std::int32_t pos, bool all_rows) {
  const auto n = static_cast<std::int32_t>(ids.size());
  if (n < 1 || pos < 0 || static_cast<std::int64_t>(pos) + n > s_->context)
    return make_error(ErrorCode::InvalidArgument, "llama.cpp: positions [" + std::to_string(pos) + ", " +
                                                      std::to_string(static_cast<std::int64_t>(pos) + n) +
                                                      ") are outside the context of " + std::to_string(s_->context));
  llama_batch b = llama_batch_init(n, 0, 1);
  for (std::int32_t i = 0; i < n; ++i) {
    b.token[i] = ids[static_cast<std::size_t>(i)];
    b.pos[i] = pos + i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = static_cast<std::int8_t>(all_rows || i == n - 1);
  }
  b.n_tokens = n;
  const int rc = llama_decode(s_->ctx, b);
  llama_batch_free(b);
  if (rc != 0) return make_error(ErrorCode::Internal, "llama_decode returned " + std::to_string(rc) + take_log());
  std::vector<float> out;
  const std::int32_t first = all_rows ? 0 : n - 1;
  out.reserve(static_cast<std::size_t>((n - first) * s_->vocab));
  for (std::int32_t i = first; i < n; ++i) {
    const float* row = llama_get_logits_ith(s_->ctx, i);
    if (!row) return make_error(ErrorCode::Internal, "llama.cpp returned no logits for row " + std::to_string(i));
    out.insert(out.end(), row, row + s_->vocab);
  }
  return out;
}

void Model::truncate(std::int32_t pos) {
  if (pos <= 0) llama_memory_clear(llama_get_memory(s_->ctx), true);
  else llama_memory_seq_rm(llama_get_memory(s_->ctx), 0, pos, -1);
}

#else  // !TERNJIT_HAVE_LLAMA_CPP

struct Model::State {};

bool available() { return false; }
std::string unavailable_reason() {
  return std::string("llama.cpp is not built in (") + TERNJIT_LLAMA_CPP_MISSING +
         "): run tools/build-llama-cpp, then configure again (cmake -S . -B build)";
}
std::string version() { return {}; }

Result<Model> Model::load(const std::string&, int, int) {
  return make_error(ErrorCode::Unavailable, unavailable_reason());
}
Result<std::vector<float>> Model::decode(const std::vector<std::int32_t>&, std::int32_t, bool) {
  return make_error(ErrorCode::Unavailable, unavailable_reason());
}
void Model::truncate(std::int32_t) {}

#endif

Model::Model(std::unique_ptr<State> s) : s_(std::move(s)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;
std::int64_t Model::vocab() const {
#if TERNJIT_HAVE_LLAMA_CPP
  return s_->vocab;
#else
  return 0;
#endif
}

}  // namespace ternjit::llama_cpp

// SPDX-License-Identifier: Apache-2.0
// llama_cpp_runner.cpp - llama_cpp_runner.h over llama.cpp's C API (llama.h of the version
// tools/build-llama-cpp built; TERNJIT_HAVE_LLAMA_CPP), or the unavailable answers without it.
//
// RPC servers are added as llama.cpp's own --rpc does (common/arg.cpp): the RPC backend's
// registration (libggml links it) gives "ggml_backend_rpc_add_server", whose registration
// holds the server's devices; they become the model's devices (llama_model_params::devices).
// ggml's RPC client aborts the process when it cannot connect, so each server is first tried
// here with a plain TCP connection, and an unreachable one is an error.
#include "tools/llama_cpp/llama_cpp_runner.h"

#include <algorithm>
#include <mutex>

#if TERNJIT_HAVE_LLAMA_CPP
#include <fcntl.h>
#include <ggml-backend.h>
#include <ggml.h>
#include <llama.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#endif

namespace ternjit::llama_cpp {

#if TERNJIT_HAVE_LLAMA_CPP

namespace {

// llama.cpp logs every tensor it loads; keep only the last warnings and errors, for messages
// (and its informational lines too while g_keep_info is set: ggml_backend_load says why it
// refuses a library at that level). While a load runs, g_placement collects its lines naming
// buffers and offloaded layers.
std::mutex g_log_mutex;
std::string g_log_tail;
bool g_keep_info = false;
std::vector<std::string>* g_placement = nullptr;

void on_log(ggml_log_level level, const char* text, void*) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  if (g_placement && level == GGML_LOG_LEVEL_INFO &&
      (std::strstr(text, " buffer size =") || std::strstr(text, "offloaded "))) {
    std::string line = text;
    // "load_tensors:   RPC0[10.0.0.1:50052] model buffer size =     1.02 MiB\n": without the
    // function's name and the padding.
    if (const auto colon = line.find(": "); colon != std::string::npos && line.find('[') > colon)
      line.erase(0, colon + 2);
    line.erase(0, line.find_first_not_of(' '));
    while (!line.empty() && line.back() == '\n') line.pop_back();
    std::string squeezed;
    for (char c : line)
      if (c != ' ' || squeezed.empty() || squeezed.back() != ' ') squeezed += c;
    g_placement->push_back(squeezed);
  }
  if (level != GGML_LOG_LEVEL_WARN && level != GGML_LOG_LEVEL_ERROR && !(g_keep_info && level == GGML_LOG_LEVEL_INFO))
    return;
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
    // The CPU backend is linked (libggml-cpu, built for this CPU), registered with ggml at load;
    // so is the RPC backend's registration (libggml-rpc).
    llama_backend_init();
  });
}

// One load at a time: g_placement belongs to it.
std::mutex g_load_mutex;

// "host:port" as ggml's RPC client reads it (the first ':'; IPv4 or a host name), with the port
// checked, and a TCP connection to it tried (5 s): ggml's client aborts on a refused one.
Result<void> try_connect(const std::string& endpoint) {
  const auto colon = endpoint.find(':');
  const std::string host = colon == std::string::npos ? "" : endpoint.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : endpoint.substr(colon + 1);
  const bool digits = !port.empty() && port.size() <= 5 &&
                      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (host.empty() || !digits || std::stoi(port) < 1 || std::stoi(port) > 65535)
    return make_error(ErrorCode::InvalidArgument, "RPC server '" + endpoint + "' is not host:port (port 1 to 65535)");
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return make_error(ErrorCode::Unavailable,
                      "RPC server " + endpoint + ": cannot resolve '" + host + "': " + ::gai_strerror(rc));
  std::string why = "no IPv4 address";
  bool connected = false;
  for (const addrinfo* a = found; a && !connected; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, 5000);
      socklen_t len = sizeof(err);
      if (ready == 0) err = ETIMEDOUT;
      else if (ready < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
    ::close(fd);
    if (err == 0) connected = true;
    else why = std::strerror(err);
  }
  ::freeaddrinfo(found);
  if (!connected) return make_error(ErrorCode::Unavailable, "cannot connect to RPC server " + endpoint + ": " + why);
  return {};
}

// The devices of `servers`, in order (each server's in its order).
Result<std::vector<ggml_backend_dev_t>> rpc_devices(const std::vector<std::string>& servers) {
  ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
  using AddServer = ggml_backend_reg_t (*)(const char*);
  auto add_server =
      rpc ? reinterpret_cast<AddServer>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"))
          : nullptr;
  if (!add_server)
    return make_error(ErrorCode::Unavailable, "this llama.cpp has no RPC backend (it was built without GGML_RPC)");
  std::vector<ggml_backend_dev_t> devices;
  for (std::size_t i = 0; i < servers.size(); ++i) {
    if (std::find(servers.begin(), servers.begin() + static_cast<std::ptrdiff_t>(i), servers[i]) !=
        servers.begin() + static_cast<std::ptrdiff_t>(i))
      return make_error(ErrorCode::InvalidArgument, "RPC server " + servers[i] + " is listed twice");
    if (auto c = try_connect(servers[i]); !c.ok()) return c.error();
    ggml_backend_reg_t reg = add_server(servers[i].c_str());
    const std::size_t n = reg ? ggml_backend_reg_dev_count(reg) : 0;
    if (n == 0)
      return make_error(ErrorCode::Unavailable, "RPC server " + servers[i] + " offers no device" + take_log());
    for (std::size_t d = 0; d < n; ++d) devices.push_back(ggml_backend_reg_dev_get(reg, d));
  }
  return devices;
}

}  // namespace

Result<void> load_backend(const std::string& library_path) {
  init_once();
  static std::mutex mutex;
  static std::set<std::string> loaded;  // ggml's registry is process-wide: so is this
  std::lock_guard<std::mutex> lock(mutex);
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(library_path, ec);
  const std::string key = ec ? library_path : canonical.string();
  if (loaded.count(key)) return {};
  take_log();
  {
    std::lock_guard<std::mutex> log_lock(g_log_mutex);
    g_keep_info = true;
  }
  ggml_backend_reg_t reg = ggml_backend_load(library_path.c_str());
  {
    std::lock_guard<std::mutex> log_lock(g_log_mutex);
    g_keep_info = false;
  }
  const std::string log = take_log();
  if (!reg) return make_error(ErrorCode::Unavailable, "llama.cpp cannot load the ggml backend " + library_path + log);
  loaded.insert(key);
  return {};
}

struct Model::State {
  llama_model* model = nullptr;
  llama_context* ctx = nullptr;
  std::int64_t vocab = 0;
  int context = 0;
  std::vector<ggml_backend_dev_t> devices;  // the model's, null-terminated (llama_model_params)
  std::vector<std::string> placement;
  ~State() {
    if (ctx) llama_free(ctx);
    if (model) llama_model_free(model);
  }
};

bool available() { return true; }
std::string unavailable_reason() { return {}; }
std::string version() { return TERNJIT_LLAMA_CPP_VERSION; }

Result<Model> Model::load(const std::string& path, const LoadOptions& o) {
  if (o.threads < 1 || o.context < 1)
    return make_error(ErrorCode::InvalidArgument, "llama.cpp: threads and context must be >= 1");
  init_once();
  std::lock_guard<std::mutex> one_load(g_load_mutex);
  auto s = std::make_unique<State>();
  if (!o.rpc_servers.empty()) {
    auto d = rpc_devices(o.rpc_servers);
    if (!d.ok()) return d.error();
    s->devices = std::move(d.value());
  }
  s->devices.push_back(nullptr);
  llama_model_params mp = llama_model_default_params();
  // An explicit device list: no other device a process may have registered (an empty list: this
  // host's CPU, and an ACCEL backend's buffer type when one is loaded).
  mp.devices = s->devices.data();
  mp.n_gpu_layers = o.rpc_servers.empty() ? 0 : -1;  // -1: every layer and the head
  {
    std::lock_guard<std::mutex> log_lock(g_log_mutex);
    g_placement = &s->placement;
  }
  s->model = llama_model_load_from_file(path.c_str(), mp);
  if (s->model) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<std::uint32_t>(o.context);
    cp.n_batch = cp.n_ubatch = static_cast<std::uint32_t>(o.context);
    cp.n_threads = cp.n_threads_batch = o.threads;
    cp.no_perf = true;
    s->ctx = llama_init_from_model(s->model, cp);
  }
  {
    std::lock_guard<std::mutex> log_lock(g_log_mutex);
    g_placement = nullptr;
  }
  if (!s->model) return make_error(ErrorCode::InvalidInput, "llama.cpp cannot load " + path + take_log());
  if (!s->ctx) return make_error(ErrorCode::Internal, "llama.cpp cannot create a context for " + path + take_log());
  s->vocab = llama_vocab_n_tokens(llama_model_get_vocab(s->model));
  s->context = o.context;
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

Result<void> load_backend(const std::string&) { return make_error(ErrorCode::Unavailable, unavailable_reason()); }
Result<Model> Model::load(const std::string&, const LoadOptions&) {
  return make_error(ErrorCode::Unavailable, unavailable_reason());
}
Result<std::vector<float>> Model::decode(const std::vector<std::int32_t>&, std::int32_t, bool) {
  return make_error(ErrorCode::Unavailable, unavailable_reason());
}
void Model::truncate(std::int32_t) {}

#endif

Result<Model> Model::load(const std::string& path, int threads, int context) {
  LoadOptions o;
  o.threads = threads;
  o.context = context;
  return load(path, o);
}
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
const std::vector<std::string>& Model::placement() const {
#if TERNJIT_HAVE_LLAMA_CPP
  return s_->placement;
#else
  static const std::vector<std::string> none;
  return none;
#endif
}

}  // namespace ternjit::llama_cpp

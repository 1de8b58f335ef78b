// SPDX-License-Identifier: Apache-2.0
// ggml-ternjit.cpp - ggml-ternjit.h: the registration, device, backend and buffer type that
// put ternary_matmul.h into ggml's scheduler (the pinned llama.cpp's ggml-backend-impl.h).
//
// How ggml and llama.cpp use it. llama.cpp places each weight in the first buffer type,
// ACCEL devices' first, whose device supports the op that reads it: the TERNJIT device
// supports MUL_MAT of a ternary weight held in its own buffer type, so exactly those weights
// go there (memory-mapped from the file when llama.cpp maps it: buffer_from_host_ptr) and
// every other weight stays in ggml-cpu's buffers. ggml's scheduler then gives the backend
// the nodes that read those weights (ACCEL backends come before the CPU's) and ggml-cpu the
// rest. The buffer type is ordinary host memory, so ggml-cpu reads it and no copy is made
// either way. Its own buffers let the backend know when a weight's bytes are written or
// freed, so a packed weight is never used for bytes that changed (ternary_matmul.h).
//
// Given a graph (llama.cpp's RPC server hands a device whole graphs, whatever supports_op
// says), the backend computes the ternary matmuls of weights in its buffers and hands every
// other run of nodes to a ggml-cpu backend of its own, in order.
#include "integrations/ggml/ggml-ternjit.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "integrations/ggml/ternary_matmul.h"
#include "ternjit/ternjit.h"

namespace {

using ternjit::ggml::TernaryMatmuls;

constexpr std::size_t kAlignment = 64;
const char* const kName = "TERNJIT";

ggml_backend_buffer_type_t ternjit_buft();
ggml_backend_reg_t reg();

TernaryMatmuls* matmuls() { return TernaryMatmuls::get(nullptr); }

// ---------------------------------------------------------------------------- buffers

// A buffer: host memory it owns (aligned_alloc) or a caller's (a memory-mapped model file),
// and the ternary weights allocated in it (init_tensor), packed all at once at the first
// graph that reads one of them.
struct Buffer {
  char* base = nullptr;
  bool owned = false;
  std::mutex mu;  // guards weights
  std::vector<ternjit::ggml::WeightRef> weights;
  std::atomic<bool> packed_all{false};
};

char* base_of(ggml_backend_buffer_t b) { return static_cast<Buffer*>(b->context)->base; }

// Bytes [offset, offset + size) of `t` are about to change: packed weights of them go.
void forget(const ggml_tensor* t, std::size_t offset, std::size_t size) {
  if (auto* m = matmuls()) {
    const char* p = static_cast<const char*>(t->data) + offset;
    m->forget(p, p + size);
  }
}

void forget_buffer(ggml_backend_buffer_t b) {
  if (auto* m = matmuls()) m->forget(base_of(b), base_of(b) + b->size);
}

void buffer_free(ggml_backend_buffer_t b) {
  forget_buffer(b);
  auto* ctx = static_cast<Buffer*>(b->context);
  if (ctx->owned) std::free(ctx->base);
  delete ctx;
}

void* buffer_base(ggml_backend_buffer_t b) { return base_of(b); }

ggml_status buffer_init_tensor(ggml_backend_buffer_t b, ggml_tensor* t) try {
  auto* ctx = static_cast<Buffer*>(b->context);
  ternjit::ggml::WeightRef w;
  if (!t->view_src && ternjit::ggml::ternary_weight(t, !ctx->owned, &w)) {
    std::lock_guard lock(ctx->mu);
    ctx->weights.push_back(std::move(w));
  }
  return GGML_STATUS_SUCCESS;
} catch (const std::bad_alloc&) {
  return GGML_STATUS_ALLOC_FAILED;
}

void buffer_memset(ggml_backend_buffer_t, ggml_tensor* t, std::uint8_t value, std::size_t offset, std::size_t size) {
  forget(t, offset, size);
  std::memset(static_cast<char*>(t->data) + offset, value, size);
}

void buffer_set(ggml_backend_buffer_t, ggml_tensor* t, const void* data, std::size_t offset, std::size_t size) {
  forget(t, offset, size);
  std::memcpy(static_cast<char*>(t->data) + offset, data, size);
}

void buffer_get(ggml_backend_buffer_t, const ggml_tensor* t, void* data, std::size_t offset, std::size_t size) {
  std::memcpy(data, static_cast<const char*>(t->data) + offset, size);
}

bool buffer_cpy(ggml_backend_buffer_t, const ggml_tensor* src, ggml_tensor* dst) {
  if (!src->buffer || !ggml_backend_buffer_is_host(src->buffer)) return false;
  forget(dst, 0, ggml_nbytes(dst));
  std::memcpy(dst->data, src->data, ggml_nbytes(src));
  return true;
}

void buffer_clear(ggml_backend_buffer_t b, std::uint8_t value) {
  forget_buffer(b);
  std::memset(base_of(b), value, b->size);
}

const ggml_backend_buffer_i kBufferInterface = {
    /* .free_buffer   = */ buffer_free,
    /* .get_base      = */ buffer_base,
    /* .init_tensor   = */ buffer_init_tensor,
    /* .memset_tensor = */ buffer_memset,
    /* .set_tensor    = */ buffer_set,
    /* .get_tensor    = */ buffer_get,
    /* .set_tensor_2d = */ nullptr,
    /* .get_tensor_2d = */ nullptr,
    /* .cpy_tensor    = */ buffer_cpy,
    /* .clear         = */ buffer_clear,
    /* .reset         = */ nullptr,
};

ggml_backend_buffer_t make_buffer(char* base, bool owned, std::size_t size) {
  auto* ctx = new Buffer;
  ctx->base = base;
  ctx->owned = owned;
  return ggml_backend_buffer_init(ternjit_buft(), kBufferInterface, ctx, size);
}

const char* buft_name(ggml_backend_buffer_type_t) { return kName; }

ggml_backend_buffer_t buft_alloc(ggml_backend_buffer_type_t, std::size_t size) {
  // aligned_alloc wants a multiple of the alignment (and ggml asks for 0 bytes at times).
  const std::size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (!p) {
    GGML_LOG_ERROR("ggml-ternjit: cannot allocate %zu bytes\n", size);
    return nullptr;
  }
  return make_buffer(static_cast<char*>(p), true, size);
}

std::size_t buft_alignment(ggml_backend_buffer_type_t) { return kAlignment; }
bool buft_is_host(ggml_backend_buffer_type_t) { return true; }

ggml_backend_buffer_t buffer_of(const ggml_tensor* t) { return t->view_src ? t->view_src->buffer : t->buffer; }

// Whether `t` is in a buffer of the backend's buffer type (llama.cpp asks supports_op of a
// weight in ggml's zero-size dummy buffer of the type, which has no context).
bool in_own_buffer(const ggml_tensor* t) {
  const ggml_backend_buffer_t b = buffer_of(t);
  return b && b->buft == ternjit_buft();
}

// The backend's own buffer holding `t`'s bytes, or null (another buffer, or a dummy).
Buffer* own_buffer(const ggml_tensor* t) {
  return in_own_buffer(t) ? static_cast<Buffer*>(buffer_of(t)->context) : nullptr;
}

// Whether `t`'s bytes are a caller's mapping (buffer_from_host_ptr: llama.cpp's mapped file).
bool mapped(const ggml_tensor* t) {
  const Buffer* b = own_buffer(t);
  return b && !b->owned;
}

// At the first graph that reads a weight of `t`'s buffer: every weight of that buffer packed,
// on the graph's threads.
void pack_buffer_once(TernaryMatmuls* m, const ggml_tensor* t, int threads) {
  Buffer* b = own_buffer(t);
  if (!b || b->packed_all.exchange(true)) return;
  std::vector<ternjit::ggml::WeightRef> weights;
  {
    std::lock_guard lock(b->mu);
    weights = b->weights;
  }
  m->pack_all(weights, threads);
}

// ---------------------------------------------------------------------------- backend

struct Backend {
  int threads = 1;
  ggml_backend_t cpu = nullptr;  // made at the first node that is not the backend's own
  ggml_backend_set_n_threads_t cpu_set_threads = nullptr;
  ~Backend() {
    if (cpu) ggml_backend_free(cpu);
  }
};

const char* backend_name(ggml_backend_t) { return kName; }

void backend_free(ggml_backend_t backend) {
  delete static_cast<Backend*>(backend->context);
  delete backend;
}

bool is_view(ggml_op op) {
  return op == GGML_OP_NONE || op == GGML_OP_RESHAPE || op == GGML_OP_VIEW || op == GGML_OP_PERMUTE ||
         op == GGML_OP_TRANSPOSE;
}

// Whether the backend computes `node` itself.
bool own_node(const ggml_tensor* node) {
  return ternjit::ggml::takes_mul_mat(node) && in_own_buffer(node->src[0]);
}

// Nodes [i0, i1) of `graph` on ggml-cpu.
ggml_status on_cpu(Backend* ctx, ggml_cgraph* graph, int i0, int i1) {
  if (!ctx->cpu) {
    ctx->cpu = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
    if (!ctx->cpu) {
      GGML_LOG_ERROR("ggml-ternjit: no CPU backend for the nodes it does not compute itself\n");
      return GGML_STATUS_FAILED;
    }
    ggml_backend_reg_t cpu_reg = ggml_backend_dev_backend_reg(ggml_backend_get_device(ctx->cpu));
    ctx->cpu_set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(cpu_reg, "ggml_backend_set_n_threads"));
  }
  if (ctx->cpu_set_threads) ctx->cpu_set_threads(ctx->cpu, ctx->threads);
  ggml_cgraph view = ggml_graph_view(graph, i0, i1);
  return ggml_backend_graph_compute(ctx->cpu, &view);
}

ggml_status compute_graph(Backend* ctx, ggml_cgraph* graph) {
  TernaryMatmuls* m = matmuls();
  const std::uint64_t packs_before = m ? m->packs() : 0;
  const int n = ggml_graph_n_nodes(graph);
  for (int i = 0; i < n;) {
    ggml_tensor* node = ggml_graph_node(graph, i);
    if (is_view(node->op) || (node->flags & GGML_TENSOR_FLAG_COMPUTE) == 0) {
      ++i;
      continue;
    }
    if (m && own_node(node)) {
      pack_buffer_once(m, node->src[0], ctx->threads);
      std::string error;
      switch (m->compute(node, ctx->threads, mapped(node->src[0]), &error)) {
        case TernaryMatmuls::Outcome::Done: ++i; continue;
        case TernaryMatmuls::Outcome::Declined: break;  // below, on ggml-cpu
        case TernaryMatmuls::Outcome::Failed:
          GGML_LOG_ERROR("ggml-ternjit: %s\n", error.c_str());
          return GGML_STATUS_FAILED;
      }
      if (const ggml_status s = on_cpu(ctx, graph, i, i + 1); s != GGML_STATUS_SUCCESS) return s;
      ++i;
      continue;
    }
    // A run of nodes the backend does not compute, up to its next own node.
    int j = i + 1;
    while (j < n && !(m && own_node(ggml_graph_node(graph, j)))) ++j;
    if (const ggml_status s = on_cpu(ctx, graph, i, j); s != GGML_STATUS_SUCCESS) return s;
    i = j;
  }
  if (m && m->packs() != packs_before) {
    const ternjit::ggml::PackedMemory mem = m->memory();
    GGML_LOG_INFO("ggml-ternjit: %zu weights packed: %.1f MiB in ternjit's layout, from %.1f MiB of GGUF blocks\n",
                  mem.weights, static_cast<double>(mem.packed_bytes) / (1 << 20),
                  static_cast<double>(mem.source_bytes) / (1 << 20));
  }
  return GGML_STATUS_SUCCESS;
}

// No exception leaves the backend into ggml (C callers, and OpenMP regions, above it).
ggml_status backend_graph_compute(ggml_backend_t backend, ggml_cgraph* graph) {
  try {
    return compute_graph(static_cast<Backend*>(backend->context), graph);
  } catch (const std::exception& e) {
    GGML_LOG_ERROR("ggml-ternjit: %s\n", e.what());
  } catch (...) {
    GGML_LOG_ERROR("ggml-ternjit: an unexpected exception\n");
  }
  return GGML_STATUS_FAILED;
}

const ggml_backend_i kBackendInterface = {
    /* .get_name            = */ backend_name,
    /* .free                = */ backend_free,
    /* .set_tensor_async    = */ nullptr,
    /* .get_tensor_async    = */ nullptr,
    /* .set_tensor_2d_async = */ nullptr,
    /* .get_tensor_2d_async = */ nullptr,
    /* .cpy_tensor_async    = */ nullptr,
    /* .synchronize         = */ nullptr,
    /* .graph_plan_create   = */ nullptr,
    /* .graph_plan_free     = */ nullptr,
    /* .graph_plan_update   = */ nullptr,
    /* .graph_plan_compute  = */ nullptr,
    /* .graph_compute       = */ backend_graph_compute,
    /* .event_record        = */ nullptr,
    /* .event_wait          = */ nullptr,
    /* .graph_optimize      = */ nullptr,
};

ggml_guid_t guid() {
  static ggml_guid g = {0x74, 0x65, 0x72, 0x6e, 0x6a, 0x69, 0x74, 0x2d, 0x67, 0x67, 0x6d, 0x6c, 0x2d, 0x62, 0x65, 0x31};
  return &g;
}

void set_threads(ggml_backend_t backend, int threads) {
  if (backend && ggml_guid_matches(backend->guid, guid()) && threads >= 1)
    static_cast<Backend*>(backend->context)->threads = threads;
}

// ---------------------------------------------------------------------------- device

const char* dev_name(ggml_backend_dev_t) { return kName; }

const char* dev_description(ggml_backend_dev_t) {
  static const std::string d = std::string("ternjit ") + ternjit_version() + " ternary matmuls";
  return d.c_str();
}

// Host memory: what the buffers use.
void dev_memory(ggml_backend_dev_t, std::size_t* free, std::size_t* total) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  *free = static_cast<std::size_t>(sysconf(_SC_AVPHYS_PAGES)) * page;
  *total = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page;
}

enum ggml_backend_dev_type dev_type(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_ACCEL; }

void dev_props(ggml_backend_dev_t dev, ggml_backend_dev_props* props) {
  props->name = dev_name(dev);
  props->description = dev_description(dev);
  props->type = dev_type(dev);
  dev_memory(dev, &props->memory_free, &props->memory_total);
  props->caps = {
      /* .async                = */ false,
      /* .host_buffer          = */ false,
      /* .buffer_from_host_ptr = */ true,
      /* .events               = */ false,
      /* .mmap_support         = */ true,
  };
}

ggml_backend_t dev_init(ggml_backend_dev_t dev, const char*) {
  return new ggml_backend{guid(), kBackendInterface, dev, new Backend};
}

ggml_backend_buffer_type_t dev_buft(ggml_backend_dev_t) { return ternjit_buft(); }

ggml_backend_buffer_t dev_buffer_from_host_ptr(ggml_backend_dev_t, void* ptr, std::size_t size, std::size_t) {
  return make_buffer(static_cast<char*>(ptr), false, size);
}

bool dev_supports_op(ggml_backend_dev_t, const ggml_tensor* op) {
  if (is_view(op->op)) return true;
  return own_node(op);
}

bool dev_supports_buft(ggml_backend_dev_t, ggml_backend_buffer_type_t buft) { return ggml_backend_buft_is_host(buft); }

const ggml_backend_device_i kDeviceInterface = {
    /* .get_name             = */ dev_name,
    /* .get_description      = */ dev_description,
    /* .get_memory           = */ dev_memory,
    /* .get_type             = */ dev_type,
    /* .get_props            = */ dev_props,
    /* .init_backend         = */ dev_init,
    /* .get_buffer_type      = */ dev_buft,
    /* .get_host_buffer_type = */ nullptr,
    /* .buffer_from_host_ptr = */ dev_buffer_from_host_ptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ nullptr,
    /* .event_new            = */ nullptr,
    /* .event_free           = */ nullptr,
    /* .event_synchronize    = */ nullptr,
};

ggml_backend_device* device() {
  static ggml_backend_device d = {kDeviceInterface, reg(), nullptr};
  return &d;
}

ggml_backend_buffer_type_t ternjit_buft() {
  static ggml_backend_buffer_type t = {
      {
          /* .get_name       = */ buft_name,
          /* .alloc_buffer   = */ buft_alloc,
          /* .get_alignment  = */ buft_alignment,
          /* .get_max_size   = */ nullptr,
          /* .get_alloc_size = */ nullptr,
          /* .is_host        = */ buft_is_host,
      },
      device(),
      nullptr,
  };
  return &t;
}

// ---------------------------------------------------------------------------- registration

const char* reg_name(ggml_backend_reg_t) { return kName; }

// One device, or none when ternjit's engine cannot be made here (said once in the log).
std::size_t reg_device_count(ggml_backend_reg_t) {
  static const bool available = [] {
    std::string why;
    if (TernaryMatmuls::get(&why)) return true;
    GGML_LOG_WARN("ggml-ternjit: no device: %s\n", why.c_str());
    return false;
  }();
  return available ? 1 : 0;
}

ggml_backend_dev_t reg_device(ggml_backend_reg_t r, std::size_t index) {
  return index < reg_device_count(r) ? device() : nullptr;
}

void* reg_proc_address(ggml_backend_reg_t, const char* name) {
  if (std::strcmp(name, "ggml_backend_set_n_threads") == 0) return reinterpret_cast<void*>(set_threads);
  if (std::strcmp(name, "ggml_backend_ternjit_memory") == 0) return reinterpret_cast<void*>(ggml_backend_ternjit_memory);
  return nullptr;
}

ggml_backend_reg_t reg() { return ggml_backend_ternjit_reg(); }

}  // namespace

ggml_backend_reg_t ggml_backend_ternjit_reg(void) {
  static ggml_backend_reg r = {
      GGML_BACKEND_API_VERSION,
      {
          /* .get_name         = */ reg_name,
          /* .get_device_count = */ reg_device_count,
          /* .get_device       = */ reg_device,
          /* .get_proc_address = */ reg_proc_address,
      },
      nullptr,
  };
  return &r;
}

void ggml_backend_ternjit_memory(size_t* weights, size_t* packed_bytes, size_t* source_bytes) {
  ternjit::ggml::PackedMemory m;
  if (auto* t = matmuls()) m = t->memory();
  if (weights) *weights = m.weights;
  if (packed_bytes) *packed_bytes = m.packed_bytes;
  if (source_bytes) *source_bytes = m.source_bytes;
}

GGML_BACKEND_DL_IMPL(ggml_backend_ternjit_reg)

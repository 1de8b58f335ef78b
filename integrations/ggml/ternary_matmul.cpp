// SPDX-License-Identifier: Apache-2.0
// ternary_matmul.cpp - ternary_matmul.h: ggml's MUL_MAT on ternjit's bound-weight kernels.
//
// ggml's MUL_MAT(W, x) with W of ggml dims (K, N) (N rows of K weights, in blocks along K)
// and x of dims (K, M, ...) computes y[m, n] = sum_k W[n, k] * x[m, k]: the dispatch's
// y = x @ W for a GGUF weight of dims (K, N), whose bytes it reads as they are. The rows of
// x (ne1 * ne2 * ne3 of them, contiguous) are the kernel's M rows, in calls of at most
// kRowsPerCall rows (one compiled kernel serves 1..kRowsPerCall rows: run-time rows).
//
// Threads: ggml tells the backend its thread count per graph; ternjit's kernels split
// their work into tasks for the engine's `threads` (this machine's hardware threads) and
// hand them to the parallel_for below, which runs them on OpenMP's team of that many
// threads: the same team ggml-cpu's own kernels run on (libgomp keeps it between parallel
// regions), so the two never fight over cores and no thread is started per call.
#include "integrations/ggml/ternary_matmul.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "ggml-impl.h"  // GGML_LOG_*
#include "ternjit/ternjit.h"

namespace ternjit::ggml {

namespace {

// Rows a kernel call takes (more are split into calls of this many).
constexpr std::int64_t kRowsPerCall = 512;

// The ggml thread count of the graph being computed on this thread.
thread_local int t_threads = 1;

void omp_parallel_for(void*, void (*task)(void*, std::int64_t), void* context, std::int64_t n) {
  const int team = static_cast<int>(std::min<std::int64_t>(t_threads, n));
  if (team <= 1) {
    for (std::int64_t i = 0; i < n; ++i) task(context, i);
    return;
  }
#pragma omp parallel for num_threads(team) schedule(dynamic, 1)
  for (std::int64_t i = 0; i < n; ++i) task(context, i);
}

struct WeightType {
  ternjit_tmatmul_weight format;
  std::int64_t block;  // weights per block along K
};

bool weight_type(ggml_type t, WeightType* out) {
  switch (t) {
    case GGML_TYPE_TQ2_0: *out = {TERNJIT_TMATMUL_W_GGUF_TQ2_0, 256}; return true;
    case GGML_TYPE_TQ1_0: *out = {TERNJIT_TMATMUL_W_GGUF_TQ1_0, 256}; return true;
    case GGML_TYPE_Q2_0: *out = {TERNJIT_TMATMUL_W_GGUF_Q2_0, 64}; return true;
    default: return false;
  }
}

// One packed weight: the bytes it was packed from, its type and shape, its kernel.
struct Packed {
  const char* end = nullptr;  // of the source bytes (the key is their start)
  ggml_type type = GGML_TYPE_COUNT;
  std::int64_t k = 0, n = 0;
  ternjit_tmatmul_bound* bound = nullptr;
  ternjit_tmatmul_fn fn = nullptr;
  const void* state = nullptr;
  bool declined = false;  // its values are not ternary: computed by ggml-cpu
  Packed() = default;
  Packed(const Packed&) = delete;
  Packed& operator=(const Packed&) = delete;
  ~Packed() { ternjit_tmatmul_bound_destroy(bound); }
};

// Hands the whole pages inside [begin, end) back to the kernel (the pages at either end may
// hold a neighbour's bytes). A kernel without MADV_PAGEOUT (before Linux 5.4) keeps them.
void release_pages(const char* begin, const char* end) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t first = (reinterpret_cast<std::uintptr_t>(begin) + page - 1) / page * page;
  const std::uintptr_t last = reinterpret_cast<std::uintptr_t>(end) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_PAGEOUT);
}

std::string last_error() {
  const char* e = ternjit_last_error();
  return e && *e ? e : "(no message)";
}

}  // namespace

bool ternary_weight(const ggml_tensor* t, bool mapped, WeightRef* out) {
  WeightType wt{};
  if (!t || !weight_type(t->type, &wt) || t->ne[2] != 1 || t->ne[3] != 1 || !ggml_is_contiguous(t) ||
      t->ne[0] % wt.block != 0)
    return false;
  *out = WeightRef{static_cast<const char*>(t->data), t->type, t->ne[0], t->ne[1], t->name, mapped};
  return true;
}

bool takes_mul_mat(const ggml_tensor* op) {
  if (op->op != GGML_OP_MUL_MAT) return false;
  const ggml_tensor* w = op->src[0];
  const ggml_tensor* x = op->src[1];
  WeightRef ref;
  if (!x || !ternary_weight(w, false, &ref)) return false;
  return x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[0] == w->ne[0] && op->type == GGML_TYPE_F32 &&
         ggml_is_contiguous(op) && op->ne[0] == w->ne[1] && ggml_nrows(op) == ggml_nrows(x);
}

struct TernaryMatmuls::Impl {
  ternjit_engine* engine = nullptr;
  ternjit_tmatmul_x x_kind = TERNJIT_TMATMUL_X_F32_ROW_I8;
  std::atomic<std::uint64_t> packs{0};
  mutable std::shared_mutex mu;                           // guards packed
  std::map<const char*, std::shared_ptr<Packed>> packed;  // by the source bytes' start

  // The packed weight of `w`'s bytes, type and shape, or null. Called under mu.
  std::shared_ptr<Packed> lookup(const WeightRef& w) const {
    auto it = packed.find(w.data);
    if (it != packed.end() && it->second->type == w.type && it->second->k == w.k && it->second->n == w.n)
      return it->second;
    return nullptr;
  }

  // The packed weight of `w`, packing it on first use. Packing runs outside the lock (several
  // weights pack at once in pack_all); of two threads packing one weight, the first to
  // finish is kept.
  std::shared_ptr<Packed> find_or_pack(const WeightRef& w, std::string* error) {
    {
      std::shared_lock lock(mu);
      if (auto p = lookup(w)) return p;
    }
    auto p = pack(w, error);
    if (!p) return nullptr;
    std::unique_lock lock(mu);
    if (auto first = lookup(w)) return first;
    packed.insert_or_assign(w.data, p);
    if (!p->declined) packs.fetch_add(1, std::memory_order_relaxed);
    return p;
  }

  std::shared_ptr<Packed> pack(const WeightRef& w, std::string* error) const {
    WeightType wt{};
    weight_type(w.type, &wt);
    auto p = std::make_shared<Packed>();
    const std::size_t bytes = ggml_row_size(w.type, w.k) * static_cast<std::size_t>(w.n);
    p->end = w.data + bytes;
    p->type = w.type;
    p->k = w.k;
    p->n = w.n;
    ternjit_tmatmul_desc d;
    ternjit_tmatmul_desc_init(&d);
    d.m = TERNJIT_TMATMUL_ANY_M;
    d.m_max = kRowsPerCall;
    d.k = p->k;
    d.n = p->n;
    d.weight = wt.format;
    d.x = x_kind;
    const ternjit_status bound = ternjit_tmatmul_bind(engine, &d, w.data, bytes, nullptr, nullptr, &p->bound);
    if (bound == TERNJIT_INVALID_INPUT && w.type == GGML_TYPE_Q2_0) {
      // Q2_0's fourth code is +2: such a weight is not ternary, and ggml-cpu computes it.
      GGML_LOG_WARN("ggml-ternjit: the Q2_0 weight '%s' holds values outside {-1, 0, +1}: ggml-cpu computes it (%s)\n",
                    w.name.c_str(), last_error().c_str());
      p->declined = true;
      return p;
    }
    if (bound != TERNJIT_OK || ternjit_tmatmul_bound_entry(p->bound, &p->fn, &p->state) != TERNJIT_OK) {
      *error = std::string("ternjit cannot take the ") + ggml_type_name(w.type) + " weight '" + w.name + "' (" +
               std::to_string(p->k) + " x " + std::to_string(p->n) + "): " + last_error();
      return nullptr;
    }
    // The bind packed the kernel of kRowsPerCall rows (prefill); one call of one row packs
    // the layout decoding reads too, here rather than inside the first token.
    std::vector<float> x(static_cast<std::size_t>(p->k), 0.0f), y(static_cast<std::size_t>(p->n));
    ternjit_tmatmul_args a{};
    a.x = x.data();
    a.y = y.data();
    a.m = 1;
    if (p->fn(p->state, &a) != TERNJIT_OK) {
      *error = std::string("ternjit's kernel for the weight '") + w.name + "' failed: " + last_error();
      return nullptr;
    }
    if (w.mapped) release_pages(w.data, p->end);
    return p;
  }
};

TernaryMatmuls* TernaryMatmuls::get(std::string* why) {
  static std::once_flag once;
  static TernaryMatmuls* instance = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    auto impl = std::make_unique<Impl>();
    if (const char* a = std::getenv("GGML_TERNJIT_ACTIVATIONS"); a && *a) {
      if (std::strcmp(a, "int8") == 0) {
        impl->x_kind = TERNJIT_TMATMUL_X_F32_ROW_I8;
      } else if (std::strcmp(a, "f32") == 0) {
        impl->x_kind = TERNJIT_TMATMUL_X_F32;
      } else {
        failure = std::string("GGML_TERNJIT_ACTIVATIONS is '") + a + "': it takes int8 (the default) or f32";
        return;
      }
    }
    ternjit_engine_options o;
    ternjit_engine_options_init(&o);
    const char* target = std::getenv("TERNJIT_TARGET");
    o.target = target && *target ? target : "auto";
    o.target_options = std::getenv("TERNJIT_TARGET_OPTIONS");
    o.threads = static_cast<std::int32_t>(std::max(1u, std::thread::hardware_concurrency()));
    o.parallel_for = omp_parallel_for;
    if (ternjit_engine_create(&o, &impl->engine) != TERNJIT_OK) {
      failure = "ternjit cannot make its engine: " + last_error();
      return;
    }
    instance = new TernaryMatmuls(impl.release());
  });
  if (!instance && why) *why = failure;
  return instance;
}

TernaryMatmuls::Outcome TernaryMatmuls::compute(const ggml_tensor* op, int threads, bool mapped, std::string* error) {
  const ggml_tensor* x = op->src[1];
  WeightRef w;
  ternary_weight(op->src[0], mapped, &w);
  const std::shared_ptr<Packed> p = impl_->find_or_pack(w, error);
  if (!p) return Outcome::Failed;
  if (p->declined) return Outcome::Declined;
  t_threads = std::max(1, threads);
  const std::int64_t rows = ggml_nrows(x);
  const auto* xs = static_cast<const float*>(x->data);
  auto* ys = static_cast<float*>(op->data);
  for (std::int64_t r = 0; r < rows; r += kRowsPerCall) {
    ternjit_tmatmul_args a{};
    a.x = xs + r * p->k;
    a.y = ys + r * p->n;
    a.m = std::min(kRowsPerCall, rows - r);
    if (p->fn(p->state, &a) != TERNJIT_OK) {
      *error = std::string("ternjit's kernel for '") + op->name + "' failed: " + last_error();
      return Outcome::Failed;
    }
  }
  return Outcome::Done;
}

void TernaryMatmuls::forget(const void* begin, const void* end) {
  const auto* b = static_cast<const char*>(begin);
  const auto* e = static_cast<const char*>(end);
  std::unique_lock lock(impl_->mu);
  // Entries starting before `e` whose bytes end after `b`: the first candidate is the last
  // entry starting at or before `b`.
  auto it = impl_->packed.upper_bound(b);
  if (it != impl_->packed.begin()) --it;
  while (it != impl_->packed.end() && it->first < e) {
    if (it->second->end > b) it = impl_->packed.erase(it);
    else ++it;
  }
}

void TernaryMatmuls::pack_all(const std::vector<WeightRef>& weights, int threads) {
  const auto n = static_cast<std::int64_t>(weights.size());
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(dynamic, 1)
  for (std::int64_t i = 0; i < n; ++i) {
    // A weight that cannot be packed (its error, or out of memory: nothing may leave an
    // OpenMP region) is left for compute, which reports it when it reads the weight.
    try {
      std::string ignored;
      impl_->find_or_pack(weights[static_cast<std::size_t>(i)], &ignored);
    } catch (...) {
    }
  }
}

std::uint64_t TernaryMatmuls::packs() const { return impl_->packs.load(std::memory_order_relaxed); }

PackedMemory TernaryMatmuls::memory() const {
  std::shared_lock lock(impl_->mu);
  PackedMemory m;
  for (const auto& [begin, p] : impl_->packed) {
    if (p->declined) continue;
    ++m.weights;
    m.packed_bytes += ternjit_tmatmul_bound_bytes(p->bound);  // now: a new row bucket packs more
    m.source_bytes += static_cast<std::size_t>(p->end - begin);
  }
  return m;
}

}  // namespace ternjit::ggml

// SPDX-License-Identifier: Apache-2.0
// tmatmul_bench.cpp - generating and running x86 ternary matmul candidates (tmatmul_bench.h).
#include "targets/x86/tmatmul_bench.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace ternjit::targets::x86 {

namespace {

constexpr std::size_t kMaxCopies = 16;

std::size_t elem_bytes(ElemKind k) {
  switch (k) {
    case ElemKind::I8:
      return 1;
    case ElemKind::BF16:
    case ElemKind::F16:
      return 2;
    default:
      return 4;
  }
}

// A 64-byte aligned byte buffer.
struct Buffer {
  std::vector<std::uint8_t> storage;
  std::size_t offset = 0;
  explicit Buffer(std::size_t bytes) : storage(bytes + 64) {
    offset = (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64;
  }
  std::uint8_t* data() { return storage.data() + offset; }
};

void run_on_arena(void* pool, Parallel::TaskFn task, void* context, std::int64_t n) {
  static_cast<tbb::task_arena*>(pool)->execute([&] {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, 1), [&](const tbb::blocked_range<std::int64_t>& r) {
      for (std::int64_t i = r.begin(); i < r.end(); ++i) task(context, i);
    });
  });
}

}  // namespace

struct TMatMulBench::Impl {
  TMatMulProblem p;
  int threads = 1;
  TuningBenchOptions o;
  mutable tbb::task_arena arena;
  std::vector<std::int8_t> w;  // plain K*N
  mutable std::vector<Buffer> xs, ys;  // rotated copies (the kernels write ys)
  std::vector<float> x_scale, w_scale, bias;
  mutable std::vector<Buffer> residual;
  std::size_t copies = 1;

  Impl(const TMatMulProblem& problem, int t, const TuningBenchOptions& options)
      : p(problem), threads(std::max(1, t)), o(options), arena(std::max(1, t)) {}

  [[nodiscard]] Parallel parallel() const {
    Parallel par;
    par.threads = threads;
    par.run = &run_on_arena;
    par.pool = &arena;
    return par;
  }
};

namespace {

class PreparedKernel final : public TuningRun {
 public:
  const TMatMulBench::Impl* bench = nullptr;
  std::unique_ptr<TMatMulKernel> kernel;
  std::vector<PackedWeights> packs;  // one per rotation

  void run(int i) const override {
    const TMatMulBench::Impl& s = *bench;
    const std::size_t c = static_cast<std::size_t>(i) % s.copies;
    TMatMulArgs a;
    a.x = s.xs[c].data();
    a.w = &packs[c];
    a.x_scale = s.p.x_scale ? s.x_scale.data() : nullptr;
    a.w_scale = s.p.w_scale ? s.w_scale.data() : nullptr;
    a.bias = s.p.bias ? s.bias.data() : nullptr;
    a.residual = s.p.residual ? s.residual[c].data() : nullptr;
    a.y = s.ys[c].data();
    kernel->run(a, s.parallel());
  }
};

}  // namespace

TMatMulBench::TMatMulBench(const TMatMulProblem& p, int threads, const TuningBenchOptions& o)
    : impl_(std::make_unique<Impl>(p, threads, o)) {
  Impl& s = *impl_;
  std::mt19937_64 rng(o.seed);
  const auto M = static_cast<std::size_t>(p.M), K = static_cast<std::size_t>(p.K), N = static_cast<std::size_t>(p.N);
  s.w.resize(K * N);
  for (std::int8_t& v : s.w) v = static_cast<std::int8_t>(static_cast<int>(rng() % 3) - 1);
  const std::size_t x_bytes = M * K * elem_bytes(p.x_kind), y_bytes = M * N * elem_bytes(p.out_kind);
  const std::size_t per_copy = x_bytes + y_bytes + K * N / 4 + 1;
  s.copies = std::clamp<std::size_t>(o.rotate_bytes / per_copy, 1, kMaxCopies);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (std::size_t c = 0; c < s.copies; ++c) {
    Buffer x(x_bytes);
    std::uint8_t* d = x.data();
    for (std::size_t i = 0; i < M * K; ++i) {
      switch (p.x_kind) {
        case ElemKind::I8:
          d[i] = static_cast<std::uint8_t>(static_cast<int>(rng() % 255) - 127);
          break;
        case ElemKind::BF16: {
          const float f = unit(rng);
          std::uint32_t bits;
          std::memcpy(&bits, &f, 4);
          const auto h = static_cast<std::uint16_t>(bits >> 16);
          std::memcpy(d + 2 * i, &h, 2);
          break;
        }
        case ElemKind::F16: {
          const auto h = static_cast<std::uint16_t>(0x3800u | (rng() & 0x3FFu) | ((rng() & 1u) << 15));
          std::memcpy(d + 2 * i, &h, 2);
          break;
        }
        default: {
          const float f = unit(rng);
          std::memcpy(d + 4 * i, &f, 4);
        }
      }
    }
    s.xs.push_back(std::move(x));
    s.ys.emplace_back(y_bytes);
    if (p.residual) {
      Buffer r(y_bytes);
      std::memset(r.data(), 0, y_bytes);  // zero is exact in every kind
      s.residual.push_back(std::move(r));
    }
  }
  s.x_scale.resize(M);
  for (float& v : s.x_scale) v = 0.01f + 0.001f * static_cast<float>(rng() % 100);
  s.w_scale.resize(p.w_scale_group > 0 ? static_cast<std::size_t>((p.K - 1) / p.w_scale_group + 1) * N
                   : p.w_scale_per_channel ? N : 1);
  for (float& v : s.w_scale) v = 0.5f + 0.01f * static_cast<float>(rng() % 100);
  s.bias.resize(N * 2);  // out_kind[N]: f32 or a 2-byte kind; zero is exact in both
  std::fill(s.bias.begin(), s.bias.end(), 0.0f);
}

TMatMulBench::~TMatMulBench() = default;

Parallel TMatMulBench::parallel() const { return impl_->parallel(); }

Result<std::unique_ptr<TuningRun>> TMatMulBench::prepare(std::string_view text) const {
  TERNJIT_TRY(TMatMulConfig config, TMatMulConfig::parse(text));
  if (config.threads > impl_->threads)
    return make_error(ErrorCode::InvalidArgument, "t=" + std::to_string(config.threads) + " exceeds the pool's " +
                                                      std::to_string(impl_->threads) + " threads");
  auto out = std::make_unique<PreparedKernel>();
  out->bench = impl_.get();
  TERNJIT_TRY(out->kernel, TMatMulKernel::create(impl_->p, config));
  TERNJIT_TRY(PackedWeights first, out->kernel->pack(impl_->w));
  for (std::size_t c = 1; c < impl_->copies; ++c) out->packs.push_back(aligned_copy(first));
  out->packs.push_back(std::move(first));
  return std::unique_ptr<TuningRun>(std::move(out));
}

}  // namespace ternjit::targets::x86

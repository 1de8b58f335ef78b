// SPDX-License-Identifier: Apache-2.0
// matmul.cpp - the dense f32 matmul (matmul.h): packing and blocking in C++, register-blocked FMA micro-kernels in Xbyak.
//
// Blocking (GotoBLAS-style, one level): A is packed per call into row panels of MR rows
// (ap[(panel * K + k) * MR + i], the broadcast operand); the N columns are cut into
// panels of NR = NV vectors; K is cut into blocks of kc so that one kc x NR block of B
// (32 KiB on AVX-512) stays in L1/L2 while every row panel of A streams past it. The
// micro-kernel computes an mr x nv-vector tile over one K block: one vector load of B
// per vector, one vbroadcastss of A per row, mr * nv FMAs per k. The first K block
// stores the tile, later ones load it and keep accumulating, so each result is still
// one f32 FMA chain in ascending k whatever kc is.
//
// B is read in place (row-major, stride N) when few row panels reuse it, swept K block
// outermost in blocks of kKcInPlace rows (that many forward streams); it is packed
// into zero-padded NR-wide panels per K block and call when it is transposed (Bt[N, K]:
// the micro-kernel needs NR consecutive columns) or when at least kPackRowPanels row
// panels reuse each block (contiguous panels: no TLB miss per k, prefetcher-friendly),
// and once at load time when it is a load-time value (MatMulKernel::pack_b).
//
// Column tails: on AVX-512 the last vector of a tile is loaded (zeroing) and stored
// under the mask k1, passed as the 7th argument; on AVX2 the tail panel's B block is
// packed zero-padded and the tile accumulates into a small buffer copied out at the end.
// Row tails: one generated variant per row count 1..MR (they are a few hundred bytes).
// A C of kStreamBytes or more written in one K block is stored with vmovntps when its
// rows are 64-byte aligned (Store::Stream).
#include "targets/x86/matmul.h"

#include <algorithm>
#include <cstring>

#include "ir/ir.h"
#include "targets/x86/jit_code.h"

namespace ternjit::targets::x86 {

namespace {

using Xbyak::Label;
using Xbyak::Reg64;
using Xbyak::Xmm;

// ukr(a, b, c, kc, ldb_bytes, ldc_bytes, mask): c[mr, nv*VL] (+)= a-panel[kc, MR] @ b[kc, nv*VL].
using Ukr = void (*)(const float* a, const float* b, float* c, std::int64_t kc, std::int64_t ldb_bytes,
                     std::int64_t ldc_bytes, std::int64_t mask);

constexpr int kMr = 6;
constexpr std::int64_t kKc = 128;
constexpr std::int64_t kKcInPlace = 16;
constexpr std::int64_t kStreamBytes = std::int64_t{16} << 20;
// Row panels that must reuse a B block before packing it pays (per block: one copy of
// kc x NR floats against kPackRowPanels strided passes over it).
constexpr std::int64_t kPackRowPanels = 4;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

struct Geometry {
  bool avx512 = false;
  int vl = 8;   // f32 lanes per vector
  int nv = 2;   // vectors per tile row
  [[nodiscard]] int nr() const { return vl * nv; }
};

Geometry geometry(Isa isa) {
  // AVX-512: 6 x 4 zmm accumulators + 4 B vectors + 2 broadcasts = 30 of 32 registers.
  // AVX2:    6 x 2 ymm accumulators + 2 B vectors + 2 broadcasts = 16 of 16.
  if (isa >= Isa::Avx512 && isa != Isa::AvxVnni) return {true, 16, 4};
  return {false, 8, 2};
}

// How a micro-kernel stores its tile: vmovups; the last vector under k1 (AVX-512 column
// tail); vmovntps (streaming, 64-byte aligned rows: a C written once and far larger than
// the caches skips the read-for-ownership of every line).
enum class Store : std::uint8_t { Plain, Masked, Stream };

// Emits every micro-kernel variant into one buffer.
class UkrGen {
 public:
  UkrGen(JitCode& code, const Geometry& g) : a_(code), g_(g) {}

  // Index of variant (mr, nv, accumulate, store).
  static std::size_t index(const Geometry& g, int mr, int nv, bool acc, Store store) {
    return ((static_cast<std::size_t>(acc) * 3 + static_cast<std::size_t>(store)) * static_cast<std::size_t>(g.nv) +
            static_cast<std::size_t>(nv - 1)) *
               kMr +
           static_cast<std::size_t>(mr - 1);
  }

  // Emits all variants; returns their offsets by index(). Masked stores exist on
  // AVX-512 only; streaming ones for whole tiles of a single K block only.
  std::vector<std::size_t> emit_all() {
    std::vector<std::size_t> offsets(index(g_, kMr, g_.nv, true, Store::Stream) + 1, SIZE_MAX);
    for (int acc = 0; acc < 2; ++acc)
      for (Store store : {Store::Plain, Store::Masked, Store::Stream})
        for (int nv = 1; nv <= g_.nv; ++nv) {
          if (store == Store::Masked && !g_.avx512) continue;
          if (store == Store::Stream && (acc != 0 || nv != g_.nv)) continue;
          for (int mr = 1; mr <= kMr; ++mr) {
            a_.align(16);
            offsets[index(g_, mr, nv, acc != 0, store)] = a_.getSize();
            emit(mr, nv, acc != 0, store);
          }
        }
    return offsets;
  }

 private:
  [[nodiscard]] Xmm vec(int idx) const {
    if (g_.avx512) return Xbyak::Zmm(idx);
    return Xbyak::Ymm(idx);
  }
  [[nodiscard]] Xmm acc(int i, int v) const { return vec(i * g_.nv + v); }
  [[nodiscard]] Xmm bvec(int v) const { return vec(kMr * g_.nv + v); }
  [[nodiscard]] Xmm bcast(int i) const { return vec(kMr * g_.nv + g_.nv + (i & 1)); }

  void emit(int mr, int nv, bool accumulate, Store store) {
    const bool masked = store == Store::Masked;
    const Reg64 rA = Xbyak::util::rdi, rB = Xbyak::util::rsi, rC = Xbyak::util::rdx, rK = Xbyak::util::rcx;
    const Reg64 rLdb = Xbyak::util::r8, rLdc = Xbyak::util::r9, rT = Xbyak::util::rax;
    const int vbytes = g_.vl * 4;
    auto last = [&](int v) { return masked && v == nv - 1; };
    if (masked) {
      a_.mov(rT, a_.ptr[a_.rsp + 8]);  // 7th argument: the last vector's lane mask
      a_.kmovw(a_.k1, rT.cvt32());
    }
    if (accumulate) {
      a_.mov(rT, rC);
      for (int i = 0; i < mr; ++i) {
        for (int v = 0; v < nv; ++v) {
          if (last(v))
            a_.vmovups(acc(i, v) | a_.k1 | a_.T_z, a_.ptr[rT + v * vbytes]);
          else
            a_.vmovups(acc(i, v), a_.ptr[rT + v * vbytes]);
        }
        if (i + 1 < mr) a_.add(rT, rLdc);
      }
    } else {
      for (int i = 0; i < mr; ++i)
        for (int v = 0; v < nv; ++v) a_.vxorps(acc(i, v), acc(i, v), acc(i, v));
    }
    Label loop;
    a_.L(loop);
    for (int v = 0; v < nv; ++v) {
      if (last(v))
        a_.vmovups(bvec(v) | a_.k1 | a_.T_z, a_.ptr[rB + v * vbytes]);
      else
        a_.vmovups(bvec(v), a_.ptr[rB + v * vbytes]);
    }
    for (int i = 0; i < mr; ++i) {
      a_.vbroadcastss(bcast(i), a_.ptr[rA + i * 4]);
      for (int v = 0; v < nv; ++v) a_.vfmadd231ps(acc(i, v), bvec(v), bcast(i));
    }
    a_.add(rA, kMr * 4);  // the packed panel's row stride is MR whatever mr is
    a_.add(rB, rLdb);
    a_.dec(rK);
    a_.jnz(loop, JitCode::T_NEAR);
    a_.mov(rT, rC);
    for (int i = 0; i < mr; ++i) {
      for (int v = 0; v < nv; ++v) {
        if (last(v))
          a_.vmovups(a_.ptr[rT + v * vbytes] | a_.k1, acc(i, v));
        else if (store == Store::Stream)
          a_.vmovntps(a_.ptr[rT + v * vbytes], acc(i, v));
        else
          a_.vmovups(a_.ptr[rT + v * vbytes], acc(i, v));
      }
      if (i + 1 < mr) a_.add(rT, rLdc);
    }
    // Streaming stores are weakly ordered: fence them before the tile is handed on
    // (another thread, or the caller, reads C after the parallel-for returns).
    if (store == Store::Stream) a_.sfence();
    a_.vzeroupper();
    a_.ret();
  }

  JitCode& a_;
  Geometry g_;
};

}  // namespace

struct MatMulKernel::Impl {
  MatMulProblem p;
  Isa isa = Isa::Avx2;
  Geometry g;
  std::int64_t kc = kKc;
  bool pack_per_call = false;
  JitCode code{256 * 1024};
  std::vector<Ukr> ukr;

  // One matrix of the batch, its first M rows: `packed` (a pack_b matrix) or else `b` as given.
  void run_matrix(const float* a, const float* b, const float* packed, float* c, const Parallel& parallel,
                  std::int64_t M) const;

  [[nodiscard]] Ukr variant(int mr, int nv, bool acc, Store store) const {
    return ukr[UkrGen::index(g, mr, nv, acc, store)];
  }

  // Packs the K block [k0, k0 + kn) of column panel jp of B (as given) into dst[kn][NR],
  // zero-padding the columns past N.
  void pack_block(const float* b, std::int64_t jp, std::int64_t k0, std::int64_t kn, float* dst) const {
    const std::int64_t nr = g.nr();
    const std::int64_t j0 = jp * nr;
    const std::int64_t nvalid = std::min(nr, p.N - j0);
    if (!p.trans_b) {
      for (std::int64_t k = 0; k < kn; ++k) {
        std::memcpy(dst + k * nr, b + (k0 + k) * p.N + j0, static_cast<std::size_t>(nvalid) * 4);
        std::fill(dst + k * nr + nvalid, dst + (k + 1) * nr, 0.0F);
      }
      return;
    }
    // Bt[N, K]: read each column's K run contiguously, scatter into the panel.
    for (std::int64_t j = 0; j < nvalid; ++j) {
      const float* src = b + (j0 + j) * p.K + k0;
      for (std::int64_t k = 0; k < kn; ++k) dst[k * nr + j] = src[k];
    }
    for (std::int64_t k = 0; k < kn; ++k) std::fill(dst + k * nr + nvalid, dst + (k + 1) * nr, 0.0F);
  }
};

MatMulKernel::MatMulKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MatMulKernel::~MatMulKernel() = default;

const MatMulProblem& MatMulKernel::problem() const { return impl_->p; }

Result<std::unique_ptr<MatMulKernel>> MatMulKernel::create(const MatMulProblem& p, Isa isa, bool allow_foreign_isa) {
  if (p.M < 1 || p.K < 1 || p.N < 1 || p.batch < 1)
    return make_error(ErrorCode::InvalidInput, "matmul kernel needs M, K, N, batch >= 1; got M=" + std::to_string(p.M) +
                                                   " K=" + std::to_string(p.K) + " N=" + std::to_string(p.N) +
                                                   " batch=" + std::to_string(p.batch));
  if (!allow_foreign_isa && !host_isas().supports(isa))
    return make_error(ErrorCode::Unavailable, "this CPU cannot run x86 code path '" + std::string(isa_name(isa)) + "'");
  auto impl = std::make_unique<Impl>();
  impl->p = p;
  impl->isa = isa;
  impl->g = geometry(isa);
  // K up to one and a half blocks runs as one block (no short last block).
  impl->kc = p.K <= kKc + kKc / 2 ? p.K : kKc;
  impl->pack_per_call = p.trans_b || ceil_div(p.M, kMr) >= kPackRowPanels;
  std::vector<std::size_t> offsets;
  TERNJIT_TRY_VOID(emit_guarded("matmul", [&] {
    UkrGen gen(impl->code, impl->g);
    offsets = gen.emit_all();
    impl->code.finalize<const std::uint8_t*>();
  }));
  const std::uint8_t* base = impl->code.getCode();
  impl->ukr.resize(offsets.size(), nullptr);
  for (std::size_t k = 0; k < offsets.size(); ++k)
    if (offsets[k] != SIZE_MAX) impl->ukr[k] = reinterpret_cast<Ukr>(base + offsets[k]);
  return std::unique_ptr<MatMulKernel>(new MatMulKernel(std::move(impl)));
}

std::string MatMulKernel::pack_signature() const {
  const Impl& m = *impl_;
  return std::string("f32.panels.nr") + std::to_string(m.g.nr()) + (m.p.trans_b ? ".bt" : "");
}

MatMulPackedB MatMulKernel::pack_b(const float* b) const {
  const Impl& m = *impl_;
  const std::int64_t nr = m.g.nr(), np = ceil_div(m.p.N, nr), matrices = m.p.b_batched ? m.p.batch : 1;
  MatMulPackedB out;
  out.data.resize(static_cast<std::size_t>(matrices * np * m.p.K * nr));
  for (std::int64_t i = 0; i < matrices; ++i)
    for (std::int64_t jp = 0; jp < np; ++jp)
      m.pack_block(b + i * m.p.K * m.p.N, jp, 0, m.p.K, out.data.data() + (i * np + jp) * m.p.K * nr);
  return out;
}

void MatMulKernel::run(const float* a, const float* b, const MatMulPackedB* packed, float* c, const Parallel& parallel,
                       std::int64_t rows) const {
  const Impl& m = *impl_;
  const MatMulProblem& p = m.p;
  TERNJIT_CHECK(rows == 0 || (rows <= p.M && p.batch == 1 && !p.trans_a), "matmul: bad run-time rows");
  const std::int64_t packed_size = ceil_div(p.N, m.g.nr()) * p.K * m.g.nr();
  for (std::int64_t i = 0; i < p.batch; ++i) {
    const std::int64_t ia = p.a_batched ? i : 0, ib = p.b_batched ? i : 0;
    m.run_matrix(a + ia * p.M * p.K, packed ? nullptr : b + ib * p.K * p.N,
                 packed ? packed->data.data() + ib * packed_size : nullptr, c + i * p.M * p.N, parallel,
                 rows > 0 ? rows : p.M);
  }
}

void MatMulKernel::Impl::run_matrix(const float* a, const float* b, const float* packed, float* c,
                                    const Parallel& parallel, std::int64_t M) const {
  const Impl& m = *this;
  const Geometry& g = m.g;
  const std::int64_t nr = g.nr(), mp = ceil_div(M, kMr), np = ceil_div(p.N, nr);

  // A into row panels of MR (rows past M zero), split over the threads by panel.
  std::vector<float> ap(static_cast<std::size_t>(mp * p.K * kMr));
  const std::int64_t a_chunks = std::min<std::int64_t>(mp, std::max(1, parallel.threads));
  parallel.for_each(a_chunks, [&](std::int64_t t) {
    for (std::int64_t ip = t * mp / a_chunks; ip < (t + 1) * mp / a_chunks; ++ip) {
      float* dst = ap.data() + ip * p.K * kMr;
      const std::int64_t i0 = ip * kMr, rows = std::min<std::int64_t>(kMr, M - i0);
      if (p.trans_a) {
        for (std::int64_t k = 0; k < p.K; ++k) {
          std::memcpy(dst + k * kMr, a + k * p.M + i0, static_cast<std::size_t>(rows) * 4);
          std::fill(dst + k * kMr + rows, dst + (k + 1) * kMr, 0.0F);
        }
      } else {
        for (std::int64_t i = 0; i < kMr; ++i) {
          if (i < rows) {
            const float* src = a + (i0 + i) * p.K;
            for (std::int64_t k = 0; k < p.K; ++k) dst[k * kMr + i] = src[k];
          } else {
            for (std::int64_t k = 0; k < p.K; ++k) dst[k * kMr + i] = 0.0F;
          }
        }
      }
    }
  });

  // Work items: column panel ranges, and row panel ranges too when there are fewer
  // column panels than threads.
  const std::int64_t threads = std::max(1, parallel.threads);
  const std::int64_t col_chunks = std::min(np, threads);
  const std::int64_t row_chunks = np < threads ? std::min(mp, ceil_div(threads, np)) : 1;
  // B read in place (few row panels): K blocks outermost, so one block's kc rows of B
  // are swept left to right across the item's panels (each row's pages stay in the TLB
  // and the streams run forward); otherwise panel by panel, each kc x NR block of B
  // (packed) staying in L2 while the row panels pass it.
  const bool k_outer = !packed && !m.pack_per_call;
  // In place, a K block is kKcInPlace rows: that many forward streams of B at once, which
  // the L2 prefetchers follow (M = 8, K = 2560, N = 6912: 16 rows 9.4 ms, 32 10.0, 64 12.0, 256 11.5).
  const std::int64_t kc = k_outer ? std::min(p.K, kKcInPlace) : m.kc;
  // Streaming stores when every tile is stored once (one K block), C is far larger than
  // L2 (it cannot be read back from cache anyway) and every row starts 64-byte aligned.
  const bool stream = kc >= p.K && M * p.N * 4 >= kStreamBytes && reinterpret_cast<std::uintptr_t>(c) % 64 == 0 &&
                      (p.N * 4) % 64 == 0;
  parallel.for_each(col_chunks * row_chunks, [&](std::int64_t item) {
    const std::int64_t cc = item / row_chunks, rc = item % row_chunks;
    const std::int64_t jp_begin = cc * np / col_chunks, jp_end = (cc + 1) * np / col_chunks;
    const std::int64_t ip_begin = rc * mp / row_chunks, ip_end = (rc + 1) * mp / row_chunks;
    std::vector<float> bbuf;
    // AVX2 column tail (only the last panel): its tiles for the item's rows, copied out
    // once every K block is in.
    std::vector<float> tile;
    // One K block [k0, k0 + kn) of column panel jp, for every row panel of the item.
    auto block = [&](std::int64_t jp, std::int64_t k0) {
      const std::int64_t kn = std::min(kc, p.K - k0);
      const std::int64_t j0 = jp * nr, nvalid = std::min(nr, p.N - j0);
      const bool tail = nvalid < nr;
      const bool via_tile = tail && !g.avx512;
      const bool masked = tail && g.avx512;
      const int nv = static_cast<int>(ceil_div(nvalid, g.vl));
      const std::int64_t last_lanes = nvalid - static_cast<std::int64_t>(nv - 1) * g.vl;
      const std::int64_t mask = (std::int64_t{1} << last_lanes) - 1;
      if (via_tile && k0 == 0) tile.assign(static_cast<std::size_t>((ip_end - ip_begin) * kMr * nr), 0.0F);
      const float* bp = nullptr;
      std::int64_t ldb = nr * 4;
      if (packed) {
        bp = packed + (jp * p.K + k0) * nr;
      } else if (m.pack_per_call || via_tile) {
        bbuf.resize(static_cast<std::size_t>(kc * nr));
        m.pack_block(b, jp, k0, kn, bbuf.data());
        bp = bbuf.data();
      } else {
        bp = b + k0 * p.N + j0;
        ldb = p.N * 4;
      }
      for (std::int64_t ip = ip_begin; ip < ip_end; ++ip) {
        const std::int64_t i0 = ip * kMr;
        const int mr = static_cast<int>(std::min<std::int64_t>(kMr, M - i0));
        const float* apanel = ap.data() + (ip * p.K + k0) * kMr;
        if (via_tile) {
          float* t = tile.data() + (ip - ip_begin) * kMr * nr;
          m.variant(mr, nv, k0 > 0, Store::Plain)(apanel, bp, t, kn, ldb, nr * 4, 0);
        } else {
          const Store store = masked ? Store::Masked : stream ? Store::Stream : Store::Plain;
          m.variant(mr, nv, k0 > 0, store)(apanel, bp, c + i0 * p.N + j0, kn, ldb, p.N * 4, mask);
        }
      }
      if (via_tile && k0 + kn == p.K) {
        for (std::int64_t i = ip_begin * kMr; i < std::min(M, ip_end * kMr); ++i)
          std::memcpy(c + i * p.N + j0, tile.data() + (i - ip_begin * kMr) * nr, static_cast<std::size_t>(nvalid) * 4);
      }
    };
    if (k_outer) {
      for (std::int64_t k0 = 0; k0 < p.K; k0 += kc)
        for (std::int64_t jp = jp_begin; jp < jp_end; ++jp) block(jp, k0);
    } else {
      for (std::int64_t jp = jp_begin; jp < jp_end; ++jp)
        for (std::int64_t k0 = 0; k0 < p.K; k0 += kc) block(jp, k0);
    }
  });
}

std::vector<MatMulKernel::CodeBlob> MatMulKernel::code() const {
  const Impl& m = *impl_;
  const auto variants = std::count_if(m.ukr.begin(), m.ukr.end(), [](Ukr u) { return u != nullptr; });
  return {CodeBlob{"matmul f32 ukr " + std::to_string(kMr) + "x" + std::to_string(m.g.nr()) + " (" +
                       std::to_string(variants) + " variants: rows, vectors, accumulate" +
                       (m.g.avx512 ? ", mask)" : ")"),
                   m.code.bytes()}};
}

std::string MatMulKernel::describe(bool b_packed_at_load) const {
  const Impl& m = *impl_;
  const MatMulProblem& p = m.p;
  std::string b = "packed at load";
  std::int64_t kc = m.kc;
  if (!b_packed_at_load) {
    b = std::string(p.trans_b ? "transposed, " : "") + (m.pack_per_call ? "packed per call" : "in place");
    if (!m.pack_per_call) kc = std::min(p.K, kKcInPlace);
  }
  return "matmul f32 " + (p.batch > 1 ? "batch=" + std::to_string(p.batch) + " " : std::string()) +
         "M=" + std::to_string(p.M) + " K=" + std::to_string(p.K) + " N=" + std::to_string(p.N) +
         (p.trans_a ? " a=transposed" : "") + " mr=" + std::to_string(kMr) + " nr=" + std::to_string(m.g.nr()) +
         " kc=" + std::to_string(kc) + " b=" + b + " isa=" + std::string(isa_name(m.isa));
}

}  // namespace ternjit::targets::x86

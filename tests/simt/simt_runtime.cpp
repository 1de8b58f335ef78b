// SPDX-License-Identifier: Apache-2.0
// simt_runtime.cpp - the SIMT emulator's host side: compile with the host compiler, dlopen, fibers per thread.
#include "tests/simt/simt_runtime.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/fiber.hpp>
#include <boost/context/pooled_fixedsize_stack.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/simt/simt_api.h"

namespace ternjit::simt_emu {

namespace fs = std::filesystem;
namespace ctx = boost::context;
using targets::simt::Dim3;
using targets::simt::KernelArg;

namespace {

// ------------------------------------------------------------------ the fiber scheduler

struct ThreadState {
  tjemu_uint3 tid{};
  ctx::fiber* sink = nullptr;  // the scheduler, from inside the thread's fiber
  bool done = false;
};

struct BlockState {
  tjemu_uint3 bid{}, bdim{}, gdim{};
  unsigned warp = 32, nthreads = 0;
  std::vector<ThreadState> threads;
  unsigned cur = 0;
  unsigned block_arrived = 0, block_gen = 0;
  std::vector<unsigned> warp_arrived, warp_gen;
  std::vector<unsigned long long> slots;
  unsigned long long progress = 0;  // arrivals, releases, exits: a round without any is a deadlock
  std::string failure;
};

thread_local BlockState* g_block = nullptr;

void yield() {
  ThreadState& t = g_block->threads[g_block->cur];
  *t.sink = std::move(*t.sink).resume();
}

const tjemu_uint3* api_thread_idx() { return &g_block->threads[g_block->cur].tid; }
const tjemu_uint3* api_block_idx() { return &g_block->bid; }
const tjemu_uint3* api_block_dim() { return &g_block->bdim; }
const tjemu_uint3* api_grid_dim() { return &g_block->gdim; }
unsigned api_lane() { return g_block->cur % g_block->warp; }
unsigned api_warp_size() { return g_block->warp; }
void api_fail(const char* why) {
  if (g_block->failure.empty()) g_block->failure = why;
}

void api_syncthreads() {
  BlockState& b = *g_block;
  const unsigned gen = b.block_gen;
  ++b.progress;
  if (++b.block_arrived == b.nthreads) {
    b.block_arrived = 0;
    ++b.block_gen;
    return;
  }
  while (b.block_gen == gen) yield();
}

void warp_barrier(unsigned w) {
  BlockState& b = *g_block;
  const unsigned members = std::min(b.warp, b.nthreads - w * b.warp);
  const unsigned gen = b.warp_gen[w];
  ++b.progress;
  if (++b.warp_arrived[w] == members) {
    b.warp_arrived[w] = 0;
    ++b.warp_gen[w];
    return;
  }
  while (b.warp_gen[w] == gen) yield();
}

unsigned long long api_exchange(unsigned long long v, unsigned src) {
  BlockState& b = *g_block;
  const unsigned w = b.cur / b.warp, lane = b.cur % b.warp;
  if (src >= b.warp || w * b.warp + src >= b.nthreads) {
    api_fail("a shuffle from a lane that does not exist");
    src = lane;
  }
  b.slots[b.cur] = v;
  warp_barrier(w);
  const unsigned long long r = b.slots[w * b.warp + src];
  warp_barrier(w);
  return r;
}

const tjemu_api kApi = {api_thread_idx, api_block_idx, api_block_dim, api_grid_dim, api_syncthreads,
                        api_exchange,   api_lane,      api_warp_size, api_fail};

using Entry = void (*)(void**);

// Runs one block; "" or why it failed.
std::string run_block(Entry entry, void** params, BlockState& b, ctx::pooled_fixedsize_stack& stacks) {
  b.threads.assign(b.nthreads, ThreadState{});
  for (unsigned i = 0; i < b.nthreads; ++i)
    b.threads[i].tid = {i % b.bdim.x, (i / b.bdim.x) % b.bdim.y, i / (b.bdim.x * b.bdim.y)};
  const unsigned warps = (b.nthreads + b.warp - 1) / b.warp;
  b.warp_arrived.assign(warps, 0);
  b.warp_gen.assign(warps, 0);
  b.slots.assign(b.nthreads, 0);
  b.block_arrived = 0;
  std::vector<ctx::fiber> fibers;
  fibers.reserve(b.nthreads);
  for (unsigned i = 0; i < b.nthreads; ++i)
    fibers.emplace_back(std::allocator_arg, stacks, [&b, i, entry, params](ctx::fiber&& sink) {
      b.threads[i].sink = &sink;
      entry(params);
      return std::move(sink);
    });
  unsigned alive = b.nthreads;
  while (alive > 0) {
    const unsigned long long before = b.progress;
    for (unsigned i = 0; i < b.nthreads; ++i) {
      if (b.threads[i].done) continue;
      b.cur = i;
      fibers[i] = std::move(fibers[i]).resume();
      if (!fibers[i]) {
        b.threads[i].done = true;
        --alive;
        ++b.progress;
      }
    }
    if (alive > 0 && b.progress == before) {
      // Every live thread waits at a barrier that cannot complete: unwind them by
      // abandoning their fibers (their stacks are freed; nothing on them owns memory).
      return "deadlock: " + std::to_string(alive) + " of " + std::to_string(b.nthreads) +
             " threads wait at a barrier or shuffle that cannot complete";
    }
  }
  return b.failure;
}

// ------------------------------------------------------------------ buffers with guard pages

// A buffer whose last 16-byte granule ends at a PROT_NONE page.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(std::size_t bytes) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 15) / 16 * 16;
    map_bytes_ = (rounded + page - 1) / page * page + page;
    void* m = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    map_ = static_cast<std::uint8_t*>(m);
    mprotect(map_ + map_bytes_ - page, page, PROT_NONE);
    data_ = map_ + map_bytes_ - page - rounded;
    bytes_ = bytes;
  }
  ~GuardedBuffer() { munmap(map_, map_bytes_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  [[nodiscard]] std::uint8_t* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return bytes_; }

 private:
  std::uint8_t* map_ = nullptr;
  std::uint8_t* data_ = nullptr;
  std::size_t map_bytes_ = 0, bytes_ = 0;
};

std::string quote_arg(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

}  // namespace

std::string find_compiler() {
  if (const char* env = std::getenv("TERNJIT_SIMT_CXX"); env != nullptr && *env != 0) return env;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (const char* name : {"g++", "clang++-19", "clang++"}) {
    std::size_t start = 0;
    while (start <= dirs.size()) {
      const std::size_t end = std::min(dirs.find(':', start), dirs.size());
      const fs::path p = fs::path(dirs.substr(start, end - start)) / name;
      std::error_code ec;
      if (!p.empty() && fs::exists(p, ec) && access(p.c_str(), X_OK) == 0) return p.string();
      start = end + 1;
    }
  }
  return "";
}

Result<std::shared_ptr<Module>> Module::build(const std::string& source, const std::vector<std::string>& kernels,
                                              const std::string& compiler) {
  std::string tmpl = (fs::temp_directory_path() / "ternjit-simt-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return make_error(ErrorCode::IoError, "simt emulator: no temporary directory");
  std::shared_ptr<Module> m(new Module());
  m->dir_ = tmpl;
  const fs::path dir(tmpl);
  {
    std::ofstream(dir / "kernels.cu") << source;  // the exact generated text
    std::ofstream w(dir / "wrapper.cpp");
    w << "#include \"" << TERNJIT_SOURCE_DIR << "/tests/simt/simt_emu.h\"\n#include \"kernels.cu\"\n";
    for (const std::string& k : kernels)
      w << "extern \"C\" void tjemu_entry_" << k << "(void** p) { tjemu_invoke(" << k << ", p); }\n";
  }
  const std::string so = (dir / "kernels.so").string();
  const std::string cmd = quote_arg(compiler) + " -std=c++17 -O1 -fPIC -shared -ffp-contract=off -fno-strict-aliasing -w -o " +
                          quote_arg(so) + " " + quote_arg((dir / "wrapper.cpp").string()) + " 2>" +
                          quote_arg((dir / "log.txt").string());
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(dir / "log.txt");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    if (text.size() > 4000) text.resize(4000);
    return make_error(ErrorCode::Unavailable, "simt emulator: " + compiler + " failed:\n" + text);
  }
  m->handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (m->handle_ == nullptr) return make_error(ErrorCode::Unavailable, std::string("simt emulator: dlopen: ") + dlerror());
  auto bind = reinterpret_cast<void (*)(const tjemu_api*)>(dlsym(m->handle_, "tjemu_bind"));
  if (bind == nullptr) return make_error(ErrorCode::Internal, "simt emulator: no tjemu_bind");
  bind(&kApi);
  return m;
}

Module::~Module() {
  if (handle_ != nullptr) dlclose(handle_);
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

Result<void> Module::launch(const std::string& name, const Dim3& grid, const Dim3& block, unsigned warp,
                            void** params) const {
  auto entry = reinterpret_cast<Entry>(dlsym(handle_, ("tjemu_entry_" + name).c_str()));
  if (entry == nullptr) return make_error(ErrorCode::NotFound, "simt emulator: no kernel " + name);
  const std::uint64_t threads = std::uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0)
    return make_error(ErrorCode::Internal, "simt emulator: " + name + ": bad launch dimensions");
  ctx::pooled_fixedsize_stack stacks(64 * 1024, threads);
  BlockState b;
  b.bdim = {block.x, block.y, block.z};
  b.gdim = {grid.x, grid.y, grid.z};
  b.warp = warp;
  b.nthreads = static_cast<unsigned>(threads);
  BlockState* saved = g_block;
  g_block = &b;
  std::string failure;
  for (unsigned z = 0; z < grid.z && failure.empty(); ++z)
    for (unsigned y = 0; y < grid.y && failure.empty(); ++y)
      for (unsigned x = 0; x < grid.x && failure.empty(); ++x) {
        b.bid = {x, y, z};
        failure = run_block(entry, params, b, stacks);
      }
  g_block = saved;
  if (!failure.empty())
    return make_error(ErrorCode::Internal, "simt emulator: kernel " + name + ": " + failure);
  return success();
}

Result<void> run_program(const Module& module, const targets::simt::KernelSet& program,
                         const std::vector<targets::LoadValue>& load_values,
                         const std::vector<std::vector<std::uint8_t>>& inputs,
                         std::vector<std::vector<std::uint8_t>>& outputs) {
  const targets::StepPlan& plan = program.plan;
  if (inputs.size() != plan.in_bytes.size()) return make_error(ErrorCode::InvalidArgument, "wrong input count");
  std::vector<std::unique_ptr<GuardedBuffer>> in, out, consts(load_values.size()), weights, scratch;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].size() != plan.in_bytes[i]) return make_error(ErrorCode::InvalidArgument, "wrong input size");
    in.push_back(std::make_unique<GuardedBuffer>(plan.in_bytes[i]));
    std::memcpy(in.back()->data(), inputs[i].data(), inputs[i].size());
  }
  for (std::size_t b : plan.out_bytes) {
    out.push_back(std::make_unique<GuardedBuffer>(b));
    std::memset(out.back()->data(), 0x5A, b);
  }
  for (const targets::simt::WeightUse& w : program.weights) {
    TERNJIT_TRY(std::vector<std::uint8_t> packed,
                targets::simt::pack_ternary_weight(load_values.at(w.load_time), w.k, w.n, w.layout));
    weights.push_back(std::make_unique<GuardedBuffer>(packed.size()));
    std::memcpy(weights.back()->data(), packed.data(), packed.size());
  }
  for (std::size_t b : program.scratch_bytes) {
    scratch.push_back(std::make_unique<GuardedBuffer>(b));
    std::memset(scratch.back()->data(), 0xAB, b);
  }
  for (const targets::simt::KernelLaunch& k : program.kernels) {
    std::vector<void*> ptrs(k.args.size());
    std::vector<std::uint32_t> scalars(k.args.size());
    std::vector<void*> params(k.args.size());
    for (std::size_t i = 0; i < k.args.size(); ++i) {
      const KernelArg& a = k.args[i];
      switch (a.kind) {
        case KernelArg::Kind::Input: ptrs[i] = in.at(a.index)->data(); break;
        case KernelArg::Kind::Output: ptrs[i] = out.at(a.index)->data(); break;
        case KernelArg::Kind::Const: {
          if (!consts.at(a.index)) {
            const std::vector<std::uint8_t> bytes = load_values[a.index].encoded();
            consts[a.index] = std::make_unique<GuardedBuffer>(bytes.size());
            std::memcpy(consts[a.index]->data(), bytes.data(), bytes.size());
          }
          ptrs[i] = consts[a.index]->data();
          break;
        }
        case KernelArg::Kind::Weight: ptrs[i] = weights.at(a.index)->data(); break;
        case KernelArg::Kind::Scratch: ptrs[i] = scratch.at(a.index)->data(); break;
        case KernelArg::Kind::Scalar: scalars[i] = a.scalar; break;
      }
      params[i] = a.kind == KernelArg::Kind::Scalar ? static_cast<void*>(&scalars[i]) : static_cast<void*>(&ptrs[i]);
    }
    TERNJIT_TRY_VOID(module.launch(k.name, k.grid, k.block, program.warp_size, params.data()));
  }
  outputs.assign(out.size(), {});
  for (std::size_t j = 0; j < out.size(); ++j) outputs[j].assign(out[j]->data(), out[j]->data() + out[j]->size());
  return success();
}

}  // namespace ternjit::simt_emu

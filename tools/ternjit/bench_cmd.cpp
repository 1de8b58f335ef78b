// SPDX-License-Identifier: Apache-2.0
// bench_cmd.cpp - `ternjit bench`: a layer's kernel timed beside the reference, a read-bandwidth probe and an int8-dot
// ceiling.
//
// One process, in this order: the kernel compiled once (run's plumbing: prepare_run,
// prepare_kernel), its work counted from the specialized, optimized IR, the reference
// target on the same inputs (skipped above an estimated time cap), both outputs checked
// against each other (kernel outputs poisoned first), the kernel timed (warm-up, then
// samples of one or more calls until --reps and --min-time), then the two ceilings on the
// same thread pool. --plot hands the numbers to Debian's python3-matplotlib.
#include "tools/ternjit/bench_cmd.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "autotune/measure.h"
#include "formats/ternary.h"
#include "jit/options.h"
#include "jit/thread_pool.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "roofline_script.h"
#include "targets/host_cpu.h"
#include "targets/registry.h"
#include "tools/ternjit/commands.h"

extern char** environ;

namespace ternjit::cli {

namespace {

Error bad(std::string msg) { return make_error(ErrorCode::InvalidArgument, std::move(msg)); }

// The reference interpreter's rate for the time estimate: bench/README.md measured
// 2*2560*2560 ops in 176 ms (~75 M ops/s); 50 M ops/s leaves room for slower machines.
constexpr double kReferenceOpsPerSecond = 50e6;
// At most this many timed samples; shorter calls are batched so the samples fill --min-time.
constexpr int kMaxSamples = 200;
// --min-time at most (an hour): a finite bound, so `bench` always ends (docs/cli.md).
constexpr double kMaxMinTime = 3600;
// --cold rotates weight copies totalling 4x the last-level cache (as the read probe), at
// most this many copies and bytes (the cache size: targets::last_level_cache, never 0).
constexpr int kMaxColdCopies = 64;
constexpr std::uint64_t kMaxColdBytes = std::uint64_t{1} << 30;
// The read probe's buffer: 4x the last-level cache, at least 64 MiB, at most 1 GiB.
constexpr std::uint64_t kMinProbeBytes = std::uint64_t{64} << 20;
constexpr std::uint64_t kMaxProbeBytes = std::uint64_t{1} << 30;
constexpr const char* kPython = "/usr/bin/python3";

// What one call of the function does, from its specialized, optimized IR.
struct Work {
  double ops = 0;                   // 2*M*N*K summed over matmul and tmatmul
  int matmuls = 0;                  // how many
  std::uint64_t weight_bytes = 0;   // every parameter read, ternary ones at the packed size
  std::uint64_t ternary_bytes = 0;  // the ternary part of weight_bytes
};

// Adds the work of function `name` of `m` (and of its callees) to `w`. Parameters count
// once by name; a t2 parameter at its type's packed layout, else as tern2 (2 bits: the
// stored form Program::bind keeps).
void count_work(const ir::Module& m, const std::string& name, Work& w,
                std::set<std::string>& params, int depth = 0) {
  const ir::Function* f = m.find_function(name);
  if (!f || depth > 64) return;
  for (ir::BlockId b : f->blocks())
    for (ir::InstId i : f->insts(b)) {
      const ir::InstData& inst = f->inst(i);
      switch (inst.op) {
        case ir::Op::MatMul:
        case ir::Op::TMatMul: {
          const ir::Type& x = f->type_of(inst.operands.at(0));
          const auto out = f->type_of(inst.results.at(0)).static_numel();
          if (!out || x.shape.empty()) break;
          w.ops += 2.0 * static_cast<double>(*out) * static_cast<double>(x.shape.back().extent);
          ++w.matmuls;
          break;
        }
        case ir::Op::Call:
          count_work(m, std::get<ir::CallAttrs>(inst.attrs).callee, w, params, depth + 1);
          break;
        case ir::Op::Param: {
          if (!params.insert(std::get<ir::ParamAttrs>(inst.attrs).name).second) break;
          const ir::Type& t = f->type_of(inst.results.at(0));
          const auto n = t.static_numel();
          if (!n) break;
          if (t.elem == ElemKind::T2) {
            const WeightFormat layout = t.layout != WeightFormat::Plain ? t.layout : WeightFormat::Tern2;
            const auto bytes = formats::packed_size(layout, static_cast<std::size_t>(*n));
            w.weight_bytes += bytes;
            w.ternary_bytes += bytes;
          } else {
            w.weight_bytes += static_cast<std::uint64_t>(*n) * static_cast<std::uint64_t>(elem_bits(t.elem) / 8);
          }
          break;
        }
        default: break;
      }
    }
}

Result<Work> layer_work(const ir::Module& m, const std::string& fname, const ir::ShapeBindings& shapes,
                        int opt_level) {
  TERNJIT_TRY(ir::Module spec, passes::specialize_function(m, fname, shapes.values, /*require_static=*/true));
  const auto level = static_cast<passes::OptLevel>(std::clamp(opt_level, 0, 3));
  TERNJIT_TRY_VOID(passes::run_pipeline(spec, passes::default_pipeline(level), passes::PipelineOptions{}));
  Work w;
  std::set<std::string> params;
  count_work(spec, fname, w, params);
  return w;
}

// Per-call times of one kernel.
struct Timing {
  double median_ns = 0, min_ns = 0;
  int samples = 0;
  long long calls = 0;  // timed calls (samples x batch)
  int batch = 1;        // calls per sample
};

// Times `call(i)` (i counts every call, for rotating copies): `warmup` calls, an
// estimate of one call (the fastest of up to 5), then samples of `batch` calls (batch > 1 only when a call is
// shorter than min_time / kMaxSamples) through autotune::measure until `reps` samples
// and `min_time` seconds have passed, at most kMaxSamples.
template <class Call>
Result<Timing> time_kernel(Call&& call, int warmup, int reps, double min_time) {
  long long n = 0;
  for (int i = 0; i < warmup; ++i) TERNJIT_TRY_VOID(call(n++));
  // The estimate: the fastest of a few calls (one preempted call would give batch 1 and
  // end the timing long before min_time), at most ~min_time / 10 of them.
  double one = 1e9;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    TERNJIT_TRY_VOID(call(n++));
    const auto t1 = std::chrono::steady_clock::now();
    one = std::min(one, std::max(1e-9, std::chrono::duration<double>(t1 - t0).count()));
    if (std::chrono::duration<double>(t1 - start).count() > min_time / 10) break;
  }
  Timing t;
  t.batch = static_cast<int>(std::clamp(min_time / (kMaxSamples * one), 1.0, 1e6));
  Error failure{};
  bool failed = false;
  autotune::MeasureOptions mo;
  mo.warmup = 0;
  mo.min_reps = std::max(1, reps);
  mo.max_reps = std::max(mo.min_reps, kMaxSamples);
  mo.target_spread = -1;  // never stop on a small spread: --reps and --min-time decide
  mo.max_seconds = min_time;
  mo.timeout_s = 0;
  TERNJIT_TRY(autotune::Measurement m, autotune::measure(
                                           [&](int) {
                                             for (int j = 0; j < t.batch && !failed; ++j)
                                               if (auto r = call(n++); !r.ok()) {
                                                 failure = r.error();
                                                 failed = true;
                                               }
                                           },
                                           mo));
  if (failed) return failure;
  t.median_ns = m.median_ns / t.batch;
  t.min_ns = m.min_ns / t.batch;
  t.samples = m.reps;
  t.calls = static_cast<long long>(m.reps) * t.batch;
  return t;
}

// One call of a kernel through its plain entry point (what a hot loop calls).
Result<void> call_kernel(const Kernel& kernel, const PreparedKernel& pk) {
  if (const std::int32_t status = kernel.entry()(kernel.state(), pk.buffers.data()); status != 0)
    return make_error(ErrorCode::Internal, "the kernel returned status " + std::to_string(status));
  return {};
}

// Runs `argv` (argv[0] the program) and waits; its exit status, or -1 when it could not run.
int spawn_wait(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0].c_str(), nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// --plot's requirement, checked before anything is measured.
Result<void> check_plotter() {
  const std::string need = "--plot needs Debian's python3 and python3-matplotlib (apt install python3-matplotlib)";
  if (access(kPython, X_OK) != 0) return make_error(ErrorCode::Unavailable, need + ": " + kPython + " not found");
  if (spawn_wait({kPython, "-c", examples::kRooflineScript, "--check"}) != 0)
    return make_error(ErrorCode::Unavailable, need + ": matplotlib does not import");
  return {};
}

Result<void> write_plot(const nlohmann::json& data, const std::string& png) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string path = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/ternjit-bench-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0)
    return make_error(ErrorCode::IoError,
                      "cannot create a temporary file for --plot: " + std::string(std::strerror(errno)));
  close(fd);
  {
    std::ofstream out(path);
    out << data.dump();
  }
  const int rc = spawn_wait({kPython, "-c", examples::kRooflineScript, path, png});
  std::remove(path.c_str());
  if (rc != 0)
    return make_error(ErrorCode::IoError, "--plot: " + std::string(kPython) + " failed to write '" + png + "' (exit " +
                                              std::to_string(rc) + "; its message is above)");
  return {};
}

nlohmann::json timing_json(const Timing& t, const Work& w) {
  return {{"median_ns", t.median_ns},
          {"min_ns", t.min_ns},
          {"samples", t.samples},
          {"calls", t.calls},
          {"batch", t.batch},
          {"gbps", static_cast<double>(w.weight_bytes) / t.median_ns},
          {"gops", w.ops / t.median_ns},
          {"gbps_best", static_cast<double>(w.weight_bytes) / t.min_ns},
          {"gops_best", w.ops / t.min_ns}};
}

nlohmann::json ceiling_json(const targets::CeilingResult& c, const char* rate, const char* work) {
  // A ceiling is an upper bound: rated at its fastest call (load on the machine only
  // slows calls down); the median's rate is there too.
  return {{work, c.work},   {"median_ns", c.median_ns}, {"min_ns", c.min_ns},
          {"reps", c.reps}, {rate, c.best_rate()},      {std::string(rate) + "_median", c.rate()}};
}

// "480.0 MiB, from sysfs": the machine's last-level cache and where its size came from.
std::string llc_text(const nlohmann::json& machine) {
  char text[96];
  const std::string source = machine["llc_source"].get<std::string>();
  std::snprintf(text, sizeof text, "%.1f MiB, %s", machine["llc_bytes"].get<double>() / (1 << 20),
                source == "default" ? "assumed: neither sysfs nor CPUID reports one"
                                    : ("from " + source).c_str());
  return text;
}

void print_table(const nlohmann::json& j) {
  const auto& k = j["kernel"];
  std::printf("# %s  %s  target=%s threads=%d %s\n", j["function"].get<std::string>().c_str(),
              j["shape_text"].get<std::string>().c_str(), j["target"].get<std::string>().c_str(),
              j["threads"].get<int>(), j["mode"].get<std::string>().c_str());
  std::printf("# cpu: %s (last-level cache %s)\n", j["machine"]["cpu"].get<std::string>().c_str(),
              llc_text(j["machine"]).c_str());
  std::printf("# work per call: %.6g ops (2*M*N*K over %d matmul%s), %llu weight bytes (%llu ternary, packed)\n",
              j["ops"].get<double>(), j["matmuls"].get<int>(), j["matmuls"].get<int>() == 1 ? "" : "s",
              j["weight_bytes"].get<unsigned long long>(), j["ternary_bytes"].get<unsigned long long>());
  std::printf("%-12s %12s %12s %9s %10s %10s\n", "row", "median ms", "min ms", "calls", "GB/s", "GOPS");
  auto row = [](const char* name, const nlohmann::json& r) {
    std::printf("%-12s %12.6f %12.6f %9lld %10.3f %10.3f\n", name, r["median_ns"].get<double>() / 1e6,
                r["min_ns"].get<double>() / 1e6, r["calls"].get<long long>(), r["gbps"].get<double>(),
                r["gops"].get<double>());
  };
  row("kernel", k);
  if (j["reference"].contains("skipped"))
    std::printf("%-12s skipped: %s\n", "reference", j["reference"]["skipped"].get<std::string>().c_str());
  else row("reference", j["reference"]);
  const auto& p = j["probe"];
  std::printf("%-12s %12.6f %12.6f %9d %10.3f %10s  (streaming read of %.0f MiB)\n", "read probe",
              p["median_ns"].get<double>() / 1e6, p["min_ns"].get<double>() / 1e6, p["reps"].get<int>(),
              p["gbps"].get<double>(), "-", p["bytes"].get<double>() / (1 << 20));
  const auto& d = j["int8_dot"];
  std::printf("%-12s %12.6f %12.6f %9d %10s %10.3f  (%s)\n", "int8 dot", d["median_ns"].get<double>() / 1e6,
              d["min_ns"].get<double>() / 1e6, d["reps"].get<int>(), "-", d["gops"].get<double>(),
              d["isa"].get<std::string>().c_str());
  const auto& r = j["ratios"];
  std::string speedup = r["speedup"].is_null() ? "-" : std::to_string(r["speedup"].get<double>()) + "x";
  std::printf("speedup over reference: %s; weight GB/s / probe: %.4f; GOPS / int8-dot ceiling: %.4f\n", speedup.c_str(),
              r["bandwidth_fraction"].get<double>(), r["compute_fraction"].get<double>());
  std::printf("check: %s\n",
              j["checked"].get<bool>() ? "outputs match the reference" : "not checked (reference skipped)");
  if (j.contains("cold")) {
    const auto& c = j["cold"];
    std::printf("cold: %d weight copies, %.1f MiB rotated, %s the last-level cache (%s)\n", c["copies"].get<int>(),
                c["rotated_bytes"].get<double>() / (1 << 20), c["beyond_llc"].get<bool>() ? "beyond" : "not beyond",
                llc_text(j["machine"]).c_str());
  }
  for (const auto& note : j["notes"]) std::printf("note: %s\n", note.get<std::string>().c_str());
}

}  // namespace

int cmd_bench(const BenchCommandOptions& o, const targets::TargetRegistry& registry) {
  if (o.reps < 1 || o.reps > kMaxSamples)
    return report(bad("--reps must be 1.." + std::to_string(kMaxSamples) + ", got " + std::to_string(o.reps)));
  if (o.warmup < 0) return report(bad("--warmup must be >= 0"));
  // NaN fails every comparison, so each check is written to pass only in range; inf is out of range.
  if (!(o.min_time >= 0 && o.min_time <= kMaxMinTime))
    return report(bad("--min-time must be a number of seconds in 0.." + std::to_string(static_cast<int>(kMaxMinTime))));
  if (!(o.ref_max_time >= 0)) return report(bad("--ref-max-time must be >= 0"));
  if (!o.plot.empty())
    if (auto ok = check_plotter(); !ok.ok()) return report(ok.error());
  auto m = load_module(o.file);
  if (!m.ok()) return report(m.error());
  auto fname = pick_function(*m, o.file, o.function);
  if (!fname.ok()) return report(fname.error());
  auto shapes = shape_flags(*m, o.shapes);
  if (!shapes.ok()) return report(shapes.error());
  formats::PrepareOptions popts;
  popts.seed = o.seed;
  auto prepared = formats::prepare_run(*m, *m->find_function(*fname), nullptr, nullptr, *shapes, popts);
  if (!prepared.ok()) return report(prepared.error());

  auto options = command_engine_options(o.target, registry);
  if (!options.ok()) return report(options.error());
  // One pool for the kernel and the ceilings: the same threads, the same count.
  const int threads = options->threads > 0 ? options->threads : jit::ThreadPool::default_threads();
  jit::ThreadPool pool(threads);
  const targets::Parallel par = pool.parallel();
  options->threads = threads;
  options->parallel_for = par.run;
  options->parallel_pool = par.pool;

  auto pk = prepare_kernel(*options, *m, *fname, *prepared);
  if (!pk.ok()) return report(pk.error());
  const std::string target = pk->engine.target_name();
  auto work = layer_work(*m, *fname, prepared->shapes, options->opt_level);
  if (!work.ok()) return report(work.error());
  // Never 0: sysfs, else CPUID, else the documented default, and the output says which.
  const targets::LastLevelCache llc_probe = targets::last_level_cache();
  const std::uint64_t llc = llc_probe.bytes;
  nlohmann::json notes = nlohmann::json::array();

  // Poisoned outputs first: a kernel that leaves an element unwritten cannot pass the check.
  for (auto& bytes : pk->out_bytes) std::fill(bytes.begin(), bytes.end(), std::uint8_t{0xff});
  if (auto r = pk->kernel->run(pk->inputs, pk->outputs); !r.ok()) return report(r.error());

  // The reference target on the same inputs: its output checks the kernel's, its time is the baseline.
  nlohmann::json ref_json;
  std::optional<Timing> ref_time;
  bool checked = false;
  const double ref_estimate = work->ops / kReferenceOpsPerSecond;
  if (ref_estimate > o.ref_max_time) {
    char why[160];
    std::snprintf(why, sizeof why,
                  "estimated %.3g s per call (%.3g ops at %.0f M ops/s) is above --ref-max-time %.3g s", ref_estimate,
                  work->ops, kReferenceOpsPerSecond / 1e6, o.ref_max_time);
    ref_json = {{"skipped", why}};
    notes.push_back(std::string("reference skipped: ") + why + "; the kernel's output is not checked");
  } else {
    EngineOptions ref_options = *options;
    ref_options.target = "reference";
    auto ref = prepare_kernel(ref_options, *m, *fname, *prepared);
    if (!ref.ok()) return report(ref.error());
    for (auto& bytes : ref->out_bytes) std::fill(bytes.begin(), bytes.end(), std::uint8_t{0xff});
    auto t = time_kernel([&](long long) { return ref->kernel->run(ref->inputs, ref->outputs); },
                         ref_estimate > 0.05 ? 0 : 1, std::min(o.reps, 3), std::min(o.min_time, o.ref_max_time));
    if (!t.ok()) return report(t.error());
    ref_time = *t;
    ref_json = timing_json(*t, *work);
    auto expected = kernel_outputs(*ref);
    auto actual = kernel_outputs(*pk);
    if (!expected.ok()) return report(expected.error());
    if (!actual.ok()) return report(actual.error());
    if (!check_outputs(*expected, *actual, abs_error_floor(pk->engine))) {
      std::fprintf(stderr, "ternjit: bench: the %s kernel disagrees with the reference target: not timed\n",
                   target.c_str());
      return 1;
    }
    checked = true;
  }

  // --cold: more programs on the same engine, each with its own weight copy, rotated.
  std::vector<Program> copies;
  std::vector<const Kernel*> kernels{pk->kernel.get()};
  nlohmann::json cold_json;
  if (o.cold) {
    const std::uint64_t per_copy = std::max<std::uint64_t>(1, work->weight_bytes);
    const std::uint64_t want = 4 * llc;
    const auto n = static_cast<int>(std::clamp<std::uint64_t>(
        (want + per_copy - 1) / per_copy, 2, std::min<std::uint64_t>(kMaxColdCopies, kMaxColdBytes / per_copy + 1)));
    for (int i = 1; i < n; ++i) {
      auto program = compile_and_bind(pk->engine, *m, *prepared);
      if (!program.ok()) return report(program.error());
      auto kernel = program->kernel(*fname, pk->inputs);
      if (!kernel.ok()) return report(kernel.error());
      kernels.push_back(kernel->get());  // held by its program, kept in `copies`
      copies.push_back(std::move(*program));
    }
    const double rotated = static_cast<double>(per_copy) * n;
    cold_json = {
        {"copies", n}, {"rotated_bytes", rotated}, {"beyond_llc", rotated > static_cast<double>(llc)}};
  }

  auto timing =
      time_kernel([&](long long i) { return call_kernel(*kernels[static_cast<std::size_t>(i) % kernels.size()], *pk); },
                  o.warmup, o.reps, o.min_time);
  if (!timing.ok()) return report(timing.error());

  // The ceilings, on the kernel's pool, as the kernel's target measures them with its
  // options as the engine read them (flags, TERNJIT_TARGET_OPTIONS, aliases); a target
  // that measures none (reference, GPUs) is compared with the first CPU target's.
  targets::CeilingOptions co;
  co.max_seconds = std::min(0.25, std::max(o.min_time, 0.01));
  const std::uint64_t probe_bytes =
      std::clamp<std::uint64_t>(4 * llc, kMinProbeBytes, kMaxProbeBytes);
  auto typed = jit::validate_options(*options, registry);
  if (!typed.ok()) return report(typed.error());
  auto measure = [&](const targets::Target& t) {
    return t.measure_ceilings(par, static_cast<std::size_t>(probe_bytes), typed->target_options[std::string(t.name())],
                              co);
  };
  Result<targets::Ceilings> ceilings = measure(*registry.lookup(target));
  std::string ceilings_by = target;
  for (const auto& t : registry.all()) {
    if (ceilings.ok() || ceilings.error().code != ErrorCode::Unsupported) break;
    if (t->kind() != targets::TargetKind::Cpu || !t->available().ok()) continue;
    ceilings = measure(*t);
    ceilings_by = std::string(t->name());
  }
  if (!ceilings.ok()) return report(ceilings.error());
  const targets::CeilingResult* probe = &ceilings->read;
  const targets::CeilingResult* dot = &ceilings->int8_dot;

  const targets::HostCpu cpu = targets::detect_host_cpu();
  nlohmann::json j;
  j["file"] = o.file;
  j["function"] = *fname;
  j["target"] = target;
  j["threads"] = threads;
  j["shape"] = prepared->shapes.values;
  j["shape_text"] = shape_text(prepared->shapes.values);
  j["mode"] = o.cold ? "cold" : "hot";
  j["machine"] = {
      {"cpu", cpu.model}, {"features", cpu.feature_string()}, {"logical_cores", cpu.logical_cores}, {"llc_bytes", llc},
      {"llc_source", llc_probe.source}};
  j["ops"] = work->ops;
  j["matmuls"] = work->matmuls;
  j["weight_bytes"] = work->weight_bytes;
  j["ternary_bytes"] = work->ternary_bytes;
  j["intensity"] = work->weight_bytes ? work->ops / static_cast<double>(work->weight_bytes) : 0.0;
  j["kernel"] = timing_json(*timing, *work);
  j["reference"] = ref_json;
  j["probe"] = ceiling_json(*probe, "gbps", "bytes");
  j["int8_dot"] = ceiling_json(*dot, "gops", "ops");
  j["int8_dot"]["isa"] = ceilings->int8_dot_path;
  j["ceilings_target"] = ceilings_by;
  j["ratios"] = {{"speedup", ref_time ? nlohmann::json(ref_time->median_ns / timing->median_ns) : nlohmann::json()},
                 {"bandwidth_fraction", j["kernel"]["gbps"].get<double>() / probe->best_rate()},
                 {"compute_fraction", j["kernel"]["gops"].get<double>() / dot->best_rate()}};
  j["checked"] = checked;
  if (o.cold) {
    j["cold"] = cold_json;
    if (!cold_json["beyond_llc"].get<bool>())
      notes.push_back("--cold: the rotated weight copies do not exceed the last-level cache: the layer's weights are "
                      "too small for the most copies --cold binds (" + std::to_string(kMaxColdCopies) + ", 1 GiB)");
  } else {
    notes.push_back("hot: one weight copy, reused by every call (it may stay in cache; --cold rotates copies)");
  }
  if (work->matmuls == 0) notes.push_back("the function has no matmul: GOPS and the compute fraction are 0");
  j["notes"] = notes;

  if (!o.plot.empty())
    if (auto ok = write_plot(j, o.plot); !ok.ok()) return report(ok.error());
  if (o.json) std::printf("%s\n", j.dump(2).c_str());
  else print_table(j);
  if (!o.plot.empty() && !o.json) std::printf("roofline written to %s\n", o.plot.c_str());
  return 0;
}

void add_bench_command(CLI::App& app, const targets::TargetRegistry& registry) {
  auto o = std::make_shared<BenchCommandOptions>();
  auto* cmd = app.add_subcommand("bench",
                                 "time a function's compiled kernel beside the reference target, a "
                                 "read-bandwidth probe and an int8-dot ceiling");
  cmd->add_option("file", o->file, "the .tri or .tir file")->required();
  add_function_flags(*cmd, o->function, "to time");
  cmd->add_option("--shape", o->shapes, "symbol values, e.g. M=1,K=2560,N=2560 or BitLinear.N=64 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_target_flags(*cmd, o->target, registry,
                   "where the kernel runs (its threads run the probes too; the target measures its ceilings "
                   "under its own options, e.g. a code-path cap)");
  add_cache_dir_flag(*cmd, o->target.cache_dir);
  cmd->add_option("--warmup", o->warmup, "untimed calls first (default 3)");
  cmd->add_option("--reps", o->reps, "timed samples at least, 1..200 (default 10)");
  cmd->add_option("--min-time", o->min_time,
                  "seconds to keep timing the kernel, at least --reps samples, 0..3600 (default 0.5)");
  cmd->add_option("--ref-max-time", o->ref_max_time,
                  "skip the reference when its estimated time per call exceeds these seconds (default 2)");
  cmd->add_flag("--cold", o->cold, "rotate weight copies totalling 4x the last-level cache (at most 64 copies, 1 GiB)");
  cmd->add_option("--seed", o->seed, "seed of the random inputs and parameters (default 1)");
  cmd->add_flag("--json", o->json, "print one JSON object with every number instead of the table");
  cmd->add_option("--plot", o->plot, "write a roofline PNG here (needs /usr/bin/python3 with python3-matplotlib)");
  cmd->callback([o, &registry] { end_command(cmd_bench(*o, registry)); });
}

}  // namespace ternjit::cli

// SPDX-License-Identifier: Apache-2.0
// x86_target.cpp - the x86 Target: plan artifacts, their loading, tuning spaces and `--emit asm`.
#include "targets/x86/x86_target.h"

#include <charconv>
#include <thread>

#include "ir/print.h"
#include "targets/host_cpu.h"
#include "targets/common/disasm.h"
#include "targets/x86/ceilings.h"
#include "targets/x86/isa.h"
#include "targets/x86/plan.h"
#include "targets/x86/tmatmul_space.h"

namespace ternjit::targets {

namespace {

// The ISA cap an option names ("" = no cap).
Result<x86::Isa> cap_of(std::string_view max_isa) {
  if (max_isa.empty()) return x86::Isa::Amx;
  auto isa = x86::parse_isa(max_isa);
  if (!isa)
    return make_error(ErrorCode::InvalidArgument, "unknown x86 ISA '" + std::string(max_isa) +
                                                      "': expected avx2, avx_vnni, avx512, avx512_vnni or amx");
  return *isa;
}

std::string isa_list(const x86::IsaSupport& s) {
  std::string r;
  for (x86::Isa isa : x86::kAllIsas)
    if (s.supports(isa)) r += (r.empty() ? "" : " ") + std::string(x86::isa_name(isa));
  return r;
}

int default_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// A loaded plan and the threads it runs on.
struct PlanState {
  std::unique_ptr<x86::Plan> plan;
  Parallel parallel;
};

Result<void> run_plan(const void* state, void* const* buffers) {
  const auto& s = *static_cast<const PlanState*>(state);
  return s.plan->run(buffers, s.parallel);
}

Result<void> run_plan_rows(const void* state, void* const* buffers, std::int64_t rows) {
  const auto& s = *static_cast<const PlanState*>(state);
  return s.plan->run(buffers, s.parallel, rows);
}

// The ops a run-time-rows plan lowers to row-aware steps (tmatmul of int8 x, an f32
// matmul of a per-row A by a load-time B, the eltwise kernels, reshape aliases); anything
// else would be a reference step, which runs all rows.
bool row_step_op(const ir::Function& f, const ir::InstData& inst) {
  switch (inst.op) {
    case ir::Op::TMatMul: return f.type_of(inst.operands[0]).elem == ElemKind::I8;
    case ir::Op::MatMul: return f.type_of(inst.operands[0]).elem == ElemKind::F32;  // plan.cpp checks the rest
    case ir::Op::Quantize: case ir::Op::QuantizeInt8: case ir::Op::RmsNorm: case ir::Op::Softmax:
    case ir::Op::ReduceSum: case ir::Op::ReduceMean: case ir::Op::ReduceMax: case ir::Op::Ewise:
    case ir::Op::Reshape: case ir::Op::Ret:
      return true;
    default:
      break;
  }
  return ir::is_ewise_step_op(inst.op);
}

// Renders describe_code's steps: per step its op, IR line, configuration and disassembly.
Result<std::string> render_steps(std::string_view function, const std::vector<x86::StepCode>& steps,
                                 std::string_view isa_cap, int threads) {
  std::string out = "; " + std::string(function) + " on x86" +
                    (isa_cap.empty() ? "" : " (max isa " + std::string(isa_cap) + ")") + ", threads " +
                    std::to_string(threads) + ", " + std::to_string(steps.size()) + " step" +
                    (steps.size() == 1 ? "" : "s") + "\n";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const x86::StepCode& s = steps[i];
    out += "\nstep " + std::to_string(i) + ": " + s.op + "\n";
    out += "  ir:     " + s.summary + "\n";
    out += "  config: " + (s.config.empty() ? std::string("-") : s.config) + "\n";
    const bool reference = s.op.size() >= 11 && s.op.compare(s.op.size() - 11, 11, "(reference)") == 0;
    if (s.blobs.empty())
      out += reference ? "  (no generated code: run by the reference implementation)\n"
                       : "  (a compiled step of the x86 target: no Xbyak code, the config line says what runs)\n";
    for (const x86::StepCode::Blob& b : s.blobs) {
      out += "  code \"" + b.label + "\" (" + std::to_string(b.code.size()) + " bytes):\n";
      TERNJIT_TRY(std::string text, disassemble_x86(b.code, 0));
      out += text;
    }
  }
  return out;
}

class X86Target final : public Target {
 public:
  X86Target() : cpu_(detect_host_cpu()) {}

  [[nodiscard]] std::string_view name() const override { return "x86"; }
  [[nodiscard]] TargetTraits traits() const override {
    TargetTraits t;
    t.kind = TargetKind::Cpu;
    t.artifact_kind = "x86-plan";
    t.runtime_rows = true;
    return t;
  }
  [[nodiscard]] Result<void> available() const override {
    if (!x86::host_isas().avx2)
      return make_error(ErrorCode::Unavailable, "this CPU lacks AVX2 + FMA + F16C, the x86 target's baseline");
    return success();
  }

  [[nodiscard]] TargetDescription describe() const override {
    const x86::IsaSupport& s = x86::host_isas();
    TargetDescription d;
    d.name = std::string(name());
    d.kind = std::string(target_kind_name(kind()));
    d.available = s.avx2;
    d.device = cpu_.model;
    d.memory_bytes = cpu_.memory_bytes;
    d.features = "code paths: " + (s.avx2 ? isa_list(s) : std::string("none"));
    // VBMI is not a code path of its own but gates one variant (base3, the 1.6-bit
    // weights), so a reader of `ternjit info` can tell why a host picks it or not.
    if (s.avx512_vbmi) d.features += "; avx512_vbmi (tmatmul base3)";
    if (!s.amx_note.empty()) d.features += " (" + s.amx_note + ")";
    return d;
  }

  // The ceilings of the host as the x86 kernels see it: the read probe and the int8-dot
  // loop of the highest path max_isa allows (x86/ceilings.h).
  [[nodiscard]] Result<Ceilings> measure_ceilings(const Parallel& parallel, std::size_t read_bytes,
                                                  const TargetOptions& options,
                                                  const CeilingOptions& how) const override {
    TERNJIT_TRY(x86::Isa cap, cap_of(options.get("max_isa")));
    const auto dot_isa = x86::dot_ceiling_isa(cap);
    if (!dot_isa) return make_error(ErrorCode::Unavailable, "the int8-dot ceiling needs AVX2");
    Ceilings c;
    TERNJIT_TRY(c.read, x86::measure_read_bandwidth(parallel, read_bytes, how));
    TERNJIT_TRY(c.int8_dot, x86::measure_int8_dot(parallel, *dot_isa, how));
    c.int8_dot_path = std::string(x86::isa_name(*dot_isa));
    return c;
  }

  [[nodiscard]] std::string describe_tuning() const override { return "x86 tmatmul:\n" + x86::describe_space(); }

  [[nodiscard]] std::vector<OptionAlias> option_aliases() const override {
    return {{"max_isa", "max_isa", "the highest x86 code path: avx2, avx_vnni, avx512, avx512_vnni or amx"}};
  }

  // One option: max_isa (the highest code path: avx2, avx_vnni, avx512, avx512_vnni, amx).
  [[nodiscard]] Result<TargetOptions> parse_options(const TargetOptions& given) const override {
    for (const auto& [option, value] : given.values) {
      if (option != "max_isa")
        return make_error(ErrorCode::InvalidArgument, "unknown x86 option '" + option + "' (x86 takes: max_isa)");
      TERNJIT_TRY_VOID(cap_of(value));
    }
    return given;
  }

  [[nodiscard]] Result<void> check_supported(const ir::Function& f) const override { return x86::plan_supported(f); }

  [[nodiscard]] Result<Artifact> compile(const ir::Module& specialized, std::string_view function,
                                         const CompileOptions& options) const override {
    const ir::Function* f = specialized.find_function(function);
    if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the module");
    TERNJIT_TRY_VOID(check_supported(*f));
    TERNJIT_TRY(x86::Isa isa, host_isa(options.target));
    const std::string text = ir::print_module(specialized);
    Artifact a;
    a.kind = std::string(traits().artifact_kind);
    a.code_is_ir = true;
    a.bytes.assign(text.begin(), text.end());
    a.entry = std::string(function);
    a.metadata["isa"] = std::string(x86::isa_name(isa));
    a.metadata["threads"] = std::to_string(options.threads > 0 ? options.threads : default_threads());
    if (options.rows_max > 0) a.metadata["rows_max"] = std::to_string(options.rows_max);
    return a;
  }

  // Per-row values are computed by the steps above; load-time values (no row axis) by
  // anything. Plan::build refuses with Unsupported what this cheap check lets through.
  [[nodiscard]] bool runtime_rows(const ir::Function& optimized, ir::SymbolId rows) const override {
    if (optimized.blocks().size() != 1) return false;
    for (ir::InstId i : optimized.insts(optimized.entry())) {
      const ir::InstData& inst = optimized.inst(i);
      bool per_row = false;
      for (ir::ValueId r : inst.results) {
        const ir::Type& t = optimized.type_of(r);
        per_row = per_row || (t.rank() >= 1 && !t.shape[0].is_static() && t.shape[0].sym == rows);
      }
      if (inst.op == ir::Op::Ret) per_row = true;
      if (per_row && !row_step_op(optimized, inst)) return false;
    }
    return true;
  }

  [[nodiscard]] std::unique_ptr<ProgramState> new_program_state() const override {
    return std::make_unique<x86::PackCache>();
  }

  // Regenerates the plan's code (microseconds per kernel) and packs the weights once per
  // Program (the PackCache); each tmatmul's configuration is asked of the tuning source.
  [[nodiscard]] Result<LoadedKernel> load(const Artifact& a, const LoadContext& context) const override {
    TERNJIT_CHECK(context.params != nullptr, "load: no parameter values");
    TERNJIT_TRY_VOID(check_artifact_kind(a, traits().artifact_kind, name()));
    TERNJIT_TRY(ir::Module m, parse_artifact_module(a));
    auto isa_it = a.metadata.find("isa");
    if (isa_it == a.metadata.end()) return make_error(ErrorCode::InvalidInput, "x86 artifact has no 'isa'");
    auto isa = x86::parse_isa(isa_it->second);
    if (!isa) return make_error(ErrorCode::InvalidInput, "x86 artifact names an unknown isa '" + isa_it->second + "'");
    x86::PlanOptions o;
    o.isa = *isa;
    o.threads = std::max(1, context.parallel.threads);
    o.adaptive_parallel = context.adaptive_parallel;
    if (context.tuning != TuningMode::Off) o.tuning = context.tuning_source;
    if (auto rows_it = a.metadata.find("rows_max"); rows_it != a.metadata.end()) {
      // Read from the disk cache too: validated before it is trusted.
      const std::string& t = rows_it->second;
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (ec != std::errc() || end != t.data() + t.size() || v < 1)
        return make_error(ErrorCode::InvalidInput, "x86 artifact has a bad 'rows_max' '" + t + "'");
      o.rows_max = v;
    }
    auto state = std::make_shared<PlanState>();
    TERNJIT_TRY(state->plan, x86::Plan::build(m, a.entry, *context.params, o,
                                              dynamic_cast<x86::PackCache*>(context.state)));
    state->parallel = context.parallel;
    LoadedKernel k;
    k.run = &run_plan;
    if (o.rows_max > 0) k.run_rows = &run_plan_rows;
    k.state = state.get();
    k.owner = std::move(state);
    k.isa = isa_it->second;
    return k;
  }

  [[nodiscard]] Result<std::vector<std::unique_ptr<TuningSpace>>> tuning_spaces(
      const ir::Module& specialized, std::string_view function, const CompileOptions& options) const override {
    TERNJIT_TRY(x86::Isa isa, host_isa(options.target));
    x86::PlanOptions o;
    o.isa = isa;
    o.threads = options.threads > 0 ? options.threads : 1;
    o.allow_foreign_isa = true;  // describing: parameters may be unbound
    std::vector<std::unique_ptr<TuningSpace>> spaces;
    o.spaces = &spaces;
    TERNJIT_TRY(auto plan, x86::Plan::build(specialized, function, ir::ParamValues{}, o, nullptr));
    return spaces;
  }

  [[nodiscard]] std::vector<std::string_view> emit_forms() const override { return {"asm"}; }

  [[nodiscard]] Result<Emitted> emit(const ir::Module& specialized, std::string_view function, std::string_view what,
                                     const CompileOptions& options, const ir::ParamValues*) const override {
    if (what != "asm")
      return make_error(ErrorCode::InvalidArgument, "the x86 target emits 'asm', not '" + std::string(what) + "'");
    const std::string cap = options.target.get("max_isa");
    const int threads = options.threads > 0 ? options.threads : 1;
    TERNJIT_TRY(auto steps, x86::describe_code(specialized, function, cap, threads));
    TERNJIT_TRY(std::string text, render_steps(function, steps, cap, threads));
    return Emitted{std::move(text), false, {}};
  }

 private:
  // The best code path the host runs at or below the max_isa option.
  static Result<x86::Isa> host_isa(const TargetOptions& options) {
    TERNJIT_TRY(x86::Isa cap, cap_of(options.get("max_isa")));
    const auto isa = x86::best_isa(x86::host_isas(), cap);
    if (!isa)
      return make_error(ErrorCode::Unavailable, "no x86 code path at or below '" + std::string(x86::isa_name(cap)) +
                                                    "' runs on this CPU");
    return *isa;
  }

  HostCpu cpu_;
};

}  // namespace

std::unique_ptr<Target> make_x86_target() { return std::make_unique<X86Target>(); }

}  // namespace ternjit::targets

namespace ternjit::targets::x86 {

Result<std::vector<StepCode>> describe_code(const ir::Module& specialized, std::string_view function,
                                            std::string_view isa_cap, int threads) {
  TERNJIT_TRY(Isa cap, cap_of(isa_cap));
  PlanOptions o;
  // Without a cap: the best path the host runs (Avx2 when even that is missing).
  o.isa = isa_cap.empty() ? best_isa(host_isas()).value_or(Isa::Avx2) : cap;
  o.threads = threads > 0 ? threads : 1;
  o.allow_foreign_isa = true;  // describing: parameters may be unbound, the ISA foreign
  TERNJIT_TRY(auto plan, Plan::build(specialized, function, ir::ParamValues{}, o, nullptr));
  return plan->describe();
}

}  // namespace ternjit::targets::x86

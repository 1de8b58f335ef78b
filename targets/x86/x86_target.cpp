// SPDX-License-Identifier: Apache-2.0
// x86_target.cpp - the x86 Target (plan artifacts) and describe_code for `--emit asm`.
#include "targets/x86/x86_target.h"

#include <thread>

#include "ir/print.h"
#include "targets/host_cpu.h"
#include "targets/x86/isa.h"
#include "targets/x86/plan.h"

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

class X86Target final : public Target {
 public:
  X86Target() : cpu_(detect_host_cpu()) {}

  [[nodiscard]] std::string_view name() const override { return "x86"; }
  [[nodiscard]] TargetKind kind() const override { return TargetKind::Cpu; }
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
    if (!s.amx_note.empty()) d.features += " (" + s.amx_note + ")";
    return d;
  }

  [[nodiscard]] passes::TargetInfo info() const override {
    // The kernels take int8 activations (VNNI/AMX dot products) and repack ternary
    // weights into their own interleaved panels when a plan is loaded, from the plain
    // values: no IR-level tpack is needed.
    passes::TargetInfo t;
    t.name = "x86";
    t.int8_dot = true;
    t.weight_layout = WeightFormat::Plain;
    return t;
  }

  [[nodiscard]] Result<void> check_supported(const ir::Function& f) const override { return x86::plan_supported(f); }

  [[nodiscard]] Result<Artifact> compile(const ir::Module& specialized, std::string_view function,
                                         const CompileOptions& options) const override {
    const ir::Function* f = specialized.find_function(function);
    if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the module");
    TERNJIT_TRY_VOID(check_supported(*f));
    TERNJIT_TRY(x86::Isa cap, cap_of(options.max_isa));
    const auto isa = x86::best_isa(x86::host_isas(), cap);
    if (!isa)
      return make_error(ErrorCode::Unavailable, "no x86 code path at or below '" + std::string(x86::isa_name(cap)) +
                                                    "' runs on this CPU");
    const std::string text = ir::print_module(specialized);
    Artifact a;
    a.kind = ArtifactKind::MachineCode;
    a.bytes.assign(text.begin(), text.end());
    a.entry = std::string(function);
    a.metadata["isa"] = std::string(x86::isa_name(*isa));
    a.metadata["threads"] = std::to_string(options.threads > 0 ? options.threads : default_threads());
    return a;
  }

  static int default_threads() {
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }

 private:
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

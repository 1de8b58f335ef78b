// SPDX-License-Identifier: Apache-2.0
// reference_target.cpp - the reference target: IR text artifacts for the interpreter.
#include "targets/reference/reference_target.h"

#include "ir/print.h"
#include "targets/host_cpu.h"

namespace ternjit::targets {

namespace {

class ReferenceTarget final : public Target {
 public:
  ReferenceTarget() : cpu_(detect_host_cpu()) {}

  [[nodiscard]] std::string_view name() const override { return "reference"; }
  [[nodiscard]] TargetKind kind() const override { return TargetKind::Interpreter; }
  [[nodiscard]] Result<void> available() const override { return success(); }

  [[nodiscard]] TargetDescription describe() const override {
    TargetDescription d;
    d.name = std::string(name());
    d.kind = std::string(target_kind_name(kind()));
    d.available = true;
    d.device = cpu_.model;
    d.memory_bytes = cpu_.memory_bytes;
    d.features = cpu_.feature_string();
    return d;
  }

  [[nodiscard]] passes::TargetInfo info() const override {
    // The interpreter reads t2 weights as they are and has no fast int8 dot product.
    passes::TargetInfo t;
    t.name = "reference";
    return t;
  }

  [[nodiscard]] Result<void> check_supported(const ir::Function&) const override { return success(); }

  [[nodiscard]] Result<Artifact> compile(const ir::Module& specialized, std::string_view function,
                                         const CompileOptions&) const override {
    const ir::Function* f = specialized.find_function(function);
    if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the module");
    TERNJIT_TRY_VOID(check_supported(*f));
    std::string text = ir::print_module(specialized);
    Artifact a;
    a.kind = ArtifactKind::Interpreted;
    a.bytes.assign(text.begin(), text.end());
    a.entry = std::string(function);
    a.metadata["isa"] = "-";
    return a;
  }

 private:
  HostCpu cpu_;
};

}  // namespace

std::unique_ptr<Target> make_reference_target() { return std::make_unique<ReferenceTarget>(); }

}  // namespace ternjit::targets

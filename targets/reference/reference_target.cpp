// SPDX-License-Identifier: Apache-2.0
// reference_target.cpp - the reference target: IR text artifacts, run by the interpreter.
#include "targets/reference/reference_target.h"

#include <charconv>
#include <cstring>
#include <map>

#include "ir/print.h"
#include "targets/common/step_plan.h"
#include "targets/cpu_buffers.h"
#include "targets/host_cpu.h"

namespace ternjit::targets {

namespace {

// A loaded Interpreted artifact: the parsed module, its entry, the weights, and every
// buffer's kind, shape and byte size (inputs, then outputs).
struct InterpretedState {
  ir::Module module;
  const ir::Function* function = nullptr;
  const ir::ParamValues* params = nullptr;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<ElemKind> kinds;
  BufferSizes bytes;
  std::vector<SameBuffer> in_place;  // (input, output) pairs that may be one buffer (step_plan.h InPlace)
  ir::InterpretOptions limits;        // the target options max_steps and max_work, named in their errors
};

// The interpreter's budgets as target options (reference.max_steps, reference.max_work):
// a positive integer each; the defaults are ir::InterpretOptions's.
Result<std::uint64_t> parse_limit(const std::string& option, const std::string& value) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v == 0)
    return make_error(ErrorCode::InvalidArgument,
                      "reference." + option + " is a positive integer (a count of " +
                          (option == "max_steps" ? "instructions" : "element operations") + "), not '" + value + "'");
  return v;
}

// The interpreter options of a kernel: the limits its target options give, each error
// naming the option that raises it.
Result<ir::InterpretOptions> limits_of(const std::map<std::string, std::string>& given) {
  ir::InterpretOptions o;
  o.max_steps_name = "the reference target's option max_steps (--target-options reference.max_steps=N)";
  o.max_work_name = "the reference target's option max_work (--target-options reference.max_work=N)";
  if (auto it = given.find("max_steps"); it != given.end()) {
    TERNJIT_TRY(o.max_steps, parse_limit(it->first, it->second));
  }
  if (auto it = given.find("max_work"); it != given.end()) {
    TERNJIT_TRY(o.max_work, parse_limit(it->first, it->second));
  }
  return o;
}

Result<void> run_interpreted(const void* state, void* const* buffers) {
  const auto& s = *static_cast<const InterpretedState*>(state);
  const std::size_t n_in = s.bytes.in.size();
  std::vector<ir::HostTensor> args;
  args.reserve(n_in);
  for (std::size_t i = 0; i < n_in; ++i) {
    const auto* p = static_cast<const std::uint8_t*>(buffers[i]);
    if (!p && s.bytes.in[i] != 0) return make_error(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " is null");
    auto t = ir::HostTensor::from_bytes(s.kinds[i], s.shapes[i], {p, s.bytes.in[i]});
    if (!t.ok()) return make_error(ErrorCode::InvalidInput, "input " + std::to_string(i) + ": " + t.error().message);
    args.push_back(std::move(t.value()));
  }
  // The interpreter reads every input before writing any output, but the buffer rule is
  // every target's (cpu_buffers.h): an output may be an input only where a kv_write chain
  // updates that input in place; any other overlap is the caller's error.
  TERNJIT_TRY_VOID(check_buffers(buffers, s.bytes.in, s.bytes.out, s.in_place));
  TERNJIT_TRY(auto outs, ir::interpret(s.module, *s.function, args, *s.params, s.limits));
  TERNJIT_CHECK(outs.size() == s.bytes.out.size(), "interpreter returned the wrong number of results");
  for (std::size_t j = 0; j < outs.size(); ++j) {
    std::vector<std::uint8_t> b = outs[j].to_bytes();
    TERNJIT_CHECK(b.size() == s.bytes.out[j], "interpreter result has the wrong size");
    if (b.empty()) continue;
    if (!buffers[n_in + j]) return make_error(ErrorCode::InvalidArgument, "output " + std::to_string(j) + " is null");
    std::memcpy(buffers[n_in + j], b.data(), b.size());
  }
  return success();
}

std::vector<std::int64_t> extents(const ir::Type& t) {
  std::vector<std::int64_t> shape;
  for (const ir::Dim& d : t.shape) shape.push_back(d.extent);
  return shape;
}

class ReferenceTarget final : public Target {
 public:
  ReferenceTarget() : cpu_(detect_host_cpu()) {}

  [[nodiscard]] std::string_view name() const override { return "reference"; }
  [[nodiscard]] TargetTraits traits() const override {
    TargetTraits t;
    t.kind = TargetKind::Interpreter;
    t.artifact_kind = "ir-text";
    return t;
  }
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

  [[nodiscard]] Result<void> check_supported(const ir::Function&) const override { return success(); }

  [[nodiscard]] Result<Artifact> compile(const ir::Module& specialized, std::string_view function,
                                         const CompileOptions&) const override {
    const ir::Function* f = specialized.find_function(function);
    if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the module");
    TERNJIT_TRY_VOID(check_supported(*f));
    std::string text = ir::print_module(specialized);
    Artifact a;
    a.kind = std::string(traits().artifact_kind);
    a.code_is_ir = true;
    a.bytes.assign(text.begin(), text.end());
    a.entry = std::string(function);
    a.metadata["isa"] = "-";
    return a;
  }

  [[nodiscard]] Result<TargetOptions> parse_options(const TargetOptions& given) const override {
    for (const auto& [option, value] : given.values) {
      if (option != "max_steps" && option != "max_work")
        return make_error(ErrorCode::InvalidArgument, "the reference target has no option '" + option +
                                                          "' (it takes max_steps, max_work)");
      TERNJIT_TRY_VOID(parse_limit(option, value));
    }
    return given;
  }

  [[nodiscard]] Result<LoadedKernel> load(const Artifact& a, const LoadContext& context) const override {
    TERNJIT_CHECK(context.params != nullptr, "load: no parameter values");
    TERNJIT_TRY_VOID(check_artifact_kind(a, traits().artifact_kind, name()));
    auto state = std::make_shared<InterpretedState>();
    TERNJIT_TRY(state->module, parse_artifact_module(a));
    state->function = state->module.find_function(a.entry);
    state->params = context.params;
    TERNJIT_TRY(state->limits, limits_of(context.options.values));
    TERNJIT_TRY(state->bytes, buffer_sizes(*state->function));
    if (plannable(*state->function, "reference").ok())
      for (const InPlace& ip : plan_steps(*state->function).in_place) state->in_place.push_back({ip.input, ip.output});
    for (ir::ValueId v : state->function->args()) {
      state->shapes.push_back(extents(state->function->type_of(v)));
      state->kinds.push_back(state->function->type_of(v).elem);
    }
    for (const ir::Type& t : state->function->result_types()) {
      state->shapes.push_back(extents(t));
      state->kinds.push_back(t.elem);
    }
    LoadedKernel k;
    k.run = &run_interpreted;
    k.state = state.get();
    k.owner = std::move(state);
    k.isa = "-";
    return k;
  }

  [[nodiscard]] std::vector<std::string_view> emit_forms() const override { return {}; }

  [[nodiscard]] Result<Emitted> emit(const ir::Module&, std::string_view, std::string_view what,
                                     const CompileOptions&, const ir::ParamValues*) const override {
    return make_error(ErrorCode::InvalidArgument, "the reference target emits no code ('" + std::string(what) +
                                                      "'): it runs the IR itself (use --emit ir)");
  }

 private:
  HostCpu cpu_;
};

}  // namespace

std::unique_ptr<Target> make_reference_target() { return std::make_unique<ReferenceTarget>(); }

}  // namespace ternjit::targets

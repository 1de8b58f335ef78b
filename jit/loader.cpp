// SPDX-License-Identifier: Apache-2.0
// loader.cpp - loading artifacts: the reference interpreter's trampoline (Interpreted artifacts).
#include "jit/loader.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "ir/parse.h"
#include "targets/llvm/llvm_target.h"
#include "ternjit/ternjit.h"

namespace ternjit::jit {

namespace {

// What the reference trampoline needs: the parsed specialized module, its entry, the
// weights, and the byte size of every buffer (inputs, then outputs).
struct InterpretedState {
  ir::Module module;
  const ir::Function* function = nullptr;
  const ir::ParamValues* params = nullptr;
  std::vector<std::vector<std::int64_t>> shapes;  // inputs then outputs
  std::vector<ElemKind> kinds;                    // inputs then outputs
  std::vector<std::size_t> bytes;                 // inputs then outputs
};

Result<void> run_interpreted(const void* state, void* const* buffers) {
  const auto& s = *static_cast<const InterpretedState*>(state);
  const std::size_t n_in = s.function->args().size();
  std::vector<ir::HostTensor> args;
  args.reserve(n_in);
  for (std::size_t i = 0; i < n_in; ++i) {
    const auto* p = static_cast<const std::uint8_t*>(buffers[i]);
    if (!p && s.bytes[i] != 0) return make_error(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " is null");
    auto t = ir::HostTensor::from_bytes(s.kinds[i], s.shapes[i], {p, s.bytes[i]});
    if (!t.ok()) return make_error(ErrorCode::InvalidInput, "input " + std::to_string(i) + ": " + t.error().message);
    args.push_back(std::move(t.value()));
  }
  TERNJIT_TRY(auto outs, ir::interpret(s.module, *s.function, args, *s.params));
  TERNJIT_CHECK(outs.size() + n_in == s.kinds.size(), "interpreter returned the wrong number of results");
  for (std::size_t j = 0; j < outs.size(); ++j) {
    const std::size_t slot = n_in + j;
    std::vector<std::uint8_t> b = outs[j].to_bytes();
    TERNJIT_CHECK(b.size() == s.bytes[slot], "interpreter result has the wrong size");
    if (b.empty()) continue;
    if (!buffers[slot]) return make_error(ErrorCode::InvalidArgument, "output " + std::to_string(j) + " is null");
    std::memcpy(buffers[slot], b.data(), b.size());
  }
  return success();
}

// The KernelFn of Interpreted artifacts. C-callable: never throws.
std::int32_t interpreted_entry(const void* state, void* const* buffers) noexcept {
  try {
    auto r = run_interpreted(state, buffers);
    return r.ok() ? TERNJIT_OK : status_of(r.error().code);
  } catch (...) {
    return TERNJIT_INTERNAL;
  }
}

Result<LoadedKernel> load_interpreted(const targets::Artifact& a, const LoadContext& context) {
  TERNJIT_CHECK(context.params != nullptr, "load: no parameter values");
  std::string_view text(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size());
  TERNJIT_TRY(ir::Module m, ir::parse_module(text, "<artifact " + a.entry + ">"));
  auto state = std::make_shared<InterpretedState>();
  state->module = std::move(m);
  state->function = state->module.find_function(a.entry);
  if (!state->function)
    return make_error(ErrorCode::InvalidInput, "artifact has no entry function '" + a.entry + "'");
  state->params = context.params;
  auto add = [&](const ir::Type& t) -> Result<void> {
    auto n = t.static_numel();
    if (!n) return make_error(ErrorCode::InvalidInput, "artifact entry '" + a.entry + "' is not fully static");
    std::vector<std::int64_t> shape;
    for (const ir::Dim& d : t.shape) shape.push_back(d.extent);
    state->shapes.push_back(std::move(shape));
    state->kinds.push_back(t.elem);
    state->bytes.push_back(static_cast<std::size_t>(*n) * static_cast<std::size_t>(elem_bits(t.elem) / 8));
    return success();
  };
  for (ir::ValueId v : state->function->args()) TERNJIT_TRY_VOID(add(state->function->type_of(v)));
  for (const ir::Type& t : state->function->result_types()) TERNJIT_TRY_VOID(add(t));
  LoadedKernel k;
  k.entry = &interpreted_entry;
  k.state = state.get();
  k.run_checked = &run_interpreted;
  k.owner = std::move(state);
  return k;
}

// ---------------------------------------------------------------- x86 plans

struct PlanState {
  std::unique_ptr<targets::x86::Plan> plan;
  targets::x86::Parallel parallel;
};

Result<void> run_plan(const void* state, void* const* buffers) {
  const auto& s = *static_cast<const PlanState*>(state);
  return s.plan->run(buffers, s.parallel);
}

std::int32_t plan_entry(const void* state, void* const* buffers) noexcept {
  try {
    auto r = run_plan(state, buffers);
    return r.ok() ? TERNJIT_OK : status_of(r.error().code);
  } catch (...) {
    return TERNJIT_INTERNAL;
  }
}

Result<LoadedKernel> load_plan(const targets::Artifact& a, const LoadContext& context) {
  TERNJIT_CHECK(context.params != nullptr, "load: no parameter values");
  std::string_view text(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size());
  TERNJIT_TRY(ir::Module m, ir::parse_module(text, "<artifact " + a.entry + ">"));
  targets::x86::PlanOptions o;
  auto isa_it = a.metadata.find("isa");
  if (isa_it == a.metadata.end()) return make_error(ErrorCode::InvalidInput, "x86 artifact has no 'isa'");
  auto isa = targets::x86::parse_isa(isa_it->second);
  if (!isa) return make_error(ErrorCode::InvalidInput, "x86 artifact names an unknown isa '" + isa_it->second + "'");
  o.isa = *isa;
  o.threads = std::max(1, context.parallel.threads);
  for (const auto& [k, v] : a.metadata)
    if (k.rfind("tmatmul.", 0) == 0) o.configs.emplace(k, v);
  auto state = std::make_shared<PlanState>();
  TERNJIT_TRY(state->plan, targets::x86::Plan::build(m, a.entry, *context.params, o, context.packs));
  state->parallel = context.parallel;
  LoadedKernel k;
  k.entry = &plan_entry;
  k.state = state.get();
  k.run_checked = &run_plan;
  k.owner = std::move(state);
  return k;
}

// ---------------------------------------------------------------- llvm objects

Result<void> run_llvm(const void* state, void* const* buffers) {
  return static_cast<const targets::llvmjit::Kernel*>(state)->run(buffers);
}

std::int32_t llvm_entry(const void* state, void* const* buffers) noexcept {
  try {
    auto r = run_llvm(state, buffers);
    return r.ok() ? TERNJIT_OK : status_of(r.error().code);
  } catch (...) {
    return TERNJIT_INTERNAL;
  }
}

Result<LoadedKernel> load_llvm(const targets::Artifact& a, const LoadContext& context) {
  TERNJIT_CHECK(context.params != nullptr, "load: no parameter values");
  TERNJIT_TRY(auto kernel, targets::llvmjit::load_kernel(a, *context.params));
  LoadedKernel k;
  k.entry = &llvm_entry;
  k.state = kernel.get();
  k.run_checked = &run_llvm;
  k.owner = std::move(kernel);
  return k;
}

}  // namespace

std::int32_t status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidInput: return TERNJIT_INVALID_INPUT;
    case ErrorCode::InvalidArgument: return TERNJIT_INVALID_ARGUMENT;
    case ErrorCode::NotFound: return TERNJIT_NOT_FOUND;
    case ErrorCode::Unsupported: return TERNJIT_UNSUPPORTED;
    case ErrorCode::Unavailable: return TERNJIT_UNAVAILABLE;
    case ErrorCode::IoError: return TERNJIT_IO_ERROR;
    case ErrorCode::Internal: return TERNJIT_INTERNAL;
  }
  return TERNJIT_INTERNAL;
}

Result<LoadedKernel> load(const targets::Artifact& artifact, const LoadContext& context) {
  switch (artifact.kind) {
    case targets::ArtifactKind::Interpreted: return load_interpreted(artifact, context);
    case targets::ArtifactKind::MachineCode: return load_plan(artifact, context);
    case targets::ArtifactKind::Object: return load_llvm(artifact, context);
    case targets::ArtifactKind::Ptx:
    case targets::ArtifactKind::Hsaco:
    case targets::ArtifactKind::Spirv: break;
  }
  return make_error(ErrorCode::Unsupported, "cannot load " + std::string(targets::artifact_kind_name(artifact.kind)) +
                                                " artifacts yet");
}

}  // namespace ternjit::jit

// SPDX-License-Identifier: Apache-2.0
// llvm_target.cpp - the llvm Target, loading its objects (const table, reference steps) and AOT emission.
#include "targets/llvm/llvm_target.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ir/parse.h"
#include "ir/print.h"
#include "targets/cpu_buffers.h"
#include "targets/llvm/backend.h"
#include "targets/llvm/program.h"

namespace ternjit::targets {

namespace {

using llvmjit::LocKind;
using llvmjit::FunctionPlan;
using llvmjit::PlanStep;

std::string symbol_of(std::string_view function) {
  std::string s(function);
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) c = '_';
  return s;
}

// The target option max_instructions: a positive integer.
Result<std::uint64_t> parse_max_instructions(const std::string& value) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v == 0)
    return make_error(ErrorCode::InvalidArgument,
                      "llvm.max_instructions is a positive integer (LLVM instructions), not '" + value + "'");
  return v;
}

// The budget `options` give (validated by parse_options), else kDefaultMaxInstructions.
Result<std::uint64_t> max_instructions_of(const TargetOptions& options) {
  const auto it = options.values.find("max_instructions");
  if (it == options.values.end()) return llvmjit::kDefaultMaxInstructions;
  return parse_max_instructions(it->second);
}

class LlvmTarget final : public Target {
 public:
  [[nodiscard]] std::string_view name() const override { return "llvm"; }
  [[nodiscard]] TargetTraits traits() const override {
    TargetTraits t;
    t.kind = TargetKind::Cpu;
    t.artifact_kind = llvmjit::kArtifactKind;
    return t;
  }
  [[nodiscard]] Result<void> available() const override { return success(); }
  [[nodiscard]] TargetDescription describe() const override {
    TargetDescription d;
    d.name = "llvm";
    d.kind = "cpu";
    d.available = true;
    d.device = llvmjit::host_cpu();
    d.features = "LLVM 19 ORC LLJIT, " + llvmjit::host_triple() + " cpu " + llvmjit::host_cpu();
    return d;
  }
  [[nodiscard]] Result<void> check_supported(const ir::Function& f) const override {
    return llvmjit::program_supported(f);
  }
  [[nodiscard]] Result<Artifact> compile(const ir::Module& specialized, std::string_view function,
                                         const CompileOptions& options) const override {
    const ir::Function* f = specialized.find_function(function);
    if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the module");
    llvmjit::CodegenOptions o;
    o.opt = options.opt_level;
    o.no_packed = options.target.get("panels") == "int8";
    TERNJIT_TRY(o.max_instructions, max_instructions_of(options.target));
    TERNJIT_TRY(llvmjit::PanelLayout layout, llvmjit::panel_layout(o));
    TERNJIT_TRY(FunctionPlan p, llvmjit::analyze(*f, layout));
    const std::string sym = symbol_of(function);
    TERNJIT_TRY(std::string obj, llvmjit::generate(*f, p, sym, nullptr, llvmjit::EmitKind::Object, o));
    Artifact a;
    a.kind = std::string(llvmjit::kArtifactKind);
    a.bytes.assign(obj.begin(), obj.end());
    a.entry = std::string(function);
    a.metadata["ir"] = ir::print_module(specialized);
    a.metadata["symbol"] = sym;
    a.metadata["triple"] = llvmjit::host_triple();
    a.metadata["cpu"] = llvmjit::host_cpu();
    a.metadata["panel_group"] = std::to_string(layout.group);
    a.metadata["packed_lanes"] = std::to_string(layout.lanes);
    return a;
  }

  // Options: triple and cpu, for emit (AOT objects and text); loaded kernels always run
  // on the host. panels = packed (default) | int8: the ternary weights of i8 tmatmuls
  // as packed 2-bit panels or as the int8 panels (the previous layout, for comparison).
  [[nodiscard]] std::vector<OptionAlias> option_aliases() const override {
    return {{"triple", "triple", "the llvm target's triple for emitted objects, e.g. aarch64-linux-gnu (default: the host)"},
            {"cpu", "cpu", "the llvm target's CPU for emitted objects, e.g. neoverse-n1 (default: the host CPU or generic)"}};
  }

  [[nodiscard]] Result<TargetOptions> parse_options(const TargetOptions& given) const override {
    for (const auto& [option, value] : given.values) {
      if (option == "panels") {
        if (value != "packed" && value != "int8")
          return make_error(ErrorCode::InvalidArgument, "llvm.panels is packed or int8, not '" + value + "'");
        continue;
      }
      if (option == "max_instructions") {
        TERNJIT_TRY_VOID(parse_max_instructions(value));
        continue;
      }
      if (option != "triple" && option != "cpu")
        return make_error(ErrorCode::InvalidArgument,
                          "unknown llvm option '" + option + "' (llvm takes: triple, cpu, panels, max_instructions)");
    }
    return given;
  }

  [[nodiscard]] std::unique_ptr<ProgramState> new_program_state() const override {
    return std::make_unique<llvmjit::PackCache>();
  }

  [[nodiscard]] Result<LoadedKernel> load(const Artifact& a, const LoadContext& context) const override {
    TERNJIT_CHECK(context.params != nullptr, "load: no parameter values");
    TERNJIT_TRY(auto kernel, llvmjit::load_kernel(a, *context.params, context.parallel,
                                                  dynamic_cast<llvmjit::PackCache*>(context.state)));
    LoadedKernel k;
    k.run = [](const void* state, void* const* buffers) {
      return static_cast<const llvmjit::Kernel*>(state)->run(buffers);
    };
    k.state = kernel.get();
    k.owner = std::move(kernel);
    k.isa = "-";
    return k;
  }

  [[nodiscard]] std::vector<std::string_view> emit_forms() const override { return {"asm", "llvm", "obj"}; }

  // asm for the host without weights reads them through the entry's const table; with
  // another triple or cpu, llvm and obj bake the weights in (`params` required).
  [[nodiscard]] Result<targets::Emitted> emit(const ir::Module& specialized, std::string_view function,
                                              std::string_view what, const CompileOptions& options,
                                              const ir::ParamValues* params) const override {
    llvmjit::EmitRequest r;
    r.triple = options.target.get("triple");
    r.cpu = options.target.get("cpu");
    r.opt = options.opt_level;
    r.no_packed = options.target.get("panels") == "int8";
    TERNJIT_TRY(r.max_instructions, max_instructions_of(options.target));
    if (what == "asm") {
      r.what = llvmjit::EmitWhat::Asm;
      if (!r.triple.empty() || !r.cpu.empty()) r.params = params;
    } else if (what == "llvm" || what == "obj") {
      r.what = what == "llvm" ? llvmjit::EmitWhat::LlvmIr : llvmjit::EmitWhat::Object;
      r.params = params;
    } else {
      return make_error(ErrorCode::InvalidArgument,
                        "the llvm target emits asm, llvm or obj, not '" + std::string(what) + "'");
    }
    if ((r.what != llvmjit::EmitWhat::Asm || !r.triple.empty() || !r.cpu.empty()) && r.params == nullptr)
      return make_error(ErrorCode::InvalidArgument, "llvm --emit " + std::string(what) + " bakes the weights in: none given");
    TERNJIT_TRY(auto e, llvmjit::emit(specialized, function, r));
    targets::Emitted out;
    out.text = std::move(e.bytes);
    out.binary = r.what == llvmjit::EmitWhat::Object;
    if (out.binary) out.companions[".h"] = std::move(e.header);
    return out;
  }
};

}  // namespace

std::unique_ptr<Target> make_llvm_target() { return std::make_unique<LlvmTarget>(); }

}  // namespace ternjit::targets

namespace ternjit::targets::llvmjit {

namespace {

using EntryFn = int (*)(void* const*, const void* const*, void*, const ParallelArgs*);
using StepFn = int (*)(void* const*);


class LoadedKernel final : public Kernel {
 public:
  ir::Module module;
  const ir::Function* f = nullptr;
  FunctionPlan p;
  std::vector<std::shared_ptr<const std::vector<std::uint8_t>>> consts;  // shared with the Program's PackCache
  std::vector<ir::StoredTensor> held;      // parameters read where they are stored (stored_param)
  std::vector<const void*> const_ptrs;
  std::unique_ptr<JitObject> jit;
  EntryFn entry = nullptr;
  std::vector<StepFn> step_fns;            // per step (null for reference/copy)
  std::vector<ir::Module> ref_modules;     // per step (empty module unless reference)
  ParallelArgs par;                        // the LoadContext's Parallel, as generated code reads it

  Result<void> run(void* const* buffers) const override {
    TERNJIT_TRY_VOID(check_buffers(buffers, p.in_bytes, p.out_bytes, p.in_place));
    const ScratchLease lease(p.scratch_bytes);
    std::uint8_t* scratch = lease.data();
    auto failed = [&](std::size_t step) {
      std::int64_t rec[4];
      std::memcpy(rec, scratch + p.err_offset, sizeof rec);
      return make_error(ErrorCode::InvalidInput, run_error_message(*f, p.steps[step].inst, rec));
    };
    if (entry) {
      const int rc = entry(buffers, const_ptrs.data(), scratch, &par);
      if (rc != 0) return failed(static_cast<std::size_t>(rc - 1));
      return success();
    }
    auto where = [&](const Loc& l) -> void* {
      switch (l.kind) {
        case LocKind::Arg: return buffers[l.index];
        case LocKind::Out: return buffers[p.n_in + l.index];
        case LocKind::Scratch: return scratch + l.index;
        case LocKind::Const: return const_cast<void*>(const_ptrs[l.index]);
      }
      return nullptr;
    };
    for (std::size_t k = 0; k < p.steps.size(); ++k) {
      const PlanStep& s = p.steps[k];
      if (s.kind == PlanStep::Kind::Copy) {
        if (s.copy_bytes) std::memmove(where(s.out[0]), where(s.in[0]), s.copy_bytes);
        continue;
      }
      if (s.kind == PlanStep::Kind::Lowered) {
        std::vector<void*> ptrs;
        for (const Loc& l : s.in) ptrs.push_back(where(l));
        for (const Loc& l : s.out) ptrs.push_back(where(l));
        ptrs.push_back(scratch + s.tmp_offset);
        ptrs.push_back(const_cast<ParallelArgs*>(&par));
        ptrs.push_back(scratch + p.err_offset);
        if (step_fns[k](ptrs.data()) != 0) return failed(k);
        continue;
      }
      // Reference step: the interpreter on this one instruction.
      const ir::InstData& inst = f->inst(s.inst);
      std::vector<ir::HostTensor> args;
      for (std::size_t i = 0; i < inst.operands.size(); ++i) {
        const ir::Type& t = f->type_of(inst.operands[i]);
        const auto* ptr = static_cast<const std::uint8_t*>(where(s.in[i]));
        TERNJIT_TRY(ir::HostTensor ht, ir::HostTensor::from_bytes(t.elem, extents_of(t), {ptr, bytes_of(t)}));
        args.push_back(std::move(ht));
      }
      TERNJIT_TRY(auto outs, ir::interpret(ref_modules[k], ref_modules[k].functions()[0], args, ir::ParamValues{}));
      TERNJIT_CHECK(outs.size() == s.out.size(), "llvm reference step returned the wrong number of results");
      for (std::size_t j = 0; j < outs.size(); ++j) {
        const std::vector<std::uint8_t> b = outs[j].to_bytes();
        if (!b.empty()) std::memcpy(where(s.out[j]), b.data(), b.size());
      }
    }
    return success();
  }
};

}  // namespace

std::shared_ptr<const std::vector<std::uint8_t>> PackCache::find(const std::string& key) const {
  const std::lock_guard<std::mutex> lock(mu_);
  auto it = packs_.find(key);
  return it == packs_.end() ? nullptr : it->second;
}

std::shared_ptr<const std::vector<std::uint8_t>> PackCache::insert(const std::string& key,
                                                                   std::shared_ptr<const std::vector<std::uint8_t>> bytes) {
  const std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = packs_.emplace(key, std::move(bytes));
  if (added) ++made_;
  return it->second;  // a pack another thread made first wins: every kernel shares one
}

std::size_t PackCache::packs_made() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return made_;
}

std::size_t PackCache::host_bytes() const {
  const std::lock_guard<std::mutex> lock(mu_);
  std::size_t n = 0;
  for (const auto& [key, bytes] : packs_) n += bytes->size();
  return n;
}

Result<std::shared_ptr<const Kernel>> load_kernel(const Artifact& a, const ir::ParamValues& params,
                                                  const Parallel& parallel, PackCache* packs) {
  TERNJIT_TRY_VOID(check_artifact_kind(a, kArtifactKind, "llvm"));
  auto ir_it = a.metadata.find("ir"), sym_it = a.metadata.find("symbol");
  if (ir_it == a.metadata.end() || sym_it == a.metadata.end())
    return make_error(ErrorCode::InvalidInput, "llvm artifact lacks its 'ir' or 'symbol' metadata");
  if (auto t = a.metadata.find("triple"); t != a.metadata.end() && t->second != host_triple())
    return make_error(ErrorCode::InvalidInput, "llvm artifact is for '" + t->second + "', not this host");
  auto k = std::make_shared<LoadedKernel>();
  TERNJIT_TRY(k->module, ir::parse_module(ir_it->second, "<llvm artifact " + a.entry + ">"));
  k->f = k->module.find_function(a.entry);
  if (!k->f) return make_error(ErrorCode::InvalidInput, "llvm artifact has no function '" + a.entry + "'");
  auto g = a.metadata.find("panel_group");
  const int group = g == a.metadata.end() ? 0 : std::atoi(g->second.c_str());
  if (group != 1 && group != 4 && group != 16)
    return make_error(ErrorCode::InvalidInput, "llvm artifact lacks a valid 'panel_group'");
  auto pl = a.metadata.find("packed_lanes");
  const int lanes = pl == a.metadata.end() ? -1 : std::atoi(pl->second.c_str());
  if (lanes != 0 && lanes != 4 && lanes != 8 && lanes != 16)
    return make_error(ErrorCode::InvalidInput, "llvm artifact lacks a valid 'packed_lanes'");
  TERNJIT_TRY(k->p, analyze(*k->f, PanelLayout{group, lanes}));
  k->par.run = parallel.run;
  k->par.pool = parallel.pool;
  k->par.threads = parallel.run ? std::max(1, parallel.threads) : 1;
  // Weight panels of parameters come from (and go to) the Program's pack cache, so every
  // specialization of a Program shares one copy per layout.
  std::vector<std::string> keys(k->p.consts.size());
  std::vector<bool> cached(k->p.consts.size(), false);
  k->consts.resize(k->p.consts.size());
  if (packs) {
    for (std::size_t s = 0; s < keys.size(); ++s) {
      keys[s] = pack_key(*k->f, k->p, s);
      if (keys[s].empty()) continue;
      k->consts[s] = packs->find(keys[s]);
      cached[s] = k->consts[s] != nullptr;
    }
  }
  // Parameters read as values (an f16 head matrix, a norm's gamma) are read where they
  // are stored: no copy at load.
  std::vector<const void*> in_place(k->p.consts.size(), nullptr);
  std::vector<bool> skip = cached;
  for (std::size_t s = 0; s < in_place.size(); ++s) {
    if (skip[s]) continue;
    if (auto st = stored_param(*k->f, k->p, s, params)) {
      in_place[s] = st->bytes().data();
      k->held.push_back(std::move(*st));
      skip[s] = true;
    }
  }
  TERNJIT_TRY(auto bytes, const_bytes(*k->f, k->p, params, false, &skip));
  for (std::size_t s = 0; s < bytes.size(); ++s) {
    if (skip[s]) continue;
    auto b = std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes[s]));
    k->consts[s] = packs && !keys[s].empty() && !b->empty() ? packs->insert(keys[s], std::move(b)) : std::move(b);
  }
  for (std::size_t s = 0; s < in_place.size(); ++s) k->const_ptrs.push_back(in_place[s] ? in_place[s] : k->consts[s]->data());
  TERNJIT_TRY(k->jit, jit_link(a.bytes));
  if (k->p.all_lowered) {
    k->entry = reinterpret_cast<EntryFn>(k->jit->lookup(sym_it->second));
    if (!k->entry) return make_error(ErrorCode::InvalidInput, "llvm object lacks its entry '" + sym_it->second + "'");
  } else {
    k->step_fns.resize(k->p.steps.size(), nullptr);
    k->ref_modules.resize(k->p.steps.size());
    for (std::size_t i = 0; i < k->p.steps.size(); ++i) {
      const PlanStep& s = k->p.steps[i];
      if (s.kind == PlanStep::Kind::Lowered) {
        k->step_fns[i] = reinterpret_cast<StepFn>(k->jit->lookup(s.symbol));
        if (!k->step_fns[i]) return make_error(ErrorCode::InvalidInput, "llvm object lacks '" + s.symbol + "'");
      } else if (s.kind == PlanStep::Kind::Reference) {
        k->ref_modules[i] = ir::single_inst_module(*k->f, k->f->inst(s.inst));
      }
    }
  }
  return std::shared_ptr<const Kernel>(std::move(k));
}

namespace {

using ir::ValueId;

std::string c_type(ElemKind k) {
  switch (k) {
    case ElemKind::F32: return "float";
    case ElemKind::I32: return "int32_t";
    case ElemKind::U8: case ElemKind::Bool: return "uint8_t";
    case ElemKind::F16: case ElemKind::BF16: return "uint16_t";
    case ElemKind::T2: case ElemKind::I8: return "int8_t";
  }
  return "void";
}

std::string header_of(const ir::Function& f, const FunctionPlan& p, const std::string& sym, const std::string& triple) {
  std::string guard = "TERNJIT_" + sym + "_H";
  for (char& c : guard) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string h = "/* " + sym + ".h - generated by ternjit (llvm target) for " + f.name() + ", triple " + triple + ". */\n";
  h += "#ifndef " + guard + "\n#define " + guard + "\n#include <stdint.h>\n\n";
  h += "/* buffers[] holds, in order, the inputs then the outputs (row-major, no padding):\n";
  std::size_t slot = 0;
  for (ValueId a : f.args()) {
    const ir::Type& t = f.type_of(a);
    h += " *   buffers[" + std::to_string(slot++) + "] in  " + c_type(t.elem) + " " + ir::type_str(t, f.symbols()) + "\n";
  }
  for (const ir::Type& t : f.result_types())
    h += " *   buffers[" + std::to_string(slot++) + "] out " + c_type(t.elem) + " " + ir::type_str(t, f.symbols()) + "\n";
  h += " * scratch: at least " + sym + "_SCRATCH_BYTES bytes, 64-byte aligned, private to the call.\n";
  h += " * Returns 0, or 1 + the index of the step that found a run-time error (a position or\n";
  h += " * an id out of range): its record, 4 int64 {kind, values...}, is at scratch + " + sym + "_ERROR_OFFSET.\n";
  if (p.in_place.empty()) {
    h += " * Outputs must not overlap inputs. Weights are baked into the object. */\n";
  } else {
    h += " * Outputs must not overlap inputs, except that these may be the same buffer (same address,\n";
    h += " * same size: updated in place, only the rows the call writes):";
    for (const auto& sb : p.in_place)
      h += " buffers[" + std::to_string(sb.input) + "] and buffers[" + std::to_string(p.n_in + sb.output) + "];";
    h += "\n * distinct buffers are correct too (the input copied first). Weights are baked into the object. */\n";
  }
  h += "#define " + sym + "_ERROR_OFFSET " + std::to_string(p.err_offset) + "\n";
  h += "#define " + sym + "_NUM_BUFFERS " + std::to_string(slot) + "\n";
  h += "#define " + sym + "_NUM_INPUTS " + std::to_string(p.n_in) + "\n";
  std::string sizes;
  for (std::size_t b : p.in_bytes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(b);
  for (std::size_t b : p.out_bytes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(b);
  h += "#define " + sym + "_BUFFER_BYTES {" + sizes + "}\n";
  h += "#define " + sym + "_SCRATCH_BYTES " + std::to_string(p.scratch_bytes + 64) + "\n";
  h += "#ifdef __cplusplus\nextern \"C\" {\n#endif\n";
  h += "int " + sym + "(void* const* buffers, void* scratch);\n";
  h += "#ifdef __cplusplus\n}\n#endif\n#endif\n";
  return h;
}

}  // namespace

Result<Emitted> emit(const ir::Module& specialized, std::string_view function, const EmitRequest& r) {
  const ir::Function* f = specialized.find_function(function);
  if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the module");
  CodegenOptions o;
  o.triple = r.triple;
  o.cpu = r.cpu;
  o.opt = r.opt;
  o.no_packed = r.no_packed;
  o.max_instructions = r.max_instructions;
  TERNJIT_TRY(PanelLayout layout, panel_layout(o));
  TERNJIT_TRY(FunctionPlan p, analyze(*f, layout));
  Emitted e;
  e.symbol = r.symbol.empty() ? symbol_of(function) : r.symbol;
  e.scratch_bytes = p.scratch_bytes;
  std::vector<std::vector<std::uint8_t>> baked;
  if (r.params) {
    if (!p.all_lowered) {
      for (const PlanStep& s : p.steps)
        if (s.kind == PlanStep::Kind::Reference)
          return make_error(ErrorCode::Unsupported, "llvm AOT: no generator for '" + s.summary + "': " +
                                                        lowerable(*f, s.inst).error().message);
    }
    TERNJIT_TRY(baked, const_bytes(*f, p, *r.params, r.what != EmitWhat::Object));
  }
  const EmitKind k = r.what == EmitWhat::LlvmIr ? EmitKind::LlvmIr : r.what == EmitWhat::Asm ? EmitKind::Asm : EmitKind::Object;
  TERNJIT_TRY(e.bytes, generate(*f, p, e.symbol, r.params ? &baked : nullptr, k, o));
  e.header = header_of(*f, p, e.symbol, r.triple.empty() ? host_triple() : r.triple);
  return e;
}

}  // namespace ternjit::targets::llvmjit

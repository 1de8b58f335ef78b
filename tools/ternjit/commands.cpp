// SPDX-License-Identifier: Apache-2.0
// commands.cpp - check, ir, opt and run: thin wrappers over the library stages.
#include "tools/ternjit/commands.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "cache/key.h"
#include "formats/safetensors.h"
#include "ir/bind.h"
#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "ir/module_impl.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/verify.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/registry.h"
#include "ternjit/engine.h"

namespace ternjit::cli {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string format_value(double v, ElemKind k) {
  if (is_integer(k)) return std::to_string(static_cast<long long>(v));
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return ec == std::errc() ? std::string(buf, p) : std::string("?");
}

// Prints a tensor as nested rows: one innermost row per line.
void print_tensor(const std::string& name, const ir::HostTensor& t) {
  std::printf("%s: %s\n", name.c_str(), t.describe().c_str());
  std::int64_t row = t.shape.empty() ? 1 : t.shape.back();
  std::int64_t n = static_cast<std::int64_t>(t.data.size());
  for (std::int64_t i = 0; i < n; i += (row ? row : 1)) {
    std::string line = "  [";
    for (std::int64_t j = 0; j < row && i + j < n; ++j)
      line += (j ? ", " : "") + format_value(t.data[i + j], t.kind);
    std::printf("%s]\n", line.c_str());
    if (row == 0) break;
  }
}

formats::StTensor to_st(const std::string& name, const ir::HostTensor& t) {
  // Ternary and bool outputs are written as I8 (safetensors has no 2-bit or bool dtype here).
  const ElemKind kind = t.kind == ElemKind::T2 || t.kind == ElemKind::Bool ? ElemKind::I8 : t.kind;
  return formats::StTensor{name, std::string(formats::st_dtype_name(kind)), kind, t.shape,
                           ir::SharedBytes::adopt(t.to_bytes())};
}

// `ternjit run --check`: every output against the reference target's. Integer (and
// bool, ternary) outputs must be equal; a float output agrees element-wise when
// |actual - expected| <= kCheckTolerance * (|expected| + max|finite expected over the
// output|) (ir::output_tolerance), a NaN or inf only with its own class: a compiled target
// may reorder f32 sums and compute rmsnorm in f32 where the reference uses double, a few
// ulps per op.
constexpr double kCheckTolerance = 1e-4;

}  // namespace

double abs_error_floor(const Engine& engine) {
  for (const TargetDescription& t : engine.targets())
    if (t.name == engine.target_name()) return t.abs_error_floor;
  return 0;
}

bool check_outputs(const std::vector<ir::HostTensor>& expected, const std::vector<ir::HostTensor>& actual,
                   double abs_floor) {
  bool ok = expected.size() == actual.size();
  if (!ok)
    std::fprintf(stderr, "check: %zu outputs, the reference gives %zu\n", actual.size(), expected.size());
  for (std::size_t i = 0; ok && i < expected.size(); ++i) {
    const bool exact = !is_float(expected[i].kind);
    // From the finite elements only: an inf in the reference's output once made atol
    // infinite, and every finite element then "matched".
    const ir::OutputTolerance tol = exact ? ir::OutputTolerance{} : ir::output_tolerance(expected[i], kCheckTolerance);
    const double rtol = tol.rtol, atol = exact ? 0.0 : std::max(tol.atol, abs_floor);
    const std::string name = expected.size() == 1 ? "output" : "output" + std::to_string(i);
    if (auto bad = ir::compare(expected[i], actual[i], rtol, atol)) {
      std::fprintf(stderr, "check: %s differs from the reference target: %s (rtol %g, atol %g)\n", name.c_str(),
                   bad->message.c_str(), rtol, atol);
      ok = false;
    } else {
      std::fprintf(stderr, "check: %s matches the reference target (%s)\n", name.c_str(),
                   exact ? "exact" : ("rtol " + std::to_string(rtol) + ", atol " + std::to_string(atol)).c_str());
    }
  }
  return ok;
}

Result<Program> compile_and_bind(Engine& engine, const ir::Module& m, const formats::RunInputs& prepared) {
  TERNJIT_TRY(Program program, engine.compile(ir::wrap(m)));
  // Bind copies each stored value once as it is: ternary weights as 2-bit tern2 codes.
  for (const auto& [name, t] : prepared.params.values) {
    const bool ternary = t.kind() == ElemKind::T2;
    const TensorView view{const_cast<std::uint8_t*>(t.bytes().data()), ternary ? ElemKind::U8 : t.kind(), t.shape()};
    TERNJIT_TRY_VOID(program.bind(name, view, ternary ? WeightFormat::Tern2 : WeightFormat::Plain));
  }
  return program;
}

Result<PreparedKernel> prepare_kernel(const EngineOptions& options, const ir::Module& m, const std::string& fname,
                                      const formats::RunInputs& prepared) {
  TERNJIT_TRY(Engine engine, Engine::create(options));
  TERNJIT_TRY(Program program, compile_and_bind(engine, m, prepared));
  PreparedKernel pk{std::move(engine), std::move(program)};
  // The engine's buffers stay within the cap of prepare_run (PrepareOptions::max_bytes),
  // checked before each allocation: output shapes come from user-given extents.
  const std::uint64_t cap = formats::PrepareOptions{}.max_bytes;
  std::uint64_t used = 0;
  auto reserve = [&](ElemKind kind, const std::vector<std::int64_t>& shape,
                     const std::string& what) -> Result<std::size_t> {
    const auto numel = ir::checked_numel(shape);
    const auto bytes = numel ? formats::tensor_bytes(kind, *numel, std::max(elem_bits(kind) / 8, 1)) : std::nullopt;
    if (!bytes || *bytes > cap - std::min(cap, used))
      return make_error(ErrorCode::InvalidInput, what + " " + ir::index_str(shape) + " needs " +
                                                     (bytes ? std::to_string(*bytes) : std::string("more than 2^64")) +
                                                     " bytes, over the run's limit of " + std::to_string(cap) +
                                                     " bytes for all its tensors");
    used += *bytes;
    return static_cast<std::size_t>(*bytes);
  };
  for (const ir::HostTensor& t : prepared.args) {
    TERNJIT_TRY_VOID(reserve(t.kind, t.shape, "an input of shape"));
    pk.arg_bytes.push_back(t.to_bytes());
  }
  for (std::size_t i = 0; i < prepared.args.size(); ++i)
    pk.inputs.push_back(TensorView{pk.arg_bytes[i].data(), prepared.args[i].kind, prepared.args[i].shape});
  TERNJIT_TRY(pk.kernel, pk.program.kernel(fname, pk.inputs));
  for (const TensorView& spec : pk.kernel->outputs()) {
    TERNJIT_TRY(const std::size_t bytes, reserve(spec.kind, spec.shape, "the output of shape"));
    pk.out_bytes.emplace_back(bytes);
  }
  for (std::size_t i = 0; i < pk.out_bytes.size(); ++i)
    pk.outputs.push_back(
        TensorView{pk.out_bytes[i].data(), pk.kernel->outputs()[i].kind, pk.kernel->outputs()[i].shape});
  for (const TensorView& v : pk.inputs) pk.buffers.push_back(v.data);
  for (const TensorView& v : pk.outputs) pk.buffers.push_back(v.data);
  return pk;
}

Result<std::vector<ir::HostTensor>> kernel_outputs(const PreparedKernel& pk) {
  std::vector<ir::HostTensor> out;
  for (std::size_t i = 0; i < pk.outputs.size(); ++i) {
    TERNJIT_TRY(ir::HostTensor t, ir::HostTensor::from_bytes(pk.outputs[i].kind, pk.outputs[i].shape, pk.out_bytes[i]));
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::vector<ir::HostTensor>> run_on_engine(const EngineOptions& options, const ir::Module& m,
                                                  const std::string& fname, const formats::RunInputs& prepared) {
  TERNJIT_TRY(PreparedKernel pk, prepare_kernel(options, m, fname, prepared));
  TERNJIT_TRY_VOID(pk.kernel->run(pk.inputs, pk.outputs));
  return kernel_outputs(pk);
}

int report(const Error& e) {
  std::fputs(render(e).c_str(), stderr);
  return 1;
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::IoError, "cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<ir::Module> load_module(const std::string& path) {
  TERNJIT_TRY(auto text, read_text_file(path));
  if (ends_with(path, ".tir")) return ir::parse_module(text, path);
  return dsl::compile_tri(text, path);
}

int cmd_check(const std::string& file) {
  auto m = load_module(file);
  if (!m.ok()) return report(m.error());
  std::printf("%s: ok (%zu functions, %zu parameters)\n", file.c_str(), m->functions().size(),
              m->params().size());
  return 0;
}

int cmd_ir(const std::string& file) {
  auto m = load_module(file);
  if (!m.ok()) return report(m.error());
  std::fputs(ir::print_module(*m).c_str(), stdout);
  return 0;
}

int cmd_opt(const OptOptions& o) {
  if (o.passes_given && !o.level.empty())
    return report(make_error(ErrorCode::InvalidArgument, "give either --passes or -O, not both"));
  std::vector<const passes::PassInfo*> pipeline;
  if (o.passes_given) {
    auto list = passes::parse_pass_list(o.passes);
    if (!list.ok()) return report(list.error());
    pipeline = std::move(list.value());
  } else {
    auto level = passes::parse_opt_level(o.level.empty() ? "O2" : o.level);
    if (!level)
      return report(make_error(ErrorCode::InvalidArgument,
                               "unknown optimization level '" + o.level +
                                   "' (expected O0..O3, 0..3, none, conservative, balanced or aggressive)"));
    pipeline = passes::default_pipeline(*level);
  }
  for (const std::string& name : o.print_after)
    if (!passes::find_pass(name))
      return report(make_error(ErrorCode::NotFound, "--print-after: unknown pass '" + name + "'"));

  auto m = load_module(o.file);
  if (!m.ok()) return report(m.error());
  if (!o.shapes.empty()) {
    auto shapes = shape_flags(*m, o.shapes);
    if (!shapes.ok()) return report(shapes.error());
    auto bound = passes::specialize_shapes(*m, shapes->values);
    if (!bound.ok()) return report(bound.error());
  }

  passes::PipelineOptions popts;
  popts.print_after_all = o.print_after_all;
  popts.print_after = o.print_after;
  popts.time_passes = o.time_passes;
  auto result = passes::run_pipeline(*m, pipeline, popts);
  if (!result.ok()) return report(result.error());
  std::fputs(result->log.c_str(), stderr);
  std::fputs(ir::print_module(*m).c_str(), stdout);
  return 0;
}

int cmd_run(const RunOptions& o, const targets::TargetRegistry& registry) {
  auto options = command_engine_options(o.target, registry);
  if (!options.ok()) return report(options.error());
  auto m = load_module(o.file);
  if (!m.ok()) return report(m.error());
  auto picked = pick_function(*m, o.file, o.function);
  if (!picked.ok()) return report(picked.error());
  const std::string& fname = *picked;
  const ir::Function* f = m->find_function(fname);
  auto shapes = shape_flags(*m, o.shapes);
  if (!shapes.ok()) return report(shapes.error());
  std::optional<formats::WeightFile> weights;
  std::optional<formats::StFile> inputs;
  if (!o.weights.empty()) {
    auto names = formats::NameMap::parse(o.name_map);
    if (!names.ok()) return report(names.error());
    auto w = formats::WeightFile::open(o.weights, *names);
    if (!w.ok()) return report(w.error());
    weights = std::move(w.value());
  } else if (!o.name_map.empty() || o.random_missing) {
    return report(make_error(ErrorCode::InvalidArgument, "--map and --random-missing need --weights"));
  }
  if (!o.input.empty()) {
    auto in = formats::read_safetensors(o.input);
    if (!in.ok()) return report(in.error());
    inputs = std::move(in.value());
  } else if (o.random_missing_inputs) {
    return report(make_error(ErrorCode::InvalidArgument, "--random-missing-inputs needs --input"));
  }
  formats::PrepareOptions popts;
  popts.seed = o.seed;
  // With an inputs file a missing argument is an error unless random ones are asked for.
  popts.random_missing_inputs = o.random_missing_inputs.has_value();
  popts.inputs_seed = o.random_missing_inputs;
  popts.inputs_name = o.input;
  // With a weights file a missing parameter is an error unless random ones are asked for;
  // without one, everything is drawn from --seed (the demo path).
  if (weights) {
    popts.random_missing_params = o.random_missing.has_value();
    popts.params_seed = o.random_missing;
  }
  auto prepared = formats::prepare_run(*m, *f, inputs ? &*inputs : nullptr, weights ? &*weights : nullptr,
                                  shapes.value(), popts);
  if (!prepared.ok()) return report(prepared.error());
  auto out = run_on_engine(*options, *m, fname, *prepared);
  if (!out.ok()) return report(out.error());
  if (o.check) {
    EngineOptions reference = *options;
    reference.target = "reference";
    auto expected = run_on_engine(reference, *m, fname, *prepared);
    if (!expected.ok()) return report(expected.error());
    auto checked = Engine::create(*options);  // what its target may add (spirv: flushed subnormals)
    if (!checked.ok()) return report(checked.error());
    if (!check_outputs(*expected, *out, abs_error_floor(*checked))) return 1;
  }

  if (o.output.empty()) {
    for (std::size_t i = 0; i < out->size(); ++i)
      print_tensor(out->size() == 1 ? "output" : "output" + std::to_string(i), (*out)[i]);
    return 0;
  }
  formats::StFile file;
  for (std::size_t i = 0; i < out->size(); ++i)
    file.tensors.push_back(to_st(out->size() == 1 ? "output" : "output" + std::to_string(i), (*out)[i]));
  file.metadata["ternjit.layer"] = fname;
  auto w = formats::write_safetensors(o.output, file);
  if (!w.ok()) return report(w.error());
  std::printf("wrote %zu tensor%s to %s\n", out->size(), out->size() == 1 ? "" : "s", o.output.c_str());
  return 0;
}

Result<std::string> pick_function(const ir::Module& m, const std::string& file, const FunctionFlags& flags) {
  std::string name = flags.function;
  if (!flags.layer.empty()) {
    const std::string prefix = flags.layer + ".";
    if (name.empty()) name = "forward";
    if (name.rfind(prefix, 0) != 0) name = prefix + name;
  }
  if (name.empty() && m.functions().size() == 1) name = m.functions().front().name();
  if (!name.empty() && m.find_function(name)) return name;
  std::string have;
  for (const ir::Function& f : m.functions()) have += (have.empty() ? "" : ", ") + f.name();
  if (name.empty())
    return make_error(ErrorCode::InvalidArgument,
                      file + " has several functions: choose one with --layer or --function (it has: " + have + ")");
  return make_error(ErrorCode::NotFound, "no function '" + name + "' in " + file + " (it has: " + have + ")");
}

Result<ir::ShapeBindings> resolve_shapes(const ir::Module& m, const std::map<std::string, std::int64_t>& given) {
  // Every name a key may take: "L.S" and "S" for each declaration's symbol S in layer L.
  std::set<std::string> known;
  const auto add = [&](std::string_view layer, const std::string& symbol) {
    known.insert(symbol);
    known.insert(std::string(layer) + "." + symbol);
    if (const auto dot = symbol.find('.'); dot != std::string::npos) known.insert(symbol.substr(dot + 1));
  };
  for (const ir::ParamDecl& p : m.params())
    for (const std::string& s : p.symbols) add(ir::layer_of(p.name), s);
  for (const ir::Function& f : m.functions())
    for (const std::string& s : f.symbols()) add(ir::layer_of(f.name()), s);
  for (const auto& [key, value] : given) {
    if (known.count(key)) continue;
    std::set<std::string> plain;  // the list shown: function symbols as spelled and "L.S" of parameters
    for (const ir::Function& f : m.functions()) plain.insert(f.symbols().begin(), f.symbols().end());
    for (const ir::ParamDecl& p : m.params())
      for (const std::string& sym : p.symbols) plain.insert(std::string(ir::layer_of(p.name)) + "." + sym);
    std::string have;
    for (const std::string& n : plain) have += (have.empty() ? "" : ", ") + n;
    return make_error(ErrorCode::InvalidArgument, "--shape " + key + "=" + std::to_string(value) +
                                                      ": no symbol '" + key + "' in the module (it has: " +
                                                      (have.empty() ? "none" : have) + ")");
  }
  ir::ShapeBindings out{given};
  for (const ir::Function& f : m.functions())
    for (const std::string& s : f.symbols()) {
      const auto dot = s.find('.');
      if (dot == std::string::npos || given.count(s)) continue;
      if (auto it = given.find(s.substr(dot + 1)); it != given.end()) out.values.emplace(s, it->second);
    }
  return out;
}

Result<ir::ShapeBindings> shape_flags(const ir::Module& m, const std::vector<std::string>& flags) {
  std::string joined;
  for (const std::string& f : flags) joined += (joined.empty() ? "" : ",") + f;
  TERNJIT_TRY(ir::ShapeBindings parsed, ir::parse_shape_list(joined));
  return resolve_shapes(m, parsed.values);
}

std::string shape_text(const std::map<std::string, std::int64_t>& shapes) {
  std::string t;
  for (const auto& [k, v] : shapes) t += (t.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return t.empty() ? "-" : t;
}

std::string version_text() {
  std::string s = "ternjit " + std::string(cache::ternjit_version()) + "\nbuild " + cache::build_id() + "\ntargets:";
  const targets::TargetRegistry registry = targets::TargetRegistry::create();
  for (const auto& t : registry.all()) {
    auto ok = t->available();
    s += "\n  " + std::string(t->name()) + (ok.ok() ? " (available)" : " (unavailable: " + ok.error().message + ")");
  }
  return s;
}

}  // namespace ternjit::cli

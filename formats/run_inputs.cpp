// SPDX-License-Identifier: Apache-2.0
// run_inputs.cpp - prepare_run: arguments and parameters of a run from safetensors files, shapes and seeds.
#include "formats/run_inputs.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "formats/weight_store.h"
#include "ir/builder.h"

namespace ternjit::formats {

using ir::BlockId;
using ir::CallAttrs;
using ir::Dim;
using ir::Function;
using ir::HostTensor;
using ir::InstData;
using ir::InstId;
using ir::Module;
using ir::Op;
using ir::ParamAttrs;
using ir::ParamDecl;
using ir::ShapeBindings;
using ir::Type;
using ir::ValueId;
using ir::derive_seed;
using ir::index_str;
using ir::layer_of;
using ir::parse_dims;
using ir::type_str;

namespace {

Error fail(std::string msg) { return make_error(ErrorCode::InvalidInput, std::move(msg)); }

// Binds the symbols of `type` (names from `symbols`, layer `layer`) to the extents of a
// concrete shape read from a file; `what` names the tensor in errors.
Result<void> bind_shape(const Type& type, std::span<const std::string> symbols, std::string_view layer,
                        const std::vector<std::int64_t>& shape, const std::string& what,
                        ShapeBindings& b) {
  if (shape.size() != type.rank())
    return fail(what + " has shape " + index_str(shape) + " but is declared " + type_str(type, symbols));
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const Dim& dim = type.shape[d];
    if (dim.is_static()) {
      if (dim.extent != shape[d])
        return fail(what + " has shape " + index_str(shape) + " but is declared " + type_str(type, symbols));
      continue;
    }
    const std::string& sym = symbols[dim.sym.index];
    if (auto have = b.lookup(layer, sym)) {
      if (*have != shape[d])
        return fail(what + " has shape " + index_str(shape) + ": symbol '" + sym + "' is " +
                    std::to_string(shape[d]) + " there but " + std::to_string(*have) + " elsewhere");
    } else {
      b.values[std::string(layer) + "." + sym] = shape[d];
    }
  }
  return success();
}

// The concrete shape of a declared type, or an error naming the unbound symbol.
Result<std::vector<std::int64_t>> concrete(const Type& type, std::span<const std::string> symbols,
                                           std::string_view layer, const ShapeBindings& b, const std::string& what,
                                           std::int64_t max_elements) {
  std::vector<std::int64_t> out;
  for (const Dim& d : type.shape) {
    if (d.is_static()) { out.push_back(d.extent); continue; }
    auto v = b.lookup(layer, symbols[d.sym.index]);
    if (!v)
      return fail("symbol '" + symbols[d.sym.index] + "' of " + what + " is not bound: pass --shape " +
                  symbols[d.sym.index] + "=<n> or provide the tensor");
    out.push_back(*v);
  }
  const auto n = ir::checked_numel(out);
  if (!n || *n > max_elements)
    return fail(what + " of shape " + index_str(out) + " has more than " + std::to_string(max_elements) + " elements");
  return out;
}

// Converts an input tensor to the stored form of its declared kind.
Result<ir::StoredTensor> convert_input(const StFile& inputs, const StTensor& t, ElemKind kind,
                                       const std::vector<std::int64_t>& logical, const std::string& what) {
  // Only weights are ternarized from float masters at load; an input must be ternary already.
  if (kind == ElemKind::T2 && is_float(t.kind))
    return fail(what + " is ternary: it needs I8 values in {-1, 0, 1} or packed U8 bytes, got " + t.dtype);
  WeightFile file = WeightFile::from_safetensors(StFile{{t}, inputs.metadata}, "the inputs");
  const WeightOffer* offer = file.find(t.name).value();
  return file.load(*offer, kind, logical, what);
}

// Names of the parameters `f` reads, directly or through the functions it calls.
// The tensor names of an inputs file, for "did you mean".
std::vector<std::string> input_names(const StFile& inputs) {
  std::vector<std::string> names;
  names.reserve(inputs.tensors.size());
  for (const StTensor& t : inputs.tensors) names.push_back(t.name);
  return names;
}

std::set<std::string> params_used(const Module& m, const Function& f) {
  std::set<std::string> used;
  std::set<std::string> seen{f.name()};
  std::vector<const Function*> work{&f};
  while (!work.empty()) {
    const Function* g = work.back();
    work.pop_back();
    for (BlockId b : g->blocks())
      for (InstId i : g->insts(b)) {
        const InstData& inst = g->inst(i);
        if (inst.op == Op::Param) used.insert(std::get<ParamAttrs>(inst.attrs).name);
        if (inst.op == Op::Call) {
          const std::string& callee = std::get<CallAttrs>(inst.attrs).callee;
          if (const Function* c = m.find_function(callee); c && seen.insert(callee).second) work.push_back(c);
        }
      }
  }
  return used;
}

// The bytes a run will allocate, summed over every tensor before any is allocated
// (PrepareOptions::max_bytes): charging one tensor at a time let 4096 random parameters
// of 64 MB each fill 4 GiB and take ~50 s before the cap said no.
struct BytePlan {
  // A sum of sizes; nullopt once one of them or the sum passes 2^64.
  using Bytes = std::optional<std::uint64_t>;
  Bytes inputs = 0, params = 0, outputs = 0;
  Bytes largest = 0;         // the largest tensor's bytes
  std::string largest_what;  // ... and its name and shape
  void add(Bytes& part, Bytes bytes, const std::string& what, const std::vector<std::int64_t>& shape) {
    part = sum(part, bytes);
    if (largest && (!bytes || *bytes > *largest)) {
      largest = bytes;
      largest_what = what + " of shape " + index_str(shape);
    }
  }
  static Bytes sum(Bytes a, Bytes b) {
    std::uint64_t t = 0;
    if (!a || !b || __builtin_add_overflow(*a, *b, &t)) return std::nullopt;
    return t;
  }
  [[nodiscard]] Bytes total() const { return sum(sum(inputs, params), outputs); }
};

// The error of a plan over the cap: the cap, the total and its parts, the largest tensor.
Result<void> check_plan(const BytePlan& plan, std::uint64_t cap) {
  const BytePlan::Bytes total = plan.total();
  if (total && *total <= cap) return success();
  auto bytes = [](BytePlan::Bytes b) { return b ? std::to_string(*b) + " bytes" : std::string("more than 2^64 bytes"); };
  return fail("the run's tensors need " + bytes(total) + " together (inputs " + bytes(plan.inputs) +
              ", random parameters " + bytes(plan.params) + ", outputs " + bytes(plan.outputs) + "; the largest, " +
              plan.largest_what + ", " + bytes(plan.largest) + "), over the run's limit of " + bytes(cap) +
              "; nothing was allocated");
}

}  // namespace

std::optional<std::uint64_t> tensor_bytes(ElemKind kind, std::int64_t numel, int bytes_per_element) {
  if (numel < 0) return std::nullopt;
  const auto n = static_cast<std::uint64_t>(numel);
  if (bytes_per_element == 0 && kind == ElemKind::T2) return n / 4 + (n % 4 != 0);
  const auto size = static_cast<std::uint64_t>(bytes_per_element != 0 ? bytes_per_element : std::max(elem_bits(kind) / 8, 1));
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(n, size, &out)) return std::nullopt;
  return out;
}

Result<RunInputs> prepare_run(const Module& m, const Function& f, const StFile* inputs,
                              const WeightFile* weights, const ShapeBindings& shapes,
                              const PrepareOptions& options) {
  RunInputs run;
  run.shapes = shapes;
  const std::string_view layer = layer_of(f.name());

  // A parameter neither the file nor a seed provides, named with the file's closest names.
  auto missing = [&](const ParamDecl& p) -> Error {
    const std::string what = "parameter '" + p.name + "'";
    if (!weights) return fail(what + " is missing: no weights were given");
    return fail(what + " has no tensor in " + weights->display_name() + ir::did_you_mean(p.name, weights->offer_names()) +
                "; random values only when asked (--random-missing SEED)");
  };

  // Pass 1: bind symbols from the shapes of every tensor the files provide.
  auto find_param = [&](const ParamDecl& p) -> Result<const WeightOffer*> {
    if (!weights) return static_cast<const WeightOffer*>(nullptr);
    return find_param_offer(*weights, p.name, layer_of(p.name) == layer);
  };
  for (ValueId a : f.args()) {
    const std::string& name = f.value(a).name;
    const StTensor* t = inputs ? inputs->find(name) : nullptr;
    // An inputs file is as strict as a weights file: what it lacks is random only when asked.
    if (!t && inputs && !options.random_missing_inputs)
      return fail("input '" + name + "' has no tensor in " + options.inputs_name +
                  ir::did_you_mean(name, input_names(*inputs)) +
                  "; random values only when asked (--random-missing-inputs SEED)");
    if (!t) continue;
    std::vector<std::int64_t> shape = t->shape;
    TERNJIT_TRY_VOID(bind_shape(f.type_of(a), f.symbols(), layer, shape, "input '" + name + "'", run.shapes));
  }
  const std::set<std::string> used = params_used(m, f);
  for (const ParamDecl& p : m.params()) {
    if (!used.count(p.name)) continue;
    const std::string what = "parameter '" + p.name + "'";
    TERNJIT_TRY(const WeightOffer* offer, find_param(p));
    if (!offer && !options.random_missing_params) return missing(p);
    if (!offer) continue;
    TERNJIT_TRY(auto shape, weights->shape_for(*offer, p.type, what));
    // A packed tensor without a "<tensor>.shape" entry takes its shape from the declaration.
    if (shape) TERNJIT_TRY_VOID(bind_shape(p.type, p.symbols, layer_of(p.name), *shape, what, run.shapes));
  }

  // Pass 2: the shape and bytes of every tensor the run allocates, all charged to the
  // cap before anything is allocated (overflow-checked): arguments as doubles, random
  // parameters at their stored size, results as doubles (ternjit run holds them so).
  auto numel_of = [](const std::vector<std::int64_t>& shape) { return *ir::checked_numel(shape); };
  BytePlan plan;
  std::vector<std::vector<std::int64_t>> arg_shapes;
  for (ValueId a : f.args()) {
    const std::string what = "input '" + f.value(a).name + "'";
    TERNJIT_TRY(auto shape, concrete(f.type_of(a), f.symbols(), layer, run.shapes, what, options.max_elements));
    plan.add(plan.inputs, tensor_bytes(f.type_of(a).elem, numel_of(shape), sizeof(double)), what, shape);
    arg_shapes.push_back(std::move(shape));
  }
  std::map<std::string, std::vector<std::int64_t>> param_shapes;
  for (const ParamDecl& p : m.params()) {
    if (!used.count(p.name)) continue;
    const std::string what = "parameter '" + p.name + "'";
    TERNJIT_TRY(const WeightOffer* offer, find_param(p));
    TERNJIT_TRY(auto shape, concrete(p.type, p.symbols, layer_of(p.name), run.shapes, what, options.max_elements));
    if (!offer && !options.random_missing_params) return missing(p);
    if (!offer) plan.add(plan.params, tensor_bytes(p.type.elem, numel_of(shape)), what, shape);
    param_shapes.emplace(p.name, std::move(shape));
  }
  for (std::size_t r = 0; r < f.result_types().size(); ++r) {
    // A result whose dims are not all bound here is the compiler's to report.
    const std::string what = f.result_types().size() == 1 ? "the output" : "output " + std::to_string(r);
    auto shape = concrete(f.result_types()[r], f.symbols(), layer, run.shapes, what, options.max_elements);
    if (shape.ok()) plan.add(plan.outputs, tensor_bytes(f.result_types()[r].elem, numel_of(*shape), sizeof(double)), what, *shape);
  }
  TERNJIT_TRY_VOID(check_plan(plan, options.max_bytes));

  // Pass 3: materialize every argument and parameter.
  std::uint64_t salt = 0;
  for (std::size_t i = 0; i < f.args().size(); ++i) {
    const ValueId a = f.args()[i];
    const std::string& name = f.value(a).name;
    const std::string what = "input '" + name + "'";
    const StTensor* t = inputs ? inputs->find(name) : nullptr;
    const std::vector<std::int64_t>& shape = arg_shapes[i];
    if (t) {
      TERNJIT_TRY(auto stored, convert_input(*inputs, *t, f.type_of(a).elem, shape, what));
      run.args.push_back(stored.to_host());
    } else {
      const std::uint64_t seed = inputs ? options.inputs_seed.value_or(options.seed) : options.seed;
      run.args.push_back(HostTensor::random(f.type_of(a).elem, shape, derive_seed(seed, salt)));
    }
    ++salt;
  }
  salt = 1000;
  std::set<std::string> bound, ternary;  // offers bound (to ternary parameters)
  for (const ParamDecl& p : m.params()) {
    if (!used.count(p.name)) continue;
    const std::string what = "parameter '" + p.name + "'";
    TERNJIT_TRY(const WeightOffer* offer, find_param(p));
    const std::vector<std::int64_t>& shape = param_shapes.at(p.name);
    if (offer) {
      TERNJIT_TRY(auto stored, weights->load(*offer, p.type.elem, shape, what));
      run.params.values.insert_or_assign(p.name, std::move(stored));
      bound.insert(offer->name);
      if (p.type.elem == ElemKind::T2) ternary.insert(offer->name);
    } else {
      run.params.values.insert_or_assign(
          p.name, ir::StoredTensor::random(p.type.elem, shape, ir::derive_seed(options.params_seed.value_or(options.seed), salt)));
    }
    ++salt;
  }
  if (weights) TERNJIT_TRY_VOID(weights->check_scales(ternary, bound));
  return run;
}

}  // namespace ternjit::formats

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

// Converts a file tensor to the stored form of a declared kind; `meta` is the file's
// metadata and `logical` the tensor's logical shape (packed data's byte count is not it).
Result<ir::StoredTensor> convert(const StTensor& t, ElemKind kind, const std::vector<std::int64_t>& logical,
                                 const std::map<std::string, std::string>& meta, const std::string& what) {
  WeightFormat format = WeightFormat::Plain;
  ElemKind given = t.kind;
  if (kind == ElemKind::T2) {
    if (auto fmt_it = meta.find(t.name + ".format"); fmt_it != meta.end()) {
      auto fmt = parse_weight_format(fmt_it->second);
      if (!fmt) return fail(what + ": unknown ternary format '" + fmt_it->second + "' in metadata");
      format = *fmt;
    }
    if (format != WeightFormat::Plain && t.kind != ElemKind::U8)
      return fail(what + ": packed ternary data must be U8, got " + t.dtype);
    if (format == WeightFormat::Plain && t.kind != ElemKind::I8)
      return fail(what + " is ternary: it needs I8 values in {-1, 0, 1} or U8 bytes with a '" + t.name +
                  ".format' metadata entry, got " + t.dtype);
  } else if (is_float(kind) ? !is_float(t.kind) : t.kind != kind) {
    return fail(what + " is " + std::string(elem_name(kind)) + " but the file holds " + t.dtype);
  }
  auto stored = store_weight(kind, given, format, format == WeightFormat::Plain ? t.shape : logical, t.bytes);
  if (!stored.ok()) return fail(what + ": " + stored.error().message);
  return std::move(stored.value());
}

// Names of the parameters `f` reads, directly or through the functions it calls.
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

// Charges `what`'s allocation of `bytes` (nullopt: overflowed) to `used`, or an error
// when it would pass the cap.
Result<void> charge(std::optional<std::uint64_t> bytes, std::uint64_t& used, std::uint64_t cap,
                    const std::string& what, const std::vector<std::int64_t>& shape) {
  if (!bytes || *bytes > cap - std::min(cap, used))
    return fail(what + " of shape " + index_str(shape) + " needs " +
                (bytes ? std::to_string(*bytes) + " bytes" : std::string("more than 2^64 bytes")) +
                (used != 0 ? ", which with the " + std::to_string(used) + " bytes of the tensors before it" : std::string(", which")) +
                " is over the run's limit of " + std::to_string(cap) + " bytes");
  used += *bytes;
  return success();
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
                              const StFile* weights, const ShapeBindings& shapes,
                              const PrepareOptions& options) {
  RunInputs run;
  run.shapes = shapes;
  const std::string_view layer = layer_of(f.name());

  // Pass 1: bind symbols from the shapes of every tensor the files provide.
  auto find_param = [&](const ParamDecl& p) -> const StTensor* {
    if (!weights) return nullptr;
    if (const StTensor* t = weights->find(p.name)) return t;
    if (layer_of(p.name) == layer) return weights->find(p.name.substr(layer.size() + 1));
    return nullptr;
  };
  for (ValueId a : f.args()) {
    const StTensor* t = inputs ? inputs->find(f.value(a).name) : nullptr;
    if (!t) continue;
    std::vector<std::int64_t> shape = t->shape;
    TERNJIT_TRY_VOID(bind_shape(f.type_of(a), f.symbols(), layer, shape,
                                "input '" + f.value(a).name + "'", run.shapes));
  }
  const std::set<std::string> used = params_used(m, f);
  for (const ParamDecl& p : m.params()) {
    const StTensor* t = find_param(p);
    if (!t || !used.count(p.name)) continue;
    bool packed = weights->metadata.count(t->name + ".format") != 0;
    if (packed) {
      // A packed tensor's shape is its byte count; the logical shape may be in metadata.
      auto it = weights->metadata.find(t->name + ".shape");
      if (it == weights->metadata.end()) continue;
      auto shape = parse_dims(it->second);
      if (!shape) return fail("parameter '" + p.name + "': bad '" + t->name + ".shape' metadata '" + it->second + "'");
      TERNJIT_TRY_VOID(bind_shape(p.type, p.symbols, layer_of(p.name), *shape, "parameter '" + p.name + "'", run.shapes));
    } else {
      TERNJIT_TRY_VOID(bind_shape(p.type, p.symbols, layer_of(p.name), t->shape, "parameter '" + p.name + "'", run.shapes));
    }
  }

  // Pass 2: materialize every argument and parameter.
  std::uint64_t allocated = 0;  // bytes so far (PrepareOptions::max_bytes)
  auto numel_of = [](const std::vector<std::int64_t>& shape) { return *ir::checked_numel(shape); };
  std::uint64_t salt = 0;
  for (ValueId a : f.args()) {
    const std::string& name = f.value(a).name;
    const std::string what = "input '" + name + "'";
    const StTensor* t = inputs ? inputs->find(name) : nullptr;
    TERNJIT_TRY(auto shape, concrete(f.type_of(a), f.symbols(), layer, run.shapes, what, options.max_elements));
    if (t || options.random_missing_inputs)
      TERNJIT_TRY_VOID(charge(tensor_bytes(f.type_of(a).elem, numel_of(shape), sizeof(double)), allocated,
                              options.max_bytes, what, shape));
    if (t) {
      TERNJIT_TRY(auto stored, convert(*t, f.type_of(a).elem, shape, inputs->metadata, what));
      run.args.push_back(stored.to_host());
    } else if (options.random_missing_inputs) {
      run.args.push_back(HostTensor::random(f.type_of(a).elem, shape, derive_seed(options.seed, salt)));
    } else {
      return fail(what + " is missing");
    }
    ++salt;
  }
  salt = 1000;
  for (const ParamDecl& p : m.params()) {
    if (!used.count(p.name)) continue;
    const std::string what = "parameter '" + p.name + "'";
    const StTensor* t = find_param(p);
    TERNJIT_TRY(auto shape, concrete(p.type, p.symbols, layer_of(p.name), run.shapes, what, options.max_elements));
    if (t) {
      TERNJIT_TRY(auto stored, convert(*t, p.type.elem, shape, weights->metadata, what));
      run.params.values.insert_or_assign(p.name, std::move(stored));
    } else if (options.random_missing_params) {
      TERNJIT_TRY_VOID(charge(tensor_bytes(p.type.elem, numel_of(shape)), allocated, options.max_bytes, what, shape));
      run.params.values.insert_or_assign(
          p.name, ir::StoredTensor::random(p.type.elem, shape, ir::derive_seed(options.seed, salt)));
    } else {
      return fail(what + " is missing from the weights");
    }
    ++salt;
  }
  return run;
}

}  // namespace ternjit::formats

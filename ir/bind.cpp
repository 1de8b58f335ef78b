// SPDX-License-Identifier: Apache-2.0
// bind.cpp - arguments and parameters of a run from safetensors files, shapes and seeds.
#include "ir/bind.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include "ir/builder.h"
#include "ir/ternary.h"

namespace ternjit::ir {

namespace {

Error fail(std::string msg) { return make_error(ErrorCode::InvalidInput, std::move(msg)); }

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Binds the symbols of `type` (names from `symbols`, layer `layer`) to the extents of a
// concrete shape read from a file; `what` names the tensor in errors.
Result<void> bind_shape(const Type& type, std::span<const std::string> symbols, std::string_view layer,
                        const std::vector<std::int64_t>& shape, const std::string& what,
                        ShapeBindings& b) {
  if (shape.size() != type.rank())
    return fail(what + " has shape " + shape_str(shape) + " but is declared " + type_str(type, symbols));
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const Dim& dim = type.shape[d];
    if (dim.is_static()) {
      if (dim.extent != shape[d])
        return fail(what + " has shape " + shape_str(shape) + " but is declared " + type_str(type, symbols));
      continue;
    }
    const std::string& sym = symbols[dim.sym.index];
    if (auto have = b.lookup(layer, sym)) {
      if (*have != shape[d])
        return fail(what + " has shape " + shape_str(shape) + ": symbol '" + sym + "' is " +
                    std::to_string(shape[d]) + " there but " + std::to_string(*have) + " elsewhere");
    } else {
      b.values[std::string(layer) + "." + sym] = shape[d];
    }
  }
  return success();
}

// The concrete shape of a declared type, or an error naming the unbound symbol.
Result<std::vector<std::int64_t>> concrete(const Type& type, std::span<const std::string> symbols,
                                           std::string_view layer, const ShapeBindings& b,
                                           const std::string& what) {
  std::vector<std::int64_t> out;
  for (const Dim& d : type.shape) {
    if (d.is_static()) { out.push_back(d.extent); continue; }
    auto v = b.lookup(layer, symbols[d.sym.index]);
    if (!v)
      return fail("symbol '" + symbols[d.sym.index] + "' of " + what + " is not bound: pass --shape " +
                  symbols[d.sym.index] + "=<n> or provide the tensor");
    out.push_back(*v);
  }
  return out;
}

// Converts a file tensor to a declared kind; `meta` is the file's metadata.
Result<HostTensor> convert(const StTensor& t, ElemKind kind, const std::vector<std::int64_t>& logical,
                           const std::map<std::string, std::string>& meta, const std::string& what) {
  if (kind == ElemKind::T2) {
    auto fmt_it = meta.find(t.name + ".format");
    if (fmt_it != meta.end()) {
      auto fmt = parse_ternary_format(fmt_it->second);
      if (!fmt) return fail(what + ": unknown ternary format '" + fmt_it->second + "' in metadata");
      if (t.kind != ElemKind::U8) return fail(what + ": packed ternary data must be U8, got " + t.dtype);
      std::size_t n = 1;
      for (std::int64_t d : logical) n *= static_cast<std::size_t>(d);
      auto values = unpack_ternary(*fmt, t.bytes, n);
      if (!values.ok()) return fail(what + ": " + values.error().message);
      HostTensor h = HostTensor::zeros(ElemKind::T2, logical);
      for (std::size_t i = 0; i < n; ++i) h.data[i] = values.value()[i];
      return h;
    }
    if (t.kind != ElemKind::I8)
      return fail(what + " is ternary: it needs I8 values in {-1, 0, 1} or U8 bytes with a '" + t.name +
                  ".format' metadata entry, got " + t.dtype);
    auto h = HostTensor::from_bytes(ElemKind::T2, t.shape, t.bytes);
    if (!h.ok()) return fail(what + ": " + h.error().message);
    return h;
  }
  if (is_float(kind)) {
    if (!is_float(t.kind)) return fail(what + " is " + std::string(elem_name(kind)) + " but the file holds " + t.dtype);
    auto f = to_f32(t);
    if (!f.ok()) return fail(what + ": " + f.error().message);
    HostTensor h = HostTensor::zeros(kind, t.shape);
    for (std::size_t i = 0; i < f.value().size(); ++i) h.data[i] = round_to_kind(f.value()[i], kind);
    return h;
  }
  if (t.kind != kind)
    return fail(what + " is " + std::string(elem_name(kind)) + " but the file holds " + t.dtype);
  auto h = HostTensor::from_bytes(kind, t.shape, t.bytes);
  if (!h.ok()) return fail(what + ": " + h.error().message);
  return h;
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

}  // namespace

std::optional<std::int64_t> ShapeBindings::lookup(std::string_view layer, std::string_view symbol) const {
  auto it = values.find(std::string(layer) + "." + std::string(symbol));
  if (it != values.end()) return it->second;
  it = values.find(std::string(symbol));
  if (it != values.end()) return it->second;
  return std::nullopt;
}

std::optional<std::vector<std::int64_t>> parse_dims(std::string_view text) {
  std::vector<std::int64_t> out;
  if (text.empty()) return out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = std::min(text.find(',', pos), text.size());
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(text.data() + pos, text.data() + end, v);
    if (ec != std::errc() || p != text.data() + end || v < 0) return std::nullopt;
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t salt) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (salt + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string_view layer_of(std::string_view name) {
  auto dot = name.find('.');
  return dot == std::string_view::npos ? std::string_view{} : name.substr(0, dot);
}

Result<ShapeBindings> parse_shape_list(std::string_view text) {
  ShapeBindings b;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(pos, end - pos);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return fail("bad shape binding '" + std::string(item) + "': expected NAME=EXTENT");
    std::string_view num = item.substr(eq + 1);
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
    if (ec != std::errc() || p != num.data() + num.size() || v <= 0)
      return fail("bad shape binding '" + std::string(item) + "': extent must be a positive integer");
    if (!b.values.emplace(std::string(item.substr(0, eq)), v).second)
      return fail("symbol '" + std::string(item.substr(0, eq)) + "' is bound twice");
    pos = end + 1;
  }
  return b;
}

Result<RunInputs> prepare_run(const Module& m, const Function& f, const StFile* inputs,
                              const StFile* weights, const ShapeBindings& shapes,
                              const PrepareOptions& options) {
  RunInputs run;
  run.shapes = shapes;
  const std::string_view layer = layer_of(f.name());
  const std::map<std::string, std::string> no_meta;

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
  std::uint64_t salt = 0;
  for (ValueId a : f.args()) {
    const std::string& name = f.value(a).name;
    const std::string what = "input '" + name + "'";
    const StTensor* t = inputs ? inputs->find(name) : nullptr;
    TERNJIT_TRY(auto shape, concrete(f.type_of(a), f.symbols(), layer, run.shapes, what));
    if (t) {
      TERNJIT_TRY(auto h, convert(*t, f.type_of(a).elem, shape, inputs->metadata, what));
      run.args.push_back(std::move(h));
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
    TERNJIT_TRY(auto shape, concrete(p.type, p.symbols, layer_of(p.name), run.shapes, what));
    if (t) {
      TERNJIT_TRY(auto h, convert(*t, p.type.elem, shape, weights->metadata, what));
      run.params.values.emplace(p.name, std::move(h));
    } else if (options.random_missing_params) {
      run.params.values.emplace(p.name, HostTensor::random(p.type.elem, shape, derive_seed(options.seed, salt)));
    } else {
      return fail(what + " is missing from the weights");
    }
    ++salt;
  }
  return run;
}

}  // namespace ternjit::ir

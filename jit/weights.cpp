// SPDX-License-Identifier: Apache-2.0
// weights.cpp - binding parameter values: caller buffers, safetensors files and seeds.
#include "jit/weights.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "ir/bind.h"
#include "ir/builder.h"
#include "ir/ternary.h"

namespace ternjit::jit {

namespace {

Error fail(ErrorCode code, std::string msg) { return make_error(code, std::move(msg)); }

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::string decl_str(const ir::ParamDecl& d) { return ir::type_str(d.type, d.symbols); }

std::optional<ir::TernaryFormat> packed_format(WeightFormat f) {
  switch (f) {
    case WeightFormat::Plain: return std::nullopt;
    case WeightFormat::Tern2: return ir::TernaryFormat::Tern2;
    case WeightFormat::Tern2SM: return ir::TernaryFormat::Tern2SM;
    case WeightFormat::Tern16: return ir::TernaryFormat::Tern16;
    case WeightFormat::Bitplane: return ir::TernaryFormat::Bitplane;
  }
  return std::nullopt;
}

// The element count of a caller shape, or an error (negative extent, overflow).
Result<std::size_t> count_of(const std::vector<std::int64_t>& shape, const std::string& what) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) return fail(ErrorCode::InvalidArgument, what + ": shape " + shape_str(shape) + " has a negative extent");
    if (d != 0 && n > (std::uint64_t{1} << 40) / static_cast<std::uint64_t>(d))
      return fail(ErrorCode::InvalidArgument, what + ": shape " + shape_str(shape) + " is too large");
    n *= static_cast<std::uint64_t>(d);
  }
  return static_cast<std::size_t>(n);
}

// Converts a caller buffer (`v.shape` logical) into a HostTensor of decl's kind.
Result<ir::HostTensor> from_view(const ir::ParamDecl& decl, const TensorView& v, WeightFormat format,
                                 const std::string& what) {
  TERNJIT_TRY(std::size_t n, count_of(v.shape, what));
  const ElemKind want = decl.type.elem;
  if (auto fmt = packed_format(format)) {
    if (want != ElemKind::T2)
      return fail(ErrorCode::InvalidArgument, what + " is declared " + decl_str(decl) + ": packed format '" +
                                                  std::string(ir::format_name(*fmt)) + "' is only for ternary parameters");
    if (v.kind != ElemKind::U8)
      return fail(ErrorCode::InvalidArgument, what + ": packed '" + std::string(ir::format_name(*fmt)) +
                                                  "' data must be u8 bytes, got " + std::string(elem_name(v.kind)));
    const std::size_t bytes = ir::packed_size(*fmt, n);
    if (bytes != 0 && v.data == nullptr) return fail(ErrorCode::InvalidArgument, what + ": data is null");
    auto values = ir::unpack_ternary(*fmt, {static_cast<const std::uint8_t*>(v.data), bytes}, n);
    if (!values.ok()) return fail(ErrorCode::InvalidInput, what + ": " + values.error().message);
    ir::HostTensor t = ir::HostTensor::zeros(ElemKind::T2, v.shape);
    for (std::size_t i = 0; i < n; ++i) t.data[i] = values.value()[i];
    return t;
  }
  // Plain: which buffer kinds the declared kind takes.
  bool accepted = v.kind == want || (is_float(want) && is_float(v.kind)) ||
                  (want == ElemKind::T2 && v.kind == ElemKind::I8);
  if (!accepted)
    return fail(ErrorCode::InvalidArgument, what + " is declared " + decl_str(decl) + " but the buffer is " +
                                                std::string(elem_name(v.kind)) +
                                                (want == ElemKind::T2 ? " (ternary takes t2 or i8 values in {-1, 0, 1}, "
                                                                        "or u8 bytes in a packed format)"
                                                                      : ""));
  const std::size_t bytes = n * static_cast<std::size_t>(elem_bits(v.kind) / 8);
  if (bytes != 0 && v.data == nullptr) return fail(ErrorCode::InvalidArgument, what + ": data is null");
  const ElemKind read_as = want == ElemKind::T2 ? ElemKind::T2 : v.kind;
  auto t = ir::HostTensor::from_bytes(read_as, v.shape, {static_cast<const std::uint8_t*>(v.data), bytes});
  if (!t.ok()) return fail(ErrorCode::InvalidInput, what + ": " + t.error().message);
  if (t->kind != want) {
    // A float buffer of another float kind: round each value to the declared kind.
    for (double& x : t->data) x = ir::round_to_kind(x, want);
    t->kind = want;
  }
  return std::move(t.value());
}

}  // namespace

std::string symbol_key(std::string_view layer, std::string_view sym) {
  if (sym.find('.') != std::string_view::npos || layer.empty()) return std::string(sym);
  return std::string(layer) + "." + std::string(sym);
}

Weights::SymbolMap Weights::symbols_except(const std::set<std::string>& skip) const {
  SymbolMap symbols;
  for (const ir::ParamDecl& d : module_->params()) {
    auto it = values_.values.find(d.name);
    if (it == values_.values.end() || skip.count(d.name)) continue;
    auto ok = fit_shape(d, it->second.shape, "parameter '" + d.name + "'", symbols);
    TERNJIT_CHECK(ok.ok(), "bound parameters disagree: " + (ok.ok() ? std::string() : ok.error().message));
  }
  return symbols;
}

Result<void> Weights::fit_shape(const ir::ParamDecl& decl, const std::vector<std::int64_t>& shape,
                                const std::string& what, SymbolMap& symbols) const {
  const auto mismatch = [&] {
    return fail(ErrorCode::InvalidInput,
                what + " has shape " + shape_str(shape) + " but is declared " + decl_str(decl));
  };
  if (shape.size() != decl.type.rank()) return mismatch();
  SymbolMap added;
  const std::string_view layer = ir::layer_of(decl.name);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const ir::Dim& dim = decl.type.shape[i];
    if (dim.is_static()) {
      if (dim.extent != shape[i]) return mismatch();
      continue;
    }
    const std::string& sym = decl.symbols[dim.sym.index];
    const std::string key = symbol_key(layer, sym);
    for (const SymbolMap* m : {&symbols, &added}) {
      auto it = m->find(key);
      if (it != m->end() && it->second.first != shape[i])
        return fail(ErrorCode::InvalidInput,
                    what + " has shape " + shape_str(shape) + " (declared " + decl_str(decl) + "): symbol '" + sym +
                        "' is " + std::to_string(shape[i]) + " there but " + std::to_string(it->second.first) +
                        (it->second.second == decl.name ? " in another dim" : " from parameter '" + it->second.second + "'"));
    }
    added.emplace(key, std::pair{shape[i], decl.name});
  }
  symbols.insert(added.begin(), added.end());
  return success();
}

Result<void> Weights::bind(std::string_view name, const TensorView& value, WeightFormat format) {
  const ir::ParamDecl* decl = module_->find_param(name);
  if (!decl) {
    std::string have;
    for (const ir::ParamDecl& d : module_->params()) have += (have.empty() ? "" : ", ") + d.name;
    return fail(ErrorCode::NotFound, "no parameter '" + std::string(name) + "' in the program (parameters: " +
                                         (have.empty() ? "none" : have) + ")");
  }
  const std::string what = "parameter '" + decl->name + "'";
  TERNJIT_TRY(ir::HostTensor t, from_view(*decl, value, format, what));
  SymbolMap symbols = symbols_except({decl->name});
  TERNJIT_TRY_VOID(fit_shape(*decl, t.shape, what, symbols));
  values_.values.insert_or_assign(decl->name, std::move(t));
  return success();
}

Result<void> Weights::bind_file(const ir::StFile& file, std::string_view display_name) {
  const std::string file_name(display_name);
  // Which tensor feeds which declaration: the full name, else a short name no other
  // declaration shares.
  std::map<std::string, int> short_count;
  for (const ir::ParamDecl& d : module_->params()) {
    std::string_view layer = ir::layer_of(d.name);
    if (!layer.empty()) ++short_count[d.name.substr(layer.size() + 1)];
  }
  struct Match {
    const ir::ParamDecl* decl;
    const ir::StTensor* tensor;
    std::optional<ir::TernaryFormat> format;
    std::optional<std::vector<std::int64_t>> logical;  // packed: from "<tensor>.shape"
  };
  std::vector<Match> matches;
  for (const ir::ParamDecl& d : module_->params()) {
    const ir::StTensor* t = file.find(d.name);
    std::string_view layer = ir::layer_of(d.name);
    if (!t && !layer.empty()) {
      std::string short_name = d.name.substr(layer.size() + 1);
      if (short_count[short_name] == 1) t = file.find(short_name);
    }
    if (!t) continue;
    Match m{&d, t, std::nullopt, std::nullopt};
    const std::string what = file_name + ": tensor '" + t->name + "' (parameter '" + d.name + "')";
    if (auto it = file.metadata.find(t->name + ".format"); it != file.metadata.end()) {
      m.format = ir::parse_ternary_format(it->second);
      if (!m.format) return fail(ErrorCode::InvalidInput, what + ": unknown ternary format '" + it->second + "' in metadata");
      if (auto s = file.metadata.find(t->name + ".shape"); s != file.metadata.end()) {
        m.logical = ir::parse_dims(s->second);
        if (!m.logical) return fail(ErrorCode::InvalidInput, what + ": bad '" + t->name + ".shape' metadata '" + s->second + "'");
      }
    }
    matches.push_back(std::move(m));
  }
  if (matches.empty() && !module_->params().empty()) {
    std::string have;
    for (const ir::StTensor& t : file.tensors) have += (have.empty() ? "" : ", ") + t.name;
    return fail(ErrorCode::InvalidInput, file_name + " holds none of the program's parameters (tensors: " +
                                             (have.empty() ? "none" : have) + ")");
  }

  std::set<std::string> replaced;
  for (const Match& m : matches) replaced.insert(m.decl->name);
  SymbolMap symbols = symbols_except(replaced);
  std::map<std::string, ir::HostTensor> staged;
  // Tensors whose logical shape is known first; packed ones without a shape take theirs
  // from the declaration once the others have fixed its symbols.
  for (int pass = 0; pass < 2; ++pass) {
    for (const Match& m : matches) {
      const bool shapeless = m.format && !m.logical;
      if (shapeless != (pass == 1)) continue;
      const std::string what = file_name + ": tensor '" + m.tensor->name + "' (parameter '" + m.decl->name + "')";
      std::vector<std::int64_t> shape = m.format ? m.logical.value_or(std::vector<std::int64_t>{}) : m.tensor->shape;
      if (shapeless) {
        for (const ir::Dim& d : m.decl->type.shape) {
          if (d.is_static()) { shape.push_back(d.extent); continue; }
          const std::string& sym = m.decl->symbols[d.sym.index];
          auto it = symbols.find(symbol_key(ir::layer_of(m.decl->name), sym));
          if (it == symbols.end())
            return fail(ErrorCode::InvalidInput, what + ": packed data needs a '" + m.tensor->name +
                                                     ".shape' metadata entry (symbol '" + sym + "' of " +
                                                     decl_str(*m.decl) + " is not fixed by another tensor)");
          shape.push_back(it->second.first);
        }
      }
      TensorView view{const_cast<std::uint8_t*>(m.tensor->bytes.data()), m.tensor->kind, shape};
      WeightFormat wf = WeightFormat::Plain;
      if (m.format) {
        switch (*m.format) {
          case ir::TernaryFormat::Tern2: wf = WeightFormat::Tern2; break;
          case ir::TernaryFormat::Tern2SM: wf = WeightFormat::Tern2SM; break;
          case ir::TernaryFormat::Tern16: wf = WeightFormat::Tern16; break;
          case ir::TernaryFormat::Bitplane: wf = WeightFormat::Bitplane; break;
        }
        // The byte count must match the logical shape exactly (from_view reads that many).
        TERNJIT_TRY(std::size_t n, count_of(shape, what));
        if (m.tensor->bytes.size() != ir::packed_size(*m.format, n))
          return fail(ErrorCode::InvalidInput, what + ": " + std::string(ir::format_name(*m.format)) + " data for " +
                                                   std::to_string(n) + " values needs " +
                                                   std::to_string(ir::packed_size(*m.format, n)) + " bytes, got " +
                                                   std::to_string(m.tensor->bytes.size()));
      } else if (m.decl->type.elem == ElemKind::T2 && m.tensor->kind != ElemKind::I8) {
        return fail(ErrorCode::InvalidInput, what + " is ternary: it needs I8 values in {-1, 0, 1} or U8 bytes with a '" +
                                                 m.tensor->name + ".format' metadata entry, got " + m.tensor->dtype);
      }
      TERNJIT_TRY(ir::HostTensor t, from_view(*m.decl, view, wf, what));
      TERNJIT_TRY_VOID(fit_shape(*m.decl, t.shape, what, symbols));
      staged.insert_or_assign(m.decl->name, std::move(t));
    }
  }
  for (auto& [name, t] : staged) values_.values.insert_or_assign(name, std::move(t));
  return success();
}

Result<void> Weights::bind_random(std::uint64_t seed) {
  SymbolMap symbols = symbols_except({});
  std::map<std::string, ir::HostTensor> staged;
  std::uint64_t index = 0;
  for (const ir::ParamDecl& d : module_->params()) {
    const std::uint64_t salt = 1000 + index++;
    if (is_bound(d.name)) continue;
    std::vector<std::int64_t> shape;
    for (const ir::Dim& dim : d.type.shape) {
      if (dim.is_static()) { shape.push_back(dim.extent); continue; }
      const std::string& sym = d.symbols[dim.sym.index];
      auto it = symbols.find(symbol_key(ir::layer_of(d.name), sym));
      if (it == symbols.end())
        return fail(ErrorCode::InvalidArgument,
                    "bind_random: parameter '" + d.name + "' is declared " + decl_str(d) + " and no bound parameter fixes '" +
                        sym + "': bind a tensor that fixes it first");
      shape.push_back(it->second.first);
    }
    staged.emplace(d.name, ir::HostTensor::random(d.type.elem, shape, ir::derive_seed(seed, salt)));
  }
  for (auto& [name, t] : staged) values_.values.insert_or_assign(name, std::move(t));
  return success();
}

}  // namespace ternjit::jit

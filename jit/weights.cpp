// SPDX-License-Identifier: Apache-2.0
// weights.cpp - binding parameter values: caller buffers, safetensors files and seeds.
#include "jit/weights.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "formats/text.h"
#include "formats/ternary.h"
#include "formats/weight_store.h"
#include "ir/bind.h"
#include "ir/builder.h"

namespace ternjit::jit {

namespace {

Error fail(ErrorCode code, std::string msg) { return make_error(code, std::move(msg)); }

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::string decl_str(const ir::ParamDecl& d) { return ir::type_str(d.type, d.symbols); }

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

// Converts a buffer (`v.shape` logical) into the stored form of decl's kind. `bytes`
// are the buffer's: borrowed caller memory (copied only where kept as is) or a file's.
Result<ir::StoredTensor> from_view(const ir::ParamDecl& decl, const TensorView& v, WeightFormat format,
                                   const ir::SharedBytes& bytes, const std::string& what) {
  const ElemKind want = decl.type.elem;
  if (format != WeightFormat::Plain) {
    const std::string name(weight_format_name(format));
    if (want != ElemKind::T2)
      return fail(ErrorCode::InvalidArgument,
                  what + " is declared " + decl_str(decl) + ": packed format '" + name + "' is only for ternary parameters");
    if (v.kind != ElemKind::U8)
      return fail(ErrorCode::InvalidArgument,
                  what + ": packed '" + name + "' data must be u8 bytes, got " + std::string(elem_name(v.kind)));
  } else {
    // Plain: which buffer kinds the declared kind takes.
    const bool accepted = v.kind == want || (is_float(want) && is_float(v.kind)) ||
                          (want == ElemKind::T2 && v.kind == ElemKind::I8);
    if (!accepted)
      return fail(ErrorCode::InvalidArgument,
                  what + " is declared " + decl_str(decl) + " but the buffer is " + std::string(elem_name(v.kind)) +
                      (want == ElemKind::T2 ? " (ternary takes t2 or i8 values in {-1, 0, 1}, or u8 bytes in a packed format)"
                                            : ""));
  }
  auto t = formats::store_weight(want, v.kind, format, v.shape, bytes);
  if (!t.ok()) return fail(t.error().code, what + ": " + t.error().message);
  return std::move(t.value());
}

// The bytes of a caller buffer: as many as `format` needs for `shape` (borrowed), which
// must be `byte_length` when the caller says how long its buffer is.
Result<ir::SharedBytes> caller_bytes(const TensorView& v, WeightFormat format, std::optional<std::size_t> byte_length,
                                     const std::string& what) {
  TERNJIT_TRY(std::size_t n, count_of(v.shape, what));
  const std::size_t size =
      format == WeightFormat::Plain ? n * static_cast<std::size_t>(elem_bits(v.kind) / 8) : formats::packed_size(format, n);
  if (byte_length && *byte_length != size) {
    const std::string layout = format == WeightFormat::Plain ? std::string(elem_name(v.kind))
                                                             : "'" + std::string(weight_format_name(format)) + "'";
    return fail(ErrorCode::InvalidArgument, what + ": shape " + shape_str(v.shape) + " in " + layout + " needs " +
                                                std::to_string(size) + " bytes, the buffer has " +
                                                std::to_string(*byte_length));
  }
  if (size != 0 && v.data == nullptr) return fail(ErrorCode::InvalidArgument, what + ": data is null");
  return ir::SharedBytes::borrow({static_cast<const std::uint8_t*>(v.data), size});
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
    auto ok = fit_shape(d, it->second.shape(), "parameter '" + d.name + "'", symbols);
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

Result<void> Weights::bind(std::string_view name, const TensorView& value, WeightFormat format,
                           std::optional<std::size_t> byte_length) {
  const ir::ParamDecl* decl = module_->find_param(name);
  if (!decl) {
    std::string have;
    for (const ir::ParamDecl& d : module_->params()) have += (have.empty() ? "" : ", ") + d.name;
    return fail(ErrorCode::NotFound, "no parameter '" + std::string(name) + "' in the program (parameters: " +
                                         (have.empty() ? "none" : have) + ")");
  }
  const std::string what = "parameter '" + decl->name + "'";
  TERNJIT_TRY(ir::SharedBytes bytes, caller_bytes(value, format, byte_length, what));
  TERNJIT_TRY(ir::StoredTensor t, from_view(*decl, value, format, bytes, what));
  SymbolMap symbols = symbols_except({decl->name});
  TERNJIT_TRY_VOID(fit_shape(*decl, t.shape(), what, symbols));
  values_.values.insert_or_assign(decl->name, std::move(t));
  return success();
}

Result<void> Weights::bind_file(const formats::WeightFile& file) {
  const std::string& file_name = file.display_name();
  // Which offer feeds which declaration: the full name, else a short name no other
  // declaration shares.
  std::map<std::string, int> short_count;
  for (const ir::ParamDecl& d : module_->params()) {
    std::string_view layer = ir::layer_of(d.name);
    if (!layer.empty()) ++short_count[d.name.substr(layer.size() + 1)];
  }
  struct Match {
    const ir::ParamDecl* decl;
    const formats::WeightOffer* offer;
    std::optional<std::vector<std::int64_t>> shape;  // nullopt: from the declaration
  };
  std::vector<Match> matches;
  for (const ir::ParamDecl& d : module_->params()) {
    std::string_view layer = ir::layer_of(d.name);
    const bool short_ok = !layer.empty() && short_count[d.name.substr(layer.size() + 1)] == 1;
    TERNJIT_TRY(const formats::WeightOffer* o, formats::find_param_offer(file, d.name, short_ok));
    if (!o) continue;
    const std::string what = "parameter '" + d.name + "'";
    TERNJIT_TRY(auto shape, file.shape_for(*o, d.type, what));
    matches.push_back(Match{&d, o, std::move(shape)});
  }
  if (matches.empty() && !module_->params().empty()) {
    std::string have;
    for (const std::string& n : file.offer_names()) have += (have.empty() ? "" : ", ") + n;
    return fail(ErrorCode::InvalidInput, file_name + " holds none of the program's parameters (tensors: " +
                                             (have.empty() ? "none" : have) + ")");
  }

  std::set<std::string> replaced;
  for (const Match& m : matches) replaced.insert(m.decl->name);
  SymbolMap symbols = symbols_except(replaced);
  std::map<std::string, ir::StoredTensor> staged;
  std::set<std::string> bound, ternary;  // offers bound (to ternary parameters)
  // Tensors whose shape is known first; packed ones without a shape take theirs from the
  // declaration once the others have fixed its symbols.
  for (int pass = 0; pass < 2; ++pass) {
    for (const Match& m : matches) {
      if (m.shape.has_value() == (pass == 1)) continue;
      const std::string what = "parameter '" + m.decl->name + "'";
      std::vector<std::int64_t> shape = m.shape.value_or(std::vector<std::int64_t>{});
      if (!m.shape) {
        for (const ir::Dim& d : m.decl->type.shape) {
          if (d.is_static()) { shape.push_back(d.extent); continue; }
          const std::string& sym = m.decl->symbols[d.sym.index];
          auto it = symbols.find(symbol_key(ir::layer_of(m.decl->name), sym));
          if (it == symbols.end())
            return fail(ErrorCode::InvalidInput, file_name + ": tensor " + formats::quoted_printable(m.offer->origin) +
                                                     " (" + what + "): packed data needs a " +
                                                     formats::quoted_printable(m.offer->origin + ".shape") +
                                                     " metadata entry (symbol '" + sym + "' of " +
                                                     decl_str(*m.decl) + " is not fixed by another tensor)");
          shape.push_back(it->second.first);
        }
      }
      TERNJIT_TRY_VOID(count_of(shape, what));
      // Tensors usable as they are keep pointing into the file's mapping.
      TERNJIT_TRY(ir::StoredTensor t, file.load(*m.offer, m.decl->type.elem, shape, what));
      TERNJIT_TRY_VOID(fit_shape(*m.decl, t.shape(), what + " (from " + file_name + ")", symbols));
      staged.insert_or_assign(m.decl->name, std::move(t));
      bound.insert(m.offer->name);
      if (m.decl->type.elem == ElemKind::T2) ternary.insert(m.offer->name);
    }
  }
  TERNJIT_TRY_VOID(file.check_scales(ternary, bound));
  for (auto& [name, t] : staged) values_.values.insert_or_assign(name, std::move(t));
  for (const std::string& n : file.offer_names())
    if (!bound.count(n)) unused_names_.push_back(n);
  return success();
}

std::string Weights::missing_hint(const std::string& param) const { return ir::did_you_mean(param, unused_names_); }

Result<void> Weights::bind_random(std::uint64_t seed) {
  SymbolMap symbols = symbols_except({});
  std::map<std::string, ir::StoredTensor> staged;
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
    TERNJIT_TRY_VOID(count_of(shape, "bind_random: parameter '" + d.name + "'"));
    staged.emplace(d.name, ir::StoredTensor::random(d.type.elem, shape, ir::derive_seed(seed, salt)));
  }
  for (auto& [name, t] : staged) values_.values.insert_or_assign(name, std::move(t));
  return success();
}

}  // namespace ternjit::jit

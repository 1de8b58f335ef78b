// SPDX-License-Identifier: Apache-2.0
// target.cpp - what every target shares: option strings, the options' cache-key text, buffer sizes, artifact IR.
#include "targets/target.h"

#include "ir/parse.h"
#include "ir/strings.h"

namespace ternjit::targets {

bool valid_artifact_kind(std::string_view kind) {
  if (kind.empty() || kind.size() > 32) return false;
  for (char c : kind)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

Result<void> check_artifact_kind(const Artifact& artifact, std::string_view kind, std::string_view target) {
  if (artifact.kind == kind) return success();
  return make_error(ErrorCode::InvalidInput, "the " + std::string(target) + " target loads '" + std::string(kind) +
                                                 "' artifacts, not '" + artifact.kind + "'");
}

std::string_view target_kind_name(TargetKind kind) {
  switch (kind) {
    case TargetKind::Interpreter: return "interpreter";
    case TargetKind::Cpu: return "cpu";
    case TargetKind::Gpu: return "gpu";
  }
  TERNJIT_UNREACHABLE("bad TargetKind");
}

std::string_view tuning_mode_name(TuningMode mode) {
  switch (mode) {
    case TuningMode::Off: return "off";
    case TuningMode::Cached: return "cached";
    case TuningMode::Tune: return "tune";
  }
  TERNJIT_UNREACHABLE("bad TuningMode");
}

std::optional<TuningMode> parse_tuning_mode(std::string_view text) {
  for (TuningMode m : {TuningMode::Off, TuningMode::Cached, TuningMode::Tune})
    if (tuning_mode_name(m) == text) return m;
  return std::nullopt;
}

std::string TargetOptions::get(std::string_view name) const {
  auto it = values.find(std::string(name));
  return it == values.end() ? std::string() : it->second;
}

Result<std::map<std::string, TargetOptions>> split_target_options(std::string_view text) {
  std::map<std::string, TargetOptions> out;
  auto bad = [&](std::string_view entry, std::string_view why) {
    return make_error(ErrorCode::InvalidArgument, "target option '" + std::string(entry) + "' " + std::string(why) +
                                                      " (expected TARGET.NAME=VALUE entries separated by ';', "
                                                      "e.g. x86.max_isa=avx2)");
  };
  while (!text.empty()) {
    const std::size_t semi = text.find(';');
    const std::string_view entry = ir::trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view() : text.substr(semi + 1);
    if (entry.empty()) continue;
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) return bad(entry, "has no '='");
    const std::string_view name = ir::trim(entry.substr(0, eq));
    const std::size_t dot = name.find('.');
    if (dot == std::string_view::npos || dot == 0 || dot + 1 == name.size())
      return bad(entry, "does not name a target and an option");
    const std::string target(name.substr(0, dot)), option(name.substr(dot + 1));
    if (!out[target].values.emplace(option, std::string(ir::trim(entry.substr(eq + 1)))).second)
      return bad(entry, "is given twice");
  }
  return out;
}

std::string CompileOptions::key() const {
  std::string s = "opt=" + std::string(passes::opt_level_name(opt_level)) + ";threads=" + std::to_string(threads) +
                  ";tuning=" + std::string(tuning_mode_name(tuning));
  for (const auto& [name, value] : target.values) s += ";" + name + "=" + value;
  if (!decisions.empty()) {
    s += ";decisions=";
    for (std::size_t i = 0; i < decisions.size(); ++i) s += (i ? "|" : "") + decisions[i];
  }
  if (rows_max > 0) s += ";rows<=" + std::to_string(rows_max);
  return s;
}

Result<Ceilings> Target::measure_ceilings(const Parallel&, std::size_t, const TargetOptions&,
                                          const CeilingOptions&) const {
  return make_error(ErrorCode::Unsupported, "the " + std::string(name()) + " target measures no ceilings");
}

std::string Target::cache_key_text() const {
  const TargetDescription d = describe();
  return "device=" + d.device + ";features=" + d.features;
}

Result<std::vector<std::unique_ptr<TuningSpace>>> Target::tuning_spaces(const ir::Module&, std::string_view,
                                                                        const CompileOptions&) const {
  return std::vector<std::unique_ptr<TuningSpace>>{};
}

Result<BufferSizes> buffer_sizes(const ir::Function& f) {
  BufferSizes s;
  auto add = [&](const ir::Type& t, std::vector<std::size_t>& to) -> Result<void> {
    auto n = t.static_numel();
    if (!n) return make_error(ErrorCode::InvalidInput, "'" + f.name() + "' is not fully static");
    to.push_back(static_cast<std::size_t>(*n) * static_cast<std::size_t>(elem_bits(t.elem) / 8));
    return success();
  };
  for (ir::ValueId v : f.args()) TERNJIT_TRY_VOID(add(f.type_of(v), s.in));
  for (const ir::Type& t : f.result_types()) TERNJIT_TRY_VOID(add(t, s.out));
  return s;
}

Result<ir::Module> parse_artifact_module(const Artifact& a) {
  std::string_view text(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size());
  TERNJIT_TRY(ir::Module m, ir::parse_module(text, "<artifact " + a.entry + ">"));
  if (!m.find_function(a.entry))
    return make_error(ErrorCode::InvalidInput, "artifact has no entry function '" + a.entry + "'");
  return m;
}

}  // namespace ternjit::targets

namespace ternjit::targets {

std::string bytes_digest(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64: offset basis, then xor and multiply per byte
  for (std::uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<std::size_t>(i)] = digits[h & 15];
  return out;
}

}  // namespace ternjit::targets

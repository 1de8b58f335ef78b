// SPDX-License-Identifier: Apache-2.0
// artifact_codec.cpp - encode_artifact / decode_artifact (format in artifact_codec.h).
#include "cache/artifact_codec.h"

#include <cstring>

#include "ir/parse.h"

namespace ternjit::cache {

namespace {

constexpr char kMagic[8] = {'t', 'j', 'a', 'r', 't', 0, 0, 0};

void put_u(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_str(std::string& out, std::string_view s) {
  put_u(out, s.size(), 8);
  out.append(s);
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool u(std::uint64_t& v, int n) {
    if (s_.size() - pos_ < static_cast<std::size_t>(n)) return false;
    v = 0;
    for (int i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(s_[pos_ + i])) << (8 * i);
    pos_ += n;
    return true;
  }
  bool str(std::string_view& v) {
    std::uint64_t n = 0;
    if (!u(n, 8) || n > s_.size() - pos_) return false;
    v = s_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool magic() {
    if (s_.substr(0, sizeof kMagic) != std::string_view(kMagic, sizeof kMagic)) return false;
    pos_ = sizeof kMagic;
    return true;
  }
  [[nodiscard]] bool done() const { return pos_ == s_.size(); }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
};

Error bad(const std::string& what) { return make_error(ErrorCode::InvalidInput, "stored artifact: " + what); }

}  // namespace

std::string encode_artifact(const targets::Artifact& a) {
  std::string out(kMagic, sizeof kMagic);
  put_u(out, kArtifactCodecVersion, 4);
  put_str(out, a.kind);
  put_u(out, a.code_is_ir ? 1 : 0, 1);
  put_str(out, std::string_view(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size()));
  put_str(out, a.entry);
  put_u(out, a.metadata.size(), 8);
  for (const auto& [name, value] : a.metadata) {
    put_str(out, name);
    put_str(out, value);
  }
  return out;
}

Result<targets::Artifact> decode_artifact(std::string_view bytes) {
  Reader r(bytes);
  if (!r.magic()) return bad("bad magic");
  std::uint64_t version = 0, code_is_ir = 0, count = 0;
  if (!r.u(version, 4)) return bad("truncated");
  if (version != kArtifactCodecVersion)
    return bad("codec version " + std::to_string(version) + ", expected " + std::to_string(kArtifactCodecVersion));
  std::string_view kind, code, entry;
  if (!r.str(kind) || !r.u(code_is_ir, 1)) return bad("truncated");
  if (!targets::valid_artifact_kind(kind)) return bad("invalid kind (" + std::to_string(kind.size()) + " bytes)");
  if (code_is_ir > 1) return bad("code_is_ir byte " + std::to_string(code_is_ir));
  targets::Artifact a;
  a.kind = std::string(kind);
  a.code_is_ir = code_is_ir == 1;
  if (!r.str(code) || !r.str(entry) || !r.u(count, 8)) return bad("truncated");
  a.bytes.assign(code.begin(), code.end());
  a.entry = std::string(entry);
  // Names strictly increasing, as encode_artifact writes them: a repeated name would be
  // dropped silently, and the encoding stays canonical (decode then encode is identity).
  std::string_view previous;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string_view name, value;
    if (!r.str(name) || !r.str(value)) return bad("truncated metadata");
    if (i > 0 && name <= previous) return bad("metadata name '" + std::string(name) + "' out of order or repeated");
    previous = name;
    a.metadata.emplace(std::string(name), std::string(value));
  }
  if (!r.done()) return bad("trailing bytes");
  return a;
}

namespace {

// "f32[2, 64]; f32[64]" for messages.
std::string types_str(const ir::Function& f, const std::vector<ir::Type>& types) {
  std::string out;
  for (const ir::Type& t : types) out += (out.empty() ? "" : "; ") + ir::type_str(t, f.symbols());
  return out.empty() ? "none" : out;
}

std::vector<ir::Type> arg_types(const ir::Function& f) {
  std::vector<ir::Type> out;
  for (ir::ValueId v : f.args()) out.push_back(f.type_of(v));
  return out;
}

bool same_types(const ir::Function& a, const std::vector<ir::Type>& ta, const ir::Function& b,
                const std::vector<ir::Type>& tb) {
  if (ta.size() != tb.size()) return false;
  for (std::size_t i = 0; i < ta.size(); ++i)
    if (!ir::same_type(ta[i], a.symbols(), tb[i], b.symbols())) return false;
  return true;
}

}  // namespace

Result<void> check_artifact_signature(const targets::Artifact& artifact, const ir::Module& specialized,
                                      std::string_view function) {
  const ir::Function* want = specialized.find_function(function);
  if (!want) return bad("no function '" + std::string(function) + "' in the specialized module");
  // Code bytes a target digested when it compiled them (GPU binaries: a cubin, code
  // objects) must still be those bytes: a damaged binary is a miss, never handed to a driver.
  if (auto it = artifact.metadata.find("bytes_digest"); it != artifact.metadata.end())
    if (targets::bytes_digest(artifact.bytes) != it->second)
      return bad("its code bytes do not match their digest (" + it->second + "): the binary is damaged");
  std::string_view text;
  if (artifact.code_is_ir) {
    text = std::string_view(reinterpret_cast<const char*>(artifact.bytes.data()), artifact.bytes.size());
  } else if (auto it = artifact.metadata.find("ir"); it != artifact.metadata.end()) {
    text = it->second;
  } else {
    return success();  // nothing to compare
  }
  auto m = ir::parse_module(text, "<stored artifact>");
  if (!m.ok()) return bad("its IR does not parse: " + m.error().message);
  const ir::Function* have = m->find_function(function);
  if (!have) return bad("its IR has no function '" + std::string(function) + "'");
  const auto want_args = arg_types(*want), have_args = arg_types(*have);
  if (!same_types(*want, want_args, *have, have_args))
    return bad("'" + std::string(function) + "' takes " + types_str(*have, have_args) + " there, but " +
               types_str(*want, want_args) + " was asked for");
  if (!same_types(*want, want->result_types(), *have, have->result_types()))
    return bad("'" + std::string(function) + "' returns " + types_str(*have, have->result_types()) +
               " there, but " + types_str(*want, want->result_types()) + " was asked for");
  return success();
}

Result<void> check_artifact_entry(const targets::Artifact& artifact, std::string_view key_ir,
                                  std::string_view function) {
  auto specialized = ir::parse_module(key_ir, "<cache key>");
  if (!specialized.ok()) return bad("its key's IR does not parse: " + specialized.error().message);
  return check_artifact_signature(artifact, *specialized, function);
}

}  // namespace ternjit::cache

// SPDX-License-Identifier: Apache-2.0
// key.cpp - canonical key bytes, XXH3-128 hashing, the artifact/record keys and the build id.
#include "cache/key.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cstring>

// Header-only mode: every xxHash function is inlined here, so libternjit.so/.a carry no
// run-time dependency on libxxhash (the hash must not change under us either way: the
// XXH3 output is specified and stable across xxHash versions >= 0.8).
#define XXH_INLINE_ALL
#include <xxhash.h>

#ifndef TERNJIT_VERSION_STRING
#error "TERNJIT_VERSION_STRING must be defined by the build (cache/CMakeLists.txt)"
#endif
#ifndef TERNJIT_BUILD_TYPE
#error "TERNJIT_BUILD_TYPE must be defined by the build (cache/CMakeLists.txt)"
#endif

namespace ternjit::cache {

namespace {

constexpr char kMagic[8] = {'t', 'j', 'k', 'e', 'y', 0, 0, 0};

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_str(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

// A bounds-checked little-endian reader over key bytes.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool u32(std::uint32_t& v) {
    if (s_.size() - pos_ < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t(static_cast<unsigned char>(s_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return true;
  }
  bool str(std::string& v) {
    if (s_.size() - pos_ < 8) return false;
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= std::uint64_t(static_cast<unsigned char>(s_[pos_ + i])) << (8 * i);
    pos_ += 8;
    if (n > s_.size() - pos_) return false;
    v.assign(s_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  bool skip(std::string_view expect) {
    if (s_.substr(pos_, expect.size()) != expect) return false;
    pos_ += expect.size();
    return true;
  }
  [[nodiscard]] bool done() const { return pos_ == s_.size(); }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
};

// The GNU build-id note of the loaded object containing `addr`, as hex; "" when none.
struct BuildIdSearch {
  const void* addr = nullptr;
  std::string id;
  std::string path;  // the object's file ("" for the main program)
  bool found_object = false;
};

int find_build_id(dl_phdr_info* info, std::size_t, void* data) {
  auto* s = static_cast<BuildIdSearch*>(data);
  const auto a = reinterpret_cast<ElfW(Addr)>(s->addr);
  bool contains = false;
  for (int i = 0; i < info->dlpi_phnum && !contains; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const ElfW(Addr) start = info->dlpi_addr + ph.p_vaddr;
    contains = a >= start && a < start + ph.p_memsz;
  }
  if (!contains) return 0;
  s->found_object = true;
  s->path = info->dlpi_name ? info->dlpi_name : "";
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) nh;
      std::memcpy(&nh, p, sizeof nh);
      const unsigned char* name = p + sizeof nh;
      const unsigned char* desc = name + ((nh.n_namesz + 3) & ~3u);
      const unsigned char* next = desc + ((nh.n_descsz + 3) & ~3u);
      if (next > end) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static constexpr char kDigits[] = "0123456789abcdef";
        for (std::uint32_t k = 0; k < nh.n_descsz; ++k) {
          s->id.push_back(kDigits[desc[k] >> 4]);
          s->id.push_back(kDigits[desc[k] & 15]);
        }
        return 1;
      }
      p = next;
    }
  }
  return 1;
}

// XXH3-128 of a whole file ("" when it cannot be read).
std::string hash_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_state_t* st = &state;
  XXH3_128bits_reset(st);
  char buf[1 << 16];
  bool ok = true;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      ok = false;
      break;
    }
    XXH3_128bits_update(st, buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
  if (!ok) return "";
  Hash128 h;
  std::memcpy(h.data(), c.digest, h.size());
  return hex(h);
}

}  // namespace

Hash128 hash128(std::string_view bytes) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), bytes.size()));
  Hash128 h;
  std::memcpy(h.data(), c.digest, h.size());
  return h;
}

Hash128 hash128(std::initializer_list<std::string_view> parts) {
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_state_t* st = &state;
  XXH3_128bits_reset(st);
  for (std::string_view p : parts) XXH3_128bits_update(st, p.data(), p.size());
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
  Hash128 h;
  std::memcpy(h.data(), c.digest, h.size());
  return h;
}

std::string hex(const Hash128& h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(32);
  for (std::uint8_t b : h) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

Key::Key(std::string_view kind, std::vector<KeyField> fields) : kind_(kind), fields_(std::move(fields)) {
  bytes_.append(kMagic, sizeof kMagic);
  put_u32(bytes_, kKeyFormatVersion);
  put_str(bytes_, kind_);
  put_u32(bytes_, static_cast<std::uint32_t>(fields_.size()));
  for (const KeyField& f : fields_) {
    put_str(bytes_, f.name);
    put_str(bytes_, f.value);
  }
  hash_ = hash128(bytes_);
}

std::optional<Key> Key::parse(std::string_view bytes) {
  Reader r(bytes);
  std::uint32_t version = 0, count = 0;
  std::string kind;
  if (!r.skip(std::string_view(kMagic, sizeof kMagic)) || !r.u32(version) || version != kKeyFormatVersion ||
      !r.str(kind) || !r.u32(count))
    return std::nullopt;
  std::vector<KeyField> fields;
  for (std::uint32_t i = 0; i < count; ++i) {
    KeyField f;
    if (!r.str(f.name) || !r.str(f.value)) return std::nullopt;
    fields.push_back(std::move(f));
  }
  if (!r.done()) return std::nullopt;
  Key k(kind, std::move(fields));
  // Re-encoding must give the same bytes (there is one encoding per key).
  if (k.bytes() != bytes) return std::nullopt;
  return k;
}

std::string_view Key::field(std::string_view name) const {
  for (const KeyField& f : fields_)
    if (f.name == name) return f.value;
  return {};
}

Key artifact_key(const ArtifactKeyInputs& in) {
  return Key("artifact", {{"function", in.function},
                          {"target", in.target},
                          {"machine", in.machine},
                          {"compile_options", in.compile_options},
                          {"version", in.version},
                          {"build_id", in.build_id},
                          {"ir", in.ir}});
}

Key record_key(const Key& kernel_key, std::string_view config) {
  return Key("record", {{"kernel", kernel_key.bytes()}, {"config", std::string(config)}});
}

Key target_file_key(std::string_view name, std::string_view identity, std::string_view version) {
  return Key("target-file", {{"name", std::string(name)}, {"identity", std::string(identity)},
                             {"version", std::string(version)}});
}

std::string_view ternjit_version() { return TERNJIT_VERSION_STRING; }

std::string build_id() {
  BuildIdSearch s;
  s.addr = reinterpret_cast<const void*>(&build_id);
  dl_iterate_phdr(&find_build_id, &s);
  std::string code = s.id;
  if (code.empty()) {
    const std::string path = s.path.empty() ? std::string("/proc/self/exe") : s.path;
    const std::string h = hash_file(path);
    code = h.empty() ? std::string("unknown") : "file-" + h;
  }
#if defined(__clang__)
  constexpr const char* kCompiler = "clang ";
#else
  constexpr const char* kCompiler = "gcc ";
#endif
  return std::string(kCompiler) + __VERSION__ + ";" + TERNJIT_BUILD_TYPE + ";" + code;
}

}  // namespace ternjit::cache

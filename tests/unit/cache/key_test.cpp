// SPDX-License-Identifier: Apache-2.0
// key_test.cpp - canonical key bytes, hashing, every key field changes the hash, the build id.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "cache/key.h"

namespace ternjit::cache {
namespace {

ArtifactKeyInputs inputs() {
  ArtifactKeyInputs in;
  in.ir = "func @f(%x: f32[4]) -> f32[4] {\n^entry:\n  ret %x\n}\n";
  in.function = "f";
  in.target = "x86";
  in.machine = "device=Some CPU;features=avx2 fma avx512f";
  in.compile_options = "opt=O2;threads=4;tuning=off";
  in.version = "0.1.0";
  in.build_id = "gcc 12;RelWithDebInfo;abc";
  return in;
}

TEST_CASE("canonical bytes: magic, format version, kind, length-prefixed fields") {
  const Key k("artifact", {{"a", "1"}});
  const std::string expect = std::string("tjkey\0\0\0", 8) + std::string("\x01\0\0\0", 4) +
                             std::string("\x08\0\0\0\0\0\0\0", 8) + "artifact" + std::string("\x01\0\0\0", 4) +
                             std::string("\x01\0\0\0\0\0\0\0", 8) + "a" + std::string("\x01\0\0\0\0\0\0\0", 8) + "1";
  CHECK(k.bytes() == expect);
  CHECK(k.hex().size() == 32);
  // The hash is XXH3-128 of the bytes, pinned: a change of encoding or hash shows up here
  // (and must come with a kKeyFormatVersion bump).
  CHECK(k.hex() == hex(hash128(expect)));
  CHECK(hex(hash128(std::string_view())) == "99aa06d3014798d86001c324468d497f");
}

TEST_CASE("length prefixes keep field boundaries apart") {
  CHECK(Key("k", {{"ab", "c"}}).hex() != Key("k", {{"a", "bc"}}).hex());
  CHECK(Key("k", {{"a", ""}, {"b", ""}}).hex() != Key("k", {{"a", std::string("\0\0\0\0\0\0\0\0", 8)}}).hex());
  CHECK(Key("artifact", {}).hex() != Key("record", {}).hex());
}

TEST_CASE("parse: round trip, and malformed bytes are rejected") {
  const Key k = artifact_key(inputs());
  auto p = Key::parse(k.bytes());
  REQUIRE(p.has_value());
  CHECK(p->bytes() == k.bytes());
  CHECK(p->field("target") == "x86");
  CHECK(p->kind() == "artifact");
  for (std::size_t n = 0; n < k.bytes().size(); ++n) CHECK_FALSE(Key::parse(k.bytes().substr(0, n)).has_value());
  CHECK_FALSE(Key::parse(k.bytes() + "x").has_value());
  std::string other_version = k.bytes();
  other_version[8] = 2;
  CHECK_FALSE(Key::parse(other_version).has_value());
}

TEST_CASE("every artifact key field changes the key: version, features, IR, target, options, build id") {
  std::set<std::string> seen{artifact_key(inputs()).hex()};
  auto differs = [&](auto mutate) {
    ArtifactKeyInputs in = inputs();
    mutate(in);
    return seen.insert(artifact_key(in).hex()).second;
  };
  CHECK(differs([](ArtifactKeyInputs& in) { in.version = "0.1.1"; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.machine = "device=Some CPU;features=avx2 fma"; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.machine = "device=Other CPU;features=avx2 fma avx512f"; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.ir += " "; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.function = "g"; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.target = "reference"; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.target = "x86>reference"; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.machine += ";toolchain=nvrtc 12.4"; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.compile_options = "opt=O3;threads=4;tuning=off"; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.compile_options = "opt=O2;threads=4;tuning=off;max_isa=avx2"; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.compile_options = "opt=O2;threads=4;tuning=off;decisions=mt=4"; }));
  CHECK(differs([](ArtifactKeyInputs& in) { in.build_id = "gcc 12;Debug;abc"; }));
  // And the same inputs give the same key (binary-reproducible).
  CHECK(artifact_key(inputs()).bytes() == artifact_key(inputs()).bytes());
}

TEST_CASE("record keys: per (kernel key, config)") {
  const Key k = artifact_key(inputs());
  CHECK(record_key(k, "a").hex() == record_key(k, "a").hex());
  CHECK(record_key(k, "a").hex() != record_key(k, "b").hex());
  CHECK(record_key(k, "a").field("kernel") == k.bytes());
}

TEST_CASE("version and build id: from this build, stable") {
  CHECK(!ternjit_version().empty());
  const std::string id = build_id();
  CHECK(id == build_id());
  // compiler;build type;GNU build-id (or a file hash)
  CHECK(std::count(id.begin(), id.end(), ';') >= 2);
  CHECK(id.find("unknown") == std::string::npos);
  MESSAGE("build id: " << id);
}

}  // namespace
}  // namespace ternjit::cache

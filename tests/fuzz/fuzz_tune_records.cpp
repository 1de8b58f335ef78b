// SPDX-License-Identifier: Apache-2.0
// fuzz_tune_records.cpp - libFuzzer harness: a tuning record file and a record's texts (autotune/record_text.h).
//
// Input: a record file of the disk cache (an entry of kind Record: its key's "config"
// field is the config text, its payload the measurements JSON); since the fuzzer rarely
// forges the entry's checksum, also the bytes split at their first NUL into a config
// text and a measurements JSON (no NUL: the whole input as both).
// Invariants: parse_record never crashes, hangs or trips ASan/UBSan; a refused record
// has a message; an accepted one has M >= 1, a finite median_ns > 0, a role of winner,
// runner_up, default or none, and its texts (record_texts) parse back to the same
// record and are written again byte for byte the same.
#include <cmath>

#include "autotune/record_text.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "tests/fuzz/fuzz_testing.h"

namespace {

using namespace ternjit;

bool same(const autotune::Record& a, const autotune::Record& b) {
  return a.M == b.M && a.config == b.config && a.median_ns == b.median_ns && a.role == b.role &&
         a.conditions == b.conditions && a.spread == b.spread && a.reps == b.reps;
}

void check(std::string_view config, std::string_view measurements) {
  auto r = autotune::parse_record(config, measurements);
  if (!r.ok()) {
    if (r.error().message.empty()) fuzz::finding("a refused record has no message");
    return;
  }
  if (r->M < 1 || !std::isfinite(r->median_ns) || !(r->median_ns > 0) || !std::isfinite(r->spread) ||
      r->spread < 0 || r->reps < 0)
    fuzz::finding("an accepted record has a field out of range");
  if (!r->role.empty() && r->role != "winner" && r->role != "runner_up" && r->role != "default")
    fuzz::finding("an accepted record has the role '" + r->role + "'");
  const auto texts = autotune::record_texts(*r);
  auto back = autotune::parse_record(texts.first, texts.second);
  if (!back.ok()) fuzz::finding("a record's own texts do not parse: " + back.error().message + "\n" + texts.first);
  if (!same(*r, *back)) fuzz::finding("a record's texts parse to another record:\n" + texts.first + "\n" + texts.second);
  if (autotune::record_texts(*back) != texts) fuzz::finding("a record's texts are not written the same twice");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view file = fuzz::as_text(data, size);
  if (auto entry = cache::decode_entry(file); entry.ok() && entry->kind == cache::EntryKind::Record)
    if (auto key = cache::Key::parse(entry->key)) check(key->field("config"), entry->payload);
  const std::size_t nul = file.find('\0');
  if (nul == std::string_view::npos) check(file, file);
  else check(file.substr(0, nul), file.substr(nul + 1));
  return 0;
}

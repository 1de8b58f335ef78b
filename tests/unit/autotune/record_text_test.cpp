// SPDX-License-Identifier: Apache-2.0
// record_text_test.cpp - a tuning record's texts: every field validated with a message, and written back unchanged.
#include "autotune/record_text.h"

#include <doctest/doctest.h>

#include <string>

namespace {

using namespace ternjit;
using namespace ternjit::autotune;

std::string error_of(const Result<Record>& r) { return r.ok() ? std::string("(ok)") : r.error().message; }

const std::string kGood = R"({"M":8,"median_ns":900.5,"spread":0.01,"reps":5,"role":"winner"})";

}  // namespace

TEST_CASE("record texts: a record parses, and what it writes parses back to the same record") {
  auto r = parse_record("M=8;cpu=AMD EPYC;isa=avx2;threads=2;version=1.0;config=k_unroll=2;nb=64", kGood);
  REQUIRE(r.ok());
  CHECK(r->M == 8);
  CHECK(r->config == "k_unroll=2;nb=64");
  CHECK(r->conditions.size() == 4);
  CHECK(r->conditions.at("cpu") == "AMD EPYC");
  CHECK(r->median_ns == 900.5);
  CHECK(r->role == "winner");
  CHECK(r->reps == 5);
  const auto [config, measurements] = record_texts(*r);
  CHECK(config == "M=8;cpu=AMD EPYC;isa=avx2;threads=2;version=1.0;config=k_unroll=2;nb=64");
  auto again = parse_record(config, measurements);
  REQUIRE(again.ok());
  CHECK(again->M == r->M);
  CHECK(again->config == r->config);
  CHECK(again->conditions == r->conditions);
  CHECK(again->median_ns == r->median_ns);
  CHECK(again->role == r->role);
  CHECK(again->spread == r->spread);
  CHECK(again->reps == r->reps);
  // No conditions; a config text holding "config=" itself.
  auto bare = parse_record("M=1;config=a;config=b", R"({"median_ns":1})");
  REQUIRE(bare.ok());
  CHECK(bare->conditions.empty());
  CHECK(bare->config == "a;config=b");
  CHECK(record_texts(*bare).first == "M=1;config=a;config=b");
}

TEST_CASE("record texts: every malformed field is refused with a message (issue 33, fuzz_tune_records)") {
  CHECK(error_of(parse_record("N=8;config=x", kGood)) == "a record's config text starts with 'M=<rows>;', got 'N=8;config=x'");
  CHECK(error_of(parse_record("M=0;config=x", kGood)) == "a record's M is a positive integer, got '0'");
  CHECK(error_of(parse_record("M=99999999999999999999;config=x", kGood)) ==
        "a record's M is a positive integer, got '99999999999999999999'");
  CHECK(error_of(parse_record("M=8;isa=avx2", kGood)) ==
        "a record's config text ends with 'config=<target config>', got 'M=8;isa=avx2'");
  // An empty field before config= was read as the config "=x" (the old decoder).
  CHECK(error_of(parse_record("M=8;;config=x", kGood)) == "a record's condition is name=value, got ''");
  CHECK(error_of(parse_record("M=8;bad name=1;config=x", kGood)) ==
        "a record's condition name is of [A-Za-z0-9_]+, got 'bad name'");
  CHECK(error_of(parse_record("M=8;a=1;a=2;config=x", kGood)) == "a record names condition 'a' twice");
  CHECK(error_of(parse_record("M=8;config=x", "[1]")) == "a record's measurements are a JSON object, got '[1]'");
  CHECK(error_of(parse_record("M=8;config=x", "{\"median_ns\":\x01}")) ==
        "a record's measurements are a JSON object, got '{\"median_ns\":\\x01}'");
  // A median of 0 or below would win every decision (the smallest median is chosen).
  CHECK(error_of(parse_record("M=8;config=x", R"({"median_ns":-1})")) ==
        "a record's median_ns is a finite number > 0, got '-1'");
  CHECK(error_of(parse_record("M=8;config=x", R"({"median_ns":0})")) ==
        "a record's median_ns is a finite number > 0, got '0'");
  CHECK(error_of(parse_record("M=8;config=x", R"({"spread":1})")) ==
        "a record's median_ns is a finite number > 0, got 'none'");
  CHECK(error_of(parse_record("M=8;config=x", R"({"median_ns":1e999})")) ==  // not JSON: out of range
        "a record's measurements are a JSON object, got '{\"median_ns\":1e999}'");
  CHECK(error_of(parse_record("M=8;config=x", R"({"M":9,"median_ns":1})")) ==
        "a record's measurements are of M = '9', its config text of M = 8");
  CHECK(error_of(parse_record("M=8;config=x", R"({"median_ns":1,"role":"best"})")) ==
        "a record's role is winner, runner_up or default, got '\"best\"'");
  CHECK(error_of(parse_record("M=8;config=x", R"({"median_ns":1,"spread":-0.5})")) ==
        "a record's spread is a finite number >= 0, got '-0.5'");
  CHECK(error_of(parse_record("M=8;config=x", R"({"median_ns":1,"reps":1.5})")) ==
        "a record's reps is an integer >= 0, got '1.5'");
  CHECK(error_of(parse_record("M=8;config=x", R"({"median_ns":1,"reps":18446744073709551615})")) ==
        "a record's reps is an integer >= 0, got '18446744073709551615'");
}

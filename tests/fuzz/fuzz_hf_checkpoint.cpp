// SPDX-License-Identifier: Apache-2.0
// fuzz_hf_checkpoint.cpp - libFuzzer harness: Hugging Face BitNet weights (packed with a weight_scale, or float masters).
//
// Input: byte 0 picks the form (bit 0: a float master weight, else packed U8 + weight_scale;
// bits 1-2: the scale's or master's dtype F32, F16, BF16; bits 3-4: the scale's declared
// kind F32, F16, BF16), byte 1 the rows (R packed rows = 1..4, or master N = 1..8), byte 2
// K = 1..16, then the scale's bits (packed) and the weight's bytes. Invariants: nothing
// crashes; every load error names the file; a weight_scale that is non-finite, zero, or
// whose reciprocal is not finite in the declared kind is refused, any other is accepted
// and binds 1 / weight_scale (rounded once) in every element; a packed weight loads iff
// no used 2-bit field holds code 3, to transformers' unpacking (element [k, n] from packed
// row n % R, bits 2 (n / R)); a master weight that loads has values in {-1, 0, 1} and a
// finite, positive scale (refused only when it is not finite in a narrower declared kind).
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "formats/weight_file.h"
#include "ir/builder.h"
#include "ir/numeric.h"
#include "tests/fuzz/fuzz_testing.h"

namespace {

using namespace ternjit;

constexpr const char* kName = "fuzz.safetensors";
constexpr ElemKind kFloats[] = {ElemKind::F32, ElemKind::F16, ElemKind::BF16};

// The bytes `take` next from the input, zero past its end.
struct Input {
  const std::uint8_t* data;
  std::size_t size, at = 0;
  std::uint8_t next() { return at < size ? data[at++] : 0; }
};

formats::StTensor tensor(std::string name, ElemKind kind, std::vector<std::int64_t> shape, std::vector<std::uint8_t> bytes) {
  return formats::StTensor{std::move(name), std::string(formats::st_dtype_name(kind)), kind, std::move(shape),
                           ir::SharedBytes::adopt(std::move(bytes))};
}

// Element i of a little-endian float tensor of `kind`, decoded here from its definition.
float float_at(ElemKind kind, const std::uint8_t* p, std::size_t i) {
  if (kind == ElemKind::F32) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, p + 4 * i, 4);
    return std::bit_cast<float>(bits);
  }
  const auto bits = static_cast<std::uint16_t>(p[2 * i] | p[2 * i + 1] << 8);
  if (kind == ElemKind::BF16) return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  return ir::f16_bits_to_f32(bits);
}

void require_names_file(const Error& e, const std::string& what) {
  if (e.message.find(kName) == std::string::npos) fuzz::finding(what + ": the error does not name the file: " + e.message);
}

const formats::WeightOffer& offer(const formats::WeightFile& f, const std::string& name) {
  auto o = f.find(name);
  if (!o.ok() || *o == nullptr) fuzz::finding("no offer '" + name + "'");
  return **o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in{data, size};
  const std::uint8_t form = in.next();
  const bool master = (form & 1) != 0;
  const ElemKind stored = kFloats[((form >> 1) & 3) % 3];
  const ElemKind declared = kFloats[((form >> 3) & 3) % 3];
  const std::size_t rows = master ? 1 + in.next() % 8 : 1 + in.next() % 4;
  const std::size_t k = 1 + in.next() % 16;
  const auto width = static_cast<std::size_t>(elem_bits(stored) / 8);

  formats::StFile st;
  std::vector<std::uint8_t> scale_bytes(width);
  if (!master) {
    for (std::uint8_t& b : scale_bytes) b = in.next();
    st.tensors.push_back(tensor("m.w_scale", stored, {1}, scale_bytes));
  }
  std::vector<std::uint8_t> weight(master ? rows * k * width : rows * k);
  for (std::uint8_t& b : weight) b = in.next();
  st.tensors.push_back(tensor("m.w", master ? stored : ElemKind::U8, {static_cast<std::int64_t>(rows), static_cast<std::int64_t>(k)}, weight));
  const formats::WeightFile file = formats::WeightFile::from_safetensors(std::move(st), kName);
  const std::size_t n = master ? rows : 4 * rows;
  const ir::Type ternary{ElemKind::T2, {ir::Dim::fixed(static_cast<std::int64_t>(k)), ir::Dim::fixed(static_cast<std::int64_t>(n))}, WeightFormat::Plain};
  const ir::Type scale_type{declared, {ir::Dim::fixed(static_cast<std::int64_t>(n))}, WeightFormat::Plain};

  const formats::WeightOffer& w = offer(file, "m.w");
  const formats::WeightOffer& s = offer(file, "m.w_scale");
  if (w.kind != (master ? formats::OfferKind::Safetensors : formats::OfferKind::HfPacked) ||
      s.kind != (master ? formats::OfferKind::MasterScale : formats::OfferKind::HfScale))
    fuzz::finding("the offers are not of the Hugging Face forms");
  auto shape = file.shape_for(w, ternary, "parameter 'w'");
  if (!shape.ok() || !shape->has_value() || **shape != std::vector<std::int64_t>{static_cast<std::int64_t>(k), static_cast<std::int64_t>(n)})
    fuzz::finding("the weight's shape is not [K, N]");
  auto values = file.load(w, ElemKind::T2, **shape, "parameter 'w'");
  auto scale = file.load(s, declared, {static_cast<std::int64_t>(n)}, "parameter 'w_scale'");
  if (!values.ok()) require_names_file(values.error(), "the weight");
  if (!scale.ok()) require_names_file(scale.error(), "the scale");

  if (!master) {
    // transformers' unpack_weights: element [k, n] is packed row n % R, bits 2 (n / R).
    bool code3 = false;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t i = 0; i < k; ++i)
        for (std::size_t plane = 0; plane < 4; ++plane) code3 = code3 || ((weight[r * k + i] >> (2 * plane)) & 3) == 3;
    if (values.ok() == code3) fuzz::finding(code3 ? "a packed code 3 is accepted" : "a packed weight without code 3 is refused");
    if (values.ok()) {
      const std::uint8_t* codes = values->bytes().data();
      for (std::size_t c = 0; c < n; ++c)
        for (std::size_t i = 0; i < k; ++i) {
          const int want = static_cast<int>((weight[(c % rows) * k + i] >> (2 * (c / rows))) & 3) - 1;
          if (ir::tern2_at(codes, i * n + c) != want) fuzz::finding("a packed element unpacks to another value");
        }
    }
    const float ws = float_at(stored, scale_bytes.data(), 0);
    const float multiplier = 1.0f / ws;
    const bool refuse = !std::isfinite(ws) || ws == 0.0f || !std::isfinite(static_cast<float>(ir::round_to_kind(multiplier, declared)));
    if (scale.ok() == refuse)
      fuzz::finding("weight_scale " + std::to_string(ws) + (refuse ? " is accepted" : " is refused"));
    if (scale.ok()) {
      const auto want = static_cast<float>(ir::round_to_kind(multiplier, declared));
      for (std::size_t c = 0; c < n; ++c) {
        const float got = float_at(declared, scale->bytes().data(), c);
        if (std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(want) || !std::isfinite(got))
          fuzz::finding("the bound scale is not 1 / weight_scale");
      }
    }
    return 0;
  }
  // A master weight: ternary values (StoredTensor checks every code) and, when they load,
  // a finite positive scale.
  if (values.ok()) {
    // Its f32 scale is finite; only a narrower declared kind may refuse it.
    if (!scale.ok()) {
      if (declared == ElemKind::F32 || scale.error().message.find("is not finite as") == std::string::npos)
        fuzz::finding("a master weight loads but its scale does not: " + scale.error().message);
      return 0;
    }
    for (std::size_t c = 0; c < n; ++c) {
      const float got = float_at(declared, scale->bytes().data(), c);
      if (!std::isfinite(got) || !(got > 0.0f)) fuzz::finding("a master weight that loads has scale " + std::to_string(got));
    }
  }
  return 0;
}

// SPDX-License-Identifier: Apache-2.0
// weight_file.h - a weights file of any kind ternjit reads, opened by content, as the tensors it offers to parameters.
//
// A WeightFile is a safetensors or GGUF file (told apart by their first bytes, never by
// the file name) seen as a list of *offers*: named tensors in ternjit's orientation that
// parameters bind from. One file tensor may offer two tensors (a ternary weight and its
// scale), and two file tensors may make one (a Hugging Face packed weight and its
// weight_scale). formats/README.md states every rule; in short:
//   - safetensors: each tensor as it is (packed ternary with "<t>.format" metadata);
//   - GGUF F32/F16/BF16/Q8_0 tensor T with dims (ne0, ne1): float T[ne0, ne1]
//     (element [k, n] = ggml element (k, n), i.e. row-major rows of ne0 transposed);
//   - GGUF TQ1_0/TQ2_0 tensor T, dims (K, N): ternary T[K, N], and its block scales as
//     T_scale: [N] when every block of a row has the same d, and [G, N], G = K / 256,
//     always (element [g, n] = d of block g of row n);
//   - Hugging Face BitNet packed weight X (U8 [ceil(N/4), K], with a one-element float
//     sibling X_scale and no "X.format" metadata): ternary X[K, N], and X_scale: [N]
//     holding 1 / weight_scale (transformers' BitLinear divides by it);
//   - a float matrix W bound to a ternary parameter is a master weight: nn.Linear layout
//     [N, K] for safetensors (transposed to [K, N]; GGUF: its dims as above), ternarized
//     with absmean at load, its scale offered as W_scale: [N].
// Names pass through a NameMap first; a derived scale is named after the mapped tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "ir/ir.h"
#include "ir/stored_tensor.h"
#include "ternjit/result.h"

namespace ternjit::formats {

/// Rules that rename checkpoint tensors to parameter names, each "PATTERN=TARGET": `{x}`
/// in PATTERN matches one or more characters other than '.', TARGET may use the same
/// placeholders, every other character is literal ("model.layers.{i}.mlp.up_proj.weight
/// =L{i}.w_up"). The first rule matching a whole name wins; a name no rule matches keeps
/// its name. Where placeholders can split a name more than one way ("{a}{b}" on "xyz"),
/// each takes the longest part that lets the rest match, in pattern order (a = "xy", b =
/// "z"). Matching never backtracks: O(|name| x |pattern|) time whatever the rule and name.
class NameMap {
 public:
  /// Parses rules. Errors (InvalidArgument): no '=', an empty side, an unclosed '{', an
  /// empty or repeated placeholder, a TARGET placeholder PATTERN does not have.
  static Result<NameMap> parse(std::span<const std::string> rules);
  /// The mapped name of `name`.
  [[nodiscard]] std::string apply(const std::string& name) const;
  /// True when there are no rules.
  [[nodiscard]] bool empty() const { return rules_.empty(); }

  struct Rule;  ///< one compiled rule (weight_file.cpp)

 private:
  std::vector<std::shared_ptr<const Rule>> rules_;
};

/// What an offer is made of (file comment).
enum class OfferKind {
  Safetensors,  ///< a safetensors tensor as stored
  GgufFloat,    ///< a GGUF F32/F16/BF16/Q8_0 tensor, shape = its ggml dims (other types: refused when bound)
  GgufTernary,  ///< the ternary values of a GGUF TQ1_0/TQ2_0 tensor, [K, N]
  GgufScale,    ///< the block scales of a GGUF ternary tensor, [N] or [G, N]
  HfPacked,     ///< a Hugging Face BitNet packed weight, [K, N]
  HfScale,      ///< 1 / weight_scale of a Hugging Face packed weight, [N]
  MasterScale,  ///< the absmean scale of a float matrix ternarized at load, [N]
};

/// One tensor a file offers.
struct WeightOffer {
  std::string name;     ///< what a parameter matches (the mapped file name, or it + "_scale")
  std::string origin;   ///< the file tensor it is read from
  OfferKind kind = OfferKind::Safetensors;
  std::size_t tensor = 0;  ///< index of `origin` in the file's tensor list
  std::size_t sibling = 0;  ///< HfPacked/HfScale: index of the weight_scale tensor
};

/// A weights file as offers. Immutable once opened; copies share the file's bytes.
class WeightFile {
 public:
  /// Opens `path` by content: "GGUF" magic -> GGUF, else safetensors. Errors: as
  /// read_gguf / read_safetensors.
  static Result<WeightFile> open(const std::string& path, const NameMap& names = {});
  /// The offers of a parsed safetensors file (`display_name` names it in errors).
  static WeightFile from_safetensors(StFile file, std::string display_name, const NameMap& names = {});
  /// The offers of a parsed GGUF file.
  static WeightFile from_gguf(GgufFile file, std::string display_name, const NameMap& names = {});

  /// The name errors use (the path).
  [[nodiscard]] const std::string& display_name() const { return display_name_; }
  /// Every offer, in file order (a ternary tensor's scale right after it).
  [[nodiscard]] const std::vector<WeightOffer>& offers() const { return offers_; }
  /// Every offer's name made printable (text.h), for messages and "did you mean" notes.
  [[nodiscard]] std::vector<std::string> offer_names() const;
  /// The offer called `name`, or nullptr. Errors (InvalidInput): two offers share the name
  /// (a rename collision, or a file tensor named like a derived scale), naming both.
  [[nodiscard]] Result<const WeightOffer*> find(std::string_view name) const;

  /// The shape `offer` has as a parameter declared `declared` (ternjit orientation), or
  /// nullopt when only the declaration can say (packed safetensors data without a
  /// "<t>.shape" entry). Errors (InvalidInput, prefixed by `what`): the offer cannot bind
  /// such a parameter (a GGUF TQ tensor to a float one, scales that vary along K to a
  /// Tensor[N], a tensor of an unused dtype, a GGUF float tensor of more than 2 dims).
  [[nodiscard]] Result<std::optional<std::vector<std::int64_t>>> shape_for(const WeightOffer& offer,
                                                                         const ir::Type& declared,
                                                                         const std::string& what) const;
  /// The offer's values as a parameter of kind `declared` and shape `shape` (which
  /// shape_for gave, or the declaration fixed). Ternary values stay 2-bit: a transposed
  /// source is re-coded straight into tern2, never widened. Errors (InvalidInput,
  /// prefixed by `what`): as shape_for, a shape other than the offer's, an invalid code
  /// (naming the element), a zero or non-finite weight_scale.
  [[nodiscard]] Result<ir::StoredTensor> load(const WeightOffer& offer, ElemKind declared,
                                              std::vector<std::int64_t> shape, const std::string& what) const;

  /// Checks what was bound, given the offers bound to ternary parameters (`ternary`) and
  /// to any parameter (`bound`), by name: a ternary offer whose scale is not all 1 needs
  /// its scale offer bound too (a scale is never dropped); a MasterScale needs its weight
  /// bound to a ternary parameter. Errors (InvalidInput) name the tensor and the
  /// parameter to declare.
  [[nodiscard]] Result<void> check_scales(const std::set<std::string>& ternary, const std::set<std::string>& bound) const;

 private:
  WeightFile() = default;
  void add_scale_offers(const NameMap& names);

  std::string display_name_;
  std::optional<StFile> st_;
  std::optional<GgufFile> gguf_;
  std::vector<WeightOffer> offers_;
  std::multimap<std::string, std::size_t> by_name_;
};

/// The offer parameter `param` binds from: its full name, else, when `short_ok`, its name
/// without the layer prefix ("BitLinear.w" -> "w"); nullptr when neither is offered.
/// Errors: as WeightFile::find.
Result<const WeightOffer*> find_param_offer(const WeightFile& file, const std::string& param, bool short_ok);

/// True when `data` starts with the GGUF magic.
bool is_gguf(std::span<const std::uint8_t> data);

}  // namespace ternjit::formats

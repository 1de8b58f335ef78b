// SPDX-License-Identifier: Apache-2.0
// fuzz_weight_binder.cpp - libFuzzer harness: a GGUF file, a name map and .tri declarations, bound end to end.
//
// Input: byte 0 picks the .tri layer (a ternary weight with its per-row scale, one with
// grouped scales, a float matrix, an f16 table in ggml's row order), then name-map rules,
// one a line, up to a NUL byte, then the GGUF file. Invariants: nothing crashes; every
// error of the reader and of an offer's shape_for/load names the file; prepare_run either
// fails with a message or binds every parameter the layer reads with its declared element
// kind, rank, static extents and the extents its symbols were bound to.
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf.h"
#include "formats/run_inputs.h"
#include "formats/weight_file.h"
#include "ir/dsl/dsl.h"
#include "tests/fuzz/fuzz_testing.h"

namespace {

using namespace ternjit;

constexpr std::string_view kName = "fuzz.gguf";

constexpr std::string_view kLayers[] = {
    "layer L {\n param w: TernaryTensor[K, N]\n param w_scale: Tensor[N]\n"
    " fn forward(x: Tensor[M, K]) -> Tensor[M, N] { return (x @ w) * w_scale }\n}\n",
    "layer L {\n param w: TernaryTensor[K, N]\n param w_scale: Tensor[G, N]\n"
    " fn forward(x: Tensor[M, K]) -> Tensor[M, N] { return grouped_matmul(x, w, w_scale) }\n}\n",
    "layer L {\n param w: Tensor[K, N]\n param b: Tensor[N]\n"
    " fn forward(x: Tensor[M, K]) -> Tensor[M, N] { return (x @ w) + b }\n}\n",
    "layer L {\n param t: Tensor<f16>[V, E]\n"
    " fn forward(x: Tensor[M, V]) -> Tensor[M, E] { return x @ t }\n}\n",
};

const std::vector<ir::Module>& modules() {
  static const std::vector<ir::Module> all = [] {
    std::vector<ir::Module> out;
    for (std::string_view src : kLayers) {
      auto m = dsl::compile_tri(src, "l.tri");
      if (!m.ok()) fuzz::finding("a harness layer does not compile: " + m.error().message);
      out.push_back(std::move(m.value()));
    }
    return out;
  }();
  return all;
}

void require_names_file(const Error& e, const std::string& what) {
  if (e.message.find(kName) == std::string::npos) fuzz::finding(what + ": the error does not name the file: " + e.message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const ir::Module& m = modules()[data[0] % std::size(kLayers)];
  const std::string_view rest = fuzz::as_text(data + 1, size - 1);
  const std::size_t split = std::min(rest.find('\0'), rest.size());
  std::vector<std::string> rules;
  for (std::size_t start = 0; start < split;) {
    const std::size_t end = std::min(rest.find('\n', start), split);
    rules.emplace_back(rest.substr(start, end - start));
    start = end + 1;
  }
  auto names = formats::NameMap::parse(rules);
  if (!names.ok()) return 0;
  const std::size_t gguf_at = 1 + std::min(split + 1, rest.size());
  auto parsed = formats::parse_gguf(ir::SharedBytes::copy_of({data + gguf_at, size - gguf_at}), kName);
  if (!parsed.ok()) {
    require_names_file(parsed.error(), "parse_gguf");
    return 0;
  }
  const formats::WeightFile file = formats::WeightFile::from_gguf(std::move(parsed.value()), std::string(kName), *names);

  // Each parameter's offer alone: shape_for and load fail naming the file, or give a
  // tensor of the declared kind and of the shape shape_for said.
  for (const ir::ParamDecl& p : m.params()) {
    auto offer = formats::find_param_offer(file, p.name, true);
    if (!offer.ok()) {
      require_names_file(offer.error(), "find_param_offer");
      continue;
    }
    if (*offer == nullptr) continue;
    const std::string what = "parameter '" + p.name + "'";
    auto shape = file.shape_for(**offer, p.type, what);
    if (!shape.ok()) {
      require_names_file(shape.error(), "shape_for");
      continue;
    }
    if (!shape->has_value()) continue;
    if (auto n = ir::checked_numel(**shape); !n || *n > (std::int64_t{1} << 20)) continue;
    auto loaded = file.load(**offer, p.type.elem, **shape, what);
    if (!loaded.ok()) {
      require_names_file(loaded.error(), "load");
      continue;
    }
    if (loaded->kind() != p.type.elem || loaded->shape() != **shape)
      fuzz::finding("load of " + p.name + " gives another kind or shape than shape_for said");
  }

  // End to end: what prepare_run binds has the declared kind and shape.
  ir::ShapeBindings shapes;
  shapes.values["M"] = 1;
  formats::PrepareOptions options;
  options.random_missing_params = false;
  options.max_elements = std::int64_t{1} << 20;
  options.max_bytes = std::uint64_t{64} << 20;
  const ir::Function* f = m.find_function("L.forward");
  auto run = formats::prepare_run(m, *f, nullptr, &file, shapes, options);
  if (!run.ok()) {
    if (run.error().message.empty()) fuzz::finding("prepare_run fails without a message");
    return 0;
  }
  for (const ir::ParamDecl& p : m.params()) {
    auto it = run->params.values.find(p.name);
    if (it == run->params.values.end()) fuzz::finding("prepare_run succeeded without binding " + p.name);
    const ir::StoredTensor& t = it->second;
    if (t.kind() != p.type.elem || t.shape().size() != p.type.shape.size())
      fuzz::finding(p.name + " is bound with another kind or rank than declared");
    for (std::size_t d = 0; d < p.type.shape.size(); ++d) {
      const ir::Dim& dim = p.type.shape[d];
      const auto want = dim.is_static() ? std::optional<std::int64_t>(dim.extent)
                                        : run->shapes.lookup("L", p.symbols[dim.sym.index]);
      if (!want || *want != t.shape()[d]) fuzz::finding(p.name + " is bound with another extent than declared at dim " + std::to_string(d));
    }
  }
  return 0;
}

// SPDX-License-Identifier: Apache-2.0
// main.cpp - ternjit::grad from C++ (docs/training.md shows this file): the backward of a BitLinear.
#include <ternjit/ternjit.hpp>

#include <cstdio>
#include <vector>

namespace {

int fail(const ternjit::Error& e) {
  std::fprintf(stderr, "%s\n", ternjit::render(e).c_str());
  return 1;
}

}  // namespace

int main() {
  const char* source = R"(layer BitLinear {
    param w: Tensor[8, 4]
    fn forward(x: Tensor[M, 8]) -> Tensor[M, 4] {
        return quantize_int8(x) @ ternarize_absmean(w)
    }
})";
  auto module = ternjit::Module::from_tri(source, "layer.tri");
  if (!module.ok()) return fail(module.error());
  ternjit::GradOptions options;
  options.wrt = {"x", "@BitLinear.w"};
  auto added = ternjit::grad(*module, "BitLinear.forward", options);  // .fwd and .bwd
  if (!added.ok()) return fail(added.error());

  auto engine = ternjit::Engine::create(ternjit::EngineOptions{});
  if (!engine.ok()) return fail(engine.error());
  auto program = engine->compile(*module);
  if (!program.ok()) return fail(program.error());
  std::vector<float> w(8 * 4), x(2 * 8), y(2 * 4), dy(2 * 4, 1.0f), dx(2 * 8), dw(8 * 4);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 4;
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 5) - 2) / 2;
  if (auto r = program->bind("BitLinear.w", {w.data(), ternjit::ElemKind::F32, {8, 4}}); !r.ok())
    return fail(r.error());

  // "BitLinear.forward.fwd": x -> y, then the saved tensors (added->num_saved of them).
  std::vector<ternjit::TensorView> fwd_in{{x.data(), ternjit::ElemKind::F32, {2, 8}}};
  std::vector<ternjit::TensorView> fwd_out{{y.data(), ternjit::ElemKind::F32, {2, 4}}};
  auto kernel = program->kernel(added->forward, fwd_in);
  if (!kernel.ok()) return fail(kernel.error());
  std::vector<std::vector<float>> saved_data;
  saved_data.reserve((*kernel)->outputs().size());  // the views below point into it
  for (std::size_t i = 1; i < (*kernel)->outputs().size(); ++i) {
    const ternjit::TensorView& spec = (*kernel)->outputs()[i];  // its kind and shape
    std::size_t n = 1;
    for (std::int64_t d : spec.shape) n *= static_cast<std::size_t>(d);
    saved_data.emplace_back(n);  // 4 bytes an element: room for a value of any kind
    fwd_out.push_back({saved_data.back().data(), spec.kind, spec.shape});
  }
  if (auto r = program->run(added->forward, fwd_in, fwd_out); !r.ok())
    return fail(r.error());

  // "BitLinear.forward.bwd": x, dy, the saved tensors -> dx, dW.
  std::vector<ternjit::TensorView> bwd_in{fwd_in[0], {dy.data(), ternjit::ElemKind::F32, {2, 4}}};
  bwd_in.insert(bwd_in.end(), fwd_out.begin() + 1, fwd_out.end());
  std::vector<ternjit::TensorView> bwd_out{{dx.data(), ternjit::ElemKind::F32, {2, 8}},
                                           {dw.data(), ternjit::ElemKind::F32, {8, 4}}};
  if (auto r = program->run(added->backward, bwd_in, bwd_out); !r.ok())
    return fail(r.error());
  std::printf("y[0] = %g, dx[0] = %g, dW[0] = %g (%zu saved)\n", y[0], dx[0], dw[0], added->num_saved);
  return 0;
}

# SPDX-License-Identifier: Apache-2.0
# torch.py - PyTorch integration: an autograd-free BitLinear module that runs through ternjit.
"""PyTorch integration (CPU tensors; Debian's python3-torch).

:class:`BitLinear` is a ``torch.nn.Module`` holding a BitNet b1.58 layer — int8 ternary
weights, an rmsnorm ``gamma`` and a per-output-channel ``scale`` — compiled once from
:data:`BITLINEAR_SOURCE` and run by ternjit::

    layer = ternjit.torch.BitLinear(weight, gamma, scale)   # weight: int8 [out, in]
    y = layer(x)                                            # x: float32 [..., in]

forward() computes ``relu((quantize_int8(rmsnorm(x, gamma, 1e-5)) @ weight.T) * scale)``
exactly as the ``.tri`` layer defines it. It is inference only: the result has no
``grad_fn``. The input's memory is handed to the kernel directly (``data_ptr()``, no copy
unless ``x`` is not a contiguous float32 CPU tensor) and the result is written straight
into a fresh torch tensor.
"""

import threading

import torch

import ternjit

#: The layer this module runs: tests/dsl/bitlinear.tri without its comment lines (the module stands
#: alone once installed; tests/unit/dsl/bitlinear_copies_test.cpp checks the copy).
BITLINEAR_SOURCE = """\
layer BitLinear {
    param gamma: Tensor[K]
    param w: TernaryTensor[K, N]
    param w_scale: Tensor[N]
    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {
        let h = rmsnorm(x, gamma, 1e-5)
        let q = quantize_int8(h)
        let y = q @ w
        return relu(y * w_scale)
    }
}
"""

#: The rmsnorm epsilon of :data:`BITLINEAR_SOURCE`.
EPS = 1e-5


class BitLinear(torch.nn.Module):
    """An autograd-free BitLinear layer run by ternjit.

    Args:
        weight: ternary weights, integer tensor ``[out_features, in_features]`` (the
            ``torch.nn.Linear`` layout) with values in {-1, 0, 1}.
        gamma: rmsnorm gain ``[in_features]``.
        scale: per-output-channel scale ``[out_features]``.
        engine: a :class:`ternjit.Engine` to compile with (default: ``Engine.from_env()``).

    The tensors are kept as buffers (``state_dict`` works); changing them through
    ``load_state_dict`` or ``.to()`` rebinds the weights on the next call.
    Raises :class:`ternjit.Error` for non-ternary weights or mismatched shapes.
    """

    def __init__(self, weight, gamma, scale, engine=None):
        super().__init__()
        weight = torch.as_tensor(weight)
        gamma = torch.as_tensor(gamma, dtype=torch.float32)
        scale = torch.as_tensor(scale, dtype=torch.float32)
        if weight.dim() != 2:
            raise ternjit.Error(ternjit.INVALID_ARGUMENT,
                                "BitLinear weight must be [out_features, in_features], got %s" % list(weight.shape))
        out_features, in_features = weight.shape
        if list(gamma.shape) != [in_features]:
            raise ternjit.Error(ternjit.INVALID_ARGUMENT, "BitLinear gamma must be [%d] (in_features), got %s" %
                                (in_features, list(gamma.shape)))
        if list(scale.shape) != [out_features]:
            raise ternjit.Error(ternjit.INVALID_ARGUMENT, "BitLinear scale must be [%d] (out_features), got %s" %
                                (out_features, list(scale.shape)))
        if weight.is_floating_point() or weight.is_complex():
            raise ternjit.Error(ternjit.INVALID_ARGUMENT,
                                "BitLinear weight must be an integer tensor of {-1, 0, 1}, got %s" % weight.dtype)
        if weight.numel() and (int(weight.min()) < -1 or int(weight.max()) > 1):
            raise ternjit.Error(ternjit.INVALID_INPUT, "BitLinear weight has values outside {-1, 0, 1} (range [%d, %d])" %
                                (int(weight.min()), int(weight.max())))
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.register_buffer("weight", weight.detach().to(torch.int8).contiguous().clone())
        self.register_buffer("gamma", gamma.detach().contiguous().clone())
        self.register_buffer("scale", scale.detach().contiguous().clone())
        self.engine = engine if engine is not None else ternjit.Engine.from_env()
        self._lock = threading.Lock()
        self._program = None
        self._kernels = {}
        self._build()

    @classmethod
    def from_linear(cls, linear, gamma=None, engine=None):
        """Ternarizes a ``torch.nn.Linear`` (BitNet b1.58 absmean, per output channel):
        ``scale[n] = mean|W[n, :]|``, ``weight = clamp(round(W / scale[n]), -1, 1)``."""
        if linear.bias is not None:
            raise ternjit.Error(ternjit.UNSUPPORTED, "BitLinear has no bias; the Linear layer has one")
        w = linear.weight.detach().to(torch.float32)
        scale = w.abs().mean(dim=1)
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        weight = torch.clamp(torch.round(w / safe[:, None]), -1, 1).to(torch.int8)
        if gamma is None:
            gamma = torch.ones(w.shape[1], dtype=torch.float32)
        return cls(weight, gamma, scale, engine=engine)

    def _build(self):
        """Compiles the layer and binds the current buffers (weights are copied by ternjit)."""
        program = self.engine.compile(BITLINEAR_SOURCE, "<ternjit.torch.BitLinear>")
        # [out, in] -> the .tri layout w[K, N]; the bound copies are owned by the program.
        program.bind("BitLinear.w", self.weight.t().contiguous().numpy(), dtype="t2")
        program.bind("BitLinear.gamma", self.gamma.detach().to(torch.float32).contiguous().numpy())
        program.bind("BitLinear.w_scale", self.scale.detach().to(torch.float32).contiguous().numpy())
        self._program = program
        self._kernels = {}

    def _kernel(self, rows):
        with self._lock:
            if self._program is None:
                self._build()
            kernel = self._kernels.get(rows)
            if kernel is None:
                kernel = self._program.kernel("BitLinear.forward",
                                              ternjit.TensorSpec((rows, self.in_features), "f32"))
                self._kernels[rows] = kernel
            return kernel

    def forward(self, x):
        """``x[..., in_features]`` (CPU) -> ``[..., out_features]`` in x's floating dtype."""
        if not isinstance(x, torch.Tensor):
            x = torch.as_tensor(x, dtype=torch.float32)
        if x.device.type != "cpu":
            raise ternjit.Error(ternjit.UNSUPPORTED, "ternjit.torch.BitLinear runs on CPU tensors, got %s" % x.device)
        if x.dim() < 1 or x.shape[-1] != self.in_features:
            raise ternjit.Error(ternjit.INVALID_ARGUMENT, "BitLinear expects x[..., %d], got %s" %
                                (self.in_features, list(x.shape)))
        lead = x.shape[:-1]
        out_dtype = x.dtype if x.is_floating_point() else torch.float32
        x2 = x.detach().reshape(-1, self.in_features).to(torch.float32).contiguous()
        rows = x2.shape[0]
        y = torch.empty((rows, self.out_features), dtype=torch.float32)
        if rows > 0:
            self._kernel(rows).call_pointers([x2.data_ptr(), y.data_ptr()])
        return y.reshape(*lead, self.out_features).to(out_dtype)

    def _apply(self, fn, *args, **kwargs):
        result = super()._apply(fn, *args, **kwargs)
        self._invalidate()
        return result

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._invalidate()

    def _invalidate(self):
        lock = getattr(self, "_lock", None)
        if lock is None:  # during __init__'s register_buffer
            return
        with lock:
            self._program = None
            self._kernels = {}

    def __getstate__(self):
        # The compiled program is rebuilt from the buffers (pickle, torch.save, deepcopy);
        # the engine pickles as the options it was made with.
        state = dict(super().__getstate__())
        for key in ("_program", "_kernels", "_lock"):
            state.pop(key, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._lock = threading.Lock()
        self._program = None
        self._kernels = {}

    def extra_repr(self):
        return "in_features=%d, out_features=%d" % (self.in_features, self.out_features)

"""PyTorch runner: ``eager`` on CPU (and CUDA when visible).

Builders get ``(torch, *tensors, **static)``; float inputs arrive with
``requires_grad=True`` only inside :func:`torch_vjp`.
"""

from __future__ import annotations

import numpy as np

from .base import Runner, nest_map, of_floats


def make(fw, spec):
    return TorchRunner(fw, spec)


class TorchRunner(Runner):
    def __init__(self, fw, spec):
        super().__init__(fw, spec)
        if spec.mode != "eager":
            raise ValueError(f"unknown PyTorch mode {spec.mode!r}")
        self.torch = fw.module
        self.torch_device = "cuda" if spec.device == "gpu" else "cpu"

    def numpy(self, x):
        if isinstance(x, self.torch.Tensor):
            # a ZeroTensor (abs's second derivative: sgn's backward) has no storage to read
            out = x.detach().cpu().numpy(force=x._is_zerotensor())  # noqa: SLF001
            self.check_device(str(x.device), out)
            return out
        if isinstance(x, (bool, int, float, str)):
            return x
        return np.asarray(x)

    def tensor(self, a):
        a = np.asarray(a)
        return self.torch.from_numpy(np.array(a, copy=True)).to(self.torch_device)

    def _build(self, builder, static):
        def call(*arrays):
            return nest_map(self.numpy, builder(self.torch, *[self.tensor(a) for a in arrays], **static))

        return call

    def sync(self, out):
        if self.torch_device == "cuda":
            self.torch.cuda.synchronize()
        return out


def torch_vjp(torch, *args, fn, diff, static, ct):
    if ct:
        *args, cotangent = args
    else:
        cotangent = None
    args = [a.requires_grad_(True) if d else a for a, d in zip(args, diff)]
    y = fn(torch, *args, **static)
    xs = [a for a, d in zip(args, diff) if d]
    if cotangent is None:  # no implicit cotangent for non-scalars in PyTorch: ones
        cotangent = torch.ones_like(y)
    # A y that does not require grad makes autograd.grad raise RuntimeError: that is
    # PyTorch's own answer, so it is not translated into None here.
    gs = torch.autograd.grad(y, xs, grad_outputs=cotangent, allow_unused=True) if xs else []
    it = iter(gs)
    return y.detach(), tuple(next(it) if d else None for d in diff)


def torch_jvp(torch, *args, fn, diff, static):
    """``torch.func.jvp`` of ``fn`` as a function of its float inputs."""
    n = sum(diff)
    f, xs = of_floats(torch, args[: len(args) - n], diff, fn, static)
    y, t = torch.func.jvp(f, tuple(xs), tuple(args[len(args) - n :]))
    return y.detach(), t.detach()


def torch_second_order(torch, *args, fn, diff, static):
    """``autograd.grad`` twice, the first with ``create_graph``."""
    *args, w, v = args
    args = [a.requires_grad_(True) if d else a for a, d in zip(args, diff)]
    xs = [a for a, d in zip(args, diff) if d]
    y = fn(torch, *args, **static)
    g = torch.autograd.grad(y, xs, grad_outputs=w, create_graph=True, allow_unused=True)
    # a first gradient that no input reaches is the upstream itself: nothing to differentiate
    if g[0] is not None and g[0].requires_grad:
        h = torch.autograd.grad(g[0], xs, grad_outputs=v, allow_unused=True)
    else:
        h = [None] * len(xs)
    it_g, it_h = iter(g), iter(h)
    per = [(next(it_g), next(it_h)) if d else (None, None) for d in diff]
    return (
        y.detach(),
        tuple(None if a is None else a.detach() for a, _ in per),
        tuple(None if b is None else b.detach() for _, b in per),
    )


def torch_derivative(torch, x, *, fn, order, static):
    """The ``order``-th derivative of an elementwise ``fn``: ``autograd.grad`` of the sum with
    ``create_graph``, ``order`` times."""
    x = x.requires_grad_(True)
    y = fn(torch, x, **static)
    for _ in range(order):
        (y,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    return y.detach()


TorchRunner.builders = {
    "vjp": torch_vjp,
    "jvp": torch_jvp,
    "second_order": torch_second_order,
    "derivative": torch_derivative,
}

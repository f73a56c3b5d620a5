"""Faults for fake-quant-gradient: tf.quantization.fake_quant_with_min_max_vars regressions.

Each replaces the public function (all its export names) with a ``tf.custom_gradient``
wrapper around the real op, so it runs in every mode (eager, tf.function, XLA, v1 graph).
"""

from __future__ import annotations

from . import fault
from .patch import get, put

_NAMES = (
    "quantization.fake_quant_with_min_max_vars",
    "compat.v1.fake_quant_with_min_max_vars",
    "compat.v1.quantization.fake_quant_with_min_max_vars",
)


def _real_forward(tf, real, x, lo, hi, kw):
    return real(x, lo, hi, **kw)


def _fake_quant(fault_name, description, forward=_real_forward, backward=lambda dy, g: g):
    """A fault that patches every export of the op with ``forward``/``backward`` built on the real
    op and gradient op (both as they were when patched)."""

    @fault(fault_name, description=description)
    def patch(tf):
        real = get(tf, _NAMES[0])
        real_grad = tf.quantization.fake_quant_with_min_max_vars_gradient

        def fake_quant_with_min_max_vars(inputs, min, max, num_bits=8, narrow_range=False, name=None):  # noqa: A002
            kw = dict(num_bits=num_bits, narrow_range=narrow_range)

            @tf.custom_gradient
            def op(x, lo, hi):
                def grad(dy):
                    return backward(dy, real_grad(dy, x, lo, hi, **kw))

                return forward(tf, real, x, lo, hi, kw), grad

            return op(*(tf.convert_to_tensor(v, tf.float32) for v in (inputs, min, max)))

        put(tf, _NAMES, fake_quant_with_min_max_vars)


_fake_quant(
    "fake-quant-no-range-mask",
    description="the x-gradient of fake_quant_with_min_max_vars passes dy everywhere (no nudged-range mask)",
    backward=lambda dy, g: (dy, g[1], g[2]),
)

_fake_quant(
    "fake-quant-min-max-grad-dropped",
    description="fake_quant_with_min_max_vars gives no gradient to min and max (as if they were attrs)",
    backward=lambda dy, g: (g[0], None, None),
)


def _no_nudge(tf, real, x, lo, hi, kw):
    levels = float(2 ** kw["num_bits"] - 1 - int(kw["narrow_range"]))
    scale = (hi - lo) / levels
    return tf.floor((tf.clip_by_value(x, lo, hi) - lo) / scale + 0.5) * scale + lo


_fake_quant(
    "fake-quant-no-nudge",
    description="fake_quant_with_min_max_vars quantizes [min, max] as given: zero is not nudged onto the grid",
    forward=_no_nudge,
)

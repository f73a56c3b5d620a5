"""Faults for fake-quant-gradient: tf.quantization.fake_quant_with_min_max_vars regressions.

Each replaces the public function (all its export names) with a ``tf.custom_gradient``
wrapper around the real op, so it runs in every mode (eager, tf.function, XLA, v1 graph).
"""

from __future__ import annotations

from . import fault

_NAMES = (
    "quantization.fake_quant_with_min_max_vars",
    "compat.v1.fake_quant_with_min_max_vars",
    "compat.v1.quantization.fake_quant_with_min_max_vars",
)


def _replace(tf, forward, backward):
    """Patch every export of the op with ``forward``/``backward`` built on the real op and gradient op."""
    real = tf.quantization.fake_quant_with_min_max_vars
    real_grad = tf.quantization.fake_quant_with_min_max_vars_gradient

    def fake_quant_with_min_max_vars(inputs, min, max, num_bits=8, narrow_range=False, name=None):  # noqa: A002
        kw = dict(num_bits=num_bits, narrow_range=narrow_range)

        @tf.custom_gradient
        def op(x, lo, hi):
            def grad(dy):
                return backward(dy, real_grad(dy, x, lo, hi, **kw))

            return forward(tf, real, x, lo, hi, kw), grad

        return op(*(tf.convert_to_tensor(v, tf.float32) for v in (inputs, min, max)))

    for dotted in _NAMES:
        obj = tf
        *path, last = dotted.split(".")
        for p in path:
            obj = getattr(obj, p)
        setattr(obj, last, fake_quant_with_min_max_vars)


def _real_forward(tf, real, x, lo, hi, kw):
    return real(x, lo, hi, **kw)


@fault(
    "fake-quant-no-range-mask",
    breaks=["fake-quant-gradient"],
    description="the x-gradient of fake_quant_with_min_max_vars passes dy everywhere (no nudged-range mask)",
)
def _no_range_mask(tf):
    _replace(tf, _real_forward, lambda dy, g: (dy, g[1], g[2]))


@fault(
    "fake-quant-min-max-grad-dropped",
    breaks=["fake-quant-gradient"],
    description="fake_quant_with_min_max_vars gives no gradient to min and max (as if they were attrs)",
)
def _min_max_grad_dropped(tf):
    _replace(tf, _real_forward, lambda dy, g: (g[0], None, None))


@fault(
    "fake-quant-no-nudge",
    breaks=["fake-quant-gradient"],
    description="fake_quant_with_min_max_vars quantizes [min, max] as given: zero is not nudged onto the grid",
)
def _no_nudge(tf):
    def forward(tf, real, x, lo, hi, kw):
        levels = float(2 ** kw["num_bits"] - 1 - int(kw["narrow_range"]))
        scale = (hi - lo) / levels
        return tf.floor((tf.clip_by_value(x, lo, hi) - lo) / scale + 0.5) * scale + lo

    _replace(tf, forward, lambda dy, g: g)

"""Faults for singular-point-gradients: a gradient at a singular point takes another value.

- ``sqrt-gradient-zero-at-zero``: the registered gradient of ``Sqrt`` is 0 where sqrt(x) = 0
  (a "safe sqrt") instead of 0.5 / sqrt(0) = +inf; the norm and the std, which differentiate
  through it, change with it.
- ``sqrt-second-derivative-zero-at-zero``: the registered gradient of ``SqrtGrad`` (sqrt's
  second derivative) is 0 where sqrt(x) = 0 instead of -inf.
- ``pow-gradient-zero-for-zero-exponent``: the base-gradient of ``Pow`` is 0 where the
  exponent is 0 (PyTorch's pow_backward) instead of 0 * x**-1 = NaN at x = 0; x**1's second
  derivative becomes 0 with it.
- ``xlogy-gradient-unmasked``: the x-gradient of ``Xlogy`` is log(y) also at x = 0 (the change
  proposed upstream in tensorflow#119869) instead of 0.
- ``norm-gradient-zero-at-origin``: ``tf.norm`` / ``tf.linalg.norm`` give the zero vector the
  subgradient 0 (PyTorch's norm_backward; tensorflow#108761) instead of 0 / 0 = NaN.
- ``reduce-std-gradient-zero-when-constant``: ``tf.math.reduce_std`` gives a row whose std is
  0 the gradient 0 (PyTorch's std_backward) instead of NaN.

Each patch replaces a registered gradient or a public function, so it holds in eager,
tf.function, XLA and v1 graph mode alike.
"""

from __future__ import annotations

from .patch import changes_grad, regrad, replaces, sum_to


@changes_grad("Sqrt", name="sqrt-gradient-zero-at-zero")
def _sqrt_gradient_zero_at_zero(tf, op, g):
    """the gradient of Sqrt is 0 where sqrt(x) = 0 instead of +inf (-inf at -0)"""
    return tf.where(tf.equal(op.outputs[0], 0), tf.zeros_like(g), g)


@regrad("SqrtGrad", name="sqrt-second-derivative-zero-at-zero")
def _sqrt_second_derivative_zero_at_zero(tf, original, op, dgrad):
    """the gradient of SqrtGrad (sqrt's second derivative) is 0 where sqrt(x) = 0 instead of -inf"""
    ga, gb = original(op, dgrad)
    return tf.where(tf.equal(op.inputs[0], 0), tf.zeros_like(ga), ga), gb


@regrad("Pow", name="pow-gradient-zero-for-zero-exponent")
def _pow_gradient_zero_for_zero_exponent(tf, original, op, dy):
    """the base-gradient of Pow is 0 where the exponent is 0 instead of 0 * x**-1 (NaN at x = 0)"""
    gx, gy = original(op, dy)
    if gx is None:
        return gx, gy
    x, y = op.inputs
    d = y * tf.pow(x, y - 1)
    return sum_to(tf, dy * tf.where(tf.equal(y, 0), tf.zeros_like(d), d), x), gy


@regrad("Xlogy", name="xlogy-gradient-unmasked")
def _xlogy_gradient_unmasked(tf, original, op, dy):
    """the x-gradient of Xlogy is log(y) also where x = 0, instead of 0"""
    _, gy = original(op, dy)
    x, y = op.inputs
    return sum_to(tf, dy * tf.math.log(y) + tf.zeros_like(x), x), gy


@replaces("norm", "linalg.norm", name="norm-gradient-zero-at-origin")
def _norm_gradient_zero_at_origin(tf, original, tensor, ord="euclidean", axis=None, keepdims=None, name=None):  # noqa: A002
    """tf.norm / tf.linalg.norm (euclidean) give the zero vector the gradient 0 instead of NaN"""
    t = tf.convert_to_tensor(tensor)
    if ord != "euclidean" or not t.dtype.is_floating:
        return original(t, ord=ord, axis=axis, keepdims=keepdims, name=name)
    zero = tf.equal(tf.reduce_sum(t * t, axis=axis, keepdims=True), 0)
    safe = original(tf.where(zero, tf.ones_like(t), t), ord=ord, axis=axis, keepdims=True)
    n = tf.where(zero, tf.zeros_like(safe), safe)
    return n if keepdims else tf.squeeze(n, axis=axis)


@replaces("math.reduce_std", name="reduce-std-gradient-zero-when-constant")
def _reduce_std_gradient_zero_when_constant(tf, original, input_tensor, axis=None, keepdims=False, name=None):
    """tf.math.reduce_std gives a constant (std 0) input the gradient 0 instead of NaN"""
    var = tf.math.reduce_variance(input_tensor, axis=axis, keepdims=keepdims)
    zero = tf.equal(var, 0)
    return tf.where(zero, tf.zeros_like(var), tf.sqrt(tf.where(zero, tf.ones_like(var), var)), name=name)

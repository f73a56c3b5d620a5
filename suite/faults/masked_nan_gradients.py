"""Faults for masked-nan-gradients: what leaks through the branch tf.where did not select changes.

- ``where-gradient-leaks-nan``: the gradient of ``tf.where`` (SelectV2/Select) adds
  ``0 * sum(branch)`` to each branch's gradient, so a non-finite value in an unselected entry
  (sqrt of a negative, log 0, 1/0, 0/0) turns every entry's gradient NaN, the selected ones too.
- ``log-gradient-masked-zero``: the registered gradient of Log multiplies with ``mul_no_nan``
  (as TensorFlow's CPU kernels for Sqrt and Reciprocal already do), so the famous NaN of a masked
  ``log(0)`` becomes 0.
- ``where-unselected-gradient-nan``: the gradient of ``tf.where`` gives each branch NaN instead
  of 0 where the branch was not selected, so even the double where stops being finite.
- ``clip-by-norm-naive-scale``: ``tf.clip_by_norm`` scales by ``min(1, c / |t|)`` without the
  two-tap where: the zero vector's gradient is NaN again (tensorflow#22048).
- ``clip-by-global-norm-inf-zeros``: ``tf.clip_by_global_norm`` drops its ``+ (n - n)`` term, so an
  infinite global norm scales by 1/inf = 0 (zeros) instead of NaN (tensorflow#21363 undone).

Each patch replaces a public function or a registered gradient, so it holds in eager,
tf.function, XLA and v1 graph mode alike.
"""

from __future__ import annotations

from .patch import regrad, replaces, sum_to


@regrad("SelectV2", "Select", name="where-gradient-leaks-nan")
def _where_gradient_leaks_nan(tf, original, op, grad):
    """the gradient of tf.where adds 0 * sum(branch) to each branch's gradient: a non-finite unselected value makes
    every entry's gradient NaN, the selected ones too"""
    none, gx, gy = original(op, grad)
    _, x, y = op.inputs
    if x.dtype.is_floating:
        gx, gy = gx + 0 * tf.reduce_sum(x), gy + 0 * tf.reduce_sum(y)
    return none, gx, gy


@regrad("Log", name="log-gradient-masked-zero")
def _log_gradient_masked_zero(tf, original, op, grad):
    """the gradient of Log is mul_no_nan(1/x, dy): 0 where the upstream gradient is 0, so a masked log(0) no longer has
    a NaN gradient"""
    return tf.math.multiply_no_nan(tf.math.reciprocal(op.inputs[0]), grad)


@regrad("SelectV2", "Select", name="where-unselected-gradient-nan")
def _where_unselected_gradient_nan(tf, original, op, grad):
    """the gradient of tf.where gives each branch NaN instead of 0 where it was not selected"""
    c, x, y = op.inputs
    v2 = op.type == "SelectV2"
    where = tf.where if v2 else tf.compat.v1.where  # v1 Select: a vector c picks rows
    nan = tf.fill(tf.shape(grad), tf.constant(float("nan"), grad.dtype))
    gx, gy = where(c, grad, nan), where(c, nan, grad)
    if v2:
        gx, gy = sum_to(tf, gx, x), sum_to(tf, gy, y)
    return None, gx, gy


@replaces("clip_by_norm", "compat.v1.clip_by_norm", name="clip-by-norm-naive-scale")
def _clip_by_norm_naive_scale(tf, original, t, clip_norm, axes=None, name=None):
    """tf.clip_by_norm computes t * min(1, c / |t|) without the two-tap where: NaN gradient at the zero vector"""
    t = tf.convert_to_tensor(t)
    norm = tf.sqrt(tf.reduce_sum(t * t, axes, keepdims=True))
    return t * tf.minimum(tf.constant(1, t.dtype), tf.cast(clip_norm, t.dtype) / norm)


@replaces("clip_by_global_norm", "compat.v1.clip_by_global_norm", name="clip-by-global-norm-inf-zeros")
def _clip_by_global_norm_inf_zeros(tf, original, t_list, clip_norm, use_norm=None, name=None):
    """tf.clip_by_global_norm scales by c * min(1/n, 1/c) without + (n - n): an infinite global norm gives zeros instead
    of NaN"""
    t_list = list(t_list)
    if use_norm is None:
        use_norm = tf.linalg.global_norm(t_list)
    scale = clip_norm * tf.minimum(1.0 / use_norm, tf.constant(1.0, use_norm.dtype) / clip_norm)
    return [None if t is None else t * tf.cast(scale, t.dtype) for t in t_list], use_norm

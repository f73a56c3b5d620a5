"""Faults for image-resize-gradients: a resize gradient that is not the transpose of the resize.

- ``resize-bilinear-grad-corner-centres``: the gradient of ``ResizeBilinear`` is computed
  without half-pixel centres (``half_pixel_centers=False``, TF1's sampling grid), so it is
  the transpose of another interpolation matrix than the one the value used;
- ``scale-and-translate-grad-ignores-antialias``: the gradient of ``ScaleAndTranslate`` is
  computed with ``antialias=False``, the unstretched kernel's transpose, while the value
  stays antialiased.

Each patch replaces a registered gradient, so it holds in eager, tf.function, XLA and v1
graph mode alike.
"""

from __future__ import annotations

from .patch import regrad


@regrad("ResizeBilinear", name="resize-bilinear-grad-corner-centres")
def _resize_bilinear_grad_corner_centres(tf, original, op, dy):
    """the gradient of ResizeBilinear samples at pixel corners (half_pixel_centers=False) while the value uses
    half-pixel centres"""
    dx = tf.raw_ops.ResizeBilinearGrad(
        grads=dy, original_image=op.inputs[0], align_corners=False, half_pixel_centers=False
    )
    return [dx, None]


@regrad("ScaleAndTranslate", name="scale-and-translate-grad-ignores-antialias")
def _scale_and_translate_grad_ignores_antialias(tf, original, op, dy):
    """the gradient of ScaleAndTranslate (tf.image.resize(antialias=True)) is computed with antialias=False"""
    dx = tf.raw_ops.ScaleAndTranslateGrad(
        grads=dy,
        original_image=op.inputs[0],
        scale=op.inputs[2],
        translation=op.inputs[3],
        kernel_type=op.get_attr("kernel_type"),
        antialias=False,
    )
    return [dx, None, None, None]

"""Image resize gradients when downscaling: the transpose of the interpolation matrix.

Resizing is linear in the image, so ``y = M x`` and the gradient of ``<w, y>`` is ``M^T w``
for the matrix ``M`` of the method's documented formula, built here in float64 NumPy from
half-pixel centres: bilinear is the triangle kernel of radius 1 (``tf.image.resize``'s
default, ``antialias=False``), antialiased bilinear the triangle stretched by the scale
(``antialias=True``, TensorFlow's ScaleAndTranslate), nearest the pixel under
``floor((i + 1/2) in/out)``. An 8x8 image is downscaled to 3x5 (factors 8/3 and 8/5, neither
an integer). Without antialias, bilinear reads two pixels per output, so downscaling by more
than 2 leaves pixels that no output reads and the gradient is 0 there (tensorflow#12753:
"nearest neighbor gradients when downscaling"); the point ``ones`` asserts it, and that the
antialiased kernel reaches every pixel. The spellings: ``tf.image.resize`` at its defaults
(bilinear, no antialias), ``jax.image.resize`` (which antialiases by default: the
antialiased entry spells it without ``antialias=``, so its JAX rows assert the default),
``torch.nn.functional.interpolate`` channels-first with ``align_corners=False`` (PyTorch's
``mode="nearest"`` is the legacy ``floor(i in/out)`` rule; ``"nearest-exact"`` is TensorFlow's
and JAX's). The table's cotangents have the input's shape, so each result is zero-padded
back to 8x8.

Three entries: ``resize_bilinear``; ``resize_antialias_nearest`` (antialiased bilinear and
nearest stacked in one program: both lack TensorFlow's forward mode and XLA gradient, so
together they cost one entry and lose nothing but nearest's second derivative, which is 0);
``resize_area`` (the box of fractional pixel coverage, as TensorFlow and JAX define area).

Declared surprises. TensorFlow registers no gradient for ``ResizeNearestNeighborGrad`` and
``ScaleAndTranslateGrad``, so forward mode (forward over reverse) and second derivatives
through antialiased resizing, and forward mode through nearest, raise LookupError
(tensorflow#22208; StagingError where a function is traced). Their gradients do not compile
under XLA: neither ScaleAndTranslate nor ResizeNearestNeighborGrad has an XLA kernel
(tensorflow#57575). ``ResizeBilinearGrad`` is NotDifferentiable, so TensorFlow's forward mode
through bilinear gives a None J t, silently (``forward[resize_bilinear]`` = ``none``, in every
mode). TensorFlow registers no gradient at all for ``ResizeArea``: every order raises
LookupError (``reverse[resize_area]``), where JAX differentiates its area kernel.

PyTorch has no spelling of this area: its ``mode="area"`` is adaptive average pooling over
whole pixels, another matrix (its rows of ``resize_area`` are declared absent).
``tf.image.resize`` returns float32 for a float64 image except with nearest (documented), so
the entries are drawn in float32.

Sources: https://github.com/tensorflow/tensorflow/issues/12753,
https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/image_grad.py,
https://www.tensorflow.org/api_docs/python/tf/image/resize,
https://docs.jax.dev/en/latest/_autosummary/jax.image.resize.html,
https://pytorch.org/docs/stable/generated/torch.nn.functional.interpolate.html
"""

import numpy as np

from suite import ops
from suite.behaviours import Floor, behaviour
from suite.expectations import expect, raises
from suite.interpolation import triangle
from suite.ops import properties

TF_ISSUE = "https://github.com/tensorflow/tensorflow/issues/12753"
TF_IMAGE_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/image_grad.py"
TF_NO_GRAD_GRAD = "https://github.com/tensorflow/tensorflow/issues/22208"
TF_XLA_GRAD = "https://github.com/tensorflow/tensorflow/issues/57575"
TF_RESIZE = "https://www.tensorflow.org/api_docs/python/tf/image/resize"
JAX_RESIZE = "https://docs.jax.dev/en/latest/_autosummary/jax.image.resize.html"
TORCH_INTERPOLATE = "https://pytorch.org/docs/stable/generated/torch.nn.functional.interpolate.html"


TORCH_AREA = (
    "PyTorch's mode='area' is adaptive_avg_pool2d over whole pixels (bins floor(i in/out) to ceil((i + 1) "
    "in/out)), another matrix than TensorFlow's and JAX's area, which weigh the fraction of a pixel a box covers"
)

BEHAVIOUR = behaviour(
    "image-resize-gradients",
    sources=[],
    links=[TF_ISSUE, TF_IMAGE_GRAD, TF_RESIZE, JAX_RESIZE, TORCH_INTERPOLATE],
    floor=Floor(
        "array",
        "Every float comparison here is an op-table row (properties.bind); its entries are elementwise=False "
        "(each output and each gradient pixel, M^T w, sums several pixels), so the table gives them its array-level "
        "floor. The module compares nothing outside the table.",
    ),
)

#: an 8x8 one-channel image, downscaled to 3x5; the results stacked over height and zero-padded
#: back to 8x8 (the table's cotangents have the input's shape)
IMAGE, OUT = (1, 8, 8, 1), (3, 5)
PAIRS = ((np.float32, IMAGE),)


def _pad(parts):
    """Channels-last padding of ``parts`` results stacked over height, as tf.pad and jnp.pad take it."""
    return ((0, 0), (0, IMAGE[1] - parts * OUT[0]), (0, IMAGE[2] - OUT[1]), (0, 0))


def _nearest(n_in, n_out):
    """The 1-D matrix of nearest: output i takes pixel floor((i + 1/2) in/out)."""
    pick = np.minimum(np.floor((np.arange(n_out) + 0.5) * n_in / n_out).astype(int), n_in - 1)
    return np.eye(n_in)[pick]


SIZES = tuple(zip(IMAGE[1:3], OUT))
BILINEAR = tuple(triangle(n_in, n_out, 1.0) for n_in, n_out in SIZES)
ANTIALIASED = tuple(triangle(n_in, n_out, n_in / n_out) for n_in, n_out in SIZES)
NEAREST = tuple(_nearest(n_in, n_out) for n_in, n_out in SIZES)


def _box(n_in, n_out):
    """The 1-D matrix of area: output i averages the input interval [i, i + 1) in/out, each pixel
    weighted by the fraction of it the interval covers."""
    lo, hi = np.arange(n_out)[:, None] * n_in / n_out, (np.arange(n_out)[:, None] + 1) * n_in / n_out
    px = np.arange(n_in)[None, :]
    w = np.clip(np.minimum(hi, px + 1) - np.maximum(lo, px), 0.0, None)
    return w / w.sum(axis=1, keepdims=True)


AREA = tuple(_box(n_in, n_out) for n_in, n_out in SIZES)


def _reference(*methods):
    """``x -> pad(stack_i(Mh_i x Mw_i^T))`` in float64, for each method's (Mh, Mw)."""

    def ref(x):
        parts = [np.einsum("ih,jw,bhwc->bijc", mh, mw, np.asarray(x, np.float64)) for mh, mw in methods]
        return np.pad(np.concatenate(parts, axis=1), _pad(len(parts)))

    return ref


def _torch(torch, x, *calls):
    """``interpolate(**call)`` channels-first for each call, stacked over height, back to NHWC and
    padded (F.pad takes the padding last axis first)."""
    f = torch.nn.functional
    ys = [f.interpolate(x.permute(0, 3, 1, 2), size=OUT, **call) for call in calls]
    pad = [p for pair in reversed(_pad(len(calls))) for p in pair]
    return f.pad(torch.cat(ys, dim=2).permute(0, 2, 3, 1), pad)


# ---------------------------------------------------------------- bilinear (TensorFlow's default)
ops.register(
    ops.Op(
        "resize_bilinear",
        behaviour="image-resize-gradients",
        tensorflow=lambda tf, x: tf.pad(tf.image.resize(x, OUT), _pad(1)),
        jax=lambda jax, x: jax.numpy.pad(jax.image.resize(x, (1, *OUT, 1), "linear", antialias=False), _pad(1)),
        torch=lambda torch, x: _torch(torch, x, dict(mode="bilinear", align_corners=False)),
        reference=_reference(BILINEAR),
        elementwise=False,  # each output mixes several pixels: an array-level floor
        pairs=PAIRS,
        # M^T 1 is 0 at every pixel no output reads (tensorflow#12753)
        points=(ops.Point("ones", (1.0,), "mixed:finite,zero", dtypes=("float32",)),),
        declared=[
            expect(
                "forward[resize_bilinear]",
                "none",
                framework="tensorflow",
                versions=">=2.18",
                reason="ResizeBilinearGrad is registered NotDifferentiable, so TensorFlow's forward mode (forward "
                "over reverse) gives a None J t instead of M t, silently, in every mode",
                link=TF_IMAGE_GRAD,
            )
        ]
        + ops.missing_gradient(
            "resize_bilinear",
            ("forward", "second"),
            r"ResizeBilinearGrad",
            versions="<2.18",
            reason="before TF 2.18 ResizeBilinearGrad has no gradient registered at all (not even "
            "NotDifferentiable), so forward mode (forward over reverse) and the second derivative of "
            "bilinear resizing raise 'gradient registry has no entry for: ResizeBilinearGrad' (measured on "
            "2.12-2.17; 2.18 and later give None, read as the zero second derivative)",
            link=TF_NO_GRAD_GRAD,
        )
        + [
            expect(
                "reverse[resize_bilinear]",
                raises("UnimplementedError", r"ResizeBilinearGrad with align_corners=False or half_pixel_centers"),
                framework="tensorflow",
                mode="xla",
                versions="<2.14",
                reason="TF 2.12's and 2.13's XLA has no ResizeBilinearGrad for half-pixel centres (tf.image.resize's "
                "convention): the gradient does not compile (measured; 2.14 and later compile it)",
                link=TF_XLA_GRAD,
            )
        ],
    )
)

# ---------------------------------------------------------------- antialiased bilinear, and nearest
# One entry for both: neither has TensorFlow's forward mode nor its XLA gradient, and the
# antialiased kernel's missing second derivative is the entry's (nearest's is 0).
ops.register(
    ops.Op(
        "resize_antialias_nearest",
        behaviour="image-resize-gradients",
        tensorflow=lambda tf, x: tf.pad(
            tf.concat([tf.image.resize(x, OUT, antialias=True), tf.image.resize(x, OUT, method="nearest")], axis=1),
            _pad(2),
        ),
        jax=lambda jax, x: jax.numpy.pad(
            jax.numpy.concatenate(
                # "linear" without antialias=: JAX's default, True
                [jax.image.resize(x, (1, *OUT, 1), "linear"), jax.image.resize(x, (1, *OUT, 1), "nearest")],
                axis=1,
            ),
            _pad(2),
        ),
        torch=lambda torch, x: _torch(
            torch, x, dict(mode="bilinear", align_corners=False, antialias=True), dict(mode="nearest-exact")
        ),
        reference=_reference(ANTIALIASED, NEAREST),
        elementwise=False,
        pairs=PAIRS,
        # M^T 1: the stretched kernel reaches every pixel
        points=(ops.Point("ones", (1.0,), "finite", dtypes=("float32",)),),
        declared=ops.missing_gradient(
            "resize_antialias_nearest",
            ("forward", "second"),
            r"ScaleAndTranslateGrad|ResizeNearestNeighborGrad",
            reason="TensorFlow registers no gradient for ScaleAndTranslateGrad nor ResizeNearestNeighborGrad, "
            "so forward mode (forward over reverse) and second derivatives through antialiased resizing raise, "
            "and forward mode through nearest resizing",
            link=TF_NO_GRAD_GRAD,
        )
        + [
            expect(
                "reverse[resize_antialias_nearest]",
                raises("InvalidArgumentError", r"Detected unsupported operations"),
                framework="tensorflow",
                mode="xla",
                reason="the gradients do not compile: TensorFlow has no XLA kernel for ScaleAndTranslate "
                "(tf.image.resize(antialias=True)) nor for ResizeNearestNeighborGrad",
                link=TF_XLA_GRAD,
            )
        ],
    )
)

# ---------------------------------------------------------------- area
ops.register(
    ops.Op(
        "resize_area",
        behaviour="image-resize-gradients",
        tensorflow=lambda tf, x: tf.pad(tf.image.resize(x, OUT, method="area"), _pad(1)),
        jax=lambda jax, x: jax.numpy.pad(jax.image.resize(x, (1, *OUT, 1), "area"), _pad(1)),
        torch=None,
        absent={"torch": (TORCH_AREA, TORCH_INTERPOLATE)},
        reference=_reference(AREA),
        elementwise=False,
        pairs=PAIRS,
        declared=ops.missing_gradient(
            "resize_area",
            ("reverse", "forward", "second"),
            r"ResizeArea",
            reason="TensorFlow registers no gradient for ResizeArea (tf.image.resize(method='area')): the "
            "gradient lookup fails in every mode (image_grad.py registers ResizeBilinear, ResizeBicubic, "
            "ResizeNearestNeighbor, ScaleAndTranslate and CropAndResize, not ResizeArea), where JAX "
            "differentiates its area kernel",
            link=TF_IMAGE_GRAD,
        )
        + [
            expect(
                f"{prop}[resize_area]",
                raises("ValueError", r'Unknown resize method "area"'),
                framework="jax",
                versions="<=0.4.30",
                reason="jax.image.resize has no area method in JAX 0.4.30 (the JAX of the TF 2.12-2.17 envs, "
                "NumPy 1): 'Unknown resize method' (measured; JAX 0.10.2 has it)",
                link=JAX_RESIZE,
            )
            for prop in ("reverse", "forward", "second")
        ],
    )
)

properties.bind(globals(), "image-resize-gradients")

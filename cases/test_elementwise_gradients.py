"""Elementwise and softmax-family gradients over their whole float range: saturation, underflow, overflow.

Activations and transcendental functions are where float32 runs out first: ``tanh`` and
``sigmoid`` saturate (their gradients round to exact zeros long before the true ones
underflow), ``exp``/``sinh``/``cosh`` overflow near 88.7, ``softplus``/``silu`` pass from
linear to underflow, ``log``/``log1p``/``acosh``/``atanh`` have poles at the ends of their
domains, and ``softmax``/``log_softmax``/``reduce_logsumexp`` meet all of it at once. Each op
is one entry of the op table (``suite.ops``): its spellings in TensorFlow, JAX and PyTorch,
a float64 NumPy reference, a domain per dtype that reaches those tails (float32 bounds past
saturation and underflow; float64 bounds where central differences still hold), and special
points (infinities, poles, overflow) with the kind of gradient every framework answers
there. The generic properties then run over every entry in every TensorFlow mode and for
JAX and PyTorch: reverse mode against the oracles and float64 central differences, forward
mode against reverse mode and the oracles, second order against the oracles, gradients of
the input's dtype and shape, and each special point's kind asserted.

Sources: https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py,
https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/nn_grad.py,
https://github.com/jax-ml/jax/blob/main/jax/_src/lax/lax.py,
https://github.com/pytorch/pytorch/blob/main/tools/autograd/derivatives.yaml
"""

import math

import numpy as np

from suite import ops
from suite.behaviours import Floor, behaviour
from suite.expectations import expect, expect_keys
from suite.ops import properties

TF_MATH_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"
TF_NN_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/nn_grad.py"
JAX_LAX = "https://github.com/jax-ml/jax/blob/main/jax/_src/lax/lax.py"
JAX_NN = "https://github.com/jax-ml/jax/blob/main/jax/_src/nn/functions.py"
TORCH_FUNCTIONAL = "https://github.com/pytorch/pytorch/blob/main/torch/nn/functional.py"
TF_NN_OPS = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/nn_ops.py"
TF_ELU_VALUE = "https://github.com/tensorflow/tensorflow/issues/116943"
TF_ELU_GRAD = "https://github.com/tensorflow/tensorflow/pull/124902"
TF_SELU_GRAD = "https://github.com/tensorflow/tensorflow/pull/125171"
TORCH_DERIVATIVES = "https://github.com/pytorch/pytorch/blob/main/tools/autograd/derivatives.yaml"
#: torch.sinh(89.0) in float32 is 2.2448e+38 on the scalar path and inf on the vectorised one
TORCH_SLEEF = "https://github.com/pytorch/pytorch/pull/49413"

BEHAVIOUR = behaviour(
    "elementwise-gradients",
    sources=[],
    links=[TF_MATH_GRAD, TF_NN_GRAD, JAX_LAX, TORCH_DERIVATIVES],
    floor=Floor(
        "mixed",
        "Every float comparison here is an op-table row (properties.bind): the elementwise entries are held per "
        "element by their own error model (the op database's Terms and this module's ULPS, suite.ops.error); "
        "softmax, log_softmax and reduce_logsumexp are reductions (each output normalises over its row), at the "
        "table's array-level floor. The module compares nothing outside the table.",
    ),
)

INF = math.inf
SOFTSIGN_GRAD = r"(?s)SoftsignGrad"  # a LookupError, inside a StagingError where traced


#: The regimes of each entry every example reaches (its error model where its formulas cancel,
#: the terms' magnitudes, is the op database's: suite/ops/db.py, suite.ops.error).
MODEL = {
    "tanh": dict(
        regimes={
            "saturating": (4.1, 5.0),
            "saturating-": (-5.0, -4.1),
            "saturated": (5.0, 9.5),
            "rounded-to-1": (9.5, 19.5),
        }
    ),
    "sigmoid": dict(regimes={"saturated": (10.0, 40.0), "underflow": (-104.0, -85.0)}),
    "softplus": dict(regimes={"linear": (15.0, 40.0), "underflow": (-104.0, -85.0)}),
    "softsign": dict(regimes={"far": (1e6, 1e8), "far-": (-1e8, -1e6)}),
    "elu": dict(regimes={"saturated": (-20.0, -8.0)}),
    "selu": dict(regimes={"saturated": (-20.0, -8.0)}),
    "gelu": dict(regimes={"tail": (-8.0, -3.0)}),
    "silu": dict(regimes={"linear": (15.0, 40.0), "underflow": (-104.0, -85.0)}),
    "erf": dict(regimes={"tail": (2.5, 4.0), "tail-": (-4.0, -2.5)}),
    "erfc": dict(regimes={"tail": (2.5, 9.0)}),
    "log_sigmoid": dict(regimes={"linear": (-40.0, -15.0), "underflow": (85.0, 104.0)}),
    "exp": dict(regimes={"underflow": (-104.0, -85.0), "large": (60.0, 88.0)}),
    "log1p": dict(regimes={"tiny": (1e-8, 1e-4), "tiny-": (-1e-4, -1e-8), "near-pole": (-0.9, -0.5)}),
    "expm1": dict(regimes={"saturated": (-20.0, -8.0), "tiny": (1e-8, 1e-4)}),
}

#: Units of rounding per entry where its kernels round more (or less) than suite.ops.ULPS: the
#: largest error the frameworks were measured to differ by, over the entry's domain and regimes
#: (``python -m suite.ops.headroom --points 3000``, TF 2.21), times 3, to the next power of two;
#: ``value``: the values' own, where they differ from the derivatives'; ``jt``, ``second``: J t's
#: and the second derivatives', where the derivatives' number left them more than 10x headroom
#: in every release, the nightly and both oracles (``--combine`` of the eleven tables, 2026-11-30).
ULPS = {
    "acos": {"float32": 16.0, "float64": 16.0},
    "asin": {"float32": 16.0, "float64": 16.0},
    "acosh": {"float32": 128.0, "float64": 512.0},
    "asinh": {"float32": 128.0, "float64": 512.0},
    "atan": {"float32": 16.0},
    "atanh": {"float32": 16.0, "second": {"float32": 4.0}, "value": {"float64": 64.0}},
    "cosh": {"float32": 64.0, "float64": 32.0, "value": {"float32": 64.0, "float64": 32.0}},
    "sinh": {"float32": 64.0, "float64": 32.0, "value": {"float32": 64.0, "float64": 32.0}},
    "erfc": {"float32": 16.0, "float64": 8.0},
    "expm1": {"value": {"float32": 16.0, "float64": 16.0}},
    "log_sigmoid": {"float32": 16.0, "float64": 64.0},
    "sigmoid": {"float32": 16.0},
    "silu": {"float32": 16.0},
    "softplus": {"float32": 32.0, "float64": 64.0},
    "tan": {"float32": 16.0, "float64": 16.0},
    "tanh": {"float32": 16.0, "float64": 32.0},
    "cos": {"float64": 4.0},
    "sin": {"float64": 4.0, "value": {"float64": 4.0}},
    "elu": {"float32": 4.0, "float64": 4.0, "value": {"float32": 4.0, "float64": 4.0}},
    "selu": {"value": {"float32": 4.0, "float64": 4.0}},
    "softsign": {"float32": 4.0, "float64": 4.0},
    "gelu": {"second": {"float32": 4.0}},
}
for _name, _ulps in ULPS.items():
    MODEL.setdefault(_name, {})["ulps"] = _ulps

#: Ops over the last axis need one: vectors and matrices of both dtypes.
ROWS = ((np.float32, (3,)), (np.float64, (2, 3)), (np.float32, (2, 3)), (np.float64, (4,)))


def unary(name, f32, f64, points=(), **kw):
    """The op database's ``name`` (its spellings and reference: :mod:`suite.ops.db`) as an entry
    of this behaviour: ``f32``/``f64``, the domain per dtype; ``points``, ``ops.Point`` or
    ``(name, at, kind)``; its regimes and units of rounding from MODEL."""
    return ops.view(
        "elementwise-gradients",
        name,
        domain={"float32": f32, "float64": f64},
        points=tuple(p if isinstance(p, ops.Point) else ops.Point(p[0], (p[1],), p[2]) for p in points),
        **MODEL.get(name, {}),
        **kw,
    )


# ---------------------------------------------------------------- activations
unary(
    "tanh",
    (-20.0, 20.0),
    (-40.0, 40.0),
    # at 20, tanh rounds to 1 in both dtypes while its derivative, 1.7e-17, is a normal number
    points=(
        ops.Point("20", (20.0,), "zero", dtypes=("float64",)),
        ops.Point("20/f32", (20.0,), "zero", dtypes=("float32",)),
        ("inf", INF, "zero"),
        ("-inf", -INF, "zero"),
    ),
    declared=[
        expect(
            "grad[tanh@20]",
            "1.7e-17",
            framework="tensorflow",
            versions=">=2.22.0.dev20260912",
            reason="TanhGrad computes 1 - tanh(x)^2 from the rounded output, which is 0 once tanh(x) rounds to 1 (as "
            "JAX and PyTorch still do); tf-nightly 2026-09-12 computes the float64 derivative from x (float32 keeps "
            "the kernel)",
            link="https://github.com/tensorflow/tensorflow/pull/126747",
        )
    ],
)
unary(
    "sigmoid",
    (-110.0, 110.0),
    (-750.0, 750.0),
    points=(("-800", -800.0, "zero"), ("40", 40.0, "zero"), ("inf", INF, "zero"), ("-inf", -INF, "zero")),
)
unary(
    "softplus",
    (-110.0, 110.0),
    # float64 above 20 is PyTorch's linear branch (the point "21" says so); at 20 itself its
    # second derivative is already 0 (measured), so the drawn range stops short of it
    (-750.0, 19.5),
    points=(
        ("-800", -800.0, "zero"),
        ("800", 800.0, "1"),
        ("inf", INF, "1"),
        ("-inf", -INF, "zero"),
        ops.Point("21", (21.0,), "1", value="exact", dtypes=("float64",)),
    ),
    declared=[
        expect(
            "value[softplus@21]",
            "rel-err~1e-10",
            framework="torch",
            reason="softplus(x) is x (and its gradient 1) above threshold=20, 7.6e-10 short of log1p(exp(21)): "
            "visible in float64 only",
            link="https://pytorch.org/docs/stable/generated/torch.nn.functional.softplus.html",
        )
    ],
)
#: the first tf-nightly whose _PowGrad zeroes an infinite x^y in d/dy (bisected: the nightly before,
#: 2.23.0.dev20261006, answers as 2.21; the same change as singular-point-gradients' POW_FROM)
POW_FROM = "2.23.0.dev20261010"
POW_COMPARE = "https://github.com/tensorflow/tensorflow/compare/fae4d3f1da0...4b9df52bd8b"
SQUARES_X = (
    "the derivative is 1/sqrt(x*x + 1) (1/sqrt(x*x - 1) for acosh): x*x overflows float32 above 1.8e19, so the "
    "gradient is 0 where 1/|x| = 3.3e-20 is a normal number (TensorFlow's kernel keeps it; measured at 3e19)"
)
unary(
    "softsign",
    # above 1.8e19 JAX's quotient rule overflows (the point "3e19" says so), and above 7e12 the
    # (|x| + 1)^3 of its second derivative (measured: 5e-28 where the truth is subnormal)
    (-1e12, 1e12),
    (-1e100, 1e100),
    excluded=(0.0,),  # f'' jumps at 0: central differences lose O(h)
    points=(("inf", INF, "zero"), ("0", 0.0, "1"), ops.Point("3e19", (3e19,), "zero", dtypes=("float32",))),
    declared=[
        expect(
            "grad[softsign@inf]",
            "nan",
            framework=fw,
            link=link,
            reason="softsign is spelled x / (|x| + 1), whose derivative by the quotient rule is "
            "1 / (|x| + 1) - x * sign(x) / (|x| + 1)^2 = 0 - inf / inf = nan at infinity; TensorFlow's "
            "SoftsignGrad kernel is g / (1 + |x|)^2 = 0",
        )
        for fw, link in (("jax", JAX_NN), ("torch", TORCH_FUNCTIONAL))
    ]
    + [
        expect(
            "grad[softsign@3e19]",
            "3.33e-20",
            framework="jax",
            link=JAX_NN,
            reason="jax.nn.soft_sign is x / (|x| + 1) differentiated by the quotient rule: x / (|x| + 1)^2 overflows "
            "float32 above 1.8e19 and leaves 1/(|x| + 1) = 3.3e-20 where the derivative, 1.1e-39, is subnormal "
            "(TensorFlow and PyTorch answer 0; measured at 3e19)",
        )
    ]
    + ops.missing_gradient(
        "softsign",
        ("forward", "second"),
        SOFTSIGN_GRAD,
        versions="<2.22.0.dev20260830",
        reason="TensorFlow registered no gradient for SoftsignGrad, so neither forward mode (forward "
        "over reverse) nor a second derivative of softsign existed; registered since (measured on "
        "2.23.0.dev20261026)",
        link="https://github.com/tensorflow/tensorflow/pull/126092",
        early=(
            "TF 2.12's ForwardAccumulator builds the forward-over-backward JVP in a tf.function in every mode, "
            "so the missing SoftsignGrad gradient surfaces as a StagingError there too (measured)",
            TF_NN_GRAD,
        ),
    ),
)
# ELU and SELU near 0 and at -40: values within 0.1 of the kink are judged at the special points
JAX_EXPM1 = dict(
    framework="jax",
    versions="<0.12",
    link=JAX_LAX,
    reason="JAX's expm1 derivative was g * (expm1(x) + 1), from the output, which is exactly -1 at -40 (measured "
    "with 0.4.30, 0.10.2 and 0.11.2); 0.12 computes g * exp(x) (measured with 0.12.0.1)",
)
TF_CANCELS = dict(framework="tensorflow", mode="eager|function|graph", link=TF_ELU_VALUE,
                  reason="the CPU kernel computes exp(x) - 1, not expm1(x), so it is 0 for |x| < 1e-8 in float32 and "
                  "< 1e-16 in float64 (XLA lowers it to expm1)")  # fmt: skip
unary(
    "elu",
    (-110.0, 1e4),
    (-750.0, 1e4),
    excluded=(0.0,),
    margin=0.1,
    points=(("-inf", -INF, "zero"), ("-40", -40.0, "4.25e-18"), ops.Point("-1e-20", (-1e-20,), "1", value="exact")),
    declared=[
        expect(
            "grad[elu@-40]",
            "zero",
            framework="tensorflow",
            versions="<2.22.0.dev20260830",
            link=TF_ELU_GRAD,
            reason="EluGrad computed the derivative as elu(x) + 1, from the output, which is exactly -1 at -40 "
            "(tensorflow#124833); computed from the input since (measured on 2.23.0.dev20261026)",
        ),
        expect("grad[elu@-40]", "zero", **JAX_EXPM1),
        expect("value[elu@-1e-20]", "rel-err~1e+00", **TF_CANCELS),
    ],
)
unary(
    "selu",
    (-110.0, 1e4),
    (-750.0, 1e4),
    excluded=(0.0,),
    margin=0.1,
    points=(("-inf", -INF, "zero"), ("-40", -40.0, "7.47e-18"), ops.Point("-1e-20", (-1e-20,), "1.76", value="exact")),
    declared=[
        expect(
            "grad[selu@-40]",
            "zero",
            framework="tensorflow",
            versions="<2.22.0.dev20260904",
            link=TF_SELU_GRAD,
            reason="SeluGrad computed the derivative as selu(x) + scale * alpha, from the output, which cancels "
            "to 0 at -40 (tensorflow#124834); computed from the input since (measured on 2.23.0.dev20261026)",
        ),
        expect(
            "grad[selu@-1e-20]",
            "1.05",
            framework="tensorflow",
            mode="eager|function|graph",
            versions="<2.22.0.dev20260904",
            link=TF_SELU_GRAD,
            reason="SeluGrad took the positive branch (scale) where the output rounded to 0; "
            "the input decides since (measured on 2.23.0.dev20261026)",
        ),
        expect("grad[selu@-40]", "zero", **JAX_EXPM1),
        expect("value[selu@-1e-20]", "rel-err~1e+00", **TF_CANCELS),
    ],
)
# GELU is drawn in float32 only: TensorFlow's float64 value is off by ~5e-9 everywhere (the point
# "1" below, in float64, says so), which no float64 tolerance of the generic properties admits
unary(
    "gelu",
    (-20.0, 20.0),
    (-40.0, 40.0),
    pairs=((np.float32, ()), (np.float32, (3,)), (np.float32, (2, 3))),
    points=(
        ops.Point("-40", (-40.0,), "zero", dtypes=("float32",)),  # gelu is drawn in float32 (above)
        ("40", 40.0, "1"),
        ops.Point("1", (1.0,), "1.08", value="exact", dtypes=("float64",)),
    ),
    declared=[
        expect(
            "grad[gelu@-40]",
            "8.94e-08",
            framework="tensorflow",
            mode="xla",
            versions=">=2.13,<2.16",
            reason="the XLA lowering of float32 erf in TF 2.13-2.15 leaves erf(-28.28) at -0.9999998, not -1, so "
            "GELU's gradient at -40 is 8.94e-08 (measured; 2.12, 2.16 and later, and float64 give 0)",
            link=TF_NN_OPS,
        ),
        expect(
            "value[gelu@1]",
            "rel-err~1e-08",
            framework="tensorflow",
            link=TF_NN_OPS,
            reason="tf.nn.gelu multiplies by math_ops.cast(0.7071067811865476, dtype), a Python float made a "
            "float32 tensor before the cast, so float64 GELU uses 1/sqrt(2) rounded to float32",
        ),
    ],
)
unary(
    "silu",
    (-110.0, 110.0),
    (-750.0, 750.0),
    points=(("-800", -800.0, "zero"), ("800", 800.0, "1")),
)
unary(
    "erf",
    (-10.0, 10.0),
    (-30.0, 30.0),
    points=(("30", 30.0, "zero"), ("inf", INF, "zero")),
)
unary(
    "erfc",
    (-10.0, 10.0),
    (-30.0, 26.0),  # erfc(26) = 5.7e-296: float64's tail, above its subnormals
    points=(("30", 30.0, "zero"), ("-inf", -INF, "zero")),
)
unary(
    "log_sigmoid",
    (-110.0, 110.0),
    (-750.0, 750.0),
    points=(("-inf", -INF, "1"), ("inf", INF, "zero"), ("-800", -800.0, "1"), ("800", 800.0, "zero")),
)

# ---------------------------------------------------------------- exponentials and logarithms
unary(
    "exp",
    (-110.0, 88.0),
    (-745.0, 300.0),
    points=(("1000", 1000.0, "+inf"), ("-inf", -INF, "zero"), ("inf", INF, "+inf")),
)
unary(
    "expm1",
    (-110.0, 88.0),
    (-745.0, 300.0),
    points=(("1000", 1000.0, "+inf"), ("-inf", -INF, "zero"), ("-40", -40.0, "4.25e-18")),
    declared=[
        expect("grad[expm1@-40]", "zero", **JAX_EXPM1),
        expect(
            "grad[expm1@-40]",
            "zero",
            framework="torch",
            link=TORCH_DERIVATIVES,
            reason="derivatives.yaml gives expm1 the gradient grad * (result + 1), from the output, exactly -1 at -40",
        ),
    ],
)
unary(
    "log",
    (1e-30, 1e30),
    (1e-2, 1e300),
    excluded=(0.0,),
    points=(("0", 0.0, "+inf"), ("inf", INF, "zero")),
)
unary(
    "log1p",
    (-0.9, 1e30),
    (-0.9, 1e300),
    excluded=(-1.0,),
    points=(("-1", -1.0, "+inf"), ("inf", INF, "zero")),
)

# ---------------------------------------------------------------- trigonometric and hyperbolic
unary("sin", (-1e4, 1e4), (-100.0, 100.0))
unary("cos", (-1e4, 1e4), (-100.0, 100.0))
unary("tan", (-1.4, 1.4), (-1.4, 1.4))
unary(
    "asin",
    (-1.0, 1.0),
    (-0.99, 0.99),
    excluded=(-1.0, 1.0),
    points=(("1", 1.0, "+inf"), ("-1", -1.0, "+inf")),
)
unary(
    "acos",
    (-1.0, 1.0),
    (-0.99, 0.99),
    excluded=(-1.0, 1.0),
    points=(("1", 1.0, "-inf"), ("-1", -1.0, "-inf")),
)
unary(
    "atan",
    (-1e30, 1e30),
    (-1e100, 1e100),
    points=(("inf", INF, "zero"),),
)
unary(
    "sinh",
    (-88.5, 88.5),  # PyTorch's vectorised float32 sinh/cosh (Sleef) hold on [-88.5, 88.5] only: TORCH_SLEEF
    (-300.0, 300.0),
    points=(("1000", 1000.0, "+inf"),),
)
unary(
    "cosh",
    (-88.5, 88.5),  # as sinh
    (-300.0, 300.0),
    points=(("1000", 1000.0, "+inf"), ("-1000", -1000.0, "-inf")),
)
unary(
    "asinh",
    (-1e18, 1e18),  # above 1.8e19, x * x overflows float32: the point "3e19" says what each framework answers
    (-1e100, 1e100),
    points=(("inf", INF, "zero"), ops.Point("3e19", (3e19,), "3.33e-20", dtypes=("float32",))),
    declared=[
        expect("grad[asinh@3e19]", "zero", framework="jax", link=JAX_LAX, reason=SQUARES_X),
        expect("grad[asinh@3e19]", "zero", framework="torch", link=TORCH_DERIVATIVES, reason=SQUARES_X),
    ],
)
unary(
    "acosh",
    (1.0, 1e18),  # as asinh
    (1.001, 1e100),
    excluded=(1.0,),
    points=(("1", 1.0, "+inf"), ops.Point("3e19", (3e19,), "3.33e-20", dtypes=("float32",))),
    declared=[
        expect("grad[acosh@3e19]", "zero", framework="jax", link=JAX_LAX, reason=SQUARES_X),
        expect("grad[acosh@3e19]", "zero", framework="torch", link=TORCH_DERIVATIVES, reason=SQUARES_X),
    ],
)
unary("atanh", (-1.0, 1.0), (-0.99, 0.99),
      excluded=(-1.0, 1.0), points=(("1", 1.0, "+inf"), ("-1", -1.0, "+inf")))  # fmt: skip


# ---------------------------------------------------------------- two arguments, and the last axis
ops.view(
    "elementwise-gradients",
    "pow",
    # the second derivatives sum x^(y-1) (1 + y log x) and its neighbours, which cancel (the
    # database's terms)
    ulps={"float32": 16.0, "float64": 16.0, "jt": {"float32": 8.0}},  # measured 2.7 and 3.2 ulp (as ULPS above)
    domain={"float32": (0.01, 10.0), "float64": (0.01, 10.0)},
    # d/dx = y x^(y-1): 0 at 0^2, +inf at 0^0.5, -inf at base 0 with a negative exponent (the value
    # is +inf), and nan at a negative base with a non-integer exponent (the value is nan) in every
    # framework and mode (measured); d/dy = x^y log x (grad_y) where the frameworks part ways
    points=(
        ops.Point("0^2", (0.0, 2.0), "zero"),
        ops.Point("0^0.5", (0.0, 0.5), "+inf"),
        ops.Point("0^-1", (0.0, -1.0), "-inf", also=(("grad_y", "nan"),)),
        ops.Point("0^-0.5", (0.0, -0.5), "-inf", also=(("grad_y", "nan"),)),
        ops.Point("-2^0.5", (-2.0, 0.5), "nan", also=(("grad_y", "nan"),)),
        ops.Point("-2^2", (-2.0, 2.0), "-4", also=(("grad_y", "nan"),)),
    ),
    declared=[
        *[
            expect(
                f"grad_y[pow@{p}]",
                "-inf",
                framework="torch",
                reason="pow_backward_exponent zeroes d/dy only where the base is 0 and the exponent is >= 0; "
                "with a negative exponent it computes x^y log x = inf * -inf = -inf (TensorFlow and JAX: "
                "inf * log 0 through their masks gives nan)",
                link="https://github.com/pytorch/pytorch/blob/main/torch/csrc/autograd/FunctionsManual.cpp",
            )
            for p in ("0^-1", "0^-0.5")
        ],
        *expect_keys(
            ["grad_y[pow@0^-1]", "grad_y[pow@0^-0.5]"],
            "zero",
            framework="tensorflow",
            versions=f">={POW_FROM}",
            reason="from tf-nightly 2.23.0.dev20261010 _PowGrad takes x^y as 0 where it is infinite before "
            "multiplying by log x (which it already sets to 0 where x <= 0), so d/dy at base 0 with a negative "
            "exponent is 0, no longer inf * 0 = nan (bisected; math_grad.py of 2.23.0.dev20261026)",
            link=POW_COMPARE,
        ),
        expect(
            "grad_y[pow@-2^2]",
            "zero",
            framework="tensorflow",
            reason="_PowGrad takes log x as where(x > 0, log x, 0), so d/dy at a negative base is 0 * x^y = 0, "
            "where JAX (log of a negative base in _pow_jvp_rhs) and PyTorch give nan",
            link="https://github.com/tensorflow/tensorflow/blob/v2.21.0/tensorflow/python/ops/math_grad.py",
        ),
    ],
)
ops.view(
    "elementwise-gradients",
    "reduce_logsumexp",
    domain={"float32": (-100.0, 100.0), "float64": (-700.0, 300.0)},
    pairs=ROWS,
    points=(ops.Point("-inf", (-INF,), "nan"),),
)
ops.view(
    "elementwise-gradients",
    "softmax",
    domain={"float32": (-100.0, 100.0), "float64": (-700.0, 300.0)},
    pairs=ROWS,
)
ops.view(
    "elementwise-gradients",
    "log_softmax",
    domain={"float32": (-100.0, 100.0), "float64": (-700.0, 300.0)},
    pairs=ROWS,
)

properties.bind(globals(), "elementwise-gradients")

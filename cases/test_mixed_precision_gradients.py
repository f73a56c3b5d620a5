"""Mixed-precision gradients: half-precision underflow, dynamic loss scaling, the mixed_float16 policy.

Three things a float16/bfloat16 training step relies on, each against float64 closed forms:

- **Underflow.** The gradient of ``sum(g * w * x)`` with respect to ``w`` is ``g * x``: a small
  upstream gradient (a loss scaled down) times a small activation. Products are drawn across the
  dtype's normal/subnormal/underflow boundaries (float16: min normal 2^-14 = 6.1e-5, min subnormal
  2^-24 = 6e-8; bfloat16 and float32 share float32's exponent range, min normal 2^-126, so at
  float16's magnitudes they only round). Per dtype and region the gradient is ``exact`` (the
  correctly rounded product), ``subnormal`` (kept, correctly rounded) or ``zero``.
- **Dynamic loss scaling.** ``LossScaleOptimizer`` (Keras 3 ``keras.optimizers.LossScaleOptimizer``,
  Keras 2 ``tf.keras.mixed_precision.LossScaleOptimizer``; in a v1 Session the
  ``tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer``) over SGD, stepped with the
  gradient of ``scale * sum(x * G_t)`` for hand-made ``G_t`` (some with inf/NaN): a non-finite step
  is skipped and halves the scale, ``dynamic_growth_steps`` finite steps double it. Variables and the
  scale trajectory are held to the float64 closed form of that algorithm; which variant fits is
  observed (whether the scale has a floor at 1, whether ``apply_gradients`` unscales the gradients it
  is given). Oracles: ``torch.amp.GradScaler("cpu")`` and a hand loop around
  ``optax.apply_if_finite`` (optax has no loss scaler: that row's scale policy is ours, its skipping
  is optax's), each against its own closed form; the defaults are recorded.
- **mixed_float16.** A Keras ``Dense`` with ``dtype="mixed_float16"`` (or built under
  ``set_global_policy("mixed_float16")``, restored afterwards): float32 kernel, float16 compute; the
  dtypes of the kernel's, the input's and the activation's gradients. ``torch.autocast("cpu")`` and a
  hand-cast JAX layer (jmp's recipe) are the oracles.

Declared surprises:

- TensorFlow (every mode) and JAX flush float32 and bfloat16 subnormal results to zero on CPU
  (denormals-are-zero): a gradient between 2^-133 and 2^-126 is 0 where PyTorch keeps it. float16
  subnormals survive everywhere (they are normal float32 numbers in the kernels' arithmetic).
- Keras 2 and the v1 optimizer never let the loss scale below 1 (``max(scale / 2, 1)``): at the floor
  every step with a non-finite gradient is skipped with no further backoff. Keras 3 and PyTorch halve
  without a floor.
- Keras 2's and the v1 optimizer's ``apply_gradients`` apply the gradients they are given (the caller
  unscales with ``get_unscaled_gradients``/``compute_gradients``); Keras 3's ``apply`` divides them by
  the scale itself (Keras 3 has no ``get_unscaled_gradients``).
- TensorFlow's default initial scale is 2^15, PyTorch's 2^16 (both grow every 2000 good steps).
- CPU autocast computes in bfloat16 (TensorFlow's policy in float16); both keep a float32 parameter's
  gradient in float32 and an activation's gradient in the compute dtype.

Sources: https://github.com/tensorflow/tensorflow/issues/47884,
https://github.com/tensorflow/tensorflow/issues/38357, https://github.com/keras-team/keras/issues/19479,
https://github.com/keras-team/keras/issues/16100
"""

import dataclasses

import numpy as np
from hypothesis import given, strategies as st

from suite import compare as cmp, strategies as ss
from suite.behaviours import Floor, behaviour
from suite.expectations import expect, expectations
from suite.frameworks.tf_runner import in_v1_graph
from suite.program import Program

try:
    import ml_dtypes  # NumPy's bfloat16, installed with TensorFlow and with JAX
except ImportError:  # a PyTorch-only install: no bfloat16 rows (and the module still imports)
    ml_dtypes = None

TF_ZERO_GRADIENT = "https://github.com/tensorflow/tensorflow/issues/47884"
TF_V1_FLOOR = "https://github.com/tensorflow/tensorflow/issues/38357"
KERAS2_FLOOR = "https://github.com/keras-team/keras/issues/16100"
KERAS3_LSO = "https://github.com/keras-team/keras/issues/19479"
TF_GET_SCALED = "https://github.com/tensorflow/tensorflow/issues/64124"
TF_FTZ = "https://github.com/tensorflow/tensorflow/issues/11902"
JAX_FTZ = "https://github.com/jax-ml/jax/issues/16200"
TORCH_SCALER = "https://pytorch.org/docs/stable/_modules/torch/cpu/amp/grad_scaler.html"
TORCH_AMP = "https://pytorch.org/docs/stable/amp.html"

BEHAVIOUR = behaviour(
    "mixed-precision-gradients",
    sources=[],
    links=[
        TF_ZERO_GRADIENT,
        TF_V1_FLOOR,
        KERAS3_LSO,
        KERAS2_FLOOR,
        "https://www.tensorflow.org/guide/mixed_precision",
        "https://tensorflow.org/versions/r2.8/api_docs/python/tf/keras/mixed_precision/set_global_policy",
        TORCH_AMP,
    ],
    floor=Floor(
        "mixed",
        "Per element: the loss-scaled SGD trajectory (x_t = x_(t-1) - lr g_t, one parameter at a time, exact "
        "power-of-two scaling) is floored at the largest magnitude each element's own trajectory reached, and the "
        "mixed_float16 activation gradient (c rounded to the compute dtype) relative to |c_i|; the underflow "
        "rows and the scale trajectory are exact. Array-level: the Dense layer's output and its kernel and input "
        "gradients are matrix products, floored at the inputs' magnitude.",
    ),
)

KERAS3 = ">=2.16"
KERAS2 = "<2.16"
BF16 = np.dtype(ml_dtypes.bfloat16) if ml_dtypes is not None else None
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
REGIONS = ("normal", "subnormal", "underflow")
LOW = ("bfloat16", "float32")  # float32's exponent range: the dtypes whose subnormals a CPU may flush

EXPECT = expectations(
    {
        **{f"grad:{d}[normal]": "exact" for d in ("float16", *LOW)},
        **{f"grad:{d}[subnormal]": "subnormal" for d in ("float16", *LOW)},
        **{f"grad:{d}[underflow]": "zero" for d in ("float16", *LOW)},
        "loss_scale_call": "available",
        "nonfinite_step": "skipped",
        "scale_trajectory": "closed-form",
        "scale_floor": "none",
        "apply_unscales": "yes",
        "default_initial_scale": 2.0**15,
        "default_growth_steps": 2000,
        "variable_dtype": "float32",
        "compute_dtype": "float16",
        "variable_grad_dtype": "float32",
        "input_grad_dtype": "float32",
        "activation_grad_dtype": "float16",
    },
    # -- subnormals flushed on CPU
    *[
        expect(
            f"grad:{d}[subnormal]",
            "zero",
            framework="tensorflow",
            link=TF_FTZ,
            reason="TensorFlow's CPU kernels (and its XLA CPU code) run with flush-to-zero/denormals-are-zero: a "
            f"{d} product below 2^-126 comes out 0 instead of the subnormal it rounds to (TensorFlow's own "
            "denormal_test asserts the flush); float16 is unaffected, its subnormals are normal float32 numbers",
        )
        for d in LOW
    ],
    *[
        expect(
            f"grad:{d}[subnormal]",
            "zero",
            framework="jax",
            device="cpu",  # measured on an H200: XLA:GPU keeps them
            link=JAX_FTZ,
            reason="XLA:CPU sets denormals-are-zero and flush-to-zero (working as intended, per the maintainers): "
            f"a {d} gradient below 2^-126 is 0 under jit and eagerly alike; float16 keeps its subnormals",
        )
        for d in LOW
    ],
    # -- loss scaling
    expect(
        "scale_floor",
        "1",
        framework="tensorflow",
        mode="eager|function|xla",  # a v1 Session uses the v1 optimizer: declared below
        versions=KERAS2,
        link=KERAS2_FLOOR,
        reason="Keras 2's LossScaleOptimizer backs off with max(scale / 2, 1): at 1 a non-finite step is skipped "
        "and the scale stays 1 (the maintainers: by design, a scale below 1 would not prevent underflow)",
    ),
    expect(
        "scale_floor",
        "1",
        framework="tensorflow",
        mode="graph",
        link=TF_V1_FLOOR,
        reason="tf.compat.v1.mixed_precision.DynamicLossScale (used by MixedPrecisionLossScaleOptimizer in a v1 "
        "Session) computes maximum(current / multiplier, 1): the scale never goes below 1",
    ),
    expect(
        "apply_unscales",
        "no",
        framework="tensorflow",
        mode="eager|function|xla",  # a v1 Session uses the v1 optimizer: declared below
        versions=KERAS2,
        link=TF_GET_SCALED,
        reason="Keras 2's apply_gradients takes unscaled gradients: the documented loop calls "
        "get_scaled_loss/get_unscaled_gradients around it (Keras 3 dropped both and unscales inside apply)",
    ),
    expect(
        "apply_unscales",
        "no",
        framework="tensorflow",
        mode="graph",
        link=TF_V1_FLOOR,
        reason="MixedPrecisionLossScaleOptimizer.apply_gradients applies the gradients it is given (compute_gradients "
        "is where it unscales); it only checks them for inf/NaN and updates the scale",
    ),
    expect(
        "default_initial_scale",
        2.0**16,
        framework="torch",
        link=TORCH_SCALER,
        reason="torch.amp.GradScaler starts at init_scale=2**16 (growth_interval 2000, backoff 0.5, growth 2.0); "
        "Keras (2 and 3) and the v1 DynamicLossScale start at 2**15",
    ),
    # -- autocast on CPU
    *[
        expect(
            key,
            "bfloat16",
            framework="torch",
            device="cpu",
            link=TORCH_AMP,
            reason="torch.autocast('cpu') defaults to dtype=torch.bfloat16 (CUDA autocast to float16): the linear "
            "layer computes, and its output's gradient flows, in bfloat16",
        )
        for key in ("compute_dtype", "activation_grad_dtype")
    ],
)


# ---------------------------------------------------------------- 1. underflow
#: (computing dtype, the exponent range the products are drawn across): a dtype at its own range,
#: and bfloat16/float32 at float16's (where float16 underflows and they do not).
UNDERFLOW_CASES = tuple(c for c in ((F16, F16), (BF16, F16), (F32, F16), (BF16, F32), (F32, F32)) if None not in c)
PER_REGION = 4


def _exponents(dtype) -> tuple[int, int]:
    """(exponent of the smallest normal, of the smallest subnormal) of ``dtype``."""
    info = (np.finfo if ml_dtypes is None else ml_dtypes.finfo)(dtype)
    return int(np.log2(float(info.tiny))), int(np.log2(float(info.smallest_subnormal)))


@dataclasses.dataclass(frozen=True)
class UnderflowCase:
    w: np.ndarray  # (12,), in [0.5, 2]
    x: np.ndarray  # (12,), normal in the dtype
    g: np.ndarray  # (12,) upstream gradient, normal in the dtype; |g * x| spans `span`'s range
    span: str  # the dtype whose range the products are drawn across


@st.composite
def underflow_cases(draw) -> UnderflowCase:
    """Per element, a product exponent e in the normal, subnormal or underflow band of ``span``
    (|g * x| in [2^e, 2^(e+2))), split between two normal factors with mantissas in [1, 2)."""
    dtype, span = draw(st.sampled_from(UNDERFLOW_CASES), label="dtype, range")
    tiny_e, sub_e = _exponents(span)
    bands = {"normal": (tiny_e, tiny_e + 2), "subnormal": (sub_e, tiny_e - 2), "underflow": (sub_e - 4, sub_e - 3)}
    mant = st.floats(1.0, 1.99, allow_nan=False)
    xs, gs = [], []
    for region in REGIONS:
        for _ in range(PER_REGION):
            e = draw(st.integers(*bands[region]), label=f"{region} exponent")
            a = e // 2
            sign = draw(st.sampled_from((1.0, -1.0)))
            xs.append(sign * float(np.asarray(draw(mant), dtype)) * 2.0**a)
            gs.append(float(np.asarray(draw(mant), dtype)) * 2.0 ** (e - a))
    w = draw(st.lists(st.floats(0.5, 2.0), min_size=len(xs), max_size=len(xs)), label="w")
    as_dtype = lambda v: np.asarray(v, np.float64).astype(dtype)  # noqa: E731 - exact: normal, dtype mantissas
    return UnderflowCase(as_dtype(w), as_dtype(xs), as_dtype(gs), span.name)


class ScaledDown(Program):
    """The gradient of ``sum(g * w * x)`` with respect to ``w`` (``g``: the upstream gradient)."""

    def tensorflow(tf, w, x, g):
        if in_v1_graph():
            return tf.gradients(w * x, [w], grad_ys=g)[0]
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = w * x
        return tape.gradient(y, w, output_gradients=g)

    def jax(jax, w, x, g):
        return jax.vjp(lambda w: w * x, w)[1](g)[0]

    def torch(torch, w, x, g, *, bits=False):
        # torch.from_numpy has no bfloat16: it travels as its bits (see run_scaled_down)
        if bits:
            w, x, g = (v.view(torch.bfloat16) for v in (w, x, g))
        w = w.requires_grad_(True)
        (gw,) = torch.autograd.grad(w * x, w, grad_outputs=g)
        return gw.view(torch.uint16) if bits else gw


def run_scaled_down(runner, case: UnderflowCase) -> np.ndarray:
    bits = runner.framework == "torch" and case.x.dtype == BF16
    if not bits:
        return runner.run(ScaledDown.of(runner), case.w, case.x, case.g)
    out = runner.run(ScaledDown.of(runner), *(v.view(np.uint16) for v in (case.w, case.x, case.g)), bits=True)
    return out.view(ml_dtypes.bfloat16)


def region_of(ref, dtype) -> np.ndarray:
    """Each float64 closed-form value's region in ``dtype``: normal, subnormal (rounds to a nonzero
    subnormal) or underflow (rounds to 0)."""
    tiny = float((np.finfo if ml_dtypes is None else ml_dtypes.finfo)(dtype).tiny)
    rounded = ref.astype(dtype).astype(np.float64)
    return np.where(np.abs(ref) >= tiny, "normal", np.where(rounded != 0, "subnormal", "underflow"))


def classify(out, ref, region: str) -> str:
    """``exact``/``subnormal``/``zero`` when every element equals the correctly rounded closed form
    (named by its region), ``zero`` when every element is 0 although some rounds to nonzero, else ``other``."""
    o = np.asarray(out).astype(np.float64)
    rounded = ref.astype(out.dtype).astype(np.float64)
    if np.array_equal(o, rounded):
        return {"normal": "exact", "subnormal": "subnormal", "underflow": "zero"}[region]
    return "zero" if not np.any(o) else "other"


def _exact_case(dtype, span, exponents) -> UnderflowCase:
    """underflow_cases()'s draw for these product exponents (normal, subnormal, underflow band, in
    order), with mantissas 1.5 (x, signs alternating) and 1 (g): each product 1.5 * 2^e, exact in
    float32, so a kernel's float32 product rounds to the dtype once, as the float64 closed form does."""
    x = [(-1.0) ** i * 1.5 * 2.0 ** (e // 2) for i, e in enumerate(exponents)]
    g = [2.0 ** (e - e // 2) for e in exponents]
    w = np.linspace(0.5, 2.0, len(exponents))
    return UnderflowCase(*(np.asarray(v, np.float64).astype(dtype) for v in (w, x, g)), span.name)


#: bfloat16 at float32's range, explicit since a ci run's draws need not pick that pair: products
#: from 2^-126 down to bfloat16's subnormals (2^-133) and below them. The flushing rows (TF's CPU
#: kernels, XLA:CPU) give 8 zeros; PyTorch keeps bfloat16's subnormals, so its zeros are the
#: underflow band's 4 and the subnormal-band products below 2^-134: one in the first (5), three in the second (7).
BF16_AT_F32_RANGE = (
    ()
    if BF16 is None
    else (
        _exact_case(BF16, F32, (-126, -125, -124, -125, -128, -130, -132, -141, -153, -152, -153, -152)),
        _exact_case(BF16, F32, (-124, -126, -125, -126, -129, -140, -145, -136, -152, -153, -152, -153)),
    )
)


@ss.explicit("case", BF16_AT_F32_RANGE)
@given(case=underflow_cases())
def test_half_precision_gradients_underflow(subject, record, case):
    """The gradient g * x per dtype and region (normal, subnormal, below the subnormals), against the
    float64 product rounded to the dtype."""
    record.example(w=case.w, x=case.x, g=case.g)
    dtype = case.x.dtype
    out = run_scaled_down(subject, case)
    ref = case.g.astype(np.float64) * case.x.astype(np.float64)
    record.equal(name="grad dtype", out=out.dtype.name, ref=dtype.name, oracle="closed-form")
    regions = region_of(ref, dtype)
    for region in REGIONS:
        sel = regions == region
        if sel.any():
            record.check(EXPECT, **{f"grad:{dtype.name}[{region}]": classify(out[sel], ref[sel], region)})
    record.observe(**{f"zeros_at_{case.span}_range[{dtype.name}]": int(np.sum(np.asarray(out, np.float64) == 0))})


# ---------------------------------------------------------------- 2. dynamic loss scaling
LR = 0.125  # a power of two: the unscaled step lr * g / scale is exact
STEPS = 6
SHAPE = (3,)


@dataclasses.dataclass(frozen=True)
class Scaling:
    initial: float
    growth_steps: int


#: Small initial scales reach 1 (and the floor, where there is one) within STEPS steps.
SCALINGS = (Scaling(2.0, 2), Scaling(1.0, 1), Scaling(4.0, 3))


@dataclasses.dataclass(frozen=True)
class ScalingProblem:
    x0: np.ndarray  # SHAPE float32
    grads: np.ndarray  # (STEPS, *SHAPE) float32: the unscaled gradients G_t, some rows with inf/NaN
    hp: Scaling


@st.composite
def scaling_problems(draw) -> ScalingProblem:
    f32 = np.float32
    hp = draw(st.sampled_from(SCALINGS), label="initial scale, growth steps")
    x0 = draw(ss.arrays(f32, SHAPE, elements=ss.floats(f32, -1.0, 1.0)), label="x0")
    grads = draw(ss.arrays(f32, (STEPS, *SHAPE), elements=ss.floats(f32, -4.0, 4.0)), label="gradients")
    for t in range(STEPS):
        kind = draw(st.sampled_from(("finite", "finite", "inf", "nan")), label=f"step {t}")
        if kind != "finite":
            i = draw(st.integers(0, SHAPE[0] - 1))
            grads[t, i] = np.nan if kind == "nan" else draw(st.sampled_from((np.inf, -np.inf)))
    return ScalingProblem(x0, grads, hp)


def closed_form(p: ScalingProblem, *, floor, unscales) -> tuple[np.ndarray, np.ndarray]:
    """(x after each step, the scale after each step) in float64: SGD on the gradient of
    ``scale * sum(x * G_t)`` divided by the scale (``unscales``) or as it is; a step with a non-finite
    gradient is skipped and halves the scale (not below ``floor``), ``growth_steps`` finite steps in a
    row double it."""
    x, s, good = p.x0.astype(np.float64), p.hp.initial, 0
    xs, scales = [], []
    for g in p.grads.astype(np.float64):
        if np.isfinite(g).all():
            x = x - LR * (g if unscales else g * s)
            good += 1
            if good >= p.hp.growth_steps:
                s, good = s * 2.0, 0
        else:
            s, good = (s / 2.0 if floor is None else max(s / 2.0, floor)), 0
        xs.append(x)
        scales.append(s)
    return np.stack(xs), np.array(scales)


MODELS = {(floor, unscales) for floor in (None, 1.0) for unscales in (True, False)}


def keras_loss_scale_optimizer(tf, hp: Scaling):
    return tf.keras.mixed_precision.LossScaleOptimizer(
        tf.keras.optimizers.SGD(LR), initial_scale=hp.initial, dynamic_growth_steps=hp.growth_steps
    )


def current_scale(tf, opt):
    """Keras 3 keeps the scale in ``dynamic_scale``; Keras 2 reads it through ``loss_scale``."""
    return tf.identity(tf.convert_to_tensor(opt.dynamic_scale if hasattr(opt, "dynamic_scale") else opt.loss_scale))


def optimizer_state(opt) -> list:
    """Every variable of a Keras loss-scale optimizer: Keras 2 keeps its scale and counter outside
    ``variables`` (in ``_loss_scale``)."""
    out = list(opt.variables() if callable(opt.variables) else opt.variables)
    own = getattr(opt, "_loss_scale", None)
    if own is not None and hasattr(own, "counter"):
        out += [own.counter, own.current_loss_scale]
    seen, unique = set(), []
    for v in out:
        if id(v) not in seen:
            seen.add(id(v))
            unique.append(v)
    return unique


class _TFState:
    """The variable and optimizer of a tf.function/XLA row (one per hyper-parameters), built eagerly
    and reset at the end of each traced step to their fresh values (as suite.optimizers.reset_slots)."""

    def __init__(self, tf, hp):
        self.var = tf.Variable(tf.zeros(SHAPE, tf.float32))
        self.opt = keras_loss_scale_optimizer(tf, hp)
        self.opt.build([self.var])
        self.initial = None

    def reset(self, tf):
        variables = optimizer_state(self.opt)
        if self.initial is None:
            with tf.init_scope():
                self.initial = [np.asarray(v.numpy()) for v in variables]
        for v, value in zip(variables, self.initial):
            v.assign(value)


class LossScaledSteps(Program):
    """STEPS loss-scaled SGD steps on ``sum(x * grads[t])``: (x after each step, scale after each step)."""

    def tensorflow(tf, x0, grads, *, hp, state=None):
        if in_v1_graph():  # the v1 API: a Session runs only what is fetched, so step t waits for t - 1
            scale = tf.compat.v1.mixed_precision.DynamicLossScale(
                initial_loss_scale=hp.initial, increment_period=hp.growth_steps, multiplier=2.0
            )
            opt = tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(LR), loss_scale=scale
            )
            var = tf.compat.v1.Variable(x0)
            after, xs, scales = [], [], []
            for t in range(STEPS):
                with tf.control_dependencies(after):
                    loss = tf.reduce_sum(var * grads[t])
                    (scaled,) = tf.gradients(loss * scale(), [var])
                    train = opt.apply_gradients([(scaled, var)])
                with tf.control_dependencies([train]):
                    after = [var.read_value(), tf.identity(scale())]
                xs.append(after[0])
                scales.append(after[1])
            return tf.stack(xs), tf.stack(scales)
        if state is None:
            var, opt = tf.Variable(x0), keras_loss_scale_optimizer(tf, hp)
        else:
            var, opt = state.var, state.opt
            var.assign(x0)
        xs, scales = [], []
        for t in range(STEPS):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(var * grads[t])
                scaled = opt.scale_loss(loss) if hasattr(opt, "scale_loss") else opt.get_scaled_loss(loss)
            (g,) = tape.gradient(scaled, [var])
            opt.apply_gradients([(g, var)])
            xs.append(var.read_value())
            scales.append(current_scale(tf, opt))
        out = tf.stack(xs), tf.stack(scales)
        if state is not None:
            state.reset(tf)
        return out

    tensorflow.exact_shapes = True

    def jax(jax, x0, grads, *, hp):
        """optax.apply_if_finite around SGD skips a non-finite step; the scale is kept by hand from its
        ``last_finite`` (optax has no loss scaler)."""
        import optax

        jnp = jax.numpy
        opt = optax.apply_if_finite(optax.sgd(LR), max_consecutive_errors=10**6)
        state, x, s, good = opt.init(x0), x0, jnp.asarray(hp.initial, x0.dtype), jnp.asarray(0)
        xs, scales = [], []
        for t in range(STEPS):
            g = grads[t]
            scaled = jax.grad(lambda x: jnp.sum(x * g) * s)(x)
            updates, state = opt.update(scaled / s, state, x)
            x = optax.apply_updates(x, updates)
            grow = state.last_finite & (good + 1 >= hp.growth_steps)
            s = jnp.where(state.last_finite, jnp.where(grow, s * 2, s), s / 2)
            good = jnp.where(state.last_finite & ~grow, good + 1, 0)
            xs.append(x)
            scales.append(s)
        return jnp.stack(xs), jnp.stack(scales)

    def torch(torch, x0, grads, *, hp):
        p = x0.clone().requires_grad_(True)
        opt = torch.optim.SGD([p], lr=LR)
        scaler = torch.amp.GradScaler(p.device.type, init_scale=hp.initial, growth_interval=hp.growth_steps)
        xs, scales = [], []
        for t in range(STEPS):
            opt.zero_grad()
            scaler.scale((p * grads[t]).sum()).backward()
            scaler.step(opt)
            scaler.update()
            xs.append(p.detach().clone())
            scales.append(scaler.get_scale())
        return torch.stack(xs), torch.tensor(scales, dtype=torch.float32, device=p.device)


_STATES: dict = {}


def run_loss_scaled(subject, p: ScalingProblem):
    state = None
    if subject.framework == "tensorflow" and subject.mode in ("function", "xla"):
        key = (subject.id, p.hp)
        if key not in _STATES:
            with subject.module.device(subject.device_name):
                _STATES[key] = _TFState(subject.module, p.hp)
        state = _STATES[key]
    static = {"state": state} if subject.framework == "tensorflow" else {}
    return subject.run(LossScaledSteps.of(subject), p.x0, p.grads, hp=p.hp, **static)


def defaults(subject):
    """(initial scale, growth steps) of the subject's loss scaler built with no arguments; None for JAX."""
    if subject.framework == "torch":
        scaler = subject.module.amp.GradScaler("cpu")
        return scaler.get_scale(), scaler.get_growth_interval()
    if subject.framework != "tensorflow":
        return None
    tf = subject.module
    if subject.mode == "graph":
        v1 = tf.compat.v1.mixed_precision.DynamicLossScale()
        return float(v1.initial_loss_scale), int(v1.increment_period)
    opt = tf.keras.mixed_precision.LossScaleOptimizer(tf.keras.optimizers.SGD())
    return float(opt.initial_scale), int(opt.dynamic_growth_steps)


def history_scale(x0, ref_x) -> np.ndarray:
    """Per step and element, the largest magnitude element i's trajectory has reached by step t
    (x0 included): x_t = x_(t-1) - d_t is one rounding of a difference of terms no larger than
    that (|d_t| <= |x_(t-1)| + |x_t|; lr, the scale and their quotient are powers of two), so
    its error is a few units of rounding at that magnitude, not at the largest element's."""
    return np.maximum.accumulate(np.abs(np.vstack([np.asarray(x0, np.float64)[None], ref_x])), axis=0)[1:]


def _fits(out_x, out_s, ref_x, ref_s, x0) -> bool:
    tol = cmp.GRAD.of(np.float32)
    scale = history_scale(x0, ref_x)
    return (
        cmp.rel_err(out_x, ref_x, rtol=tol, scale=scale, dtype=np.float32) <= tol
        and cmp.rel_err(out_s, ref_s, rtol=0.0) == 0.0
    )


@given(p=scaling_problems())
def test_dynamic_loss_scale_follows_its_closed_form(subject, record, p):
    """Loss-scaled SGD over hand-made gradients (some inf/NaN): skipped steps, the scale's halving,
    growth and floor, and who unscales, against the float64 closed form of each variant."""
    record.example(x0=p.x0, grads=p.grads)
    d = defaults(subject)
    if d is not None:
        record.check(EXPECT, default_initial_scale=d[0], default_growth_steps=d[1])
    try:
        xs, scales = run_loss_scaled(subject, p)
    except Exception as e:  # an API this release or mode does not have
        record.check(EXPECT, loss_scale_call=cmp.error_name(e))
        return
    record.check(EXPECT, loss_scale_call="available")
    xs, scales = np.asarray(xs), np.asarray(scales)
    record.equal(name="variable dtype", out=xs.dtype.name, ref="float32", oracle="closed-form")
    prev = np.vstack([p.x0[None], xs[:-1]])
    bad = ~np.isfinite(p.grads).all(axis=1)
    if bad.any():
        record.check(EXPECT, nonfinite_step="skipped" if np.array_equal(xs[bad], prev[bad]) else "applied")
    refs = {m: closed_form(p, floor=m[0], unscales=m[1]) for m in MODELS}
    fits = [m for m, (rx, rs) in refs.items() if _fits(xs, scales, rx, rs, p.x0)]
    record.check(EXPECT, scale_trajectory="closed-form" if fits else "other")
    if not fits:
        return
    for i, key, labels in (
        (0, "scale_floor", {None: "none", 1.0: "1"}),
        (1, "apply_unscales", {True: "yes", False: "no"}),
    ):
        seen = {labels[m[i]] for m in fits}
        if len(seen) == 1 and subject.framework != "jax":  # JAX's scale policy is the hand loop's own
            record.check(EXPECT, **{key: seen.pop()})
    ref_x, ref_s = refs[fits[0]]
    scale = history_scale(p.x0, ref_x)
    record.close(name="x after each step", out=xs, ref=ref_x.astype(np.float32), oracle="closed-form", scale=scale)
    record.close(
        name="scale after each step", out=scales, ref=ref_s.astype(np.float32), oracle="closed-form", tol=cmp.EXACT
    )


# ---------------------------------------------------------------- 3. the mixed_float16 policy
LAYER_SHAPES = ((4, 3, 2), (2, 5, 3))  # (batch, in, out)
_LAYERS: dict = {}


def mixed_dense(tf, api, n_in, n_out, init):
    """A bias-free Dense whose policy is mixed_float16: given to the layer, or the global policy while it is
    built (restored afterwards, whatever happens)."""
    dense = tf.keras.layers.Dense
    if api == "layer":
        layer = dense(n_out, use_bias=False, dtype="mixed_float16", kernel_initializer=init)
        layer.build((None, n_in))
        return layer
    policy = tf.keras.mixed_precision.global_policy()
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        layer = dense(n_out, use_bias=False, kernel_initializer=init)
        layer.build((None, n_in))
    finally:
        tf.keras.mixed_precision.set_global_policy(policy)
    return layer


class MixedDense(Program):
    """h = x @ k in the policy's compute dtype; loss = sum(float32(h) * c): (h, dloss/dk, dloss/dx,
    dloss/dh, k as the variable holds it)."""

    def tensorflow(tf, x, c, k, *, api, dims):
        """``dims``: (in, out), static (traced and v1 graphs see k with unknown dimensions)."""
        n_in, n_out = dims
        if in_v1_graph():  # a layer per graph, its kernel initialised from the fed k
            layer = mixed_dense(tf, api, n_in, n_out, lambda shape, dtype=None, **kw: tf.cast(k, dtype or tf.float32))
            h = layer(x)
            gk, gx, gh = tf.gradients(tf.reduce_sum(tf.cast(h, tf.float32) * c), [layer.kernel, x, h])
            return h, gk, gx, gh, tf.convert_to_tensor(layer.kernel)
        key = (api, n_in, n_out)
        if key not in _LAYERS:
            with tf.init_scope():
                _LAYERS[key] = mixed_dense(tf, api, n_in, n_out, "zeros")
        layer = _LAYERS[key]
        layer.kernel.assign(k)
        with tf.GradientTape() as tape:
            tape.watch(x)
            h = layer(x)
            loss = tf.reduce_sum(tf.cast(h, tf.float32) * c)
        gk, gx, gh = tape.gradient(loss, [layer.kernel, x, h])
        return h, gk, gx, gh, tf.convert_to_tensor(layer.kernel)

    def jax(jax, x, c, k):
        """jmp's recipe: float32 parameters cast to float16 for the computation."""
        jnp = jax.numpy
        h, pull = jax.vjp(lambda x, k: x.astype(jnp.float16) @ k.astype(jnp.float16), x, k)
        gh = jax.grad(lambda h: jnp.sum(h.astype(jnp.float32) * c))(h)
        gx, gk = pull(gh)
        return h, gk, gx, gh, k

    def torch(torch, x, c, k):
        lin = torch.nn.Linear(*k.shape, bias=False, device=x.device)
        with torch.no_grad():
            lin.weight.copy_(k.T)
        x = x.requires_grad_(True)
        with torch.autocast(x.device.type):
            h = lin(x)
        h.retain_grad()
        (h.float() * c).sum().backward()
        as_np = lambda t: t.float() if t.dtype == torch.bfloat16 else t  # noqa: E731 - NumPy has no bfloat16
        return as_np(h.detach()), lin.weight.grad.T, x.grad, as_np(h.grad), lin.weight.detach().T, str(h.dtype)


@dataclasses.dataclass(frozen=True)
class DenseCase:
    x: np.ndarray
    c: np.ndarray
    k: np.ndarray


@st.composite
def dense_cases(draw) -> DenseCase:
    f32 = np.float32
    b, n, m = draw(st.sampled_from(LAYER_SHAPES), label="batch, in, out")
    x = draw(ss.arrays(f32, (b, n), elements=ss.floats(f32, -2.0, 2.0)), label="x")
    c = draw(ss.arrays(f32, (b, m), elements=ss.floats(f32, -2.0, 2.0)), label="cotangent")
    k = draw(ss.arrays(f32, (n, m), elements=ss.floats(f32, -1.0, 1.0)), label="kernel")
    return DenseCase(x, c, k)


APIS = {"tensorflow": ("layer", "global"), "jax": (None,), "torch": (None,)}


@given(case=dense_cases())
def test_mixed_policy_gradient_dtypes(subject, record, case):
    """Dtypes of the variable, the computation and each gradient under mixed_float16 (autocast, hand
    casts), and their values against float64 closed forms at the compute dtype's tolerance."""
    record.example(x=case.x, c=case.c, k=case.k)
    x, c = case.x.astype(np.float64), case.c.astype(np.float64)
    for api in APIS[subject.framework]:
        static = {"api": api, "dims": case.k.shape} if api else {}
        h, gk, gx, gh, k, *torch_dtype = subject.run(MixedDense.of(subject), case.x, case.c, case.k, **static)
        compute = torch_dtype[0].removeprefix("torch.") if torch_dtype else h.dtype.name
        record.check(
            EXPECT,
            variable_dtype=k.dtype.name,
            compute_dtype=compute,
            variable_grad_dtype=gk.dtype.name,
            input_grad_dtype=gx.dtype.name,
            activation_grad_dtype=compute if torch_dtype else gh.dtype.name,
        )
        kk = k.astype(np.float64)
        tol = BF16 if compute == "bfloat16" else np.dtype(compute)
        # the matrix products sum over an axis: floored at the inputs' magnitude; the activation gradient is
        # c rounded to the compute dtype, element by element: held relative to |c_i|
        for name, out, ref, scale in (
            ("h", h, x @ kk, "inputs"),
            ("kernel grad", gk, x.T @ c, "inputs"),
            ("input grad", gx, c @ kk.T, "inputs"),
            ("activation grad", gh, c, np.abs(c)),
        ):
            record.close(
                name=f"{name}[{api or subject.framework}]",
                out=np.asarray(out, np.float64),
                ref=ref,
                oracle="closed-form",
                derived_from=tol,
                scale=scale,
            )

"""Adam's epsilon: TensorFlow adds it to sqrt(v) before bias correction ("epsilon hat").

Source: seeds/001 (``tf.train.AdamOptimizer(learning_rate=0.001, beta1=0.9, beta2=0.999,
epsilon=0.1)``, then ``compute_gradients``/``apply_gradients`` in a Session; seeds/003
repeats it). Given a gradient sequence g_1..g_n, m_t = b1 m + (1-b1) g_t, v_t = b2 v +
(1-b2) g_t^2 and two update rules exist:

* ``eps-hat`` (the formula just before Sec. 2.1 of Kingma & Ba):
  x -= lr sqrt(1-b2^t)/(1-b1^t) m_t / (sqrt(v_t) + eps);
* ``eps-outside-bias-correction`` (Algorithm 1): x -= lr m_hat / (sqrt(v_hat) + eps),
  m_hat = m/(1-b1^t), v_hat = v/(1-b2^t).

Both are the same update with eps_t = eps / sqrt(1-b2^t) in the second. Gradients are fed
to the optimizers (the parameter value does not enter Adam's update) and trajectories are
compared as displacement from x0 in units of lr; tf.function/XLA rows build the variable
and optimizer once per dtype outside the function and reset them inside it (``_TFState``).

Declared surprises:

* TF's Adam (the v1 ``AdamOptimizer`` and Keras ``Adam``) follows eps-hat, where
  ``torch.optim.Adam`` and ``optax.adam`` follow eps-outside-bias-correction.
* So with identical hyper-parameters TF's trajectory differs from PyTorch's and optax's; it
  matches them once they get eps_t = eps/sqrt(1-b2^t) per step.
* Keras Adam in a v1 Session cannot step: Keras 3's ``apply_gradients`` returns a
  keras.Variable that ``Session.run`` rejects (``raises:TypeError``), Keras 2's op steps nothing.
* For float64 variables Keras 3 keeps the learning rate in float32 and casts the betas
  through float32 before the power (model ``float32-lr-beta-powers``).
* For float64 variables the v1 ``AdamOptimizer`` converts lr, betas and epsilon to float32 and
  accumulates the beta powers in float32 (model ``float32-all``).
"""

import dataclasses
import math

import numpy as np
from hypothesis import assume, example, given, strategies as st

from suite import compare as cmp, optimizers, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.program import Program

V1_DOC = "https://www.tensorflow.org/api_docs/python/tf/compat/v1/train/AdamOptimizer"
KERAS_DOC = "https://keras.io/api/optimizers/adam/"
TORCH_DOC = "https://pytorch.org/docs/stable/generated/torch.optim.Adam.html"
OPTAX_DOC = "https://optax.readthedocs.io/en/latest/api/optimizers.html#optax.adam"
V1_SRC = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/training/adam.py"
KERAS_SRC = "https://github.com/keras-team/keras/blob/master/keras/src/optimizers/adam.py"
KERAS_BASE_SRC = "https://github.com/keras-team/keras/blob/master/keras/src/optimizers/base_optimizer.py"

BEHAVIOUR = behaviour(
    "adam-epsilon",
    sources=["001", "003"],
    links=[V1_DOC, KERAS_DOC, TORCH_DOC, OPTAX_DOC, "https://github.com/tensorflow/tensorflow/pull/9047"],
    floor=Floor(
        "mixed",
        "Per element: Adam fed its gradients is elementwise (element i moves by its own m_i, v_i), so each "
        "displacement (x_t - x0) / lr, against the closed forms and across frameworks, is floored at what element "
        "i's parameter reached plus the steps it took, in units of lr (rounding_scales). Array-level: the seed "
        "model's trajectory (its gradient is a softmax cross-entropy over both variables) and the seed's ratios "
        "of displacements (floored at 1).",
    ),
)

EPS_HAT = (
    "lr_t = lr*sqrt(1-b2^t)/(1-b1^t); x -= lr_t*m/(sqrt(v)+eps): eps is 'epsilon hat' of Kingma & Ba "
    "(formula before Sec. 2.1), i.e. PyTorch/optax's eps_t = eps/sqrt(1-b2^t); both the v1 "
    "AdamOptimizer and tf.keras.optimizers.Adam docstrings say so"
)
KERAS2_IN_SESSION = (
    "Keras 2 (TF 2.12-2.15; keras.optimizers.Optimizer since 2.11) targets TF2: in a v1 "
    "graph apply_gradients returns iterations.assign_add(1) with no control dependency on "
    "the variable updates, so running the op it returns steps nothing (measured: the "
    "variable keeps x0); tf.keras.optimizers.legacy.* are the graph-mode optimizers"
)
KERAS2_OPTIMIZER_SRC = "https://github.com/keras-team/keras/blob/v2.15.0/keras/optimizers/optimizer.py"
EXPECT = expectations(
    {
        "update_rule": "eps-outside-bias-correction",
        "identical_hparams": "agree",
        "optimizer_call": "available",
        "v1_optimizer_call": "available",
        "float64_hyperparams": "float64",
        "v1_float64_hyperparams": "float64",
    },
    expect("update_rule", "eps-hat", framework="tensorflow", reason=EPS_HAT, link=V1_DOC),
    expect(
        "identical_hparams",
        "differ",
        framework="tensorflow",
        reason="eps-hat vs eps-outside-bias-correction: with the same eps TF's effective eps is "
        "1/sqrt(1-b2^t) times PyTorch's/optax's (31.6x at t=1 for b2=0.999)",
        link=TORCH_DOC,
    ),
    expect(
        "optimizer_call",
        raises("TypeError", r"Can not convert a \w+ into a Tensor or Operation"),
        framework="tensorflow",
        mode="graph",
        versions=">=2.16",
        reason="Keras 3 targets TF2: apply_gradients returns self.iterations (a keras.Variable), not an "
        "op; Session.run/control_dependencies cannot take it (TypeError)",
        link=KERAS_BASE_SRC,
    ),
    expect(
        "optimizer_call",
        "no-step",
        framework="tensorflow",
        mode="graph",
        versions="<2.16",
        reason=KERAS2_IN_SESSION,
        link=KERAS2_OPTIMIZER_SRC,
    ),
    expect(
        "float64_hyperparams",
        "float32",
        framework="tensorflow",
        reason="Keras 3 keeps learning_rate in a float32 variable and ops.cast(beta_1, float64) goes "
        "through a float32 tensor before ops.power (model float32-lr-beta-powers); m, v and "
        "epsilon stay float64",
        link=KERAS_SRC,
    ),
    expect(
        "v1_float64_hyperparams",
        "float32",
        framework="tensorflow",
        reason="AdamOptimizer._prepare converts lr/beta1/beta2/epsilon to (float32) tensors and "
        "beta1_power/beta2_power are float32 non-slot variables, cast to float64 per step "
        "(model float32-all)",
        link=V1_SRC,
    ),
)

# Displacement from x0 in units of lr. float32: |x| <= ~1 rounds to 1.2e-7 per step, five
# steps over lr >= 1e-3 give <= 6e-4. float64: the same argument at 2.2e-16, with slack.
# float64 runs meet their hyper-parameter model (float64 or float32) to 1e-13 in every mode.
TRAJ_TOL = cmp.tolerance(float32=1e-3, float64=1e-10)
# TF against the oracles: TF's float64 runs carry float32 hyper-parameters (declared above;
# 1 - f32(0.999) is off by 1.3e-5 relative), so float64 is loosened to that; float32 is
# TRAJ_TOL's. PyTorch and optax against each other keep float64 hyper-parameters: cmp.GRAD.
XFW_TOL = cmp.tolerance(float32=1e-3, float64=1e-4)
# That error is relative to each step, not to the displacement: where an element's steps cancel
# (a gradient that changes sign) it stays at their sum's, so TF is held per element at HPARAM_ERR of
# its cumulated |steps| (hyperparameter_scales). Measured against float64 hyper-parameters, the
# closed forms float32-all (v1) and float32-lr-beta-powers (Keras 3) stay within 1.4e-5 and 6.7e-6
# of those, over 6,000 random draws (gradient scales 1e-6 to 1e3, sign changes, zeros); 1e-4 with
# slack, XFW_TOL's float64.
HPARAM_ERR = 1e-4
# Relative differences between frameworks (the seed numbers) from float32 runs that start at 0:
# each ratio carries its two displacements' relative errors (x0 = 0, so the parameters round at
# their own size, a few units of float32 rounding per step, 1e-6 over five), 1e-4 with slack.
DIFF_TOL = cmp.tolerance(float32=1e-4, float64=1e-9)
STEPS = 5
# Adam is elementwise; one shape keeps XLA/tf.function at one program per dtype and API
# (the seed examples add shapes (2,) and (3,)).
SHAPES = ((2, 3),)


@dataclasses.dataclass(frozen=True)
class Hyper:
    lr: float
    b1: float
    b2: float
    eps: float


SEED = Hyper(0.001, 0.9, 0.999, 0.1)  # seeds/001, as written


# ---------------------------------------------------------------- closed forms (NumPy, float64)
def _f32(a):
    return float(np.float32(a))


def closed_form(x0, grads, hp, *, rule, hparams="float64", steps=STEPS):
    """Parameters after each step, in float64. ``grads``: the fed gradients, one per step, or
    a function of the parameters (a model's gradient).

    ``hparams`` reproduces where an implementation keeps hyper-parameters in float32:
    ``float32-all`` (v1: lr, b1, b2, eps rounded; b^t accumulated in float32) or
    ``float32-lr-beta-powers`` (Keras 3: lr rounded, b^t = f32(b)^t; m, v, eps exact).
    """
    lr, b1, b2, eps = hp.lr, hp.b1, hp.b2, hp.eps
    pb1, pb2 = b1, b2  # the betas that go into the powers
    if hparams == "float32-all":
        lr, b1, b2, eps = map(_f32, (lr, b1, b2, eps))
        pb1, pb2 = b1, b2
    elif hparams == "float32-lr-beta-powers":
        lr, pb1, pb2 = _f32(lr), _f32(b1), _f32(b2)
    x = np.asarray(x0, np.float64)
    m = v = np.zeros_like(x)
    p1 = p2 = 1.0
    out = []
    for t in range(1, steps + 1):
        g = grads(x) if callable(grads) else np.asarray(grads[t - 1], np.float64)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if hparams == "float32-all":
            p1, p2 = _f32(p1 * pb1), _f32(p2 * pb2)
        else:
            p1, p2 = pb1**t, pb2**t
        if rule == "eps-hat":
            x = x - lr * math.sqrt(1 - p2) / (1 - p1) * m / (np.sqrt(v) + eps)
        else:
            x = x - lr * (m / (1 - p1)) / (np.sqrt(v / (1 - p2)) + eps)
        out.append(x)
    return np.stack(out)


RULES = ("eps-hat", "eps-outside-bias-correction")
FLOAT32_MODELS = ("float32-all", "float32-lr-beta-powers")


def displacement(x0, traj, lr):
    """(x_t - x0) / lr: what Adam moved, in units of the learning rate (float64, derived
    from the trajectory: compare it with ``derived_from=`` and :func:`rounding_scale`)."""
    return (np.asarray(traj, np.float64) - np.asarray(x0, np.float64)) / lr


def rounding_scale(x0, traj, lr) -> float:
    """The magnitude that sets a displacement's absolute error floor: the parameters round
    at ``eps * |x|`` per step, which is ``eps * |x| / lr`` in units of lr (however small
    the displacement itself is)."""
    mags = [float(np.max(np.abs(np.asarray(a, np.float64)))) for a in (x0, traj) if np.size(a)]
    return max(mags, default=0.0) / lr


def rounding_scales(x0, traj, lr) -> np.ndarray:
    """:func:`rounding_scale` per step and element, for a trajectory fed its gradients (Adam is
    elementwise: element i moves by its own m_i, v_i): what element i's parameter has reached by
    step t (it rounds at ``eps * |x|`` per step), plus the steps it took (each rounds at its own
    size, and they may cancel in the displacement), in units of lr; never above the array-level
    :func:`rounding_scale` (no element is held more loosely than before). Never below a step that
    may be flushed: a parameter change under ``FLUSHED`` smallest normals is subnormal, which
    XLA's and TensorFlow's CPU kernels flush to zero (measured: JAX leaves a parameter at 0 whose
    gradients are the smallest normal, 1.2e-38, where the closed form moves it by 1.2e-40 a step),
    and in units of lr that is ``FLUSHED * tiny / lr``."""
    x = np.vstack([np.asarray(x0, np.float64)[None], np.asarray(traj, np.float64)])
    reached = np.maximum.accumulate(np.abs(x), axis=0)[1:]
    moved = np.cumsum(np.abs(np.diff(x, axis=0)), axis=0)
    flushed = cmp.flushed_scale(np.asarray(traj).dtype, 1.0 / lr)
    return np.maximum(np.minimum((reached + moved) / lr, rounding_scale(x0, traj, lr)), flushed)


def hyperparameter_scales(x0, traj, lr) -> np.ndarray:
    """:func:`rounding_scales`, and at least ``HPARAM_ERR`` of the steps each element took (their
    cumulated |steps|, in units of lr): a TensorFlow trajectory's error from its float32
    hyper-parameters, as a scale of :func:`suite.compare.floor` for the trajectory's dtype."""
    x = np.vstack([np.asarray(x0, np.float64)[None], np.asarray(traj, np.float64)])
    moved = np.cumsum(np.abs(np.diff(x, axis=0)), axis=0) / lr
    return np.maximum(rounding_scales(x0, traj, lr), cmp.scale_allowing(np.asarray(traj).dtype, moved * HPARAM_ERR))


@dataclasses.dataclass(frozen=True)
class Fit:
    rule: str  # eps-hat | eps-outside-bias-correction | ambiguous | other
    precision: str  # float64 runs: float64 | float32 | other (float32 runs: "n/a")
    model: str  # the hyper-parameter model of the closed form that fits best
    ref: np.ndarray  # that closed form's displacement


def fit(x0, grads, hp, traj) -> Fit:
    """Which closed form ``traj`` follows: the update rule, and for float64 whether the
    hyper-parameters stayed float64 or went through float32 (and which float32 model fits)."""
    out = displacement(x0, traj, hp.lr)
    models = ("float64", *FLOAT32_MODELS)
    refs = {
        (r, h): displacement(x0, closed_form(x0, grads, hp, rule=r, hparams=h), hp.lr) for r in RULES for h in models
    }
    tol = TRAJ_TOL.of(traj.dtype)
    scale = rounding_scales(x0, traj, hp.lr)
    errs = {k: cmp.rel_err(out, ref, rtol=tol, scale=scale, dtype=traj.dtype) for k, ref in refs.items()}
    rules = [r for r in RULES if min(errs[r, h] for h in models) <= tol]
    rule = rules[0] if len(rules) == 1 else ("ambiguous" if rules else "other")
    if rule not in RULES:
        return Fit(rule, "other", "none", refs[RULES[0], "float64"])
    if traj.dtype != np.float64:  # float32 cannot tell the hyper-parameter models apart
        return Fit(rule, "n/a", "float64", refs[rule, "float64"])
    model = min(models, key=lambda h: errs[rule, h])
    precision = "float64" if model == "float64" else "float32"
    return Fit(rule, precision, model, refs[rule, model])


def separated(x0, grads, hp) -> bool:
    """The two rules' closed forms differ by well over the tolerance (so a run can tell them apart)."""
    trajs = [closed_form(x0, grads, hp, rule=r) for r in RULES]
    a, b = (displacement(x0, t, hp.lr) for t in trajs)
    tol = TRAJ_TOL.of(np.float32)
    return cmp.rel_err(a, b, rtol=tol, scale=rounding_scale(x0, trajs[0], hp.lr), dtype=np.float32) > 5 * tol


# ---------------------------------------------------------------- strategies
@dataclasses.dataclass(frozen=True)
class AdamProblem:
    x0: np.ndarray
    grads: np.ndarray  # (STEPS, *x0.shape): the gradient fed at each step
    hp: Hyper


@st.composite
def adam_problems(draw):
    """Initial parameters in [-1, 1] and STEPS gradients of one drawn scale (1e-3: the seed's
    "small gradients" regime, up to 10), with the seed's hyper-parameters."""
    dtype = draw(ss.float_dtypes())
    shape = draw(st.sampled_from(SHAPES), label="shape")
    x0 = draw(ss.float_arrays(dtype=dtype, shape=shape, min_value=-1.0, max_value=1.0), label="params")
    scale = draw(st.sampled_from([1e-3, 1e-1, 1.0, 10.0]), label="gradient scale")
    g = draw(ss.float_arrays(dtype=dtype, shape=(STEPS, *shape), min_value=-1.0, max_value=1.0), label="gradients")
    return AdamProblem(x0=x0, grads=(g * dtype.type(scale)).astype(dtype), hp=SEED)


# ---------------------------------------------------------------- the programs
def keras_adam(tf, hp):
    return tf.keras.optimizers.Adam(hp.lr, beta_1=hp.b1, beta_2=hp.b2, epsilon=hp.eps)


def v1_adam(tf, hp):
    """seeds/001: tf.train.AdamOptimizer(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=0.1)."""
    return tf.compat.v1.train.AdamOptimizer(learning_rate=hp.lr, beta1=hp.b1, beta2=hp.b2, epsilon=hp.eps)


TF_OPTIMIZERS = {"keras": keras_adam, "v1": v1_adam}


class AdamOptimizer(Program):
    """Each framework's own Adam optimizer with hyper-parameters ``hp`` (also the benchmark's)."""

    def tensorflow(tf, *, hp, api="keras"):
        """``api``: "keras" (tf.keras.optimizers.Adam) or "v1" (the seed's AdamOptimizer)."""
        return TF_OPTIMIZERS[api](tf, hp)

    def jax(jax, *, hp, rescale=False):
        """optax.adam (eps_root=0); ``rescale``: wrapped by inject_hyperparams, so eps can be set per step."""
        import optax

        if rescale:
            return optax.inject_hyperparams(optax.adam)(learning_rate=hp.lr, b1=hp.b1, b2=hp.b2, eps=hp.eps)
        return optax.adam(hp.lr, b1=hp.b1, b2=hp.b2, eps=hp.eps)

    def torch(torch, params, *, hp, foreach=None):
        return torch.optim.Adam(params, lr=hp.lr, betas=(hp.b1, hp.b2), eps=hp.eps, foreach=foreach)


class Adam(Program):
    """Adam over the fed gradients: the parameters after every step, shape (steps, *x0.shape)."""

    def tensorflow(tf, x0, grads, *, api, hp, state=None):
        """``api`` ("keras" or "v1") Adam, one apply_gradients per fed gradient; ``state``: see _TFState."""
        if state is None:
            var, opt = tf.Variable(x0), AdamOptimizer.tensorflow(tf, hp=hp, api=api)
        else:
            var, opt = state.var, state.opt
            var.assign(x0)
        outs, after = [], []
        for t in range(grads.shape[0]):
            if in_v1_graph():  # a Session runs only what is fetched: chain step t after step t-1
                with tf.control_dependencies(after):
                    train_op = opt.apply_gradients([(grads[t], var)])
                with tf.control_dependencies([train_op]):
                    after = [var.read_value()]
                outs.append(after[0])
            else:
                opt.apply_gradients([(grads[t], var)])
                outs.append(var.read_value())
        out = tf.stack(outs)
        if state is not None:
            state.reset(tf)
        return out

    tensorflow.exact_shapes = True  # the step count is the static grads.shape[0]

    def jax(jax, x0, grads, *, hp, rescale=False):
        """optax.adam; ``rescale``: eps_t = eps/sqrt(1-b2^t) via inject_hyperparams."""
        import optax

        opt = AdamOptimizer.jax(jax, hp=hp, rescale=rescale)
        state, x, out = opt.init(x0), x0, []
        for t in range(grads.shape[0]):
            if rescale:
                state.hyperparams["eps"] = hp.eps / math.sqrt(1 - hp.b2 ** (t + 1))
            updates, state = opt.update(grads[t], state, x)
            x = optax.apply_updates(x, updates)
            out.append(x)
        return jax.numpy.stack(out)

    def torch(torch, x0, grads, *, hp, rescale=False):
        """torch.optim.Adam; ``rescale``: eps_t = eps/sqrt(1-b2^t) set in param_groups before step t."""
        p = torch.nn.Parameter(x0.clone())
        opt = AdamOptimizer.torch(torch, [p], hp=hp)
        out = []
        for t, g in enumerate(grads, 1):
            if rescale:
                opt.param_groups[0]["eps"] = hp.eps / math.sqrt(1 - hp.b2**t)
            p.grad = g.clone()
            opt.step()
            out.append(p.detach().clone())
        return torch.stack(out)


class _TFState:
    """The variable and optimizer of a tf.function/XLA row, one per (subject, API, dtype,
    shape), built eagerly outside the function. ``reset``, traced at the end of the step,
    assigns the freshly built values back: each example starts from a fresh optimizer while
    the function is traced once."""

    def __init__(self, tf, api, dtype, shape, hp):
        self.var = tf.Variable(tf.zeros(shape, dtype))
        self.opt = AdamOptimizer.tensorflow(tf, hp=hp, api=api)
        if api == "keras":  # v1 slots are made by the first apply_gradients (in an init_scope)
            self.opt.build([self.var])
        self.initial = None

    def reset(self, tf):
        self.initial = optimizers.reset_slots(tf, self.opt, self.initial)


_STATES: dict = {}


def run_adam(subject, x0, grads, hp, *, api=None):
    """The subject's native Adam; for TensorFlow ``api`` (default: Keras Adam in TF2 modes and
    the seed's v1 optimizer in a Session)."""
    if subject.framework != "tensorflow":
        return subject.run(Adam.of(subject), x0, grads, hp=hp)
    api = api or ("v1" if subject.mode == "graph" else "keras")
    state = None  # eager and graph build fresh objects per call
    if subject.mode in ("function", "xla"):
        key = (subject.id, api, x0.dtype.str, x0.shape, hp)
        if key not in _STATES:
            with subject.module.device(subject.device_name):
                _STATES[key] = _TFState(subject.module, api, x0.dtype, x0.shape, hp)
        state = _STATES[key]
    return subject.run(Adam.of(subject), x0, grads, api=api, hp=hp, state=state)


# ---------------------------------------------------------------- properties
def check_fit(record, p, traj, *, precision_key):
    """Observe the update rule (and float64 hyper-parameter precision) and hold the
    trajectory to the closed form it should follow."""
    f = fit(p.x0, p.grads, p.hp, traj)
    record.check(EXPECT, update_rule=f.rule)
    if p.x0.dtype == np.float64:
        record.check(EXPECT, **{precision_key: f.precision})
        record.observe(**{f"{precision_key}_model": f.model})
    record.equal(name="trajectory dtype", out=np.asarray(traj).dtype.name, ref=p.x0.dtype.name, oracle="closed-form")
    record.close(
        name=f"displacement[{f.rule},{f.model}]",
        out=displacement(p.x0, traj, p.hp.lr),
        ref=f.ref,
        oracle="closed-form",
        tol=TRAJ_TOL,
        derived_from=p.x0.dtype,
        scale=rounding_scales(p.x0, traj, p.hp.lr),
    )


@given(p=adam_problems())
def test_native_adam_matches_its_closed_form(subject, record, p):
    """Keras Adam / optax.adam / torch.optim.Adam over five fed gradients follow their
    update rule; for float64, which hyper-parameter precision."""
    assume(separated(p.x0, p.grads, p.hp))
    record.example(x0=p.x0, grads=p.grads)
    try:
        traj = run_adam(subject, p.x0, p.grads, p.hp, api="keras")
    except Exception as e:  # Keras 3 in a v1 Session
        record.check(EXPECT, optimizer_call=cmp.error_name(e))
        return
    # Accepted but inert: every step left the variable where it started (the gradients are
    # nonzero, so any Adam step moves it).
    stepped = not all(np.array_equal(np.asarray(x), p.x0) for x in traj)
    record.check(EXPECT, optimizer_call="available" if stepped else "no-step")
    if stepped:
        check_fit(record, p, traj, precision_key="float64_hyperparams")


@on("tensorflow")
@given(p=adam_problems())
def test_v1_adam_optimizer_matches_its_closed_form(subject, record, p):
    """tf.compat.v1.train.AdamOptimizer (the seed's API) in every TF mode: available or not,
    and which closed form it follows. TF-only: the API exists only there."""
    assume(separated(p.x0, p.grads, p.hp))
    record.example(x0=p.x0, grads=p.grads)
    try:
        traj = run_adam(subject, p.x0, p.grads, p.hp, api="v1")
    except Exception as e:
        record.check(EXPECT, v1_optimizer_call=cmp.error_name(e))
        return
    record.check(EXPECT, v1_optimizer_call="available")
    check_fit(record, p, traj, precision_key="v1_float64_hyperparams")


#: A thorough run's draw (float64, gradient scale 1e-3): element [0, 0]'s first gradient is
#: negative, the rest positive, so its displacement after two steps is 1/95 of its steps (1.09e-4
#: and -1.11e-4 lr). The v1 AdamOptimizer (a Session, TF 2.21) gave -2.318251e-6 lr (its float32-all
#: closed form to 1e-14), optax and torch.optim with eps_t -2.318640e-6: each TF step is 6.4e-6 to
#: 1.3e-5 short (float32 1 - b2 and beta powers), 1.7e-4 of the sum but 1.8e-6 of the steps.
CANCELLING = AdamProblem(
    x0=np.zeros((2, 3)),
    grads=np.concatenate([[[[-0.34375, 0.78125, 0.78125], [0.78125] * 3]], np.full((STEPS - 1, 2, 3), 0.78125)]) * 1e-3,
    hp=SEED,
)


@given(p=adam_problems())
@example(p=CANCELLING)
def test_identical_hyperparameters_across_frameworks(subject, oracles, record, p):
    """Same lr, betas, eps and gradients everywhere: TF (Keras Adam; the seed's v1 optimizer in
    a Session) differs from torch/optax, and matches them given eps_t = eps/sqrt(1-b2^t)."""
    assume(separated(p.x0, p.grads, p.hp))
    record.example(x0=p.x0, grads=p.grads)
    traj = run_adam(subject, p.x0, p.grads, p.hp)
    out = displacement(p.x0, traj, p.hp.lr)
    tf_ = subject.framework == "tensorflow"  # only TF's hyper-parameters are float32
    xfw = XFW_TOL if tf_ else cmp.GRAD
    tol = xfw.of(p.x0.dtype)
    scale = (hyperparameter_scales if tf_ else rounding_scales)(p.x0, traj, p.hp.lr)
    for o in oracles:
        theirs = o.run(Adam.of(o), p.x0, p.grads, hp=p.hp)
        record.equal(name="trajectory dtype", out=np.asarray(traj).dtype.name, ref=theirs.dtype.name, oracle=o.id)
        ref = displacement(p.x0, theirs, p.hp.lr)
        same = cmp.rel_err(out, ref, rtol=tol, scale=scale, dtype=p.x0.dtype) <= tol
        record.check(EXPECT, identical_hparams="agree" if same else "differ")
        if subject.framework == "tensorflow":
            ref = displacement(p.x0, o.run(Adam.of(o), p.x0, p.grads, hp=p.hp, rescale=True), p.hp.lr)
            name = "displacement[oracle with eps_t=eps/sqrt(1-b2^t)]"
        else:
            name = "displacement"
        record.close(name=name, out=out, ref=ref, oracle=o.id, tol=xfw, derived_from=p.x0.dtype, scale=scale)


# ---------------------------------------------------------------- seed examples
SMALL = AdamProblem(x0=np.zeros(3, np.float32), grads=np.full((STEPS, 3), 1e-3, np.float32), hp=SEED)


def relative_difference(a, b):
    """max_i |a_i - b_i| / |b_i| of two displacements (b nonzero)."""
    return float(np.max(np.abs(a - b) / np.abs(b)))


@on("tensorflow", "jax", "torch")
@given(p=st.just(SMALL))
def test_seed_small_gradients_one_and_five_steps(subject, oracles, record, p):
    """seeds/001 hyper-parameters (eps=0.1), gradients 1e-3: TF moves lr*3.2e-4 at step 1,
    torch/optax lr*9.9e-3 (96.8% apart; 94.6% after five steps)."""
    record.example(x0=p.x0, grads=p.grads)
    traj = run_adam(subject, p.x0, p.grads, p.hp)
    out = displacement(p.x0, traj, p.hp.lr)
    hat, outside = (displacement(p.x0, closed_form(p.x0, p.grads, p.hp, rule=r), p.hp.lr) for r in RULES)
    check_fit(record, p, traj, precision_key=None)  # float32 only
    for o in oracles:
        ref = displacement(p.x0, o.run(Adam.of(o), p.x0, p.grads, hp=p.hp), p.hp.lr)
        scale = rounding_scales(p.x0, traj, p.hp.lr)
        same = cmp.rel_err(out, ref, rtol=XFW_TOL.of(np.float32), scale=scale, dtype=np.float32)
        record.check(EXPECT, identical_hparams="agree" if same <= XFW_TOL.of(np.float32) else "differ")
        diffs = [relative_difference(out[k], ref[k]) for k in (0, STEPS - 1)]
        ours, theirs = (hat, outside) if subject.framework == "tensorflow" else (outside, outside)
        predicted = [relative_difference(ours[k], theirs[k]) for k in (0, STEPS - 1)]
        record.close(
            name=f"rel_diff_vs_{o.framework}[1 step, {STEPS} steps]",
            out=np.array(diffs),
            ref=np.array(predicted),
            oracle="closed-form",
            tol=DIFF_TOL,
            derived_from=np.float32,
            scale=1.0,  # ratios: 0 when two frameworks agree, so their floor is set at 1
        )
        record.observe(
            **{
                f"rel_diff_vs_{o.framework}_1_step": round(diffs[0], 4),
                f"rel_diff_vs_{o.framework}_{STEPS}_steps": round(diffs[1], 4),
            }
        )


def seed_model_gradient(data, onehot):
    """seeds/001's model as a function of x = [c, k]: d = data + c, e = c + k, a = d * e,
    L = softmax cross-entropy(a, onehot); dL/dc = (e + d) dL/da, dL/dk = d dL/da."""

    def grad(x):
        c, k = x[:2], x[2:]
        d, e = data + c, c + k
        a = d * e
        s = np.exp(a - a.max())
        dl_da = s / s.sum() - onehot
        return np.concatenate([(e + d) * dl_da, d * dl_da])

    return grad


class SeedModel(Program):
    """seeds/001 as written (placeholders, truncated_normal variables, AdamOptimizer(0.001, 0.9,
    0.999, 0.1), compute_gradients/apply_gradients), ``steps`` train ops chained in one run."""

    def tensorflow(tf, labels, data, *, steps):
        stddev = 1e-1
        # op seeds (the seed has none) keep the init, and so the observed numbers, fixed across runs
        c = tf.Variable(tf.random.truncated_normal(shape=[2], stddev=stddev, seed=1))
        k = tf.Variable(tf.random.truncated_normal(shape=[2], stddev=stddev, seed=2))
        start = tf.concat([c.read_value(), k.read_value()], 0)
        opt = tf.compat.v1.train.AdamOptimizer(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=0.1)
        after, traj = [start], []
        for _ in range(steps):
            with tf.control_dependencies(after):
                d = tf.add(data, c)
                e = tf.add(c, k)
                a = tf.multiply(d, e)
                loss = tf.compat.v1.losses.softmax_cross_entropy(logits=a, onehot_labels=labels)
                grads = opt.compute_gradients(loss, tf.compat.v1.trainable_variables())
                train_op = opt.apply_gradients(grads_and_vars=list(grads))
            with tf.control_dependencies([train_op]):
                after = [tf.concat([c.read_value(), k.read_value()], 0)]
            traj.append(after[0])
        return start, tf.stack(traj)

    tensorflow.exact_shapes = True


@on("tensorflow", modes=("graph",))
@given(v=st.just((np.array([0, 1], np.int32), np.array([1, 2], np.float32))))
def test_seed_001_model_as_written(subject, record, v):
    """seeds/001's model and optimizer in a Session (graph only: the seed's v1 code), five
    steps from its random init follow eps-hat; eps-outside would move the parameters 8.7x
    further after 1 step and 5.5x after 5 (relative differences observed)."""
    labels, data = v
    record.example(labels=labels, data=data)
    start, traj = subject.run(SeedModel.of(subject), labels, data, steps=STEPS)
    grad = seed_model_gradient(data.astype(np.float64), labels.astype(np.float64))
    rules = {r: closed_form(start, grad, SEED, rule=r) for r in RULES}
    out = displacement(start, traj, SEED.lr)
    tol, scale = TRAJ_TOL.of(np.float32), rounding_scale(start, traj, SEED.lr)
    errs = {
        r: cmp.rel_err(out, displacement(start, rules[r], SEED.lr), rtol=tol, scale=scale, dtype=np.float32)
        for r in RULES
    }
    matched = [r for r in RULES if errs[r] <= tol]
    record.check(EXPECT, update_rule=matched[0] if len(matched) == 1 else "other")
    record.close(
        name="displacement[eps-hat]",
        out=out,
        ref=displacement(start, rules["eps-hat"], SEED.lr),
        oracle="closed-form",
        tol=TRAJ_TOL,
        derived_from=np.float32,
        scale=scale,
    )
    other = displacement(start, rules["eps-outside-bias-correction"], SEED.lr)
    record.observe(
        init=np.round(start.astype(np.float64), 4),
        rel_diff_vs_eps_outside_1_step=round(relative_difference(out[0], other[0]), 4),
        rel_diff_vs_eps_outside_5_steps=round(relative_difference(out[-1], other[-1]), 4),
    )

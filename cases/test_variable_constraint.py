"""Variable constraints: ``constraint=`` projects a variable after an optimizer step, not on assign.

Source: seeds/002 ("How could I limit the range of a variable in tensorflow"): pass
``constraint=lambda t: tf.clip_by_value(t, 0, 1)`` to ``tf.get_variable``/``tf.Variable``
("an optional projection function to be applied to the variable after being updated by
an Optimizer"), or re-parametrise, ``Mj_out = tf.sigmoid(Mj)``. Each optimizer test steps
two variables with the same gradients, one constrained and one not, from x0 in [0, 1]
with gradients and learning rates drawn so that the unconstrained step leaves [0, 1];
``applied`` means the constrained result equals clip(unconstrained) exactly. Keras
optimizers (``SGD``, ``Adam``: ``apply_gradients``) and ``tf.compat.v1.train`` ones
(``minimize``) are stepped with dense and IndexedSlices (``tf.gather``) gradients;
``assign``/``assign_add``/``assign_sub`` and the initial value must not project. Several
random SGD steps must stay in [0, 1] and follow x <- clip(x - lr g), as the oracles' explicit
projections do: PyTorch has no variable constraints (``torch.nn.utils.parametrize`` is its
re-parametrisation counterpart), so its oracle is ``SGD.step()`` then ``p.clamp_(0, 1)``,
and JAX's is ``optax.sgd`` then ``optax.projections.projection_box``. The optimizer tests
are TensorFlow-only (``@on``): the API under test exists only there. The sigmoid
re-parametrisation stays in the open interval (0, 1), with gradient y (1 - y), for bounded
w; beyond 1 + e^-w rounding to 1 it saturates to exactly 1 with a zero gradient, so a
re-parametrised variable pushed there stops learning.

tf.function/XLA rows build the variables and optimizer once per (API, optimizer, dtype,
shape) outside the function and reset them by assignment in it (``_TFState``); eager and
graph rows build fresh ones per call. A configuration that raises while tracing/building is
built once per row and its error re-raised for later examples (``step_and_observe``).

Declared surprises:

* Keras optimizers in a v1 Session cannot step: Keras 3's ``apply_gradients`` returns a
  keras.Variable that ``Session.run`` rejects (``raises:TypeError``), Keras 2's op steps nothing.
* ``tf.compat.v1.train`` optimizers refuse a sparse gradient of a constrained variable
  ("Cannot use a constraint function on a sparse variable", ``raises:RuntimeError``).
"""

import dataclasses

import numpy as np
from hypothesis import assume, example, given, strategies as st
from hypothesis.extra import numpy as hnp

from suite import compare as cmp, optimizers, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.compare import capped
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.program import Program

VARIABLE_DOC = "https://www.tensorflow.org/api_docs/python/tf/Variable"
V1_SRC = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/training/optimizer.py"
KERAS_BASE_SRC = "https://github.com/keras-team/keras/blob/master/keras/src/optimizers/base_optimizer.py"
PARAMETRIZE_DOC = "https://pytorch.org/docs/stable/generated/torch.nn.utils.parametrize.register_parametrization.html"
OPTAX_PROJECTIONS = "https://optax.readthedocs.io/en/latest/api/projections.html"

BEHAVIOUR = behaviour(
    "variable-constraint",
    sources=["002"],
    links=[
        VARIABLE_DOC,
        "https://www.tensorflow.org/api_docs/python/tf/compat/v1/get_variable",
        KERAS_BASE_SRC,
        V1_SRC,
        PARAMETRIZE_DOC,
        OPTAX_PROJECTIONS,
    ],
    floor=Floor(
        "element",
        "Every compared result is elementwise. SGD steps x <- clip(x - lr g) (one step, three, the oracles' "
        "explicit projections, the seed's clip) are held per element at the terms they cancel, summed over the "
        "steps so far: |x| + lr |g| (sgd_scales; a sparse gradient at the sum of |w| over its duplicate rows), "
        "capped at the largest value the chain computed with, x0 or a step's (an array-level magnitude; the "
        "results' alone are ~1e-16 where every element clips or cancels to 0). "
        "Sigmoid values relative to themselves; their gradient ct y (1 - y) at |ct| y (1 - y cancels).",
    ),
)

KERAS_IN_SESSION = (
    "Keras 3 targets TF2: apply_gradients returns self.iterations (a keras.Variable), not an "
    "op; Session.run and control_dependencies cannot take it (TypeError)"
)
# Graph.as_graph_element's refusal of that keras.Variable as a fetch
KERAS_VARIABLE_FETCH = raises("TypeError", r"Can not convert a \w+ into a Tensor or Operation")
KERAS2_IN_SESSION = (
    "Keras 2 (TF 2.12-2.15; keras.optimizers.Optimizer since 2.11) targets TF2: in a v1 "
    "graph apply_gradients returns iterations.assign_add(1) with no control dependency on "
    "the variable updates, so running the op it returns steps nothing (measured: both "
    "variables keep x0); tf.keras.optimizers.legacy.* are the graph-mode optimizers"
)
KERAS2_OPTIMIZER_SRC = "https://github.com/keras-team/keras/blob/v2.15.0/keras/optimizers/optimizer.py"
EXPECT = expectations(
    {
        "keras_dense": "applied",
        "keras_sparse": "applied",
        "v1_dense": "applied",
        "v1_sparse": "applied",
        "assign": "not-applied",
        "initial_value": "not-applied",
        "in_range": "in-range",
        "reparam_range": "open-unit-interval",
        "saturation": "one",
        "saturated_grad": "zero",
    },
    *(
        expect(key, value, framework="tensorflow", mode="graph", versions=versions, reason=reason, link=link)
        for value, versions, reason, link in (
            (KERAS_VARIABLE_FETCH, ">=2.16", KERAS_IN_SESSION, KERAS_BASE_SRC),
            ("no-step", "<2.16", KERAS2_IN_SESSION, KERAS2_OPTIMIZER_SRC),
        )
        for key in ("keras_dense", "keras_sparse")
    ),
    expect(
        "v1_sparse",
        raises("RuntimeError", r"Cannot use a constraint function on a sparse variable"),
        framework="tensorflow",
        reason="v1 Optimizer.apply_gradients (_DenseResourceVariableProcessor.update_op) raises "
        "'Cannot use a constraint function on a sparse variable.' for an IndexedSlices gradient "
        "of a constrained variable, rather than projecting after the sparse update",
        link=V1_SRC,
    ),
)
# One SGD step x - lr g (or a chain of three, each clipped): a rounding per operation, per
# element at the terms |x| + lr |g| (sgd_scales).
STEP_TOL = cmp.VALUE
OPTIMIZERS = ("sgd", "adam")
# Adam's defaults; at t = 1 both APIs step lr g / (|g| + eps / sqrt(1 - beta_2)) (eps_t, on sqrt(v), not sqrt(v_hat))
ADAM_EPS = {"keras": 1e-7, "v1": 1e-8}
ADAM_BETA_2 = 0.999
SHAPES = ((4,), (3, 2))
OPT_SHAPE = (3, 2)  # optimizer tests: one shape keeps tf.function/XLA/graph at one build per config
N_GATHERED = 3  # rows gathered for a sparse gradient (duplicates allowed)
STEPS = 3  # steps of the random-gradient descent
MARGIN = 0.05  # how far outside [0, 1] the unconstrained step must land somewhere
# Sigmoid bounds: 1 + e^-w rounds to 1 beyond 16.64 (float32) / 36.74 (float64).
OPEN_BOUND = {np.dtype(np.float32): 16.0, np.dtype(np.float64): 36.0}
SATURATED = {np.dtype(np.float32): (17.0, 80.0), np.dtype(np.float64): (37.5, 700.0)}


# ---------------------------------------------------------------- strategies and closed forms
@dataclasses.dataclass(frozen=True)
class Problem:
    x0: np.ndarray  # initial values in [0, 1]
    w: np.ndarray  # loss weights per step: (steps, *x0.shape) dense, (steps, N_GATHERED, ...) sparse
    idx: np.ndarray  # int32 rows gathered (sparse; ignored when dense)
    lr: np.ndarray  # float32 scalar (Keras keeps the learning rate in float32)
    sparse: bool

    def gradients(self) -> np.ndarray:
        """The dense gradient each step applies (duplicated rows summed), float64."""
        w = self.w.astype(np.float64)
        if not self.sparse:
            return w
        g = np.zeros((w.shape[0], *self.x0.shape))
        for t in range(w.shape[0]):
            np.add.at(g[t], self.idx, w[t])
        return g


@st.composite
def problems(draw, *, sparse=None, steps=1, shape=OPT_SHAPE):
    dtype = draw(ss.float_dtypes())
    sparse = draw(st.booleans(), label="sparse") if sparse is None else sparse
    x0 = draw(ss.float_arrays(dtype=dtype, shape=shape, min_value=0.0, max_value=1.0), label="x0")
    idx = draw(hnp.arrays(np.int32, (N_GATHERED,), elements=st.integers(0, shape[0] - 1)), label="idx")
    wshape = (steps, N_GATHERED, *shape[1:]) if sparse else (steps, *shape)
    w = draw(ss.float_arrays(dtype=dtype, shape=wshape, min_value=-4.0, max_value=4.0), label="gradients")
    lr = np.float32(draw(ss.floats(np.float32, 0.25, 2.0), label="lr"))
    return Problem(x0=x0, w=w, idx=idx, lr=lr, sparse=sparse)


#: A thorough run's draws (TF 2.21, float64). Adam's gradient 4.6e-154 steps lr g / (|g| + 3.2e-6) =
#: 1.5e-148, so x stays at x0: the step leaves [0, 1] only with eps neglected (Keras read 'no-step').
VANISHING_ADAM = Problem(
    x0=np.array([[1.0, 0.5], [1.0, 1.0], [1.0, 1.0]]),
    w=np.full((1, 3, 2), 4.63568975e-154),
    idx=np.zeros(N_GATHERED, np.int32),
    lr=np.float32(1.0),
    sparse=False,
)
#: 0.75 - 0.75 (1 - 2^-53) (w printed as ones) is 8.3e-17 fused (TF's XLA, JAX, PyTorch), 1.1e-16
#: with lr g rounded first (Keras and v1 on CPU, NumPy); every other element clips to 0, so the results'
#: largest is 1e-16, and a cap there held that cancellation (terms 0.75 + 0.75) at it.
CANCELLING_SGD = Problem(
    x0=np.array([[0.75, 0.0], [0.0, 0.0], [0.0, 0.0]]),
    w=np.where(np.arange(STEPS * 6).reshape(STEPS, 3, 2) == 0, np.nextafter(1.0, 0.0), 1.0),
    idx=np.zeros(N_GATHERED, np.int32),
    lr=np.float32(0.75),
    sparse=False,
)


def first_step(p: Problem, opt: str, api: str) -> np.ndarray:
    """The unconstrained first step of ``api``'s ``opt``, float64. Adam at t = 1: lr g / (sqrt(q) + eps_t),
    q the sum of g^2 over duplicate rows, eps_t = eps / sqrt(1 - beta_2) (3.2e-6 Keras, 3.2e-7 v1): a
    gradient far below eps_t steps far less than lr, so the step may not leave [0, 1]."""
    g = p.gradients()[0]
    if opt == "sgd":
        return p.x0 - float(p.lr) * g
    w = p.w[0].astype(np.float64)
    q = w**2 if not p.sparse else np.zeros_like(g)
    if p.sparse:
        np.add.at(q, p.idx, w**2)
    return p.x0 - float(p.lr) * g / (np.sqrt(q) + ADAM_EPS[api] / np.sqrt(1 - ADAM_BETA_2))


def leaves_range(x) -> bool:
    return bool(np.any((x < -MARGIN) | (x > 1 + MARGIN)))


def sgd_closed_form(p: Problem):
    """Trajectories of x <- clip(x - lr g) (constrained), of x <- x - lr g (unconstrained), and
    the constrained chain's values before each projection."""
    xc = xu = p.x0.astype(np.float64)
    cs, us, pre = [], [], []
    for g in p.gradients():
        pre.append(xc - float(p.lr) * g)
        xc, xu = np.clip(pre[-1], 0, 1), xu - float(p.lr) * g
        cs.append(xc)
        us.append(xu)
    return np.stack(cs), np.stack(us), np.stack(pre)


def sgd_scales(p: Problem):
    """Per-element scales (float64) of :func:`sgd_closed_form`'s constrained and unconstrained
    trajectories: after step t, the sum over steps s <= t of ``|x_(s-1)| + lr |g_s|`` (x - lr g cancels;
    each step adds its rounding at its terms; a sparse gradient at the sum of |w| over duplicate rows)."""
    terms = Problem(x0=p.x0, w=np.abs(p.w), idx=p.idx, lr=p.lr, sparse=p.sparse).gradients() * float(p.lr)
    xc = xu = p.x0.astype(np.float64)
    sc, su, cs, us = 0.0, 0.0, [], []
    for g, t in zip(p.gradients(), terms):
        sc, su = sc + np.abs(xc) + t, su + np.abs(xu) + t
        xc, xu = np.clip(xc - float(p.lr) * g, 0, 1), xu - float(p.lr) * g
        cs.append(sc)
        us.append(su)
    return np.stack(cs), np.stack(us)


def chain_capped(scale, p: Problem, ref) -> np.ndarray:
    """``scale`` (per element) capped (:func:`suite.compare.capped`) at the largest value an SGD chain
    computed with, x0's or a step's ``ref``: its results alone can all be ~0 (CANCELLING_SGD)."""
    return capped(scale, np.concatenate([np.asarray(p.x0, np.float64)[None], np.asarray(ref, np.float64)]))


def constraint_kind(constrained, unconstrained) -> str:
    """``applied``: constrained == clip(unconstrained) exactly; ``not-applied``: equal to it."""
    if np.array_equal(constrained, np.clip(unconstrained, 0, 1)):
        return "applied"
    if np.array_equal(constrained, unconstrained):
        return "not-applied"
    return "other"


# ---------------------------------------------------------------- the programs
def clip01(tf):
    """seeds/002's constraint, as written."""
    return lambda t: tf.clip_by_value(t, 0, 1)


def make_optimizer(tf, api, opt, lr):
    if api == "keras":
        return {"sgd": tf.keras.optimizers.SGD, "adam": tf.keras.optimizers.Adam}[opt](learning_rate=lr)
    return {"sgd": tf.compat.v1.train.GradientDescentOptimizer, "adam": tf.compat.v1.train.AdamOptimizer}[opt](
        learning_rate=lr
    )


class ConstrainedSteps(Program):
    """``steps`` optimizer steps on a constrained and an unconstrained variable (TF-only)."""

    def tensorflow(tf, x0, w, lr, idx, *, api, opt, sparse, steps, state=None):
        """Both variables from x0, loss sum(w[t] * v) (dense) or sum(w[t] * gather(v, idx)) (sparse:
        IndexedSlices). Returns both variables after every step (``steps`` is static: a traced
        function must not relax it to an unknown dimension). Keras: GradientTape (tf.gradients in
        a Session) + apply_gradients; v1: minimize (a callable loss outside a Session)."""
        if state is None:
            var_c, var_u = tf.Variable(x0, constraint=clip01(tf)), tf.Variable(x0)
            optimizer = make_optimizer(tf, api, opt, lr if api == "v1" else 1.0)
        else:
            var_c, var_u, optimizer = state.var_c, state.var_u, state.opt
            var_c.assign(x0)
            var_u.assign(x0)
            if api == "v1":
                state.lr.assign(lr)
        if api == "keras":
            optimizer.learning_rate = lr
        read = (lambda v: tf.gather(v, idx)) if sparse else (lambda v: v)
        outs, after = [], []
        for t in range(steps):

            def loss(t=t):
                return tf.reduce_sum(w[t] * read(var_c)) + tf.reduce_sum(w[t] * read(var_u))

            if in_v1_graph():  # a Session runs only what is fetched: chain step t after step t-1
                with tf.control_dependencies(after):
                    if api == "keras":
                        grads = tf.gradients(loss(), [var_c, var_u])
                        train_op = optimizer.apply_gradients(zip(grads, [var_c, var_u]))
                    else:
                        train_op = optimizer.minimize(loss(), var_list=[var_c, var_u])
                with tf.control_dependencies([train_op]):
                    after = [var_c.read_value(), var_u.read_value()]
            else:
                if api == "keras":
                    with tf.GradientTape() as tape:
                        value = loss()
                    optimizer.apply_gradients(zip(tape.gradient(value, [var_c, var_u]), [var_c, var_u]))
                else:
                    optimizer.minimize(loss, var_list=[var_c, var_u])
                after = [var_c.read_value(), var_u.read_value()]
            outs.append(after)
        out = tf.stack([a for a, _ in outs]), tf.stack([b for _, b in outs])
        if state is not None:
            state.reset(tf)
        return out

    tensorflow.exact_shapes = True  # tf.Variable from a placeholder needs its shape; step count is static


class Assign(Program):
    """A constrained variable written by ``assign``/``assign_add``/``assign_sub`` with ``value``;
    also (where variables are made per call) a constrained variable initialised to ``value``."""

    def tensorflow(tf, x0, value, *, how, state=None):
        if state is None:
            var = tf.Variable(x0, constraint=clip01(tf))
            initial = tf.Variable(value, constraint=clip01(tf)).read_value()
        else:
            var, initial = state.var, None
            var.assign(x0)
        op = getattr(var, how)(value)
        if in_v1_graph():
            with tf.control_dependencies([op]):
                return var.read_value(), initial
        return var.read_value(), initial

    tensorflow.exact_shapes = True


class Descend(Program):
    """The oracles' SGD on [0, 1]: they have no variable constraints, so each step is followed
    by an explicit projection. Returns the parameters after every step."""

    def jax(jax, x0, grads, lr):
        """optax.sgd, then optax.projections.projection_box."""
        import optax

        opt = optax.sgd(lr)
        state, x, out = opt.init(x0), x0, []
        for t in range(grads.shape[0]):
            updates, state = opt.update(grads[t], state, x)
            x = optax.projections.projection_box(optax.apply_updates(x, updates), 0.0, 1.0)
            out.append(x)
        return jax.numpy.stack(out)

    def torch(torch, x0, grads, lr):
        """SGD.step(), then clamp_ under no_grad."""
        p = torch.nn.Parameter(x0.clone())
        opt = torch.optim.SGD([p], lr=float(lr))
        out = []
        for g in grads:
            p.grad = g.clone()
            opt.step()
            with torch.no_grad():
                p.clamp_(0, 1)
            out.append(p.detach().clone())
        return torch.stack(out)


class Sigmoid(Program):
    """seeds/002: Mj_out = tf.sigmoid(Mj)."""

    def tensorflow(tf, w):
        return tf.sigmoid(w)

    def jax(jax, w):
        return jax.nn.sigmoid(w)

    def torch(torch, w):
        return torch.sigmoid(w)


class Parametrized(Program):
    """torch.nn.utils.parametrize: module.weight reads sigmoid(original); gradient to original."""

    def torch(torch, w, ct):
        from torch.nn.utils import parametrize

        class SigmoidModule(torch.nn.Module):
            def forward(self, x):
                return torch.sigmoid(x)

        m = torch.nn.Module()
        m.weight = torch.nn.Parameter(w.clone())
        parametrize.register_parametrization(m, "weight", SigmoidModule())
        y = m.weight
        (g,) = torch.autograd.grad(y, m.parametrizations.weight.original, grad_outputs=ct)
        return y.detach(), g


class _TFState:
    """Variables and optimizer of a tf.function/XLA row, one per (subject, API, optimizer, dtype,
    shape), built eagerly outside the function (tf.function creates variables on the first call
    only). The traced step assigns x0 (and the v1 learning rate) first and ``reset`` assigns the
    optimizer's fresh values back last, so each example starts from a fresh optimizer."""

    def __init__(self, tf, api, opt, dtype, shape):
        self.var_c = tf.Variable(tf.zeros(shape, dtype), constraint=clip01(tf))
        self.var_u = tf.Variable(tf.zeros(shape, dtype))
        self.var = self.var_c
        self.lr = tf.Variable(1.0, dtype=tf.float32)
        self.opt = make_optimizer(tf, api, opt, self.lr if api == "v1" else 1.0) if api else None
        if api == "keras":  # v1 slots are made by the first apply_gradients (in an init_scope)
            self.opt.build([self.var_c, self.var_u])
        self.initial = None

    def reset(self, tf):
        self.initial = optimizers.reset_slots(tf, self.opt, self.initial)


_STATES: dict = {}


def tf_state(subject, api, opt, x0):
    """The row's persistent state in function/xla modes; None where each call builds its own."""
    if subject.mode not in ("function", "xla"):
        return None
    key = (subject.id, api, opt, x0.dtype.str, x0.shape)
    if key not in _STATES:
        with subject.module.device(subject.device_name):
            _STATES[key] = _TFState(subject.module, api, opt, x0.dtype, x0.shape)
    return _STATES[key]


# ---------------------------------------------------------------- properties
def run_steps(subject, p, *, api, opt, steps):
    """``steps`` steps of ``api``/``opt`` on the problem ``p``: the constrained and unconstrained trajectories."""
    program, state = ConstrainedSteps.of(subject), tf_state(subject, api, opt, p.x0)
    return subject.run(program, p.x0, p.w, p.lr, p.idx, api=api, opt=opt, sparse=p.sparse, steps=steps, state=state)


_BUILD_ERRORS: dict = {}


def step_and_observe(subject, record, p, *, api, opt, key):
    """One step of ``api``/``opt``: observe ``key`` (applied, not-applied, raises:X); SGD also
    against its closed form."""
    config = (subject.id, api, opt, p.sparse, p.x0.dtype.str, p.x0.shape)
    try:
        if config in _BUILD_ERRORS:
            raise _BUILD_ERRORS[config]
        out_c, out_u = run_steps(subject, p, api=api, opt=opt, steps=1)
    except Exception as e:  # Keras 3 in a Session; v1 optimizers with a sparse gradient
        if subject.mode != "eager":
            # Raised while tracing/building, so by the configuration, not the values: build it once
            # per row. The state goes too: a tf.function whose first trace raised after creating
            # variables (v1 slots) returns None on later calls (measured, TF 2.21).
            _BUILD_ERRORS[config] = e
            _STATES.pop((subject.id, api, opt, p.x0.dtype.str, p.x0.shape), None)
        record.note(f"{key}: {type(e).__name__}: {str(e).strip().splitlines()[-1].strip()[:160]}")
        record.check(EXPECT, **{key: cmp.error_name(e)})
        return
    if np.array_equal(out_c[0], p.x0) and np.array_equal(out_u[0], p.x0):
        # Accepted but inert: the first step leaves the range (assumed), so any step moves x.
        record.check(EXPECT, **{key: "no-step"})
        return
    record.check(EXPECT, **{key: constraint_kind(out_c[0], out_u[0])})
    if opt == "sgd":
        ref_c, ref_u, _ = sgd_closed_form(p)
        at_c, at_u = sgd_scales(p)
        close = dict(oracle="closed-form", tol=STEP_TOL, dtype=p.x0.dtype)
        record.close(
            name=f"{api}-sgd[unconstrained]", out=out_u, ref=ref_u, scale=chain_capped(at_u, p, ref_u), **close
        )
        record.close(name=f"{api}-sgd[constrained]", out=out_c, ref=ref_c, scale=chain_capped(at_c, p, ref_c), **close)


@on("tensorflow")
@given(p=problems(), opt=st.sampled_from(OPTIMIZERS))
@example(p=VANISHING_ADAM, opt="adam")  # rejected: its step does not leave [0, 1]
def test_keras_optimizer_step_applies_constraint(subject, record, p, opt):
    """tf.keras.optimizers.SGD/Adam.apply_gradients projects a constrained tf.Variable after the
    update (dense and IndexedSlices gradients). TF-only: the API exists only there."""
    assume(leaves_range(first_step(p, opt, "keras")))
    record.example(x0=p.x0, w=p.w, idx=p.idx, lr=p.lr, sparse=p.sparse, opt=opt)
    step_and_observe(subject, record, p, api="keras", opt=opt, key="keras_sparse" if p.sparse else "keras_dense")


@on("tensorflow")
@given(p=problems(), opt=st.sampled_from(OPTIMIZERS))
def test_v1_optimizer_step_applies_constraint(subject, record, p, opt):
    """tf.compat.v1.train.GradientDescentOptimizer/AdamOptimizer.minimize projects a constrained
    variable after a dense update, in every mode; sparse gradients: see expectations. TF-only."""
    assume(leaves_range(first_step(p, opt, "v1")))
    record.example(x0=p.x0, w=p.w, idx=p.idx, lr=p.lr, sparse=p.sparse, opt=opt)
    step_and_observe(subject, record, p, api="v1", opt=opt, key="v1_sparse" if p.sparse else "v1_dense")


@on("tensorflow")
@given(p=problems(sparse=False, steps=STEPS))
@example(p=CANCELLING_SGD)
def test_random_gradients_keep_values_in_range(subject, oracles, record, p):
    """Three random SGD steps (Keras SGD; the v1 GradientDescentOptimizer in a Session) stay in
    [0, 1] and follow x <- clip(x - lr g), as torch SGD + clamp_ and optax.sgd + projection_box do."""
    ref_c, _, pre = sgd_closed_form(p)
    assume(leaves_range(pre))
    record.example(x0=p.x0, grads=p.w, lr=p.lr)
    api = "v1" if subject.mode == "graph" else "keras"
    traj, _ = run_steps(subject, p, api=api, opt="sgd", steps=STEPS)
    record.observe(api=api)
    record.check(EXPECT, in_range="in-range" if np.all((traj >= 0) & (traj <= 1)) else "out-of-range")
    at = chain_capped(sgd_scales(p)[0], p, ref_c)  # the oracles' trajectories: ref_c to rounding
    close = dict(oracle="closed-form", tol=STEP_TOL, dtype=p.x0.dtype, scale=at)
    record.close(name=f"{api}-sgd trajectory", out=traj, ref=ref_c, **close)
    got = {f"{api}-sgd trajectory": traj}
    record.against(oracles, Descend, p.x0, p.w, p.lr, got=got, via="run", tol=STEP_TOL, scale=at)


@on("tensorflow")
@given(
    x0=ss.float_arrays(shape=st.sampled_from(SHAPES), min_value=0.0, max_value=1.0),
    how=st.sampled_from(["assign", "assign_add", "assign_sub"]),
    data=st.data(),
)
def test_assign_does_not_apply_constraint(subject, record, x0, how, data):
    """assign/assign_add/assign_sub (and the initial value, where variables are made per call:
    eager, graph) write values outside [0, 1] unprojected. TF-only: torch/JAX have no constraints."""
    value = data.draw(ss.float_arrays(dtype=x0.dtype, shape=x0.shape, min_value=-3.0, max_value=4.0), label="value")
    expected = {"assign": value, "assign_add": x0 + value, "assign_sub": x0 - value}[how]
    assume(leaves_range(expected) and leaves_range(value))
    record.example(x0=x0, value=value, how=how)
    state = tf_state(subject, None, None, x0)
    out, initial = subject.run(Assign.of(subject), x0, value, how=how, state=state)
    record.check(EXPECT, assign=constraint_kind(out, expected))
    if initial is not None:
        record.check(EXPECT, initial_value=constraint_kind(initial, value))


@given(
    w=ss.float_dtypes().flatmap(lambda d: ss.float_arrays(dtype=d, min_value=-OPEN_BOUND[d], max_value=OPEN_BOUND[d])),
    data=st.data(),
)
def test_sigmoid_reparametrisation_in_open_unit_interval(subject, oracles, record, w, data):
    """y = sigmoid(w) lies in (0, 1) for bounded w; the gradient of sum(ct * y) is y (1 - y) ct."""
    ct = data.draw(ss.like(w), label="cotangent")
    record.example(w=w, ct=ct)
    out, (grad,) = subject.vjp(Sigmoid.of(subject), w, cotangent=ct)
    y = 1 / (1 + np.exp(-w.astype(np.float64)))
    # per element (suite.ops.error's sigmoid): the value relative to itself; the gradient
    # ct y (1 - y) at |ct| y, the terms of 1 - y, which cancels where y saturates
    at = {"value": 0.0, "grad": np.abs(ct.astype(np.float64)) * y}
    close = dict(oracle="closed-form", dtype=w.dtype)
    record.close(name="value", out=out, ref=y, tol=cmp.VALUE, scale=at["value"], **close)
    record.close(name="grad", out=grad, ref=y * (1 - y) * ct, scale=at["grad"], **close)
    record.check(EXPECT, reparam_range="open-unit-interval" if np.all((out > 0) & (out < 1)) else "touches-bound")
    got = {"value": out, "grad": grad}
    record.against(oracles, Sigmoid, w, cotangent=ct, got=got, tol={"value": cmp.VALUE}, scale=at)
    if subject.framework == "torch":  # PyTorch's own counterpart of a constrained parameter
        pout, pgrad = subject.run(Parametrized.of(subject), w, ct)
        record.close(name="parametrize value", out=pout, ref=y, tol=cmp.VALUE, scale=at["value"], **close)
        record.close(name="parametrize grad", out=pgrad, ref=y * (1 - y) * ct, scale=at["grad"], **close)


@given(
    w=ss.float_dtypes().flatmap(
        lambda d: ss.float_arrays(dtype=d, min_value=SATURATED[d][0], max_value=SATURATED[d][1])
    )
)
def test_sigmoid_saturates_beyond_bound(subject, record, w):
    """Beyond the bound (w >= 17 float32, >= 37.5 float64) sigmoid(w) is exactly 1 and its
    gradient exactly 0, though the true derivative e^-w / (1 + e^-w)^2 is positive."""
    record.example(w=w)
    out, (grad,) = subject.vjp(Sigmoid.of(subject), w)
    record.check(
        EXPECT,
        saturation="one" if np.all(out == 1) else "below-one",
        saturated_grad=cmp.gradient_kind(grad) if cmp.gradient_kind(grad) != "nonzero" else "nonzero",
    )


# ---------------------------------------------------------------- seed examples
class SeedGetVariable(Program):
    """seeds/002 as written: get_variable('Mj_', [500, 4], random_uniform_initializer(0, 1),
    constraint=clip_by_value(t, 0, 1)), one GradientDescentOptimizer step on sum(w * Mj)."""

    def tensorflow(tf, w, lr):
        Mj = tf.compat.v1.get_variable(
            "Mj_",
            dtype=tf.float32,
            shape=[500, 4],
            initializer=tf.compat.v1.random_uniform_initializer(maxval=1, minval=0, seed=1),  # op seed: fixed init
            constraint=lambda t: tf.clip_by_value(t, 0, 1),
        )
        start = Mj.read_value()
        with tf.control_dependencies([start]):
            train_op = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(tf.reduce_sum(w * Mj))
        with tf.control_dependencies([train_op]):
            return start, Mj.read_value()

    tensorflow.exact_shapes = True


@on("tensorflow", modes=("graph",))
@given(v=st.just((np.linspace(-3, 3, 2000, dtype=np.float32).reshape(500, 4), np.float32(0.5))))
def test_seed_get_variable_clip_constraint(subject, record, v):
    """seeds/002 as written (graph only: its v1 get_variable/Session code): after a step of
    0.5 * [-3, 3] the values are clip(start - 0.5 w) and all in [0, 1]."""
    w, lr = v
    record.example(w=w, lr=lr)
    start, after = subject.run(SeedGetVariable.of(subject), w, lr)
    unconstrained = start - lr * w
    record.check(EXPECT, v1_dense=constraint_kind(after, unconstrained))
    clipped = np.clip(start.astype(np.float64) - 0.5 * w, 0, 1)
    record.close(
        name="Mj",
        out=after,
        ref=clipped,
        oracle="closed-form",
        tol=STEP_TOL,
        dtype=np.float32,
        scale=capped(np.abs(start.astype(np.float64)) + 0.5 * np.abs(w), clipped),  # per element: x - lr g's terms
    )
    record.check(EXPECT, in_range="in-range" if np.all((after >= 0) & (after <= 1)) else "out-of-range")
    record.observe(clipped_entries=int(np.sum((unconstrained < 0) | (unconstrained > 1))))


class SeedSigmoid(Program):
    """seeds/002's alternative, as written: Mj = get_variable('Mj_', [500, 4]); Mj_out = sigmoid(Mj)."""

    def tensorflow(tf, ct):
        Mj = tf.compat.v1.get_variable(
            "Mj_", dtype=tf.float32, shape=[500, 4], initializer=tf.compat.v1.glorot_uniform_initializer(seed=2)
        )
        Mj_out = tf.sigmoid(Mj)
        return Mj.read_value(), Mj_out, tf.gradients(Mj_out, Mj, grad_ys=ct)[0]

    tensorflow.exact_shapes = True


@on("tensorflow", modes=("graph",))
@given(ct=st.just(np.linspace(-2, 2, 2000, dtype=np.float32).reshape(500, 4)))
def test_seed_sigmoid_reparametrisation(subject, record, ct):
    """seeds/002's Mj_out = tf.sigmoid(Mj) on the default (Glorot) initializer: in (0, 1),
    gradient sigmoid (1 - sigmoid) times the cotangent (graph only: the seed's v1 code)."""
    record.example(ct=ct)
    mj, out, grad = subject.run(SeedSigmoid.of(subject), ct)
    y = 1 / (1 + np.exp(-mj.astype(np.float64)))
    # per element, as in test_sigmoid_reparametrisation_in_open_unit_interval
    close = dict(oracle="closed-form", dtype=np.float32)
    record.close(name="Mj_out", out=out, ref=y, tol=cmp.VALUE, scale=0.0, **close)
    dmj = y * (1 - y) * ct
    record.close(name="dMj", out=grad, ref=dmj, scale=capped(np.abs(ct.astype(np.float64)) * y, dmj), **close)
    record.check(EXPECT, reparam_range="open-unit-interval" if np.all((out > 0) & (out < 1)) else "touches-bound")

"""Variable copy: a deep copy keeps its value when the source changes, an alias follows it.

Source: seeds/001 ("Train several networks independently"): one Graph per network ("Train
several networks that are defined in the same Graph is impossible"), values copied across
Sessions with ``vars_2[i].load(vars_1[i].eval(session=session_1), session_2)``, because
"assign, tf.Variable, tf.contrib.copy_graph.copy_variable_to_graph make reference, not a
deep copy; for making a deep copy use load". Oracle: sequential Python/NumPy; after ``dst =
copy(src); src += d`` a copy still holds the old value, an alias the new one.

Declared surprises: JAX arrays are immutable, so even a Python reference keeps the old value;
inside ``tf.function`` ``tf.Variable(other)`` raises (ValueError; XLA's first call
UnimplementedError) and ``Variable.load`` raises ValueError (no default session); in a v1 graph
a RefVariable copied into a resource variable by ``assign`` or ``tf.Variable(other)`` aliases it
under every later in-place update; the seed's loop as written raises RuntimeError in TF2
(``Session.as_default()`` does not make its graph the default); ``v2.assign(v1)`` across graphs
raises ValueError; ``tf.compat.v1.Variable(v1)`` under graph 2 creates the copy in graph 1;
``tf.contrib.copy_graph`` is gone; ``Variable.load`` is deprecated. Defaults are what a copy
means to the oracles (``copy``; ``alias`` for a Python reference); for the seed's TF-only
spellings (its loop, copies across graphs, ``copy_variable_to_graph``) the default is the deep
copy the seed wants, and the seed's "impossible" two networks in one Graph is expected to train
independently with ``minimize(var_list=...)``. The seed gives no numbers: the seed example's
values are ours.
"""

import types

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from suite import compare as cmp, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks import resources
from suite.frameworks.tf_runner import Variables
from suite.program import Program

LOAD = "https://www.tensorflow.org/api_docs/python/tf/compat/v1/Variable#load"
TF_FUNCTION_VARIABLES = "https://www.tensorflow.org/guide/function#creating_tfvariables"
AS_DEFAULT = "https://www.tensorflow.org/api_docs/python/tf/compat/v1/Session#as_default"
NAME_SCOPE = "https://www.tensorflow.org/api_docs/python/tf/compat/v1/name_scope"
KERNEL = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/kernels/resource_variable_ops.cc"
CONTRIB = "https://github.com/tensorflow/community/blob/master/rfcs/20180907-contrib-sunset.md"
JAX_INPLACE = "https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html#in-place-updates"

BEHAVIOUR = behaviour(
    "variable-copy",
    sources=["001"],
    links=[
        "https://www.tensorflow.org/api_docs/python/tf/Variable#assign",
        LOAD,
        AS_DEFAULT,
        "https://pytorch.org/docs/stable/generated/torch.Tensor.copy_.html",
        "https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.load_state_dict",
        JAX_INPLACE,
    ],
    floor=Floor(
        "element",
        "Copies, aliases, reads and the discriminator are compared exactly; the one tolerance comparison is "
        "network 1 after one SGD step (and the classifier of whether network 2 moved with it), W_ij - lr x_i t_j "
        "and b_j - lr t_j, elementwise with a batch of one row: each element floored at |W_ij| + |lr x_i t_j|, "
        "the subtraction's terms.",
    ),
)

MECHANISMS = ("assign", "tf.Variable(other)", "load", "python reference")
KINDS = {"resource": True, "ref": False}  # tf.compat.v1.Variable(use_resource=...)
PAIRS = [(s, d) for s in KINDS for d in KINDS]
MUTATIONS = ("assign_add", "assign", "sgd")  # the source's change: +d, := a + d, a 1.0 * d descent step
KIND_KEYS = [f"{m} [{s}->{d}]" for m in ("assign", "tf.Variable(other)", "load") for s, d in PAIRS]
REF_INTO_RESOURCE = (
    "AssignVariableOp keeps the value's buffer ('every resource-variable-manipulating op "
    "assumes copy-on-write semantics ... we never need to copy'), but a RefVariable's "
    "in-place kernels (Assign, AssignAdd, ApplyGradientDescent) write into that buffer "
    "without copying, so the resource variable follows the RefVariable"
)
IN_FUNCTION = "inside tf.function (and XLA)"
# The seed's loop in TF2 (eager on): the resource variable's eval refuses; the ref variable's
# load runs its generated assign eagerly, which cannot take a ref.
SEED_REFUSALS = {
    "resource": raises("RuntimeError", r"This operation is not supported when eager execution is enabled"),
    "ref": raises("RuntimeError", r"assign op does not support eager execution\. Arg 'output_ref' is a ref"),
}
EXPECT = expectations(
    {
        **{m: "copy" for m in MECHANISMS},
        "python reference": "alias",
        **{k: "copy" for k in KIND_KEYS},
        **{f"eval [{s}]": "copy" for s in KINDS},
        "network copy": "copy",
        **{f"seed code as written [{s}]": "copy" for s in KINDS},
        "assign [across graphs]": "copy",
        "tf.Variable(other) [across graphs]": "created-in-current-graph",
        "copy_variable_to_graph": "copy",
        "Variable.load": "available",
        "networks in one graph": "independent",
    },
    expect(
        "python reference",
        "copy",
        framework="jax",
        link=JAX_INPLACE,
        reason="JAX arrays are immutable: x.at[...].add(d) returns a new array and the name is rebound, "
        "so another name for the old array keeps its value",
    ),
    expect(
        "tf.Variable(other)",
        raises("ValueError", r"tf\.function only supports singleton tf\.Variables created on the first call"),
        framework="tensorflow",
        mode="function",
        link=TF_FUNCTION_VARIABLES,
        reason=f"{IN_FUNCTION}, tf.Variable(v) in the body is a new variable per call: 'tf.function only "
        "supports singleton tf.Variables created on the first call'",
    ),
    expect(
        "tf.Variable(other)",
        raises(
            "UnimplementedError",
            r"We failed to lift variable creations out of this tf\.function, so this tf\.function cannot be run on XLA",
        ),
        framework="tensorflow",
        mode="xla",
        link=TF_FUNCTION_VARIABLES,
        reason="the first call of a jit_compile=True function that creates a variable fails: 'We failed to "
        "lift variable creations out of this tf.function, so this tf.function cannot be run on XLA' "
        "(later calls of the same function raise ValueError, as without XLA)",
    ),
    expect(
        "load",
        raises("ValueError", r"Either session argument should be provided or default session should be established"),
        framework="tensorflow",
        mode="function|xla",
        link=LOAD,
        reason=f"{IN_FUNCTION} Variable.load is not eager, so it wants a Session: 'Either session argument "
        "should be provided or default session should be established'",
    ),
    *[
        expect(
            f"{m} [ref->resource]", "alias", framework="tensorflow", mode="graph", link=KERNEL, reason=REF_INTO_RESOURCE
        )
        for m in ("assign", "tf.Variable(other)")
    ],
    *[
        expect(
            f"seed code as written [{s}]",
            SEED_REFUSALS[s],
            framework="tensorflow",
            versions=">=2.0",
            link=AS_DEFAULT,
            reason="'Entering a with sess.as_default(): block does not affect the current default graph' and "
            "eager execution is on in TF2: ResourceVariable.eval raises 'not supported when eager "
            "execution is enabled', RefVariable.load falls back to an eager assign of a ref",
        )
        for s in KINDS
    ],
    expect(
        "assign [across graphs]",
        raises("ValueError", r"must be from the same graph as"),
        framework="tensorflow",
        mode="graph",
        link="https://www.tensorflow.org/api_docs/python/tf/Graph",
        reason="an op's inputs must come from its own graph: '... must be from the same graph as ...'",
    ),
    expect(
        "tf.Variable(other) [across graphs]",
        "created-in-source-graph",
        framework="tensorflow",
        mode="graph",
        link=NAME_SCOPE,
        reason="Variable's name_scope(values=[initial_value]) 'validates that the given values are from the "
        "same graph, makes that graph the default graph': the copy lands in the source's graph",
    ),
    expect(
        "copy_variable_to_graph",
        "unavailable",
        framework="tensorflow",
        versions=">=2.0",
        link=CONTRIB,
        reason="tf.contrib was removed in TF 2.0 (contrib sunset RFC): no copy_graph module",
    ),
    expect(
        "Variable.load",
        "deprecated",
        framework="tensorflow",
        link=LOAD,
        reason="'Prefer Variable.assign which has equivalent behavior in 2.X'",
    ),
)

LR = 0.5  # a power of two: the learning-rate product is exact
NET_SHAPES = {"generator/W": (2, 3), "generator/b": (3,), "discriminator/c": (2,)}
SHAPES = ((1,), (3,))


def kind_of(before, after, ref, moved) -> str:
    """``copy``: the destination held ``ref`` and still does; ``alias``: it moved with the source."""
    if np.array_equal(before, ref) and np.array_equal(after, ref):
        return "copy"
    return "alias" if np.array_equal(after, moved) else "other"


# ---------------------------------------------------------------- strategies
def _offsets(dtype, shape):
    """Elements in +-[0.5, 4]: a + offset differs from a in every element (|a| <= 10)."""
    mag = ss.floats(dtype, 0.5, 4)
    return hnp.arrays(dtype, shape, elements=st.one_of(mag, mag.map(lambda v: -v)))


@st.composite
def copy_inputs(draw):
    """(source, destination's own value, the change to the source), small float vectors."""
    dtype, shape = draw(ss.dtypes_and_shapes(shapes=SHAPES), label="dtype, shape")
    a = draw(ss.float_arrays(dtype=dtype, shape=shape), label="source")
    b0 = a + draw(_offsets(dtype, shape), label="destination - source")
    return a, b0, draw(_offsets(dtype, shape), label="change")


@st.composite
def network_inputs(draw):
    dtype = draw(ss.float_dtypes())
    arr = {
        n: draw(ss.float_arrays(dtype=dtype, shape=s, min_value=-3, max_value=3), label=n)
        for n, s in NET_SHAPES.items()
    }
    net2 = tuple(arr[n] + draw(_offsets(dtype, s), label=f"network 2 {n}") for n, s in NET_SHAPES.items())
    x = draw(ss.float_arrays(dtype=dtype, shape=(1, 2), min_value=-3, max_value=3), label="x")
    t = draw(_offsets(dtype, (1, 3)), label="t")
    return tuple(arr.values()) + net2 + (x, t)


# ---------------------------------------------------------------- the programs
VARIABLES = Variables()


def _variable(tf, init, name, sig):
    """The module's variable ``name`` holding ``init`` (``sig``: dtype, shape, device; reduce_retracing
    hides the shape in a trace)."""
    return VARIABLES.get(tf, init, name=name, shape=sig[1])


# The copy mechanisms: each spelling makes the destination from the source (``dst`` holds its own value).
class Assign(Program):
    def tensorflow(tf, src, dst):
        dst.assign(src)
        return dst

    def jax(jax, src, dst):
        return dst.at[...].set(src)

    def torch(torch, src, dst):
        dst.copy_(src)
        return dst


class FromVariable(Program):
    """``tf.Variable(other)``: a new variable (array, tensor) initialised from the source."""

    def tensorflow(tf, src, dst):
        return tf.Variable(src)

    def jax(jax, src, dst):
        return jax.numpy.array(src, copy=True)

    def torch(torch, src, dst):
        return src.clone()


class Load(Program):
    """``Variable.load`` (TF2: of a snapshot of the source); ``device_put``; ``load_state_dict``."""

    def tensorflow(tf, src, dst):
        dst.load(src.read_value())  # TF2's eval(): a snapshot of the source
        return dst

    def jax(jax, src, dst):
        return jax.device_put(src)

    def torch(torch, src, dst):
        net1, net2 = torch.nn.Module(), torch.nn.Module()
        net1.register_buffer("p", src)
        net2.register_buffer("p", dst)
        net2.load_state_dict(net1.state_dict())
        return net2.p


class Reference(Program):
    def tensorflow(tf, src, dst):
        return src

    def jax(jax, src, dst):
        return src

    def torch(torch, src, dst):
        return src


COPIES = {"assign": Assign, "tf.Variable(other)": FromVariable, "load": Load, "python reference": Reference}


class Copy(Program):
    """dst = mechanism(src); src += d: (dst before the change, dst after it, src after it)."""

    def tensorflow(tf, a, b0, d, *, mechanism, sig, attempt=0):
        src, dst = _variable(tf, a, "src", sig), _variable(tf, b0, "dst", sig)  # reset in every call
        dst = COPIES[mechanism].tensorflow(tf, src, dst)
        before = dst.read_value()
        src.assign_add(d)
        return before, dst.read_value(), src.read_value()

    def jax(jax, a, b0, d, *, mechanism):
        src = a
        dst = COPIES[mechanism].jax(jax, src, b0)
        before = dst
        src = src.at[...].add(d)
        return before, dst, src

    def torch(torch, a, b0, d, *, mechanism):
        src = a.clone()
        dst = COPIES[mechanism].torch(torch, src, b0.clone())
        before = dst.clone()
        src.add_(d)
        return before, dst, src


class Networks(Program):
    """seeds/001: copy the 'generator' variables of network 1 into network 2, train network 1 one
    step; returns (network 2's variables, network 1's generator)."""

    def tensorflow(tf, w, b, c, w2, b2, c2, x, t, *, sig):
        values = {"network1": (w, b, c), "network2": (w2, b2, c2)}
        train_vars1, train_vars2 = (
            [VARIABLES.get(tf, v, name=f"{net}/{n}", shape=s) for (n, s), v in zip(NET_SHAPES.items(), values[net])]
            for net in values
        )
        vars_1 = [var for var in train_vars1 if "generator" in var.name]
        vars_2 = [var for var in train_vars2 if "generator" in var.name]
        for var_idx, var in enumerate(vars_1):
            vars_2[var_idx].assign(vars_1[var_idx])
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(t * (tf.matmul(x, vars_1[0]) + vars_1[1]))
        for var, g in zip(vars_1, tape.gradient(loss, vars_1)):
            var.assign_sub(LR * g)
        return tuple(v.read_value() for v in train_vars2), tuple(v.read_value() for v in vars_1)

    def jax(jax, w, b, c, w2, b2, c2, x, t):
        params_1 = dict(zip(NET_SHAPES, (w, b, c)))
        params_2 = dict(zip(NET_SHAPES, (w2, b2, c2)))
        params_2.update({k: v for k, v in params_1.items() if "generator" in k})
        gen = {k: v for k, v in params_1.items() if "generator" in k}
        grads = jax.grad(lambda p: jax.numpy.sum(t * (x @ p["generator/W"] + p["generator/b"])))(gen)
        params_1.update(jax.tree_util.tree_map(lambda p, g: p - LR * g, gen, grads))
        return tuple(params_2[k] for k in NET_SHAPES), (params_1["generator/W"], params_1["generator/b"])

    def torch(torch, w, b, c, w2, b2, c2, x, t):
        def network(w, b, c):
            net = torch.nn.Module()
            net.generator, net.discriminator = torch.nn.Module(), torch.nn.Module()
            net.generator.W, net.generator.b = torch.nn.Parameter(w), torch.nn.Parameter(b)
            net.discriminator.c = torch.nn.Parameter(c)
            return net

        net1, net2 = network(w, b, c), network(w2, b2, c2)
        net2.load_state_dict({k: v for k, v in net1.state_dict().items() if "generator" in k}, strict=False)
        (t * (x @ net1.generator.W + net1.generator.b)).sum().backward()
        torch.optim.SGD(net1.generator.parameters(), lr=LR).step()
        return (
            tuple(p.detach().clone() for p in (net2.generator.W, net2.generator.b, net2.discriminator.c)),
            (net1.generator.W.detach(), net1.generator.b.detach()),
        )


# ---------------------------------------------------------------- v1: two graphs, two sessions
_V1 = resources.PerTest()  # graphs and Sessions for one test; closed when it ends


def _v1_pair(tf, dtype, shape, device):
    """Graph 1 holds a source of each kind, the mutations, and destinations for ``assign`` and
    ``tf.Variable(other)``; graph 2 holds ``load`` destinations. Built once per dtype x shape x
    device; every variable is initialised from a placeholder, so each example re-initialises."""
    key = (dtype, shape, device)
    if key in _V1:
        return _V1[key]
    v1, p = tf.compat.v1, types.SimpleNamespace(src={}, mutate={}, dst={}, assign={}, new={}, net2={})
    p.g1, p.g2 = tf.Graph(), tf.Graph()
    with p.g1.as_default(), tf.device(device):
        p.a, p.b, p.d = (v1.placeholder(dtype, shape, name=n) for n in ("a", "b", "d"))
        for s, use_resource in KINDS.items():
            src = p.src[s] = v1.Variable(p.a, use_resource=use_resource, name=f"src_{s}")
            p.mutate[s, "assign_add"], p.mutate[s, "assign"] = src.assign_add(p.d), src.assign(p.d)
            p.mutate[s, "sgd"] = v1.train.GradientDescentOptimizer(1.0).apply_gradients([(p.d, src)])
            for d, dst_resource in KINDS.items():
                p.dst[s, d] = v1.Variable(p.b, use_resource=dst_resource)
                p.assign[s, d] = p.dst[s, d].assign(src)
                p.new[s, d] = v1.Variable(src, use_resource=dst_resource)
    with p.g2.as_default(), tf.device(device):
        p.b2 = v1.placeholder(dtype, shape, name="b")
        for d, dst_resource in KINDS.items():
            p.net2[d] = v1.Variable(p.b2, use_resource=dst_resource)
    p.g1.finalize()
    p.g2.finalize()
    p.s1, p.s2 = resources.track(v1.Session(graph=p.g1)), resources.track(v1.Session(graph=p.g2))
    _V1[key] = p
    return p


def v1_copy(p, a, b0, d, *, mechanism, src_kind="resource", dst_kind="resource", mutation="assign_add"):
    """(destination before, destination after the source changed, source after) in Sessions."""
    s1, s2, src = p.s1, p.s2, p.src[src_kind]
    s1.run(src.initializer, {p.a: a})
    sess = s1
    if mechanism == "assign":
        dst = p.dst[src_kind, dst_kind]
        s1.run(dst.initializer, {p.b: b0})
        s1.run(p.assign[src_kind, dst_kind])
    elif mechanism == "tf.Variable(other)":
        dst = p.new[src_kind, dst_kind]  # the source's initial value fed as b0: a copy of it would show
        s1.run(dst.initializer, {p.a: b0})
    elif mechanism == "eval":  # the fetched NumPy value is the destination
        with s1.graph.as_default():
            value = src.eval(session=s1)
        before = value.copy()
        s1.run(p.mutate[src_kind, mutation], {p.d: d})
        return before, value, s1.run(src)
    elif mechanism == "load":
        with s1.graph.as_default():
            value = src.eval(session=s1)
        dst, sess = p.net2[dst_kind], s2
        s2.run(dst.initializer, {p.b2: b0})
        with s2.graph.as_default():
            dst.load(value, s2)
    else:
        dst = src
    before = sess.run(dst)
    s1.run(p.mutate[src_kind, mutation], {p.d: d})
    return before, sess.run(dst), s1.run(src)


def _v1_networks(tf, dtype, device):
    key = ("networks", dtype, device)
    if key in _V1:
        return _V1[key]
    v1, n = tf.compat.v1, types.SimpleNamespace(sessions=[], phs=[], train_vars=[], inits=[])
    for k in (1, 2):
        g = tf.Graph()
        with g.as_default(), tf.device(device):
            phs = {name: v1.placeholder(dtype, s) for name, s in NET_SHAPES.items()}
            for name in NET_SHAPES:
                scope, var = name.split("/")
                with v1.variable_scope(scope):
                    v1.Variable(phs[name], name=var)
            train_vars = v1.trainable_variables()
            if k == 1:
                n.x, n.t = v1.placeholder(dtype, (1, 2)), v1.placeholder(dtype, (1, 3))
                gen = [v for v in train_vars if "generator" in v.name]
                loss = tf.reduce_sum(n.t * (tf.matmul(n.x, gen[0]) + gen[1]))
                n.train_op = v1.train.GradientDescentOptimizer(LR).minimize(loss, var_list=gen)
            n.inits.append(v1.global_variables_initializer())
        g.finalize()
        n.phs.append(phs)
        n.train_vars.append(train_vars)
        n.sessions.append(resources.track(v1.Session(graph=g)))
    _V1[key] = n
    return n


def v1_networks(n, w, b, c, w2, b2, c2, x, t):
    """seeds/001's loop, plus the ``graph.as_default()`` blocks TF2 needs (see the seed test)."""
    session_1, session_2 = n.sessions
    for sess, init, phs, values in zip(n.sessions, n.inits, n.phs, ((w, b, c), (w2, b2, c2))):
        sess.run(init, dict(zip(phs.values(), values)))
    vars_1 = [var for var in n.train_vars[0] if "generator" in var.name]
    with session_2.graph.as_default(), session_2.as_default():
        vars_2 = [var for var in n.train_vars[1] if "generator" in var.name]
        for var_idx, var in enumerate(vars_1):
            with session_1.graph.as_default():
                value = vars_1[var_idx].eval(session=session_1)
            vars_2[var_idx].load(value, session_2)
    session_1.run(n.train_op, {n.x: x, n.t: t})
    return tuple(session_2.run(n.train_vars[1])), tuple(session_1.run(vars_1))


# ---------------------------------------------------------------- properties
@given(v=copy_inputs())
def test_copy_keeps_value_alias_follows_source(subject, record, v):
    """dst = mechanism(src); src += d: a copy still reads src's old value, an alias the new one.
    TensorFlow's graph mode: resource variables, assign/tf.Variable in graph 1, load into graph 2."""
    a, b0, d = v
    record.example(a=a, b0=b0, d=d)
    for m in MECHANISMS:
        try:
            if subject.framework != "tensorflow":
                out = subject.run(Copy.of(subject), a, b0, d, mechanism=m)
            elif subject.mode == "graph":
                out = v1_copy(
                    _v1_pair(subject.module, a.dtype.name, a.shape, subject.device_name), a, b0, d, mechanism=m
                )
            else:  # a fresh tf.function per example where creating a variable makes the first call special
                out = subject.run(
                    Copy.of(subject),
                    a,
                    b0,
                    d,
                    mechanism=m,
                    attempt=record.examples if m == "tf.Variable(other)" else 0,
                    sig=(a.dtype.name, a.shape, subject.device),
                )
        except Exception as e:  # noqa: BLE001  the framework's own answer is the observation
            record.check(EXPECT, **{m: cmp.error_name(e)})
            continue
        before, after, src = out
        record.check(EXPECT, **{m: kind_of(before, after, a, a + d)})
        record.equal(name=f"{m}: destination", out=np.asarray(before), ref=a, oracle="closed-form")
        record.equal(name=f"{m}: source after", out=np.asarray(src), ref=a + d, oracle="closed-form")


@on("tensorflow", modes=("graph",))
@given(v=copy_inputs(), mutation=st.sampled_from(MUTATIONS))
def test_v1_variable_kinds_copy_or_alias(subject, record, v, mutation):
    """Every pair of v1 variable kinds (resource, ref) x assign / tf.Variable(other) / load, the
    source changed by assign_add, assign or a gradient-descent step. Graph only: RefVariables
    exist only in a v1 graph (eager variables are always resource variables)."""
    a, b0, d = v
    record.example(a=a, b0=b0, d=d, mutation=mutation)
    p = _v1_pair(subject.module, a.dtype.name, a.shape, subject.device_name)
    fed = a + d if mutation == "assign" else d  # every mutation moves every element of the source
    moved = a - d if mutation == "sgd" else a + d
    for m in ("assign", "tf.Variable(other)", "load"):
        for s, k in PAIRS:
            before, after, src = v1_copy(p, a, b0, fed, mechanism=m, src_kind=s, dst_kind=k, mutation=mutation)
            record.check(EXPECT, **{f"{m} [{s}->{k}]": kind_of(before, after, a, moved)})
            record.equal(name=f"{m} [{s}->{k}]: source after", out=src, ref=moved, oracle="closed-form")
    for s in KINDS:
        before, after, _ = v1_copy(p, a, b0, fed, mechanism="eval", src_kind=s, mutation=mutation)
        record.check(EXPECT, **{f"eval [{s}]": kind_of(before, after, a, moved)})


@given(v=network_inputs())
def test_copied_network_keeps_values_while_source_trains(subject, record, v):
    """seeds/001: copy network 1's 'generator' variables into network 2 (TF graph: load across two
    Sessions; TF2: assign; torch: load_state_dict; JAX: the arrays), one SGD step on network 1:
    network 2 keeps the copy, its 'discriminator' is untouched, network 1 moves by -lr * grad."""
    w, b, c, w2, b2, c2, x, t = v
    record.example(w=w, b=b, c=c, w2=w2, b2=b2, c2=c2, x=x, t=t)
    if subject.framework == "tensorflow" and subject.mode == "graph":
        net2, net1 = v1_networks(_v1_networks(subject.module, w.dtype.name, subject.device_name), *v)
    else:
        sig = {"sig": (w.dtype.name, subject.device)} if subject.framework == "tensorflow" else {}
        net2, net1 = subject.run(Networks.of(subject), *v, **sig)
    step = (LR * np.outer(x[0], t[0]), LR * t[0])
    trained = (w - step[0], b - step[1])
    # per element: W_ij - lr x_i t_j (one product, the batch has one row) and b_j - lr t_j: the subtraction's
    # terms set each element's floor
    scales = [np.abs(np.asarray(v, np.float64)) + np.abs(np.asarray(d, np.float64)) for v, d in zip((w, b), step)]
    record.close(name="network 1 W", out=net1[0], ref=trained[0], oracle="closed-form", tol=cmp.GRAD, scale=scales[0])
    record.close(name="network 1 b", out=net1[1], ref=trained[1], oracle="closed-form", tol=cmp.GRAD, scale=scales[1])
    record.equal(name="network 2 discriminator", out=np.asarray(net2[2]), ref=c2, oracle="closed-form")
    copied = all(np.array_equal(o, r) for o, r in zip(net2[:2], (w, b)))
    rtol = cmp.GRAD.of(w.dtype)
    moved = all(cmp.rel_err(o, r, rtol=rtol, scale=at) <= rtol for o, r, at in zip(net2[:2], trained, scales))
    record.check(EXPECT, **{"network copy": "copy" if copied else "alias" if moved else "other"})


# ---------------------------------------------------------------- seed examples
def _one_graph_two_networks(tf, a, b0, d):
    """Two networks in ONE graph, each trained by its own minimize(var_list=): does a step of one
    leave the other alone and move itself by -lr * grad?"""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        with v1.variable_scope("generator"):
            g = v1.Variable(a)
        with v1.variable_scope("discriminator"):
            c = v1.Variable(b0)
        opt = v1.train.GradientDescentOptimizer(LR)
        train_g = opt.minimize(tf.reduce_sum(d * g), var_list=[g])
        train_c = opt.minimize(tf.reduce_sum(d * c), var_list=[c])
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            session.run(train_g)  # the step, then the reads: one run would race them
            after_g = session.run([g, c])
            session.run(train_c)
            after_c = session.run([g, c])
    ok = (
        np.array_equal(after_g[0], a - LR * d)
        and np.array_equal(after_g[1], b0)
        and np.array_equal(after_c[0], a - LR * d)
        and np.array_equal(after_c[1], b0 - LR * d)
    )
    return "independent" if ok else "coupled"


@on("tensorflow", modes=("graph",))
@given(v=st.just((np.float32([1.0, 2.0]), np.float32([0.0, 0.0]), np.float32([10.0, 10.0]))))
def test_seed_two_graphs_two_sessions(subject, record, v):
    """seeds/001's claims, measured: the load loop as written (both variable kinds), assign and
    tf.Variable(other) across graphs, tf.contrib.copy_graph, Variable.load, two networks trained
    in one Graph. Graph only: these are the seed's v1 Graph/Session APIs."""
    tf, v1 = subject.module, subject.module.compat.v1
    a, b0, d = v
    record.example(a=a, b0=b0, d=d)
    for s, use_resource in KINDS.items():
        graph_1, graph_2 = tf.Graph(), tf.Graph()
        with graph_1.as_default():
            vars_1 = [v1.Variable(a, use_resource=use_resource, name="net")]
        with graph_2.as_default():
            vars_2 = [v1.Variable(b0, use_resource=use_resource, name="net")]
        session_1, session_2 = resources.track(v1.Session(graph=graph_1)), resources.track(v1.Session(graph=graph_2))
        session_1.run(vars_1[0].initializer)
        session_2.run(vars_2[0].initializer)
        try:
            with session_2.as_default():  # the seed's loop, as written
                for var_idx, var in enumerate(vars_1):
                    vars_2[var_idx].load(vars_1[var_idx].eval(session=session_1), session_2)
            with graph_2.as_default():
                seen = "copy" if np.array_equal(session_2.run(vars_2[0]), a) else "other"
        except Exception as e:  # noqa: BLE001
            seen = cmp.error_name(e)
        record.check(EXPECT, **{f"seed code as written [{s}]": seen})
        if s == "resource":
            with graph_2.as_default():
                try:
                    vars_2[0].assign(vars_1[0])
                    seen = "built"
                except Exception as e:  # noqa: BLE001
                    seen = cmp.error_name(e)
                record.check(EXPECT, **{"assign [across graphs]": seen})
                new = v1.Variable(vars_1[0])
            record.check(
                EXPECT,
                **{
                    "tf.Variable(other) [across graphs]": "created-in-source-graph"
                    if new.graph is graph_1
                    else "created-in-current-graph"
                    if new.graph is graph_2
                    else "other"
                },
            )
        session_1.close()
        session_2.close()
    try:
        tf.contrib.copy_graph.copy_variable_to_graph  # noqa: B018
        seen = "available"
    except AttributeError:
        seen = "unavailable"
    record.check(EXPECT, copy_variable_to_graph=seen)
    load = getattr(v1.Variable, "load", None)
    record.check(
        EXPECT,
        **{
            "Variable.load": "unavailable"
            if load is None
            else "deprecated"
            if "(deprecated)" in (load.__doc__ or "")
            else "available"
        },
    )
    record.check(EXPECT, **{"networks in one graph": _one_graph_two_networks(tf, a, b0, d)})

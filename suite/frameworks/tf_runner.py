"""TensorFlow runners: ``eager``, ``function`` (tf.function), ``xla`` (jit_compile=True)
and ``graph`` (a ``tf.compat.v1`` Graph + Session, the style the source documents use).

Builders get ``(tf, *tensors, **static)``. In ``graph`` mode the tensors are shape-free
placeholders: the graph is built once per builder x dtypes x ranks and each example is
fed, so a property test does not build a graph per example. Variables a builder creates
in ``graph`` mode are re-initialised before every call (with the inputs fed, so they may
be initialised from them), as in eager each call starts fresh. A builder marked
``builder.exact_shapes = True`` gets placeholders of the exact input shapes (one graph
per shape), for APIs such as ``get_variable`` that need a static shape; under ``tf.function``
it gets one function per input shapes, never relaxed to unknown dimensions (``reduce_retracing``
would, and some gradients, QR's, refuse a dynamic shape).
``in_v1_graph()`` tells a builder it is being built for a Session.
"""

from __future__ import annotations

import functools

import numpy as np

from . import resources
from .base import Runner, nest_flatten, nest_map, nest_pack, split_orders

_V1_GRAPH = [False]


def in_v1_graph() -> bool:
    """True while a builder is being traced into a ``tf.compat.v1`` graph for a Session."""
    return _V1_GRAPH[0]


def make(fw, spec):
    return TFRunner(fw, spec)


class TFRunner(Runner):
    def __init__(self, fw, spec):
        super().__init__(fw, spec)
        self.tf = fw.module
        self.device_name = "/GPU:0" if spec.device == "gpu" else "/CPU:0"
        # XLA's refusal quotes every op's definition stack, and TensorFlow parses the message
        # with a regex quadratic in its length (error_interpolation.parse_message): 0.6 s a
        # call traced from a pytest+Hypothesis stack (measured in custom-backward), so the
        # calls that may be refused (recall) are traced from a thread with a short stack
        self.shallow_recall = spec.mode == "xla"
        # a v1 graph is built in 16 ms, and a Session runs all it fetches: the combined program
        # of orders() made the graph rows of the op table slower (15.5 s -> 26.5 s, measured), so
        # a v1 graph builds a program per order
        self.traced = spec.mode in ("function", "xla")

    def _to_tf(self, a) -> np.ndarray:
        """``a`` as an array TensorFlow takes: ml_dtypes' bfloat16 becomes TensorFlow's own
        bfloat16 NumPy type where the release has one of its own (TF 2.12 refuses ml_dtypes'
        with "Unsupported numpy type: NPY_USERDEF"; measured). The values are unchanged."""
        a = np.asarray(a)
        if a.dtype.name == "bfloat16":
            own = np.dtype(self.tf.bfloat16.as_numpy_dtype)
            if a.dtype != own:
                return a.astype(np.float32).astype(own)
        return a

    @staticmethod
    def _from_tf(out):
        """TensorFlow's own bfloat16 arrays as ml_dtypes' (the dtype the suite compares)."""
        if isinstance(out, np.ndarray) and out.dtype.name == "bfloat16":
            import ml_dtypes

            if out.dtype != ml_dtypes.bfloat16:
                return out.astype(np.float32).astype(ml_dtypes.bfloat16)
        return out

    def numpy(self, x):
        return self._from_tf(self._numpy(x))

    def _numpy(self, x):
        tf = self.tf
        if isinstance(x, tf.IndexedSlices):
            x = tf.convert_to_tensor(x)
        if type(x).__name__ == "IndexedSlicesValue":  # what Session.run gives for IndexedSlices
            dense = np.zeros(x.dense_shape, x.values.dtype)
            np.add.at(dense, x.indices, x.values)
            return dense
        if isinstance(x, tf.Variable) or hasattr(x, "numpy"):
            out = x.numpy()
            if getattr(x, "device", None):
                self.check_device(x.device, out)
            return out
        return np.asarray(x) if not isinstance(x, (bool, int, float, str, bytes)) else x

    def _build(self, builder, static):
        tf = self.tf
        if self.mode == "eager":

            def call(*arrays):
                with tf.device(self.device_name):
                    out = builder(tf, *[tf.constant(self._to_tf(a)) for a in arrays], **static)
                return nest_map(self.numpy, out)

            return call
        if self.mode in ("function", "xla"):
            fns = {}  # one tf.function per number of arrays: a traced function keeps its arity
            exact = getattr(static.get("fn", builder), "exact_shapes", False)

            def call(*arrays):
                # exact_shapes: one function per input shapes, never relaxed to unknown dimensions
                key = (len(arrays), tuple(np.shape(a) for a in arrays) if exact else None)
                fn = fns.get(key)
                if fn is None:
                    # A partial, not a lambda: TF <= 2.15's AutoGraph caches a converted lambda by
                    # its code object and can call another builder's closure (measured on 2.15).
                    fn = fns[key] = tf.function(
                        functools.partial(builder, tf, **static),
                        reduce_retracing=not exact,
                        jit_compile=self.mode == "xla",
                    )
                with tf.device(self.device_name):
                    out = fn(*[tf.constant(self._to_tf(a)) for a in arrays])
                return nest_map(self.numpy, out)

            call.tf_functions = fns
            return call
        if self.mode == "graph":
            graphs = resources.PerTest()  # one graph per test: its Session closes when the test ends

            def call(*arrays):
                arrays = [self._to_tf(a) for a in arrays]
                exact = getattr(static.get("fn", builder), "exact_shapes", False)
                key = tuple((a.dtype.str, a.shape if exact else a.ndim) for a in arrays)
                if key not in graphs:
                    graphs[key] = self._graph(builder, static, arrays)
                sess, phs, template, fetches, init = graphs[key]
                feed = dict(zip(phs, arrays))
                if init is not None:  # variables may be initialised from the inputs
                    sess.run(init, feed_dict=feed)
                values = sess.run(fetches, feed_dict=feed) if fetches else []
                flat, it = [], iter(values)
                for t in nest_flatten(template):
                    flat.append(None if t is None else self.numpy(next(it)) if not _is_py(t) else t)
                return nest_pack(template, flat)

            return call
        raise ValueError(f"unknown TensorFlow mode {self.mode!r}")

    def _graph(self, builder, static, arrays):
        tf = self.tf
        exact = getattr(static.get("fn", builder), "exact_shapes", False)
        g = tf.Graph()
        with g.as_default(), tf.device(self.device_name):
            phs = [
                tf.compat.v1.placeholder(
                    tf.as_dtype(a.dtype), shape=list(a.shape) if exact else [None] * a.ndim, name=f"arg{i}"
                )
                for i, a in enumerate(arrays)
            ]
            _V1_GRAPH[0] = True
            try:
                template = builder(tf, *phs, **static)
            finally:
                _V1_GRAPH[0] = False
            template = nest_map(lambda t: tf.convert_to_tensor(t) if isinstance(t, tf.IndexedSlices) else t, template)
            fetches = [t for t in nest_flatten(template) if t is not None and not _is_py(t)]
            init = tf.compat.v1.global_variables_initializer() if tf.compat.v1.global_variables() else None
        g.finalize()
        # A GPU row's Session places strictly: an op with no GPU kernel is an error, not a
        # silent move to the CPU, unless the builder declares CPU-only kernels
        # (``builder.cpu_only_kernels = "why"``), which the row then notes.
        soft = getattr(static.get("fn", builder), "cpu_only_kernels", None)
        config = tf.compat.v1.ConfigProto(allow_soft_placement=bool(soft) or self.device != "gpu")
        sess = resources.track(tf.compat.v1.Session(graph=g, config=config))
        return sess, phs, template, fetches, init

    def sync(self, out):
        return nest_map(self.numpy, out)


def _is_py(t) -> bool:
    return isinstance(t, (bool, int, float, str, bytes, np.ndarray, np.generic))


def tf_vjp(tf, *args, fn, diff, static, ct):
    """Native reverse mode: ``tf.gradients`` in a v1 graph, ``GradientTape`` otherwise."""
    if ct:
        *args, cotangent = args
    else:
        cotangent = None
    xs = [a for a, d in zip(args, diff) if d]
    if in_v1_graph():
        y = fn(tf, *args, **static)
        gs = tf.gradients(y, xs, grad_ys=cotangent) if xs else []
    else:
        with tf.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            y = fn(tf, *args, **static)
        gs = tape.gradient(y, xs, output_gradients=cotangent) if xs else []
    it = iter(gs)
    return y, tuple(next(it) if d else None for d in diff)


def _split(args, diff, n_extra):
    """(inputs, the float inputs, the trailing extra arguments)."""
    cut = len(args) - n_extra
    args, extra = list(args[:cut]), list(args[cut:])
    return args, [a for a, d in zip(args, diff) if d], extra


def _per_input(diff, gs):
    it = iter(gs)
    return tuple(next(it) if d else None for d in diff)


def tf_jvp(tf, *args, fn, diff, static):
    """Native forward mode: a ForwardAccumulator (it works in every mode, a v1 graph too)."""
    n = sum(diff)
    args, xs, ts = _split(args, diff, n)
    with tf.autodiff.ForwardAccumulator(xs, ts) as acc:
        y = fn(tf, *args, **static)
    return y, acc.jvp(y)


def tf_second_order(tf, *args, fn, diff, static):
    """Reverse over reverse: nested tapes, or ``tf.gradients`` twice in a v1 graph."""
    args, xs, (w, v) = _split(args, diff, 2)
    if in_v1_graph():
        y = fn(tf, *args, **static)
        g = tf.gradients(y, xs, grad_ys=w)
        h = tf.gradients(g[0], xs, grad_ys=v) if g[0] is not None else [None] * len(xs)
        return y, _per_input(diff, g), _per_input(diff, h)
    with tf.GradientTape() as outer:
        outer.watch(xs)
        with tf.GradientTape() as inner:
            inner.watch(xs)
            y = fn(tf, *args, **static)
        g = inner.gradient(y, xs, output_gradients=w)
    h = outer.gradient(g[0], xs, output_gradients=v) if g[0] is not None else [None] * len(xs)
    return y, _per_input(diff, g), _per_input(diff, h)


def tf_orders(tf, *args, fn, diff, static):
    """Every order of ``fn`` in one program (``Runner.orders``): the value and gradients of the
    second-order program (the inner tape's gradients are :func:`tf_vjp`'s), and a
    ForwardAccumulator's ``J t`` of another call of ``fn``."""
    args, w, ts, v = split_orders(args, diff)
    y, grads, second = tf_second_order(tf, *args, w, v, fn=fn, diff=diff, static=static)
    _, jt = tf_jvp(tf, *args, *ts, fn=fn, diff=diff, static=static)
    return y, grads, jt, second


def tf_derivative(tf, x, *, fn, order, static):
    """The ``order``-th derivative of an elementwise ``fn``: ``order`` nested tapes, each
    recording the one inside (a v1 graph's tapes too)."""
    if order == 0:
        return fn(tf, x, **static)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf_derivative(tf, x, fn=fn, order=order - 1, static=static)
    return tape.gradient(y, x)


class Variables:
    """TensorFlow variables for a case module's builders, one store per module::

        VARIABLES = Variables()
        ...
        def tensorflow(tf, v0, x):
            v = VARIABLES.get(tf, v0, name="acc")   # holds v0 on every call

    In a v1 graph each build makes a new ``tf.compat.v1.Variable`` (the graph is built once per
    signature and fed). Elsewhere a variable is made once per (name, device, dtype, shape),
    outside any ``tf.function`` (which may create variables on its first call only), on the
    device the caller placed the run on (so a GPU row never measures a CPU variable's kernel),
    and assigned ``init`` on every call. ``shape`` gives the shape where a trace hides ``init``'s
    (a static argument of the program). Keyword arguments (``use_resource``, ``trainable``,
    ``validate_shape``: in a v1 graph False unless given) go to ``tf.compat.v1.Variable``.
    :meth:`once` keeps any other state a trace must not create (a ``tf.random.Generator``)."""

    def __init__(self):
        self._store: dict = {}

    @staticmethod
    def key(tf, name: str, like, shape=None) -> tuple:
        with tf.init_scope():
            device = tf.zeros([]).device
        return name, device, like.dtype.name, tuple(like.shape.as_list() if shape is None else shape)

    def once(self, tf, key, make):
        """The object ``make()`` made for ``key``: made on the first call, outside any trace (a
        ``tf.function`` may create state on its first call only), and kept."""
        if key not in self._store:
            with tf.init_scope():
                self._store[key] = make()
        return self._store[key]

    def get(self, tf, init, *, name: str, shape=None, **kwargs):
        if in_v1_graph():
            return tf.compat.v1.Variable(init, name=name, **{"validate_shape": False, **kwargs})
        key = self.key(tf, name, init, shape)

        def make():
            zeros = tf.zeros(key[-1], init.dtype)
            return tf.compat.v1.Variable(zeros, name=name, **kwargs) if kwargs else tf.Variable(zeros, name=name)

        var = self.once(tf, key, make)
        var.assign(init)
        return var

    def existing(self, tf, name: str, like):
        """The variable :meth:`get` made for ``name`` and ``like``'s dtype and shape (not reset)."""
        return self._store[self.key(tf, name, like)]


TFRunner.builders = {
    "vjp": tf_vjp,
    "jvp": tf_jvp,
    "second_order": tf_second_order,
    "derivative": tf_derivative,
    "orders": tf_orders,
}

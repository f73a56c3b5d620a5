"""The runner API beyond first-order reverse mode: ``jvp`` (native forward mode) and
``second_order`` (reverse over reverse), in every mode of every installed framework, against
closed forms. Cases call these instead of writing per-framework helpers."""

import threading

import numpy as np
import pytest

from suite import compare as cmp, frameworks
from suite.program import Program

SPECS = frameworks.specs(devices=("cpu",))


class Cubic(Program):
    """y = a * x**3 with an integer input that is not differentiated."""

    def tensorflow(tf, x, a, k):
        return a * x**3 + tf.cast(k, x.dtype) * 0

    def jax(jax, x, a, k):
        return a * x**3 + k.astype(x.dtype) * 0

    def torch(torch, x, a, k):
        return a * x**3 + k.to(x.dtype) * 0


X = np.array([0.5, -1.0, 2.0], np.float64)
A = np.array([1.5, 2.0, -0.25], np.float64)
K = np.array([1, 2, 3], np.int32)
W = np.array([1.0, -2.0, 0.5], np.float64)
V = np.array([0.25, 1.0, -3.0], np.float64)


def _runner(spec):
    try:
        return frameworks.runner(spec)
    except frameworks.Unavailable as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_jvp_is_forward_mode_in_every_mode(spec):
    r = _runner(spec)
    tx, ta = np.array([1.0, 0.5, -1.0]), np.array([0.0, 2.0, 1.0])
    y, t = r.jvp(Cubic.of(r), X, A, K, tangents=(tx, ta))
    np.testing.assert_allclose(y, A * X**3, rtol=1e-12)
    np.testing.assert_allclose(t, 3 * A * X**2 * tx + X**3 * ta, rtol=1e-12)


class ScaledPower(Program):
    """y = c * x ** n, elementwise (two static arguments)."""

    def tensorflow(tf, x, *, n, c):
        return c * x**n

    def jax(jax, x, *, n, c):
        return c * x**n

    def torch(torch, x, *, n, c):
        return c * x**n


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_derivative_of_any_order_is_nested_differentiation(spec):
    """d^k/dx^k c x^4 = c 4!/(4-k)! x^(4-k), k = 0..3, in every mode; a bad order is refused."""
    r = _runner(spec)
    for k, ref in enumerate((X**4, 4 * X**3, 12 * X**2, 24 * X)):
        np.testing.assert_allclose(r.derivative(ScaledPower.of(r), X, order=k, n=4, c=-1.5), -1.5 * ref, rtol=1e-12)
    with pytest.raises(ValueError, match="order=-1"):
        r.derivative(ScaledPower.of(r), X, order=-1, n=4, c=1.0)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_second_order_is_the_gradient_of_the_first_inputs_gradient(spec):
    r = _runner(spec)
    y, g, h = r.second_order(Cubic.of(r), X, A, K, cotangent=W, cotangent2=V)
    np.testing.assert_allclose(y, A * X**3, rtol=1e-12)
    np.testing.assert_allclose(g[0], 3 * A * X**2 * W, rtol=1e-12)
    np.testing.assert_allclose(g[1], X**3 * W, rtol=1e-12)
    assert g[2] is None and h[2] is None  # the integer input
    np.testing.assert_allclose(h[0], 6 * A * X * W * V, rtol=1e-12)  # d <v, dx> / dx
    np.testing.assert_allclose(h[1], 3 * X**2 * W * V, rtol=1e-12)  # d <v, dx> / da


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
@pytest.mark.parametrize("need", ["vjp", "jvp", "second"])
def test_orders_agree_with_the_program_of_each_order(spec, need):
    """Runner.orders (issue 46: one program for every order where the mode traces) gives what
    vjp, jvp and second_order give, and in a traced mode all of them from one compiled program."""
    r = _runner(spec)
    fn = Cubic.of(r)
    ts = (np.array([1.0, 0.5, -1.0]), np.array([0.0, 2.0, 1.0]))
    o = r.orders(fn, X, A, K, cotangent=W, tangents=ts, cotangent2=V, need=need)
    np.testing.assert_allclose(o.value, A * X**3, rtol=1e-12)
    if need != "jvp" or r.traced:
        np.testing.assert_allclose(o.grads[0], 3 * A * X**2 * W, rtol=1e-12)
        np.testing.assert_allclose(o.grads[1], X**3 * W, rtol=1e-12)
        assert o.grads[2] is None
    if need == "jvp" or r.traced:
        np.testing.assert_allclose(o.jt, 3 * A * X**2 * ts[0] + X**3 * ts[1], rtol=1e-12)
    if need == "second" or r.traced:
        np.testing.assert_allclose(o.second[0], 6 * A * X * W * V, rtol=1e-12)
    if not r.traced:  # eager: the order asked for, nothing else
        assert (o.jt is None) == (need != "jvp") and (o.second is None) == (need != "second")
    with pytest.raises(ValueError, match="need="):
        r.orders(fn, X, A, K, cotangent=W, tangents=ts, cotangent2=V, need="hessian")


class NoForwardRule(Program):
    """A JAX custom_vjp function: reverse mode works, forward mode raises (no JVP rule)."""

    def jax(jax, x):
        @jax.custom_vjp
        def f(x):
            return x * 2.0

        f.defvjp(lambda x: (x * 2.0, None), lambda _, g: (g * 2.0,))
        return f(x)


def test_orders_fall_back_to_the_program_of_the_order_where_the_combined_one_fails():
    """The combined program needs every order; where one is refused, the order asked for runs on
    its own (and its refusal is the observation), and the combined program is not tried again."""
    r = _runner(frameworks.Spec("jax", "jit", "cpu"))
    fn = NoForwardRule.of(r)
    o = r.orders(fn, X, cotangent=W, tangents=(W,), cotangent2=V, need="vjp")
    np.testing.assert_allclose(o.grads[0], 2 * W)
    assert o.jt is None
    key = next(k for k in r._one_program if k[0] is fn)
    assert r._one_program[key] is False  # remembered: vjp alone from now on
    with pytest.raises(TypeError, match="custom_vjp"):
        r.orders(fn, X, cotangent=W, tangents=(W,), cotangent2=V, need="jvp")


def test_attempt_observes_a_refusal_and_remembers_the_ones_asked_to():
    r = _runner(frameworks.specs(frameworks=("jax",), devices=("cpu",))[1])  # jax-jit-cpu
    calls = []

    def refuses(jax, x):
        calls.append(1)
        raise ValueError("Detected unsupported operations")

    def fine(jax, x):
        return x * 2

    out, err = r.attempt("run", fine, X)
    assert err is None and np.allclose(out, 2 * X)
    for _ in range(3):
        out, err = r.attempt("run", refuses, X, remember=lambda e: "unsupported" in str(e))
        assert out is None and err == "raises:ValueError" and "unsupported" in err.message
    assert len(calls) == 1  # remembered after the first refusal
    r.attempt("run", refuses, X)
    assert len(calls) == 2  # not remembered unless asked


def test_calls_that_may_be_refused_under_xla_are_traced_from_a_short_stack():
    """XLA's refusal quotes each op's definition stack and TensorFlow parses it at a cost
    quadratic in its length: under XLA a call with ``remember=`` is traced from a thread of its
    own; one without, and every call in the other modes, from the caller's. Results and the
    refusal's observation are the same either way."""
    xla, eager = (_runner(frameworks.Spec("tensorflow", m, "cpu")) for m in ("xla", "eager"))
    traced = []

    def double(tf, x):
        traced.append(threading.current_thread().name)
        return x * 2

    def half(tf, x):
        traced.append(threading.current_thread().name)
        return x / 2

    def python_op(tf, x):
        traced.append(threading.current_thread().name)
        return tf.py_function(lambda v: v, [x], x.dtype)

    out, err = xla.attempt("run", double, X, remember=cmp.xla_refusal)
    assert err is None and np.allclose(out, 2 * X)
    out, err = xla.attempt("run", half, X)
    assert err is None and np.allclose(out, X / 2)
    assert traced[0].startswith("shallow") and traced[1] == threading.current_thread().name
    for _ in range(2):
        out, err = xla.attempt("run", python_op, X, remember=cmp.xla_refusal)
        assert out is None and err == "raises:InvalidArgumentError" and cmp.xla_refusal(err.exc)
    assert traced[2:] == [traced[0]]  # refused once, then remembered
    out, err = eager.attempt("run", double, X, remember=cmp.xla_refusal)
    assert err is None and np.allclose(out, 2 * X) and traced[-1] == threading.current_thread().name


@pytest.mark.parametrize("name", ["tensorflow", "jax", "torch"])
def test_the_environment_records_the_revision_each_build_names(name):
    """Issue 49: which nightly made a change is a range of source revisions, so the report
    header records the one each installed build names (measured from the module itself)."""
    fw = frameworks.load(name)
    if not fw.available:
        pytest.skip(f"{name} is not installed")
    env = frameworks.environment()[name]
    expected = {
        "tensorflow": lambda m: m.version.GIT_VERSION,
        "jax": lambda m: __import__("jax.version").version._git_hash,
        "torch": lambda m: m.version.git_version,
    }[name](fw.module)
    assert env["git_version"] == str(expected) and env["git_version"], env

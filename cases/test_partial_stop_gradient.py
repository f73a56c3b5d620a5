"""Partial stop-gradient: stop the gradient of some entries of a tensor.

Source: seeds/000 ("停止部分变量的梯度计算"): ``tf.stop_gradient`` stops a whole tensor,
so retraining part of a tensor uses ``entry_stop_gradients(target, mask) =
stop_gradient(|mask - 1| * target) + mask * target``. The value equals ``target``
exactly (one of the two products is a signed zero) and the gradient of ``sum(w * y)``
is ``mask * w``: entries where the mask is 1 train, the others are frozen. Masks come
as float 0/1 (the seed) and as booleans (cast to the dtype, or ``where``).

Whole-tensor ``stop_gradient`` is the contrast: TensorFlow reports the source as
unconnected (``None``), JAX gives zeros, and PyTorch's ``autograd.grad`` refuses a
detached output (RuntimeError) — declared below.
"""

import numpy as np
from hypothesis import given, strategies as st

from suite import compare as cmp, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.program import Program

BEHAVIOUR = behaviour(
    "partial-stop-gradient",
    sources=["000"],
    links=[
        "https://www.tensorflow.org/api_docs/python/tf/stop_gradient",
        "https://stackoverflow.com/questions/43364985/how-to-stop-gradient-for-some-entry-of-a-tensor-in-tensorflow",
    ],
    floor=Floor(
        "none",
        "Every float comparison is exact (cmp.EXACT or record.equal): the value is target itself and the "
        "gradient mask * w, one of two products being a signed zero, so no element is held to a tolerance.",
    ),
)

EXPECT = expectations(
    {"partial_grad": "mask*upstream", "whole_stop_grad": "zero"},
    expect(
        "whole_stop_grad",
        "none",
        framework="tensorflow",
        reason="GradientTape.gradient and tf.gradients return None for a source the target does "
        "not depend on (unconnected_gradients=NONE is the default)",
        link="https://www.tensorflow.org/api_docs/python/tf/GradientTape#gradient",
    ),
    expect(
        "whole_stop_grad",
        raises("RuntimeError", r"does not require grad and does not have a grad_fn"),
        framework="torch",
        reason="a detached output has no grad_fn; torch.autograd.grad raises "
        "'element 0 of tensors does not require grad' rather than returning zeros",
        link="https://pytorch.org/docs/stable/generated/torch.autograd.grad.html",
    ),
)


# ---------------------------------------------------------------- the programs
class EntryStop(Program):
    """seeds/000 ``entry_stop_gradients(target, mask)``, as written."""

    def tensorflow(tf, target, mask):
        mask_h = tf.abs(mask - 1)
        return tf.stop_gradient(mask_h * target) + mask * target

    def jax(jax, target, mask):
        mask_h = jax.numpy.abs(mask - 1)
        return jax.lax.stop_gradient(mask_h * target) + mask * target

    def torch(torch, target, mask):
        mask_h = torch.abs(mask - 1)
        return (mask_h * target).detach() + mask * target


class BoolMask(Program):
    """A boolean mask: cast to the dtype (``by="cast"``) or selected with ``where``."""

    def tensorflow(tf, target, mask, *, by):
        if by == "cast":
            m = tf.cast(mask, target.dtype)
            return tf.stop_gradient((1 - m) * target) + m * target
        return tf.where(mask, target, tf.stop_gradient(target))

    def jax(jax, target, mask, *, by):
        jnp = jax.numpy
        if by == "cast":
            m = mask.astype(target.dtype)
            return jax.lax.stop_gradient((1 - m) * target) + m * target
        return jnp.where(mask, target, jax.lax.stop_gradient(target))

    def torch(torch, target, mask, *, by):
        if by == "cast":
            m = mask.to(target.dtype)
            return ((1 - m) * target).detach() + m * target
        return torch.where(mask, target, target.detach())


class WholeStop(Program):
    """stop_gradient on the whole tensor."""

    def tensorflow(tf, target):
        return tf.stop_gradient(target)

    def jax(jax, target):
        return jax.lax.stop_gradient(target)

    def torch(torch, target):
        return target.detach()


def partial_kind(grad, mask, w) -> str:
    if grad is None:
        return "none"
    if np.array_equal(grad, mask * w):
        return "mask*upstream"
    if np.array_equal(grad, w):
        return "upstream"  # the stop did nothing
    return "other"


# ---------------------------------------------------------------- properties
@given(m=ss.masked_arrays(), data=st.data())
def test_float_mask_value_is_target_and_gradient_is_masked(subject, oracles, record, m, data):
    """Value equals target exactly; gradient of sum(w * y) equals mask * w."""
    w = data.draw(ss.like(m.x), label="cotangent")
    mask = m.mask.astype(m.x.dtype)
    record.example(target=m.x, mask=mask, w=w)
    out, (grad, mgrad) = subject.vjp(EntryStop.of(subject), m.x, mask, cotangent=w)
    record.close(name="value", out=out, ref=m.x, oracle="closed-form", tol=cmp.EXACT)
    record.close(name="grad", out=grad, ref=mask * w, oracle="closed-form", tol=cmp.EXACT)
    record.check(EXPECT, partial_grad=partial_kind(grad, mask, w))
    record.against(oracles, EntryStop, m.x, mask, cotangent=w, got={"value": out, "grad": grad}, tol=cmp.EXACT)


@given(m=ss.masked_arrays(), how=st.sampled_from(["cast", "where"]), data=st.data())
def test_bool_mask_value_is_target_and_gradient_is_masked(subject, oracles, record, m, how, data):
    """Boolean masks (cast to the dtype, or ``where``) freeze exactly the False entries."""
    w = data.draw(ss.like(m.x), label="cotangent")
    record.example(target=m.x, mask=m.mask, w=w, how=how)
    out, (grad, mgrad) = subject.vjp(BoolMask.of(subject), m.x, m.mask, cotangent=w, by=how)
    ref_grad = m.mask.astype(m.x.dtype) * w
    record.close(name=f"value[{how}]", out=out, ref=m.x, oracle="closed-form", tol=cmp.EXACT)
    record.close(name=f"grad[{how}]", out=grad, ref=ref_grad, oracle="closed-form", tol=cmp.EXACT)
    record.check(EXPECT, partial_grad=partial_kind(grad, m.mask.astype(m.x.dtype), w))
    assert mgrad is None, f"mask_grad[{subject.id}] should be None for a boolean mask, got {mgrad}"
    got = {f"value[{how}]": out, f"grad[{how}]": grad}
    record.against(oracles, BoolMask, m.x, m.mask, cotangent=w, by=how, got=got, tol=cmp.EXACT)


@given(x=ss.float_arrays())
def test_whole_tensor_stop_gradient_is_declared(subject, record, x):
    """stop_gradient on the whole tensor: None in TF, zeros in JAX, an error in PyTorch."""
    record.example(x=x)
    try:
        out, (grad,) = subject.vjp(WholeStop.of(subject), x)
    except Exception as e:  # PyTorch refuses; anything else is observed and then fails the check
        record.check(EXPECT, whole_stop_grad=cmp.error_name(e))
        return
    record.close(name="value", out=out, ref=x, oracle="closed-form", tol=cmp.EXACT)
    record.check(EXPECT, whole_stop_grad=cmp.gradient_kind(grad))


# ---------------------------------------------------------------- seed examples
@on("tensorflow", "jax", "torch")
@given(x=st.just(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)))
def test_seed_entry_stop_gradients(subject, record, x):
    """seeds/000: E = [[1,2,3],[4,5,6]], mask [[1,0,1],[0,1,0]]: value E, gradient = mask."""
    mask = np.array([[1, 0, 1], [0, 1, 0]], np.float32)
    record.example(target=x, mask=mask)
    out, (grad, _) = subject.vjp(EntryStop.of(subject), x, mask)
    record.equal(name="value", out=out, ref=x, oracle="closed-form")
    record.equal(name="grad", out=grad, ref=mask, oracle="closed-form")
    record.check(EXPECT, partial_grad=partial_kind(grad, mask, np.ones_like(x)))

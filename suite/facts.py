"""Facts several behaviours rely on, declared once: each builds the declaration a case module
puts in its ``expectations``, with one reason and one link.

>>> d = tf_gradients_in_eager("tf_gradients")
>>> d.framework, d.mode, d.observed.describe()
('tensorflow', 'eager', 'raises:RuntimeError /tf\\\\.gradients is not supported when eager execution is enabled/')
"""

from __future__ import annotations

from suite.expectations import Expectation, expect, raises

TF_GRADIENTS = "https://www.tensorflow.org/api_docs/python/tf/gradients"
#: What eager TensorFlow says to ``tf.gradients`` (gradients_util._GradientsHelper).
NO_EAGER_GRADIENTS = raises("RuntimeError", r"tf\.gradients is not supported when eager execution is enabled")


def tf_gradients_in_eager(key: str, *, why: str = "") -> Expectation:
    """``tf.gradients`` is only valid in a graph context (a v1 graph or a ``tf.function`` trace):
    eagerly it raises RuntimeError. ``why``: what the key's program used it for, if that adds
    anything."""
    reason = (
        "tf.gradients is only valid in a graph context (a v1 graph or a tf.function trace): eagerly it raises "
        "RuntimeError 'tf.gradients is not supported when eager execution is enabled. Use tf.GradientTape instead.'"
    )
    return expect(
        key,
        NO_EAGER_GRADIENTS,
        framework="tensorflow",
        mode="eager",
        reason=f"{reason}; {why}" if why else reason,
        link=TF_GRADIENTS,
    )

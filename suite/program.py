"""One program, spelled natively in each framework, its spellings next to each other.

A case writes a program once per framework as methods without ``self`` (the role
``GradTestSpec`` rows play in JAX's ``lax_autodiff_test.py``); a runner picks its own
spelling with :meth:`Program.of`. Each spelling takes the framework module first, then
the arrays, then keyword-only static arguments, exactly as ``Runner.run`` and
``Runner.vjp`` call builders::

    class RoundThrough(Program):
        def tensorflow(tf, x): return x + tf.stop_gradient(tf.round(x) - x)
        def jax(jax, x):       return x + jax.lax.stop_gradient(jax.numpy.round(x) - x)
        def torch(torch, x):   return x + (torch.round(x) - x).detach()

    out, (grad,) = subject.vjp(RoundThrough.of(subject), x, cotangent=w)

A framework the program has no spelling for is a :class:`NoSpelling` error naming the
program (a test that should not run there restricts itself with ``@on(...)``).

>>> class Double(Program):
...     def tensorflow(tf, x): return 2 * x
>>> Double.of("tensorflow")(None, 3)
6
>>> Double.of("tensorflow") is Double.of("tensorflow")   # one builder: compiled once per runner
True
"""

from __future__ import annotations

from suite.options import FRAMEWORKS  # defined once, with the run options


class NoSpelling(KeyError):
    """The program is not written for this framework."""


class Program:
    """Base class of a program's spellings (``tensorflow``, ``jax``, ``torch``: no ``self``)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in FRAMEWORKS:
            fn = cls.__dict__.get(name)
            if fn is not None and not isinstance(fn, staticmethod):
                setattr(cls, name, staticmethod(fn))

    @classmethod
    def of(cls, who):
        """The spelling for ``who``: a runner (anything with ``.framework``) or a framework name."""
        framework = getattr(who, "framework", who)
        fn = getattr(cls, framework, None) if framework in FRAMEWORKS else None
        if fn is None:
            raise NoSpelling(f"{cls.__name__} has no {framework} spelling")
        return fn

    @classmethod
    def frameworks(cls) -> tuple[str, ...]:
        return tuple(f for f in FRAMEWORKS if getattr(cls, f, None) is not None)

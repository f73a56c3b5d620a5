"""What one test saw: observations, expectations, errors against each oracle, examples.

The ``record`` fixture gives each test one :class:`Record`, shared by all its Hypothesis
examples (that is the point: the row summarises every example). A property test calls
``record.example(**inputs)`` first in each example; the last inputs become the row's
reproducer when the test fails.
"""

from __future__ import annotations

import numpy as np

from suite import compare as cmp


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return v


def _order(v) -> str:
    import json

    return json.dumps(v, sort_keys=True, default=str)


class Record:
    def __init__(self, subject):
        self.subject = subject
        self.observed: dict[str, list] = {}
        self.expected: dict[str, object] = {}
        self.declared: dict[str, dict] = {}
        self.max_rel_err: dict[str, float] = {}
        self.examples = 0
        self.last_inputs: dict | None = None
        self.notes: list[str] = []
        self.racy: dict[str, list] = {}
        #: what the current example observed: a failed row shows only this (Hypothesis runs
        #: the falsifying example last), so a value an earlier, passing draw saw cannot sit
        #: beside an error that contradicts it
        self.current: dict[str, object] = {}

    @property
    def who(self) -> str:
        return self.subject.id

    def example(self, **inputs) -> None:
        """Mark the start of one example and keep its inputs for the reproducer."""
        self.examples += 1
        self.last_inputs = inputs
        self.current = {}

    def observe(self, **observations) -> None:
        """Record observations (strings from the behaviour's vocabulary, or small numbers)."""
        for k, v in observations.items():
            seen = self.observed.setdefault(k, [])
            v = _jsonable(v)
            self.current[k] = v
            if v not in seen:
                seen.append(v)

    def observe_racy(self, **observations) -> None:
        """Record what a race decided (documented as undefined, so it may differ from run to
        run): kept in the row's notes, not in ``observed``, so a changelog between two
        reports does not list a coin flip as a semantic change."""
        for k, v in observations.items():
            seen = self.racy.setdefault(k, [])
            v = _jsonable(v)
            if v not in seen:
                seen.append(v)

    def check(self, expectations, **observations) -> None:
        """Record each observation and assert it equals the expectation for this subject."""
        __tracebackhide__ = True
        self.observe(**observations)
        for key, value in observations.items():
            want, decl = expectations.lookup(key, self.subject)
            self.expected[key] = _jsonable(want)
            if decl is not None:
                self.declared[key] = {"reason": decl.reason, "link": decl.link, "versions": decl.versions}
            if _jsonable(value) != _jsonable(want):
                how = f" (declared: {decl.reason}; {decl.link})" if decl else ""
                raise AssertionError(f"{key}[{self.who}]={_jsonable(value)!r} but expected {_jsonable(want)!r}{how}")

    def close(self, *, name: str, out, ref, oracle: str, tol=cmp.GRAD, dtype=None) -> float:
        """``compare.assert_close`` that also keeps the max error per oracle for the row.

        ``oracle`` is a runner id (``jax-jit-cpu``) or ``closed-form``; the error is
        filed under its framework (``jax``) or ``numpy`` for the closed form.
        """
        __tracebackhide__ = True
        key = "numpy" if oracle in ("closed-form", "numpy") else oracle.split("-")[0]
        try:
            err = cmp.assert_close(name=name, out=out, ref=ref, who=self.who, oracle=oracle, tol=tol, dtype=dtype)
        except AssertionError:
            self.max_rel_err[key] = (
                float("inf")
                if out is None or ref is None
                else max(self.max_rel_err.get(key, 0.0), cmp.rel_err(out, ref))
            )
            raise
        self.max_rel_err[key] = max(self.max_rel_err.get(key, 0.0), err)
        return err

    def against(
        self, oracles, program, *arrays, got: dict, via: str = "vjp", cotangent=None, tol=cmp.GRAD, **static
    ) -> list:
        """Run ``program`` on each oracle the way the subject ran it and compare, name by name.

        ``via="vjp"``: each oracle computes ``(value, grads)`` with its native reverse mode
        (``cotangent`` as for ``Runner.vjp``); its outputs, in order, are the value then each
        gradient. ``via="run"``: its outputs are what the program returns (a tuple is
        spread). ``got`` maps a name to the subject's result for the output in the same
        position; a name mapped to ``...`` is not compared. ``tol`` is one tolerance or a
        dict by name. Returns each oracle's raw result, for checks of their own.

        >>> record.against(oracles, RoundThrough, x, cotangent=w, got={"value": out, "grad": grad},
        ...                tol=cmp.EXACT)   # doctest: +SKIP
        """
        __tracebackhide__ = True
        results = []
        for o in oracles:
            fn = program.of(o) if hasattr(program, "of") else program[o.framework]
            if via == "vjp":
                raw = o.vjp(fn, *arrays, cotangent=cotangent, **static)
                refs = [raw[0], *raw[1]]
            elif via == "run":
                raw = o.run(fn, *arrays, **static)
                refs = list(raw) if isinstance(raw, (tuple, list)) and len(got) > 1 else [raw]
            else:
                raise ValueError(f"via={via!r}: 'vjp' or 'run'")
            for (name, out), ref in zip(got.items(), refs):
                if out is ...:
                    continue
                t = tol.get(name, cmp.GRAD) if isinstance(tol, dict) else tol
                self.close(name=name, out=out, ref=ref, oracle=o.id, tol=t)
            results.append(raw)
        return results

    def equal(self, *, name: str, out, ref, oracle: str) -> None:
        __tracebackhide__ = True
        key = "numpy" if oracle in ("closed-form", "numpy") else oracle.split("-")[0]
        cmp.assert_equal(name=name, out=out, ref=ref, who=self.who, oracle=oracle)
        self.max_rel_err.setdefault(key, 0.0)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def row_fields(self, *, failed: bool = False) -> dict:
        """The row's measured fields. ``failed``: the observations of the failing example only."""
        if failed and self.examples:
            observed = dict(self.current)
        else:
            # Several values over the examples: sorted, so the order examples ran in is not a change.
            observed = {k: (v[0] if len(v) == 1 else sorted(v, key=_order)) for k, v in self.observed.items()}
        expected = {k: v for k, v in self.expected.items() if not failed or k in observed}
        out = {
            "observed": observed,
            "expected": expected,
            "max_rel_err": dict(self.max_rel_err),
            "examples": self.examples,
        }
        if self.declared:
            out["declared"] = dict(self.declared)
        notes = list(self.notes) + [
            f"racy (recorded, not compared): {k} = {', '.join(map(str, sorted(v, key=_order)))}"
            for k, v in self.racy.items()
        ]
        if notes:
            out["notes"] = notes
        return out

    def inputs_source(self) -> str:
        """The last example's inputs as NumPy literals (for reproducers)."""
        if not self.last_inputs:
            return ""
        lines = []
        np.set_printoptions(threshold=10_000, floatmode="unique")
        try:
            for k, v in self.last_inputs.items():
                if isinstance(v, np.ndarray):
                    lines.append(f"{k} = np.array({np.array2string(v, separator=', ')}, dtype=np.{v.dtype})")
                else:
                    lines.append(f"{k} = {v!r}")
        finally:
            np.set_printoptions(threshold=1000, floatmode="maxprec")
        return "\n".join(lines)

"""What one test saw: observations, expectations, errors against each oracle, examples.

The ``record`` fixture gives each test one :class:`Record`, shared by all its Hypothesis
examples (that is the point: the row summarises every example). A property test calls
``record.example(**inputs)`` first in each example; the last inputs become the row's
reproducer when the test fails.
"""

from __future__ import annotations

import numpy as np

from suite import compare as cmp, finite_diff
from suite.expectations import Raises


def _jsonable(v):
    if isinstance(v, cmp.Raised):
        return str(v)  # the report keeps the class; the message was matched, not stored
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


def _oracle_key(oracle: str) -> str:
    """Where an error is filed in the row: ``numpy`` (closed form), ``finite-difference``, or
    the oracle runner's framework (``jax-jit-cpu`` -> ``jax``)."""
    if oracle in ("closed-form", "numpy") or oracle.startswith("closed-form "):
        return "numpy"  # "closed-form (jnp EMA, jax-jit-cpu)": a closed form, whoever runs it
    if oracle == "finite-difference":
        return oracle
    return oracle.split("-")[0]


class Record:
    def __init__(self, subject):
        self.subject = subject
        self.observed: dict[str, list] = {}
        self.expected: dict[str, object] = {}
        self.declared: dict[str, dict] = {}
        self.max_rel_err: dict[str, float] = {}
        #: per dtype and oracle, [observed, tolerance] in units of rounding of the comparison
        #: nearest its tolerance (the report's error-model table: how much headroom is left)
        self.errors: dict[str, dict[str, list]] = {}
        self.array_errors: dict[str, dict[str, list]] = {}
        self.examples = 0
        self.last_inputs: dict | None = None
        self.notes: list[str] = []
        self.racy: dict[str, list] = {}
        #: what the current example observed, each key's values (a failing example keeps its
        #: own in ``failures``: the row shows the reported one whole)
        self.current: dict[str, list] = {}
        #: how many comparisons (closed form, finite difference, oracle, declared expectation)
        #: passed; a test that passes having compared nothing fails (see the plugin)
        self.compared = 0
        self._messages: set = set()
        #: default ``scale=`` of every comparison of this row (``"inputs"``: :meth:`input_scale`)
        self.scale = None
        #: record everything, then assert: where the plugin runs a case, a mismatch (a check,
        #: a comparison) is kept in ``pending`` and the example goes on, so every key it
        #: observes is recorded; :meth:`end_example` then fails it with every mismatch.
        #: Elsewhere (a self-test's Record) a mismatch raises at once.
        self.defer = False
        self.pending: list[str] = []
        #: the examples that failed, in the order they ran: inputs, observations, message
        self.failures: list[dict] = []
        #: every observation up to and including the first failing example (each value
        #: list as it stood then): what a failed row reports, with its reported example's
        self._at_first_failure: dict[str, list] | None = None

    @property
    def who(self) -> str:
        return self.subject.id

    def example(self, **inputs) -> None:
        """Mark the start of one example and keep its inputs for the reproducer."""
        self.examples += 1
        self.last_inputs = inputs
        self.current = {}

    def input_scale(self) -> float:
        """The largest finite magnitude among the current example's float inputs (those given
        to :meth:`example`): pass it as ``scale=`` where a result cancels or saturates (a
        gradient of tanh near +-1, a Jacobian entry that sums terms of opposite sign), so its
        absolute floor is set by the magnitudes it was computed from, not by its own.

        The floor is then ``FLOOR_ULPS`` units of rounding at that scale: a tiny gradient that
        comes from a tiny cotangent is still held relatively when the inputs are small."""
        mags, todo = [0.0], list((self.last_inputs or {}).values())
        while todo:
            v = todo.pop()
            if isinstance(v, (list, tuple)):
                todo.extend(v)
                continue
            a = np.asarray(v)
            if cmp.is_inexact(a.dtype) and a.size:
                finite = np.abs(a[np.isfinite(a)])
                if finite.size:
                    mags.append(float(finite.max()))
        return max(mags)

    def observe(self, **observations) -> None:
        """Record observations (strings from the behaviour's vocabulary, or small numbers)."""
        for k, v in observations.items():
            seen = self.observed.setdefault(k, [])
            if isinstance(v, cmp.Raised) and (k, str(v)) not in self._messages:  # the class is the
                self._messages.add((k, str(v)))  # observation; its first message, a note
                self.note(f"{k}: {v}: {' '.join(v.message.split())[:240]}")
            v = _jsonable(v)
            now = self.current.setdefault(k, [])
            if v not in now:
                now.append(v)
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
            self.expected[key] = want.describe() if isinstance(want, Raises) else _jsonable(want)
            if decl is not None:
                entry = {"reason": decl.reason, "link": decl.link, "versions": decl.versions, "id": decl.id}
                self.declared[key] = {**entry, "held": self.declared.get(key, {}).get("held", False)}
            ok = want.matches(value) if isinstance(want, Raises) else _jsonable(value) == _jsonable(want)
            if not ok:
                how = f" (declared: {decl.reason}; {decl.link})" if decl else ""
                got = _jsonable(value)
                if isinstance(value, cmp.Raised):
                    got = f"{value}: {value.message[:300]}"
                shown = want.describe() if isinstance(want, Raises) else _jsonable(want)
                self._mismatch(f"{key}[{self.who}]={got!r} but expected {shown!r}{how}")
                continue
            if decl is not None:  # a match, not a look-up: the report counts these per declaration
                self.declared[key]["held"] = True
            self.compared += 1

    def close(
        self, *, name: str, out, ref, oracle: str, tol=cmp.GRAD, dtype=None, scale=None, derived_from=None
    ) -> float:
        """``compare.assert_close`` (shape, dtype, then values) that also keeps the max error
        per oracle for the row.

        ``oracle`` is a runner id (``jax-jit-cpu``), ``closed-form`` or ``finite-difference``;
        the error is filed under its framework (``jax``), ``numpy`` for the closed form, or
        ``finite-difference``. ``scale="inputs"`` (or ``record.scale = "inputs"`` for the
        whole row) sets the floor at the example's inputs' magnitude where results cancel
        or saturate (see :meth:`input_scale`).
        """
        __tracebackhide__ = True
        key = _oracle_key(oracle)
        if scale is None:
            scale = self.scale
        if isinstance(scale, str) and scale == "inputs":
            scale = max(self.input_scale(), float(np.max(np.abs(ref))) if ref is not None and np.size(ref) else 0.0)
        try:
            err = cmp.assert_close(
                name=name,
                out=out,
                ref=ref,
                who=self.who,
                oracle=oracle,
                tol=tol,
                dtype=dtype,
                scale=scale,
                derived_from=derived_from,
            )
        except cmp.Mismatch as e:  # values: the error as the check measured it (its dtype, floor and scale)
            mismatch, err = str(e), e.err
        except AssertionError as e:  # None, shape or dtype: no error at the tolerance's terms
            mismatch = str(e)
            try:
                err = cmp.rel_err(out, ref) if out is not None and ref is not None else float("inf")
            except (TypeError, ValueError):
                err = float("inf")
        else:
            mismatch = None
        self.max_rel_err[key] = max(self.max_rel_err.get(key, 0.0), err)
        self._headroom(key, out, ref, dtype, derived_from, tol, err)
        if mismatch is not None:
            self._mismatch(mismatch)
        else:
            self.compared += 1
        return err

    def _headroom(self, key, out, ref, dtype, derived_from, tol, err) -> None:
        """Keep, per dtype and oracle, the comparison whose error came nearest its tolerance, both
        in units of rounding of that dtype: the op table's error-model comparisons (``tol.model``)
        in ``errors``, every other one (an array-level floor) in ``array_errors``."""
        kind = derived_from or dtype or (np.asarray(ref).dtype if ref is not None else None)
        if kind is None or not cmp.is_inexact(kind):
            kind = np.asarray(out).dtype if out is not None else None
        if kind is None or not cmp.is_inexact(kind) or cmp.real_name(kind) not in cmp.EPS:
            return
        name = cmp.real_name(kind)
        t = tol.of(kind)
        if t <= 0:
            return
        eps = cmp.EPS[name]
        store = self.errors if getattr(tol, "model", False) else self.array_errors
        seen = store.setdefault(name, {}).get(key)
        if seen is None or err / t > seen[0] / seen[1]:
            store[name][key] = [err / eps, t / eps]

    def against(
        self,
        oracles,
        program,
        *arrays,
        got: dict,
        via: str = "vjp",
        cotangent=None,
        tangents=None,
        cotangent2=None,
        tol=cmp.GRAD,
        derived_from=None,
        scale=None,
        **static,
    ) -> list:
        """Run ``program`` on each oracle the way the subject ran it and compare, name by name.

        ``via="vjp"``: each oracle computes ``(value, grads)`` with its native reverse mode
        (``cotangent`` as for ``Runner.vjp``); its outputs, in order, are the value then each
        gradient. ``via="orders"``: the same, from ``Runner.orders`` (with ``tangents`` and
        ``cotangent2``: one program for every order where the oracle's mode traces). ``via="run"``:
        its outputs are what the program returns (a tuple is spread). ``got`` maps a name to the
        subject's result for the output in the same position; a name mapped to ``...`` is not
        compared. ``tol`` is one tolerance or a dict by name; ``derived_from``, as for
        :meth:`close`: the dtype whose tolerance and floor apply (a float64 result held at float32's
        precision); ``scale``, as for :meth:`close` (``"inputs"``: the floor at the inputs'
        magnitude where the exact answer cancels to 0; a dict by name, e.g. one array per element
        for each output: :func:`suite.ops.error.scales`). Returns each oracle's raw result, for
        checks of their own.

        >>> record.against(oracles, RoundThrough, x, cotangent=w, got={"value": out, "grad": grad},
        ...                tol=cmp.EXACT)   # doctest: +SKIP
        """
        __tracebackhide__ = True
        if via not in ("vjp", "orders", "run"):
            raise ValueError(f"via={via!r}: 'vjp', 'orders' or 'run'")
        results = []
        for o in oracles:
            fn = program.of(o) if hasattr(program, "of") else program[o.framework]
            try:
                if via == "vjp":
                    raw = o.vjp(fn, *arrays, cotangent=cotangent, **static)
                    refs = [raw[0], *raw[1]]
                elif via == "orders":
                    raw = o.orders(fn, *arrays, cotangent=cotangent, tangents=tangents, cotangent2=cotangent2,
                                   need="vjp", **static)  # fmt: skip
                    refs = [raw.value, *raw.grads]
                else:
                    raw = o.run(fn, *arrays, **static)
                    refs = list(raw) if isinstance(raw, (tuple, list)) and len(got) > 1 else [raw]
            except AssertionError:  # the harness's own checks (a silent CPU fallback) still fail the row
                raise
            except Exception as e:  # an oracle that cannot run the program gives no reference; its
                # own row (every oracle program also runs as a subject) records and checks the error
                self.note(f"oracle {o.id} raised {type(e).__name__}: {' '.join(str(e).split())[:200]}; not compared")
                continue
            for (name, out), ref in zip(got.items(), refs):
                if out is ...:
                    continue
                t = tol.get(name, cmp.GRAD) if isinstance(tol, dict) else tol
                at = scale.get(name) if isinstance(scale, dict) else scale
                self.close(name=name, out=out, ref=ref, oracle=o.id, tol=t, derived_from=derived_from, scale=at)
            results.append(raw)
        return results

    def finite_differences(
        self, runner, program, *arrays, got: dict, cotangent=None, side: str = "central", tol=None, **static
    ) -> list:
        """Hold the gradients in ``got`` (name -> the gradient of each float input, in order; a
        name mapped to ``...`` or a ``None`` gradient is not compared) to differences of
        ``runner``'s own forward pass of ``program``, run in float64: the fourth oracle, which
        uses nobody's autodiff. ``side="left"``/``"right"`` for one-sided limits at a kink.
        Returns the differences.

        >>> record.finite_differences(subject, Chain, x, a, cotangent=w, got={"dx": dx, "dA": da})  # doctest: +SKIP
        """
        __tracebackhide__ = True

        fn = program.of(runner) if hasattr(program, "of") else program
        as64 = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else a for a in arrays]
        u = None if cotangent is None else np.asarray(cotangent, np.float64)
        refs = [
            r
            for r in finite_diff.vjp(lambda *xs: runner.run(fn, *xs, **static), *as64, cotangent=u, side=side)
            if r is not None
        ]
        tol = tol or (cmp.FINITE_DIFF if side == "central" else cmp.ONE_SIDED)
        self.against_differences(got, refs, label=side, tol=tol)
        return refs

    def against_differences(self, got: dict, refs, *, label: str, tol=cmp.FINITE_DIFF) -> None:
        """Hold each result in ``got`` (name -> framework output; ``...``/``None`` skipped) to
        its float64 finite difference in ``refs``, at the output dtype's tolerance."""
        __tracebackhide__ = True
        for (name, out), ref in zip(got.items(), refs):
            if out is ... or out is None:
                continue
            out = np.asarray(out)
            self.close(
                name=f"{name}[finite difference, {label}]",
                out=out.astype(np.float64),
                ref=ref,
                oracle="finite-difference",
                tol=tol,
                derived_from=out.dtype,
            )

    def equal(self, *, name: str, out, ref, oracle: str, dtype=None) -> None:
        """``compare.assert_equal``: exact, and for arrays the same shape and dtype too."""
        __tracebackhide__ = True
        try:
            cmp.assert_equal(name=name, out=out, ref=ref, who=self.who, oracle=oracle, dtype=dtype)
        except AssertionError as e:
            self._mismatch(str(e))
            return
        self.max_rel_err.setdefault(_oracle_key(oracle), 0.0)
        self.compared += 1

    def _mismatch(self, message: str) -> None:
        """A check or comparison that failed: raise now, or (``defer``) keep it for
        :meth:`end_example` and let the example record the rest of what it observes."""
        __tracebackhide__ = True
        if not self.defer:
            raise AssertionError(message)
        self.pending.append(message)

    def end_example(self, error: BaseException | None = None) -> None:
        """The end of one example (the plugin calls it; ``error``: what the example raised).
        Fails it with every deferred mismatch, keeps what it observed and its inputs for the
        row, and lets any other error through (the caller re-raises it)."""
        __tracebackhide__ = True
        from hypothesis.errors import UnsatisfiedAssumption

        msgs, self.pending = self.pending, []
        if not msgs:
            if isinstance(error, Exception) and not isinstance(error, UnsatisfiedAssumption):
                self._failed(str(error) or type(error).__name__)
            return
        if error is not None and not isinstance(error, Exception):
            return  # Ctrl-C, a skip, Hypothesis' own control flow: not to be masked
        if isinstance(error, AssertionError):
            msgs.append(str(error))
        elif error is not None and not isinstance(error, UnsatisfiedAssumption):
            msgs.append(f"then the example raised {type(error).__name__}: {str(error)[:300]}")
        text = msgs[0] if len(msgs) == 1 else f"{len(msgs)} mismatches in one example:\n" + "\n".join(msgs)
        self._failed(text)
        raise AssertionError(text) from error

    def _failed(self, message: str) -> None:
        if self._at_first_failure is None:
            self._at_first_failure = {k: list(v) for k, v in self.observed.items()}
        self.failures.append(
            {"inputs": self.last_inputs, "observed": {k: list(v) for k, v in self.current.items()}, "message": message}
        )

    def reported_failure(self, error_text: str = "") -> dict | None:
        """The failing example whose error pytest reports: the last one whose message is in
        ``error_text`` (Hypothesis replays the shrunk example last; of several failing
        ``@example``s it reports one per place of failure, not necessarily the last run)."""
        hits = [f for f in self.failures if f["message"] and f["message"].splitlines()[0][:200] in error_text]
        return (hits or self.failures or [None])[-1]

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _seen(self, failed: bool, error_text: str) -> dict:
        """Every key's values: all the examples', or, for a failed row, those up to and including
        the first failing example and the reported failing example whole."""
        if failed and self.failures:
            seen = {k: list(v) for k, v in (self._at_first_failure or {}).items()}
            for k, vs in (self.reported_failure(error_text) or {}).get("observed", {}).items():
                seen.setdefault(k, []).extend(v for v in vs if v not in seen[k])
            return seen
        if failed and self.examples:
            return {k: list(v) for k, v in self.current.items()}
        return self.observed

    def row_fields(self, *, failed: bool = False, error_text: str = "") -> dict:
        """The row's measured fields. ``failed``: what every example observed up to and
        including the first that failed, and the reported failing example whole (not the
        examples Hypothesis ran while shrinking); ``error_text`` picks the reported one."""
        # Several values over the examples: sorted, so the order examples ran in is not a change.
        observed = {
            k: (v[0] if len(v) == 1 else sorted(v, key=_order)) for k, v in self._seen(failed, error_text).items()
        }
        expected = {k: v for k, v in self.expected.items() if not failed or k in observed}
        out = {
            "observed": observed,
            "expected": expected,
            "max_rel_err": dict(self.max_rel_err),
            "examples": self.examples,
        }
        if self.declared:
            out["declared"] = dict(self.declared)
        if self.errors:
            out["errors"] = {d: dict(v) for d, v in self.errors.items()}
        if self.array_errors:
            out["array_errors"] = {d: dict(v) for d, v in self.array_errors.items()}
        notes = list(self.notes) + [
            f"racy (recorded, not compared): {k} = {', '.join(map(str, sorted(v, key=_order)))}"
            for k, v in self.racy.items()
        ]
        if notes:
            out["notes"] = notes
        return out

    def inputs_source(self, inputs: dict | None = None) -> str:
        """An example's inputs as NumPy literals (for reproducers; default: the last example's)."""
        inputs = self.last_inputs if inputs is None else inputs
        if not inputs:
            return ""
        lines = []
        np.set_printoptions(threshold=10_000, floatmode="unique")
        try:
            for k, v in inputs.items():
                if isinstance(v, np.ndarray):
                    lines.append(f"{k} = np.array({np.array2string(v, separator=', ')}, dtype=np.{v.dtype})")
                else:
                    lines.append(f"{k} = {v!r}")
        finally:
            np.set_printoptions(threshold=1000, floatmode="maxprec")
        return "\n".join(lines)

"""The one vocabulary of gradient kinds: the words an observation uses to say what a gradient is.

Every behaviour that observes a gradient's kind rather than its value says it in these words,
each with one meaning (:func:`suite.compare.gradient_kind`, :func:`suite.compare.which`,
:func:`suite.ops.point_kind`, :func:`suite.ops.side_kind`, :func:`suite.ops.points.side` and the
case modules' own classifiers):

What the entries are (a value kind):

==============  ==============================================================================
``none``        no gradient at all (the framework returned None: unconnected)
``zero``        every entry is 0 (+0 or -0)
``nonzero``     some entry is not 0 (the coarse class of :func:`suite.compare.gradient_kind`)
``nan``         every entry is NaN; ``+inf``/``-inf`` likewise
``finite``      finite, non-zero entries that equal no named form
a name          a closed form or a value every entry equals (``upstream``, ``1``, ``log(y)``)
``other``       a gradient that equals none of the references a classifier names
``mixed:a,b``   entries of different kinds, the kinds sorted
==============  ==============================================================================

Which one-sided difference quotient a gradient equals (a side kind), at a kink or a point where
the derivative is undefined:

==============  ==============================================================================
``left``        the left quotient's limit; ``right`` the right one's
``both``        both sides agree and the gradient equals them
``mean``        the mean of two sides that differ
``neither``     a gradient (in a key of its own, ``side[...]``) that equals no side
==============  ==============================================================================

Where one key carries both (kink-subgradients' and cumulative-gradients' ``<op>@<x>`` entries),
a gradient that is no side is named by its value kind (``zero`` for TF's ``sign`` at 0).

Reports of schema version 1 spelled some of these otherwise (``zeros``, ``both-sides``,
``mean-of-sides``, and ``none`` for a side key's ``neither``), and keyed kink-subgradients' kinks
``<op>@<x>`` (``relu@0``) where the op table says ``grad[<op>@<x>]``: :func:`current` renames
one observed or declared value and :func:`current_key` one key; the report and bisect loaders
apply them, so an old baseline compares with a new run word for word.
"""

from __future__ import annotations

import re

#: Schema-1 words (anywhere in a value, as a whole word) and what they are now.
RENAMED = {"zeros": "zero", "both-sides": "both", "mean-of-sides": "mean"}
#: Schema-1 words of a side key (:func:`is_side_key`) and what they are now.
SIDE_RENAMED = {"none": "neither"}
#: Where schema 1 keyed a kink ``<op>@<x>``: the rows of this test, the declarations of its entries.
_KINK_TEST = "cases/test_kink_subgradients.py::test_op_special_points["
_KINK_ENTRY = re.compile(r"^cases\.test_kink_subgradients:[^:]+:\d+$")
_WORD = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, RENAMED)) + r")(?![\w])")


def is_side_key(key: str) -> bool:
    """Whether an observation key holds a side kind: ``side[...]``, ``side_dx[...]``, ``naive_side[...]``.

    >>> is_side_key("side_dy[pow@x=0,y=0]"), is_side_key("double_where_side[log]"), is_side_key("grad[relu@0]")
    (True, True, False)
    """
    base = key.split("[", 1)[0]
    return base == "side" or base.startswith("side_") or base.endswith("_side")


def current(key: str, value):
    """``value`` observed (or declared) under ``key`` in a schema-1 report, in today's words.
    Values that are not strings, and words that did not change, are returned as they are.

    >>> current("round_grad", "zeros"), current("grad[cumprod@default:0,0,3]", "mixed:both-sides,zero")
    ('zero', 'mixed:both,zero')
    >>> current("side_dx[xlogy@x=0,y=0]", "none"), current("unconnected[NONE]", "none")
    ('neither', 'none')
    >>> current("global_clip_value[inf]", "zeros-and-nan"), current("saturated_grad", "nonzero")
    ('zero-and-nan', 'nonzero')
    """
    if isinstance(value, list):
        return [current(key, v) for v in value]
    if not isinstance(value, str):
        return value
    side = is_side_key(key)
    if value.startswith("mixed:"):
        words = {_word(w, side) for w in value[len("mixed:") :].split(",")}
        return words.pop() if len(words) == 1 else "mixed:" + ",".join(sorted(words))
    return _word(value, side)


def _word(word: str, side: bool) -> str:
    if side and word in SIDE_RENAMED:
        return SIDE_RENAMED[word]
    return _WORD.sub(lambda m: RENAMED[m.group(1)], word)


def current_key(where: str, key: str) -> str:
    """Observation key ``key`` of a schema-1 report in today's form; ``where``: the row's test id,
    or the declaration's id (a declaration of an op-table entry is ``<module>:<entry>:<n>``).

    >>> current_key("cases/test_kink_subgradients.py::test_op_special_points[jax-jit-cpu-relu]", "relu@0")
    'grad[relu@0]'
    >>> current_key("cases.test_kink_subgradients:clip:0", "clip@-1")
    'grad[clip@-1]'
    >>> current_key("cases.test_kink_subgradients:3", "minimum"), current_key("cases/test_b.py::test_x[jax]", "relu@0")
    ('minimum', 'relu@0')
    """
    kink = where.startswith(_KINK_TEST) or _KINK_ENTRY.match(where)
    return f"grad[{key}]" if kink and "@" in key and "[" not in key else key

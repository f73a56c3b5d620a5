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
``mean-of-sides``, and ``none`` for a side key's ``neither``): :func:`current` renames one
observed or declared value, and the report and bisect loaders apply it, so an old baseline
compares with a new run word for word.
"""

from __future__ import annotations

import re

#: Schema-1 words (anywhere in a value, as a whole word) and what they are now.
RENAMED = {"zeros": "zero", "both-sides": "both", "mean-of-sides": "mean"}
#: Schema-1 words of a side key (:func:`is_side_key`) and what they are now.
SIDE_RENAMED = {"none": "neither"}
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

"""Data-pipeline randomness: per-element random maps, disjoint splits, exactly-once shuffles, seeds.

Source: seeds/001 ("TensorFlow Queue": 1. always control that the queue is completely
filled; 2. validation data is never used as training data and vice versa; 3. during a
multithreaded dequeue every random transformation has to be RANDOM). The tf.data
spelling: a parallel ``map`` (``num_parallel_calls=AUTOTUNE``) gives each element its own
random transformation; training and validation pipelines share no element; a shuffled
dataset yields every element exactly once per epoch; with fixed seeds two runs agree.
PyTorch's ``DataLoader``/``RandomSampler``/``random_split`` (``num_workers=0``) is the
oracle row; JAX has no data pipeline (no loader, sampler or shuffle buffer to test), so
every test is ``@on("tensorflow", "torch")``.

Observations: each random transformation in a parallel map is ``per-element`` or
``shared``; a train/validation split is ``disjoint`` or ``overlap``; a shuffled epoch is
``exactly-once`` and ``within-buffer``, epochs ``reshuffled`` or ``same-order``; orders and draws
are ``reproducible`` or not across two runs, by which seeds are set (the pairing of a stateful
op's draws with elements races under parallel calls, "the values of output elements may not be
deterministic regardless of the deterministic flag value": recorded, not asserted). The seed's
own queue, a v1 ``RandomShuffleQueue`` (10 enqueued, ``min_after_dequeue=4``), dequeues each
element once when closed; left open it stops after 6 dequeues, the 7th waiting for the queue to
be filled again, which is why rule 1 says to keep it filled.

Declared surprises: XLA cannot compile tf.data (``raises:InvalidArgumentError``); a bare
``np.random.uniform()`` in a TF map function runs once, when tf.data traces it, and is shared by
every element; after the default reshuffling ``shuffle``, ``take``/``skip`` are two iterations
and overlap in eager and tf.function (the shuffle docs warn of this leakage); in a v1 Session
each iterator initialisation re-creates the dataset, so an unseeded shuffle draws a new seed per
iterator and the split overlaps even with ``reshuffle_each_iteration=False``.

Modes: eager iterates with a Python ``for``; ``function`` calls ``Dataset.reduce`` inside
the harness's ``tf.function`` (one trace per static configuration, sizes and seeds are
tensors); ``graph`` builds a ``tf.compat.v1`` Graph per configuration with
``make_initializable_iterator`` fed through placeholders, and a "run" initialises each
iterator in its own ``Session.run`` and calls ``get_next`` until ``OutOfRangeError``. The
one-shot iterators of the seed's era cannot capture placeholders (``ValueError``) and a graph
per example cost ~1 s, so they appear in a seed example only.
"""

import itertools

import numpy as np
from hypothesis import example, given, settings, strategies as st

from suite import compare as cmp
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks import resources
from suite.program import Program

MAP_DOC = "https://www.tensorflow.org/api_docs/python/tf/data/Dataset#map"
SHUFFLE_DOC = "https://www.tensorflow.org/api_docs/python/tf/data/Dataset#shuffle"
SHUFFLE_OP = "https://www.tensorflow.org/api_docs/python/tf/raw_ops/ShuffleDataset"
DETERMINISM = "https://www.tensorflow.org/api_docs/python/tf/config/experimental/enable_op_determinism"
XLA_DOC = "https://www.tensorflow.org/xla#explicit_compilation_with_tffunctionjit_compiletrue"
BEHAVIOUR = behaviour(
    "data-pipeline-randomness",
    sources=["001"],
    links=[
        MAP_DOC,
        SHUFFLE_DOC,
        SHUFFLE_OP,
        DETERMINISM,
        "https://www.tensorflow.org/api_docs/python/tf/random/set_seed",
        "https://www.tensorflow.org/api_docs/python/tf/compat/v1/data/make_one_shot_iterator",
        "https://github.com/tensorflow/tensorflow/issues/13932",
        "https://pytorch.org/docs/stable/data.html#torch.utils.data.random_split",
        "https://pytorch.org/docs/stable/notes/randomness.html",
    ],
    floor=Floor(
        "element",
        "The one float comparison, the queue seed's dequeued + draw, is elementwise (element i is the i-th "
        "dequeued integer plus its own uniform draw, two non-negative terms): held relatively per element "
        "(scale=0.0); everything else compares orders, counts and kinds exactly.",
    ),
)

TRANSFORM_FIELDS = {
    "tensorflow": ("uniform", "flip", "stateless-enumerate", "stateless-random", "py_function-numpy", "numpy"),
    "torch": ("uniform", "flip", "numpy"),
}
SPLITS = (
    "split-then-shuffle",
    "shuffle-once-then-split, seed",
    "shuffle-once-then-split, no seed",
    "reshuffle-then-split, seed",
    "reshuffle-then-split, no seed",
)
EPOCHS = ("seed, reshuffle", "seed, same order", "no seed, reshuffle", "no seed, same order")
SEEDINGS = ("op seed + global seed", "op seed only", "global seed only", "no seeds")
TRIALS = 2  # train/val pairs per shuffle-first split (see ``splits`` for the odds)

XLA_REASON = (
    "jit_compile has 'must-compile semantics: either the entire function is compiled with XLA, or an "
    "errors.InvalidArgumentError exception is thrown', and the dataset ops (RangeDataset, ShuffleDataset, "
    "ReduceDataset...) are host-side kernels with no XLA_CPU_JIT registration"
)
XLA_REFUSAL = raises(
    "InvalidArgumentError",
    r"Detected unsupported operations when trying to compile graph[^\n]*No registered '\w*Dataset\w*' OpKernel",
)
READ_TWICE = (
    "with reshuffle_each_iteration=True (the default) each iteration reshuffles, and ds.take(k) and "
    "ds.skip(k) are two iterations: the shuffle docs warn that take/skip after it 'would lead to data "
    "leakage'"
)
V1_ITERATOR = (
    "in a v1 Session each iterator initialisation (or one-shot iterator) re-creates the dataset: an "
    "unseeded shuffle (seed=seed2=0) then 'uses a random seed' per iterator, so the take and skip "
    "iterators see two orders even with reshuffle_each_iteration=False (a seeded one restarts from its "
    "seed and both see one order)"
)
EXPECT = expectations(
    {
        "pipeline": "runs",
        **{f"transform[{k}]": "per-element" for k in TRANSFORM_FIELDS["tensorflow"]},
        "indices": "each-once",
        **{f"split[{k}]": "disjoint" for k in SPLITS},
        **{f"exactly_once[{k}]": "exactly-once" for k in EPOCHS},
        "buffer": "within-buffer",
        "epoch_order[reshuffle]": "reshuffled",
        "epoch_order[same order]": "same-order",
        **{f"order[{k}]": "reproducible" for k in SEEDINGS[:-1]},
        "order[no seeds]": "not-reproducible",
        "seed_effect": "applied",
        "draws[op seed]": "reproducible",
        "draws[global seed only]": "reproducible",
        "draws[no seeds]": "not-reproducible",
        "values[stateless, deterministic=True]": "reproducible",
        "values[stateless, deterministic=False]": "reproducible",
        "queue": "exactly-once",
        "unclosed_queue": "6 dequeued, then raises:DeadlineExceededError",
    },
    expect("pipeline", XLA_REFUSAL, framework="tensorflow", mode="xla", reason=XLA_REASON, link=XLA_DOC),
    expect(
        "transform[numpy]",
        "shared",
        framework="tensorflow",
        link=MAP_DOC,
        reason="'irrespective of the context in which map_func is defined (eager vs. graph), tf.data traces the "
        "function and executes it as a graph': np.random.uniform() runs once, at trace time, and its "
        "value is a constant for every element (tf.py_function runs Python per element)",
    ),
    *[
        expect(
            f"split[reshuffle-then-split, {s}]",
            "overlap",
            framework="tensorflow",
            mode="eager|function",
            reason=READ_TWICE,
            link=SHUFFLE_DOC,
        )
        for s in ("seed", "no seed")
    ],
    *[
        expect(
            f"split[{v}, no seed]", "overlap", framework="tensorflow", mode="graph", reason=V1_ITERATOR, link=SHUFFLE_OP
        )
        for v in ("shuffle-once-then-split", "reshuffle-then-split")
    ],
)


# ---------------------------------------------------------------- strategies
def int64s(lo, hi):
    return st.integers(lo, hi).map(np.int64)


@st.composite
def splits(draw):
    """n in [16, 32], k in the middle third: a split whose two pipelines shuffle independently
    looks disjoint (train's k elements are the other order's first k) TRIALS times with
    p <= C(16, 5) ** -TRIALS = 5e-8."""
    n = draw(st.integers(16, 32), label="n")
    k = draw(st.integers(n // 3, n - n // 3), label="k")
    return np.int64(n), np.int64(k)


@st.composite
def buffered(draw, *, min_n=1):
    n = draw(st.integers(min_n, 32), label="n")
    return np.int64(n), np.int64(draw(st.integers(1, n + 8), label="buffer_size"))


SEEDS = int64s(0, 2**30)
# Every example builds and iterates tf.data pipelines (30-400 ms): shrinking a failure would
# re-run it hundreds of times (minutes per row), so a failure is reported as drawn. Examples
# that iterate many pipelines (18 iterators a split, 4 runs a reproducibility check) take a
# fraction of the profile's examples, to keep the module's ci run short.
_NO_SHRINK = [p for p in settings.default.phases if p.name not in ("shrink", "explain")]
PIPELINES = settings(phases=_NO_SHRINK)
HALF = settings(max_examples=max(5, settings.default.max_examples // 2), phases=_NO_SHRINK)
THIRD = settings(max_examples=max(5, settings.default.max_examples // 3), phases=_NO_SHRINK)


# ---------------------------------------------------------------- the programs (pipelines)
# Each builder returns {name: pipeline}; a TF pipeline's elements are (nested) tuples of
# tensors, a PyTorch one is any iterable of tuples. One iterator per pipeline and run: an
# iterator costs ~20 ms to start with autotune on, so related pipelines are zipped.
def _par(tf, deterministic):
    return {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": deterministic}


def _image(tf, i):
    """A 1x2x1 image [2i, 2i+1]: a left-right flip swaps the two pixels."""
    return tf.reshape(tf.cast(tf.stack([2 * i, 2 * i + 1]), tf.float32), [1, 2, 1])


def _py_uniform():
    return np.float32(np.random.uniform())


def _zipped(*loaders):
    """Loaders in lockstep (as Dataset.zip), each step flattened into one tuple."""
    for parts in zip(*loaders):
        yield sum((tuple(p) for p in parts), ())


SEEDED_FIELDS = (
    "order[op seed]",
    "order[other op seed]",
    "order[no op seed]",
    "index",
    "draws[op seed]",
    "draws[no op seed]",
    "values[stateless]",
)


class Transforms(Program):
    """Every kind of random transformation, one draw per element."""

    def tensorflow(tf, n, s, *, deterministic, op_seed):
        """One parallel map over range(n) applying every kind of random transformation."""

        def augment(j_i, pair):
            j, i = j_i
            return (
                i,
                tf.random.uniform([], seed=op_seed),
                tf.image.random_flip_left_right(_image(tf, i), seed=op_seed),
                tf.random.stateless_uniform([], seed=tf.stack([s, j])),  # per-element seed: s and the position
                tf.random.stateless_uniform([], seed=pair),  # per-element seed: Dataset.random
                tf.ensure_shape(tf.py_function(_py_uniform, [], tf.float32), []),
                tf.constant(np.random.uniform(), tf.float32),
            )  # Python: runs when map traces augment

        pairs = tf.data.Dataset.random(seed=s).batch(2)
        ds = tf.data.Dataset.zip((tf.data.Dataset.range(n).enumerate(), pairs))
        return {"augmented": ds.map(augment, **_par(tf, deterministic))}

    def torch(torch, n):
        """The same kinds in a map-style Dataset: __getitem__ runs per element (num_workers=0)."""

        class Augmented(torch.utils.data.Dataset):
            def __len__(self):
                return int(n)

            def __getitem__(self, i):
                img = torch.tensor([2.0 * i, 2.0 * i + 1])
                return (
                    i,
                    torch.rand(()),
                    torch.flip(img, [0]) if torch.rand(()) < 0.5 else img,
                    np.float32(np.random.uniform()),
                )

        return {"augmented": torch.utils.data.DataLoader(Augmented(), batch_size=None, shuffle=True)}


class Splits(Program):
    """Train/validation pipelines, by how the split and the shuffle are spelled."""

    def tensorflow(tf, n, k, s):
        """Train/validation pipelines take(k)/skip(k): TRIALS pairs for the shuffle-first spellings.

        Autotune is off here: its start-up (~20 ms an iterator) would dominate 2 + 8 * TRIALS
        iterators per example, and there is nothing parallel in these pipelines to tune."""
        options = tf.data.Options()
        options.autotune.enabled = False
        idx = tf.data.Dataset.range(n).with_options(options)
        out = {"split-then-shuffle": [(idx.take(k).shuffle(n, seed=s), idx.skip(k).shuffle(n, seed=s))]}
        for seed, tag in ((s, "seed"), (None, "no seed")):
            once = idx.shuffle(n, seed=seed, reshuffle_each_iteration=False)
            every = idx.shuffle(n, seed=seed)
            out[f"shuffle-once-then-split, {tag}"] = [(once.take(k), once.skip(k)) for _ in range(TRIALS)]
            out[f"reshuffle-then-split, {tag}"] = [(every.take(k), every.skip(k)) for _ in range(TRIALS)]
        return {
            f"{name}/{t}/{part}": ds
            for name, pairs in out.items()
            for t, pair in enumerate(pairs)
            for part, ds in zip(("train", "val"), pair)
        }

    def torch(torch, n, k, s):
        """random_split: one permutation, split once (a seeded generator, and the global one)."""
        data = torch.utils.data.TensorDataset(torch.arange(int(n)))
        out = {}
        for tag, gen in (("seed", torch.Generator().manual_seed(int(s))), ("no seed", None)):
            kw = {"generator": gen} if gen is not None else {}
            for part, subset in zip(("train", "val"), torch.utils.data.random_split(data, [int(k), int(n - k)], **kw)):
                out[f"shuffle-once-then-split, {tag}/0/{part}"] = torch.utils.data.DataLoader(
                    subset, batch_size=None, shuffle=True
                )
        return out


class Epochs(Program):
    """Two epochs of a shuffled range(n)."""

    def tensorflow(tf, n, b, s, *, seeded, reshuffle, deterministic):
        """Two epochs (repeat after shuffle) of range(n) through a parallel map."""
        ds = tf.data.Dataset.range(n).shuffle(b, seed=s if seeded else None, reshuffle_each_iteration=reshuffle)
        return {"epochs": ds.map(lambda i: i, **_par(tf, deterministic)).repeat(2)}

    def torch(torch, n, b, s, *, seeded):
        """A DataLoader(shuffle=True) read twice: RandomSampler permutes per epoch (no buffer)."""
        kw = {"generator": torch.Generator().manual_seed(int(s))} if seeded else {}
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.arange(int(n))), batch_size=None, shuffle=True, **kw
        )
        return {"epochs": itertools.chain(loader, loader)}


class Seeded(Program):
    """One run of seeded and unseeded shuffles and random draws."""

    def tensorflow(tf, n, b, s, *, global_seed, op_seed, deterministic):
        """One run, as a script would write it: the global seed (None: unset), shuffles with and
        without op seeds, and a parallel map of random draws over a seeded shuffle (zipped)."""
        if global_seed is not None:
            tf.random.set_seed(global_seed)
        idx = tf.data.Dataset.range(n)
        drawn = (
            idx.shuffle(b, seed=s)
            .enumerate()
            .map(
                lambda j, i: (
                    i,
                    tf.random.uniform([], seed=op_seed),
                    tf.random.uniform([]),
                    tf.random.stateless_uniform([], seed=tf.stack([s, j])),
                ),
                **_par(tf, deterministic),
            )
        )
        return {"run": tf.data.Dataset.zip((idx.shuffle(b, seed=s), idx.shuffle(b, seed=s + 1), idx.shuffle(b), drawn))}

    def torch(torch, n, b, s, *, global_seed):
        """torch.manual_seed is the global seed, a generator= the op seed."""
        if global_seed is not None:
            torch.manual_seed(global_seed)
        data = torch.utils.data.TensorDataset(torch.arange(int(n)))
        op = torch.Generator().manual_seed(int(s) + 2)

        class Drawn(torch.utils.data.Dataset):
            def __len__(self):
                return int(n)

            def __getitem__(self, i):
                return i, torch.rand((), generator=op), torch.rand(())

        def loader(ds, seed=None):
            kw = {"generator": torch.Generator().manual_seed(seed)} if seed is not None else {}
            return torch.utils.data.DataLoader(ds, batch_size=None, shuffle=True, **kw)

        return {"run": _zipped(loader(data, int(s)), loader(data, int(s) + 1), loader(data), loader(Drawn(), int(s)))}


# ---------------------------------------------------------------- running a pipeline
class Collect(Program):
    """Iterate every pipeline ``pipelines`` builds: {name: its elements' components, stacked}.
    TensorFlow iterates with a Python ``for`` eagerly, with ``Dataset.reduce`` in a tf.function."""

    def tensorflow(tf, *tensors, pipelines, **static):
        out = {}
        for name, ds in pipelines(tf, *tensors, **static).items():
            specs = tf.nest.flatten(ds.element_spec)
            if tf.executing_eagerly():
                out[name] = _stack([[c.numpy() for c in tf.nest.flatten(x)] for x in ds], specs)
            else:
                init = tuple(tf.zeros([0] + spec.shape.as_list(), spec.dtype) for spec in specs)
                out[name] = ds.reduce(
                    init, lambda acc, x: tuple(tf.concat([a, c[None]], 0) for a, c in zip(acc, tf.nest.flatten(x)))
                )
        return out

    def torch(torch, *arrays, pipelines, **static):
        out = {}
        for name, loader in pipelines(torch, *arrays, **static).items():
            elements = [[np.asarray(c) for c in x] for x in loader]
            out[name] = tuple(np.array(c) for c in zip(*elements))
        return out


def _stack(elements, specs):
    return tuple(
        np.array([e[c] for e in elements], dtype=spec.dtype.as_numpy_dtype).reshape(
            (len(elements),) + tuple(spec.shape)
        )
        for c, spec in enumerate(specs)
    )


#: v1 pipelines run without tf.data's autotuning model thread (the pipelines' AUTOTUNE still
#: parallelises their maps; autotuning only picks the degree). With it, a thorough run on TF 2.21
#: (2026-11-30) hung for good in each of three tries, in a reused Session's
#: MakeIterator: re-initialising an iterator destroys the previous one, whose destructor waited on
#: a thread that never ended (RootDataset::Iterator::~Iterator, beside its Model::OptimizeLoop
#: threads). Without it the same row passed at thorough three times in three (about 10 s each).
#: The 60 s RunOptions timeout below did not end that hang (the Session still waited at 100 s:
#: DirectSession cancels a step past its timeout, then waits for the executor to finish). It
#: bounds the runs whose ops honour cancellation (a get_next waiting on its input). Not declared:
#: it needs the suite's state to appear (3,000 re-initialisations of the same pipeline alone did
#: not hang), so no row could assert it. Related reports, not the same stack:
#: https://github.com/tensorflow/tensorflow/issues/21277 (a Session's destructor hangs on a
#: dataset's thread), https://github.com/tensorflow/tensorflow/issues/23334 (re-initialising an
#: iterator in the same Session).
V1_RUN_TIMEOUT_MS = 60_000


def _no_autotune(tf):
    opts = tf.data.Options()
    opts.autotune.enabled = False
    return opts


def _bounded(tf):
    return tf.compat.v1.RunOptions(timeout_in_ms=V1_RUN_TIMEOUT_MS)


def _drain(tf, session, get_next) -> list:
    """``session.run(get_next)`` until OutOfRangeError: each element's components, flattened."""
    elements = []
    try:
        while True:
            elements.append(tf.nest.flatten(session.run(get_next, options=_bounded(tf))))
    except tf.errors.OutOfRangeError:
        return elements


_V1_PIPELINES = resources.PerTest()  # Sessions with live iterators: closed when the test ends


def tensorflow_v1_collect(subject, arrays, *, pipelines, **static):
    """The seed's style: a Graph, initializable iterators fed through placeholders, get_next
    in a Session until OutOfRangeError. One graph per pipeline and static configuration."""
    tf = subject.module
    key = (subject.id, pipelines, tuple(sorted(static.items())), tuple(np.asarray(a).dtype.str for a in arrays))
    if key not in _V1_PIPELINES:
        with tf.Graph().as_default() as g, tf.device(subject.device_name):
            phs = [tf.compat.v1.placeholder(tf.as_dtype(np.asarray(a).dtype), []) for a in arrays]
            datasets = {name: ds.with_options(_no_autotune(tf)) for name, ds in pipelines(tf, *phs, **static).items()}
            iterators = {name: tf.compat.v1.data.make_initializable_iterator(ds) for name, ds in datasets.items()}
            fetches = {
                name: (it.initializer, it.get_next(), tf.nest.flatten(datasets[name].element_spec))
                for name, it in iterators.items()
            }
        g.finalize()
        # Soft placement: under a GPU scope the dataset kernels (CPU only) go to the host, as in eager.
        config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
        _V1_PIPELINES[key] = (resources.track(tf.compat.v1.Session(graph=g, config=config)), phs, fetches)
    session, phs, fetches = _V1_PIPELINES[key]
    out = {}
    for name, (initializer, get_next, specs) in fetches.items():
        # as a v1 epoch loop starts each iterator
        session.run(initializer, feed_dict=dict(zip(phs, arrays)), options=_bounded(tf))
        out[name] = _stack(_drain(tf, session, get_next), specs)
    return out


class PipelineError(Exception):
    """The subject could not run the pipeline; ``observation`` is ``raises:<Error>``."""

    def __init__(self, observation):
        super().__init__(observation)
        self.observation = observation


# A pipeline that failed to build or compile fails the same way for every drawn value (the
# inputs are tensors of fixed dtype and rank, one program per static configuration): XLA's
# compile error is measured once per configuration, not 25 times at ~0.3 s each.
_FAILED = {}


def run(subject, pipelines, *arrays, **static):
    """Build and iterate the program ``pipelines`` in the subject's mode: {name: components}.

    A global seed lasts for one run: eager TF runs end with tf.random.set_seed(None), PyTorch
    runs that seeded the global generator restore its state (unseeded runs advance it)."""
    if subject.framework == "torch":
        torch = subject.module
        state = torch.get_rng_state() if static.get("global_seed") is not None else None
        try:
            return subject.run(Collect.of(subject), *arrays, pipelines=pipelines.of(subject), **static)
        finally:
            if state is not None:
                torch.set_rng_state(state)
    tf, builder = subject.module, pipelines.of(subject)
    key = (subject.id, builder, tuple(sorted(static.items())))
    if key in _FAILED:
        raise PipelineError(_FAILED[key])
    if subject.mode != "graph":  # no global seed left by an earlier test (a tf.function inherits it when traced)
        tf.random.set_seed(None)
    try:
        if subject.mode == "graph":
            return tensorflow_v1_collect(subject, arrays, pipelines=builder, **static)
        return subject.run(Collect.of(subject), *arrays, pipelines=builder, **static)
    except (tf.errors.OpError, ValueError, TypeError, NotImplementedError) as e:
        _FAILED[key] = cmp.error_name(e)
        raise PipelineError(_FAILED[key]) from e
    finally:
        if subject.mode == "eager":
            tf.random.set_seed(None)


def runs(subject, record, pipelines, *arrays, **static):
    """``run`` that checks the ``pipeline`` observation; None when the subject cannot run it."""
    try:
        out = run(subject, pipelines, *arrays, **static)
    except PipelineError as e:
        record.check(EXPECT, pipeline=e.observation)
        return None
    record.check(EXPECT, pipeline="runs")
    return out


# ---------------------------------------------------------------- classifiers
def spread(values) -> str:
    """``per-element`` (all distinct), ``shared`` (all equal) or ``partly-shared``."""
    flat = [np.asarray(v).tobytes() for v in values]
    distinct = len(set(flat))
    return "per-element" if distinct == len(flat) else "shared" if distinct == 1 else "partly-shared"


def flipped(indices, images) -> np.ndarray:
    """Which images were flipped: [2i, 2i+1] became [2i+1, 2i]."""
    return np.asarray(images).reshape(len(indices), 2)[:, 0] == 2 * np.asarray(indices) + 1


def epoch_kind(stream, n, epochs) -> str:
    """``exactly-once`` when the stream is ``epochs`` permutations of range(n)."""
    stream = np.asarray(stream)
    if len(stream) > n * epochs:
        return "duplicated"
    if len(stream) < n * epochs:
        return "dropped"
    if all(np.array_equal(np.sort(c), np.arange(n)) for c in stream.reshape(epochs, n)):
        return "exactly-once"
    return "duplicated"


def within_buffer(order, b) -> bool:
    """``shuffle`` 'fills a buffer with buffer_size elements, then randomly samples elements
    from this buffer, replacing the selected elements with new elements': element i enters
    after i - b + 1 elements have left, so it cannot leave at an earlier position."""
    pos = np.empty(len(order), int)
    pos[np.asarray(order)] = np.arange(len(order))
    return bool(np.all(pos >= np.arange(len(order)) - b + 1))


def split_kind(pairs, n, k) -> str:
    """Over every (train, val) pair: ``overlap`` if one shares an element, ``disjoint`` when
    each is an exact partition of range(n) into k and n - k, else ``not-a-partition``."""
    kinds = set()
    for train, val in pairs:
        if set(train.tolist()) & set(val.tolist()):
            kinds.add("overlap")
        elif len(train) == k and np.array_equal(np.sort(np.concatenate([train, val])), np.arange(n)):
            kinds.add("disjoint")
        else:
            kinds.add("not-a-partition")
    return "overlap" if "overlap" in kinds else "not-a-partition" if "not-a-partition" in kinds else "disjoint"


def reproducible(a, b) -> str:
    same = len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    return "reproducible" if same else "not-reproducible"


def by_index(index, *values):
    """Values sorted by element index: the pairing, whatever the output order."""
    o = np.argsort(index, kind="stable")
    return (index[o],) + tuple(v[o] for v in values)


# ---------------------------------------------------------------- properties
@on("tensorflow", "torch")
@PIPELINES
@given(n=int64s(20, 32), s=SEEDS, deterministic=st.booleans(), op_seed=st.sampled_from([7, 2024]))
def test_parallel_map_random_is_per_element(subject, record, n, s, deterministic, op_seed):
    """Each element of a parallel map gets its own draw (uniform, flip, stateless per element,
    py_function); a bare np.random call in the map function is traced once and shared (declared)."""
    record.example(n=n, s=s, deterministic=deterministic, op_seed=op_seed)
    is_tf = subject.framework == "tensorflow"
    out = runs(
        subject,
        record,
        Transforms,
        *((n, s) if is_tf else (n,)),
        **({"deterministic": deterministic, "op_seed": op_seed} if is_tf else {}),
    )
    if out is None:
        return
    index, *values = out["augmented"]
    record.check(EXPECT, indices="each-once" if np.array_equal(np.sort(index), np.arange(n)) else "other")
    for kind, v in zip(TRANSFORM_FIELDS[subject.framework], values):
        if kind == "flip":  # one Bernoulli per element: per-element when both outcomes occur (p = 2^-19 not)
            f = flipped(index, v)
            record.check(EXPECT, **{f"transform[{kind}]": "per-element" if 0 < f.sum() < n else "shared"})
        else:
            record.check(EXPECT, **{f"transform[{kind}]": spread(v)})


@on("tensorflow", "torch")
@HALF
@given(nk=splits(), s=SEEDS)
def test_train_and_validation_never_share(subject, record, nk, s):
    """take(k)/skip(k) are disjoint partitions when the split is made once (before a shuffle,
    or after a fixed-order one); a reshuffling shuffle before the split leaks (declared)."""
    n, k = nk
    record.example(n=n, k=k, s=s)
    out = runs(subject, record, Splits, n, k, s)
    if out is None:
        return
    for name in SPLITS:
        pairs = [
            (out[f"{name}/{t}/train"][0], out[f"{name}/{t}/val"][0])
            for t in range(TRIALS)
            if f"{name}/{t}/train" in out
        ]
        if pairs:
            record.check(EXPECT, **{f"split[{name}]": split_kind(pairs, n, k)})


@on("tensorflow", "torch")
@PIPELINES
# the regime where the epochs' order is observed (reshuffle, n >= 10, buffer >= n), whatever the draws
@example(nb=(np.int64(16), np.int64(16)), s=np.int64(7), seeded=True, reshuffle=True, deterministic=True)
# the same regime unseeded: exactly_once[no seed, reshuffle], whatever the draws
@example(nb=(np.int64(16), np.int64(16)), s=np.int64(7), seeded=False, reshuffle=True, deterministic=True)
@given(nb=buffered(), s=SEEDS, seeded=st.booleans(), reshuffle=st.booleans(), deterministic=st.booleans())
def test_shuffle_yields_every_element_exactly_once(subject, record, nb, s, seeded, reshuffle, deterministic):
    """Two epochs of shuffle(buffer_size) through a parallel map: each epoch is a permutation of
    range(n) drawn within the buffer window; reshuffle_each_iteration sets the epochs' order."""
    n, b = nb
    if subject.framework == "torch":
        reshuffle = True  # a RandomSampler draws a new permutation every epoch
    record.example(n=n, buffer_size=b, s=s, seeded=seeded, reshuffle=reshuffle, deterministic=deterministic)
    static = {"seeded": seeded}
    if subject.framework == "tensorflow":
        static.update(reshuffle=reshuffle, deterministic=deterministic)
    out = runs(subject, record, Epochs, n, b, s, **static)
    if out is None:
        return
    (stream,) = out["epochs"]
    name = f"{'seed' if seeded else 'no seed'}, {'reshuffle' if reshuffle else 'same order'}"
    kind = epoch_kind(stream, n, 2)
    record.check(EXPECT, **{f"exactly_once[{name}]": kind})
    if kind != "exactly-once":
        return
    first, second = stream[:n], stream[n:]
    if subject.framework == "tensorflow" and deterministic:  # deterministic=False may reorder the map's outputs
        record.check(
            EXPECT, buffer="within-buffer" if within_buffer(first, b) and within_buffer(second, b) else "beyond-buffer"
        )
    flag = "reshuffle" if reshuffle else "same order"
    if not reshuffle or (n >= 10 and b >= n):  # two full shuffles of >= 10 agree with p <= 1/10!
        record.check(
            EXPECT, **{f"epoch_order[{flag}]": "same-order" if np.array_equal(first, second) else "reshuffled"}
        )


@on("tensorflow", "torch")
@THIRD
@given(nb=buffered(min_n=10), s=SEEDS, deterministic=st.booleans(), op_seed=st.sampled_from([7, 2024]))
def test_fixed_seed_runs_agree(subject, record, nb, s, deterministic, op_seed):
    """Two runs agree on the shuffle order and the random draws when an op seed or the global
    seed is set, not with neither; shuffle(seed=s) and shuffle(seed=s + 1) differ."""
    n, b = nb[0], max(nb)  # full shuffles: two unseeded orders agree with p <= 1/10!
    record.example(n=n, buffer_size=b, s=s, deterministic=deterministic, op_seed=op_seed)
    tf_static = {"op_seed": op_seed, "deterministic": deterministic} if subject.framework == "tensorflow" else {}
    runs_by_seed = {}
    for global_seed in (1234, None):
        pair = []
        for _ in range(2):
            out = runs(subject, record, Seeded, n, b, s, global_seed=global_seed, **tf_static)
            if out is None:
                return
            pair.append(dict(zip(SEEDED_FIELDS, out["run"])))
        runs_by_seed[global_seed] = pair
    (g1, g2), (u1, u2) = runs_by_seed[1234], runs_by_seed[None]
    record.check(
        EXPECT,
        **{
            "order[op seed + global seed]": reproducible([g1["order[op seed]"]], [g2["order[op seed]"]]),
            "order[op seed only]": reproducible([u1["order[op seed]"]], [u2["order[op seed]"]]),
            "order[global seed only]": reproducible([g1["order[no op seed]"]], [g2["order[no op seed]"]]),
            "order[no seeds]": reproducible([u1["order[no op seed]"]], [u2["order[no op seed]"]]),
            "seed_effect": "ignored" if np.array_equal(u1["order[op seed]"], u1["order[other op seed]"]) else "applied",
        },
    )

    # A stateful op draws one stream per iterator; which element gets which draw races under
    # parallel calls ("the order in which that state is accessed is undefined"): the multiset
    # of draws is asserted, the pairing only observed.
    def draws(r, key):
        return [np.sort(r[key])]

    record.check(
        EXPECT,
        **{
            "draws[op seed]": reproducible(draws(u1, "draws[op seed]"), draws(u2, "draws[op seed]")),
            "draws[global seed only]": reproducible(draws(g1, "draws[no op seed]"), draws(g2, "draws[no op seed]")),
            "draws[no seeds]": reproducible(draws(u1, "draws[no op seed]"), draws(u2, "draws[no op seed]")),
        },
    )
    record.observe_racy(
        **{
            f"pairing[stateful op seed, deterministic={deterministic}]": reproducible(
                by_index(u1["index"], u1["draws[op seed]"]), by_index(u2["index"], u2["draws[op seed]"])
            )
        }
    )
    if subject.framework == "tensorflow":
        a = (u1["index"], u1["values[stateless]"])
        c = (u2["index"], u2["values[stateless]"])
        record.check(
            EXPECT,
            **{
                f"values[stateless, deterministic={deterministic}]": reproducible(a, c)
                if deterministic
                else reproducible(by_index(*a), by_index(*c))
            },
        )
        # deterministic=True promises the order; with False the order is whatever the race gave.
        (record.observe if deterministic else record.observe_racy)(
            **{f"map output order[deterministic={deterministic}]": reproducible(a[:1], c[:1])}
        )


# ---------------------------------------------------------------- seed examples
class Queue(Program):
    def tensorflow(tf, *, n, capacity, min_after_dequeue, seed, close, device):
        """seeds/001 "TensorFlow Queue" as a v1 program: enqueue range(n) into a RandomShuffleQueue,
        close it (or not), dequeue with a random transformation per dequeue until the queue ends
        (OutOfRangeError) or a dequeue waits longer than 300 ms (DeadlineExceededError)."""
        with tf.Graph().as_default() as g, tf.device(device):
            tf.random.set_seed(seed)
            queue = tf.queue.RandomShuffleQueue(capacity, min_after_dequeue, [tf.int64], shapes=[[]], seed=seed)
            enqueue = queue.enqueue_many([tf.range(n, dtype=tf.int64)])
            x = queue.dequeue()
            draw = tf.random.uniform([], seed=seed)
            noisy = tf.cast(x, tf.float32) + draw  # the random transformation of the dequeued element
            closing = queue.close()
        got, ended = [], None
        with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(allow_soft_placement=True)) as session:
            session.run(enqueue)
            if close:
                session.run(closing)
            try:
                while True:
                    got.append(session.run([x, draw, noisy], options=tf.compat.v1.RunOptions(timeout_in_ms=300)))
            except (tf.errors.OutOfRangeError, tf.errors.DeadlineExceededError) as e:
                ended = cmp.error_name(e)
        return tuple(np.array(c) for c in zip(*got)), ended


@on("tensorflow", modes=("graph",))
@given(n=st.just(10), capacity=st.just(10), min_after_dequeue=st.just(4), seed=st.just(7))
def test_seed_random_shuffle_queue(subject, record, n, capacity, min_after_dequeue, seed):
    """seeds/001 as written (a v1 RandomShuffleQueue; graph only: queues feed Sessions): 10
    enqueued and closed dequeue once each, each with its own draw; unclosed, the queue stops
    after 10 - 4 dequeues, waiting to be filled above min_after_dequeue (rule 1)."""
    record.example(n=n, capacity=capacity, min_after_dequeue=min_after_dequeue, seed=seed)
    kw = dict(n=n, capacity=capacity, min_after_dequeue=min_after_dequeue, seed=seed, device=subject.device_name)
    (order, noise, noisy), ended = Queue.tensorflow(subject.module, close=True, **kw)
    record.check(
        EXPECT,
        queue=epoch_kind(order, n, 1) if ended == "raises:OutOfRangeError" else ended,
        **{"transform[uniform]": spread(noise)},
    )
    # elementwise, two non-negative terms (no cancellation): each element relative to itself
    record.close(
        name="dequeued + draw",
        out=noisy,
        ref=order.astype(np.float32) + noise,
        oracle="closed-form",
        tol=cmp.VALUE,
        scale=0.0,
    )
    record.observe(dequeued=order)
    (order, _, _), ended = Queue.tensorflow(subject.module, close=False, **kw)
    record.check(EXPECT, unclosed_queue=f"{len(order)} dequeued, then {ended}")


def tensorflow_one_shot_collect(tf, arrays, *, pipelines, device, **static):
    """A Graph per run, one ``make_one_shot_iterator`` per pipeline, get_next until OutOfRangeError."""
    with tf.Graph().as_default() as g, tf.device(device):
        datasets = pipelines(tf, *[tf.constant(a) for a in arrays], **static)
        nexts = {name: tf.compat.v1.data.make_one_shot_iterator(ds).get_next() for name, ds in datasets.items()}
    out = {}
    with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(allow_soft_placement=True)) as session:
        for name, get_next in nexts.items():
            out[name] = _stack(_drain(tf, session, get_next), tf.nest.flatten(datasets[name].element_spec))
    return out


@on("tensorflow", modes=("graph",))
@given(n=st.just(np.int64(16)), k=st.just(np.int64(12)), s=st.just(np.int64(7)))
def test_seed_one_shot_iterator_splits(subject, record, n, k, s):
    """seeds/001 rule 2 with one-shot iterators, the seed's era (graph only: a Session API): a
    75/25 split of 16 behaves as with initializable iterators, each iterator restarting its copy."""
    record.example(n=n, k=k, s=s)
    out = tensorflow_one_shot_collect(
        subject.module, (n, k, s), pipelines=Splits.tensorflow, device=subject.device_name
    )
    for name in SPLITS:
        pairs = [
            (out[f"{name}/{t}/train"][0], out[f"{name}/{t}/val"][0])
            for t in range(TRIALS)
            if f"{name}/{t}/train" in out
        ]
        record.check(EXPECT, **{f"split[{name}]": split_kind(pairs, n, k)})

"""The README and docs/, as a stranger runs them: every ``autodiff-semantics`` example in their
shell blocks runs as written in a fresh clone (a copy of the tracked files, nothing generated).

``run`` examples run up to collection (``--collect-only``: the flags, the behaviour ids and
the selection are real, the minutes of testing are not); ``bench`` and a whole ``faults``
run are minutes long and are exercised elsewhere (tests/test_cli.py, tests/test_faults.py);
``merge`` needs the shard runs' reports (tests/test_parallel.py merges real shards);
``tox`` and ``pip`` lines install environments, which ``.ci/run`` does for real.
"""

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LONG = {"bench", "faults"}
#: Examples that need the reports of the runs before them (tests/test_parallel.py runs those).
AFTER_RUNS = {"merge"}


#: The README and the documentation pages it links to: their examples run alike.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_examples() -> list[tuple[str, int]]:
    """(command, exit status) of every example of the README and docs/; the status is 0 unless
    its comment says ``exits N`` (an upgrade check that lists a regression exits 1, as its own
    text says). Each command once, in the order the pages show them."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            cmd, _, comment = [*re.split(r"\s{2,}(#)", line, maxsplit=1), "", ""][:3]
            cmd = cmd.strip()
            if cmd.startswith("autodiff-semantics ") or cmd.startswith("python -m pytest cases"):
                m = re.search(r"\bexits (\d+)\b", comment)
                out.append((cmd, int(m.group(1)) if m else 0))
    return list(dict.fromkeys(out))


def readme_commands() -> list[str]:
    return [cmd for cmd, _ in readme_examples()]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    dest = tmp_path_factory.mktemp("clone")
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in filter(None, files.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, dest / name)
    return dest


def test_the_readme_has_examples_of_every_command():
    cmds = {c.split()[1] for c in readme_commands() if c.startswith("autodiff-semantics")}
    assert {"list", "run", "report", "diff", "upgrade", "bench", "faults"} <= cmds, cmds


@pytest.mark.parametrize("cmd, status", readme_examples(), ids=[c for c, _ in readme_examples()])
def test_a_readme_example_runs_as_written_in_a_fresh_clone(clone, cmd, status):
    argv = shlex.split(cmd)
    if argv[0] == "autodiff-semantics":
        sub = argv[1]
        if sub in LONG and "--list" not in argv:
            pytest.skip(f"'{sub}' runs for minutes; its behaviour is tested in tests/test_cli.py and test_faults.py")
        if sub in AFTER_RUNS:
            pytest.skip(f"'{sub}' joins the reports of the shard runs above; tests/test_parallel.py merges real shards")
        argv = [sys.executable, "-m", "suite", *argv[1:]]
        if sub == "run":
            argv += ["--collect-only", "-q"] if "--" in argv else ["--", "--collect-only", "-q"]
    else:  # python -m pytest cases ...
        argv = [sys.executable, *argv[1:], "--collect-only", "-q"]
    p = subprocess.run(argv, cwd=clone, capture_output=True, text=True, timeout=600)
    assert p.returncode == status, f"{cmd}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    assert "Traceback" not in p.stderr, p.stderr[-2000:]

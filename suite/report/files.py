"""Report files on disk: the report directory, versioned copies, report paths.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp()) / "reports"
>>> check_report_dir(d) == d and d.is_dir()
True
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from suite import bisection, versions
from suite.report import diff, html, pages, upgrade


class ReportFileError(ValueError):
    """Report files that cannot be used as asked; the message names the path and the problem."""


class ReportDirError(ReportFileError):
    """A report directory that cannot be written; the message names the path and the problem."""


def check_report_dir(path) -> Path:
    """Create ``path`` if needed and prove a file can be written there, before any test runs.

    Raises :class:`ReportDirError` with one line: the path and what is wrong with it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ReportDirError(f"--report-dir {path}: is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ReportDirError(f"--report-dir {path}: a parent of it is a file, not a directory") from None
    except OSError as e:
        raise ReportDirError(f"--report-dir {path}: cannot create it ({e.strerror or e})") from None
    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ReportDirError(f"--report-dir {path}: cannot write there ({e.strerror or e})") from None
    return path


def default_report(report_dir="reports") -> Path:
    d = Path(report_dir)
    return d / "latest.json" if (d / "latest.json").exists() else d / "latest.jsonl"


def version_key(path: Path):
    """Sort key of a report file by the TensorFlow version in its name (``suite.versions``:
    dev < rc < final); names without one sort first, by name."""
    v = versions.of_report_name(path)
    return (1, versions.key(v), str(path)) if v else (0, (), str(path))


def expand_reports(items) -> list[Path]:
    """Report files; a directory stands for its tf-*.json, in version order."""
    out = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(p.glob("tf-*.json"), key=version_key)
            if not found:
                raise ReportFileError(f"{p}: no tf-*.json reports in this directory")
            out += found
        else:
            out.append(p)
    return out


def tf_version_of(report_dir: Path) -> str | None:
    import json

    try:
        return json.loads((report_dir / "latest.json").read_text())["environment"]["frameworks"]["tensorflow"][
            "version"
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_versioned(report_dir: Path, dest: Path) -> list[Path]:
    """Copy latest.{json,md,html} to dest/tf-<version>.* (the matrix's per-version reports)."""
    import json
    import shutil

    v = tf_version_of(report_dir)
    if not v:
        raise ReportFileError(f"{report_dir}/latest.json has no TensorFlow version (is TensorFlow installed?)")
    injected = json.loads((report_dir / "latest.json").read_text()).get("environment", {}).get("faults")
    if injected:
        raise ReportFileError(
            f"{report_dir}/latest.json was measured with fault(s) injected ({', '.join(injected)}): "
            "a self-check run is not written as a versioned report or baseline"
        )
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("json", "md", "html", "junit.xml"):
        src = report_dir / f"latest.{ext}"
        if src.exists():
            shutil.copyfile(src, dest / f"tf-{v}.{ext}")
            out.append(dest / f"tf-{v}.{ext}")
    return out


def find_release_report(version: str, root: Path) -> Path | None:
    """The newest build of a release line (``suite.versions``' order: a final release over
    its release candidates over its nightlies): reports/ (fresh tox runs) first, then the
    committed baselines; in the working directory, then beside the cases. ``nightly``: the
    newest report in reports/nightly/ (the tox env ``nightly`` writes there)."""
    for base in dict.fromkeys((Path.cwd() / "reports", root / "reports")):
        dirs = (base / "nightly",) if version == "nightly" else (base, base / "baselines")
        for d in dirs:
            pattern = ("tf-*.json",) if version == "nightly" else (f"tf-{version}.json", f"tf-{version}.*.json")
            found = sorted((f for g in pattern for f in d.glob(g)), key=version_key)
            found = [f for f in found if not f.name.endswith(".junit.xml")]
            if found:
                return found[-1]
    return None


BEGIN, END = "<!-- version-matrix:begin -->", "<!-- version-matrix:end -->"


def update_readme(path: Path, reports) -> None:
    """Replace the section of a page (docs/versions.md) between the version-matrix markers with the matrix and
    the changelog between consecutive releases, generated from the reports."""
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ReportFileError(f"{path}: no {BEGIN} ... {END} section to replace")
    body = [
        BEGIN,
        "",
        "Generated by `autodiff-semantics report reports/baselines reports/nightly --readme "
        f"{path.as_posix()}` from the committed baselines and the nightly report (TensorFlow rows; `ok n/m` = "
        "passed rows of m; **Δk**: k observation keys changed since the release to the left, not counting keys "
        "of tests that release's suite revision did not have; the last row: the suite revision each report was "
        "measured with).",
        "",
    ]
    body += pages.versions_table_md(reports) + ["", "Changelog between consecutive releases (measured):", ""]
    body += diff.consecutive_changes_md(reports) + ["", END]
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(head + "\n".join(body) + tail, encoding="utf-8")


def bisect_state(paths) -> dict | None:
    """The ``autodiff-semantics bisect`` state over the two reports ``paths`` (old, new): a
    ``bisect.json`` beside the newer one whose reports are these (by file name), else None."""
    old, new = (Path(p) for p in paths)
    try:
        state = bisection.load_state(new.parent / "bisect.json")
    except bisection.BisectError:
        return None
    if state and (state.get("old"), state.get("new")) == (old.name, new.name):
        return state
    return None


def write_pages(paths, reports, out_dir: Path, stem: str, bench=()) -> tuple[Path, Path]:
    """Write ``<stem>.md`` and ``<stem>.html`` for one report, or for several the version
    matrix with each release's own pages in ``<stem>-releases/`` (and, for exactly two, the
    upgrade view above it: ``upgrade.{md,html}`` by default). Returns the two paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = [str(p) for p in paths]
    if len(reports) == 1:
        md = pages.markdown(reports[0])
        page = html.page(reports, labels, list(bench))
    else:
        sub = out_dir / f"{stem}-releases"
        sub.mkdir(exist_ok=True)
        details, names = [], set()
        for p, r in zip(paths, reports):
            name = Path(p).stem if Path(p).stem not in names else f"{Path(p).stem}-{len(names)}"
            names.add(name)
            (sub / f"{name}.md").write_text(pages.markdown(r), encoding="utf-8")
            (sub / f"{name}.html").write_text(html.page([r], [str(p)]), encoding="utf-8")
            details.append(f"{sub.name}/{name}")
        matrix_md = pages.versions_markdown(reports, [d + ".md" for d in details])
        if len(reports) == 2:  # the upgrade view, the two releases' matrix below it
            m = upgrade.model(reports[0], reports[1], labels[0], labels[1], bisect=bisect_state(paths))
            md = upgrade.markdown(m) + "\n" + matrix_md
            page = upgrade.html(
                m, css=html.CSS, matrix_html=html.matrix_sections(reports, labels, [d + ".html" for d in details])
            )
        else:
            md = matrix_md
            page = html.page(reports, labels, list(bench), details=[d + ".html" for d in details])
    (out_dir / f"{stem}.md").write_text(md, encoding="utf-8")
    (out_dir / f"{stem}.html").write_text(page, encoding="utf-8")
    return out_dir / f"{stem}.md", out_dir / f"{stem}.html"

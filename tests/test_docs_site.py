"""The documentation site (issue 50): ``mkdocs build --strict`` builds it from docs/ and the
generated pages (docs/gen_pages.py); the divergence atlas lists every declaration of the newest
baseline; every internal link of every page resolves; and every generated page opens in headless
Chromium, served from loopback, without a console message (an error, a failed load)."""

import http.server
import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.test_html_browser import CHROMIUM, chromium

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("mkdocs", reason="the [docs] extra (mkdocs, mkdocs-material, mkdocs-gen-files) is not installed")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    p = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return out


def _newest_baseline() -> dict:
    sys.path.insert(0, str(ROOT))
    from suite.report import files

    path = sorted((ROOT / "reports" / "baselines").glob("tf-*.json"), key=files.version_key)[-1]
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_atlas_lists_every_declaration_of_the_newest_baseline(site):
    page = (site / "atlas" / "index.html").read_text(encoding="utf-8")
    rows = len(re.findall(r"<tr data-framework=", page))
    report = _newest_baseline()
    assert rows == len(report["declared"]) > 0, (rows, len(report["declared"]))
    assert f"<strong>{rows} declarations</strong>" in page


def test_every_behaviour_has_a_generated_page(site):
    ids = {p.stem[5:].replace("_", "-") for p in (ROOT / "cases").glob("test_*.py")}
    pages = {p.parent.name for p in (site / "behaviours").glob("*/index.html")}
    assert ids <= pages, sorted(ids - pages)


def _pages(site) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if "assets" not in p.parts)


def test_every_internal_link_resolves(site):
    broken = []
    for page in _pages(site):
        for href in re.findall(r'href="([^"]+)"', page.read_text(encoding="utf-8")):
            url = urlparse(href)
            if url.scheme or href.startswith(("#", "mailto:", "//")):
                continue
            path = unquote(url.path)  # the 404 page's links are from the site's root
            target = (site / path.lstrip("/") if path.startswith("/") else page.parent / path).resolve()
            if url.path.endswith("/") or target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {href}")
    assert not broken, broken[:20]


@pytest.fixture(scope="module")
def served(site):
    """The built site over HTTP on a free loopback port, stopped when the module ends."""
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(site), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.RequestHandlerClass.log_message = lambda *a, **k: None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


GENERATED = ["", "atlas/", "version-chart/", "behaviours/"]


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium (Debian's chromium package) is not installed")
def test_generated_pages_open_without_a_console_message(served, site, tmp_path):
    pages = GENERATED + sorted(f"behaviours/{p.parent.name}/" for p in (site / "behaviours").glob("*/index.html"))
    errors = []
    for rel in pages:
        p = chromium(tmp_path, "1400,900", "--enable-logging=stderr", "--v=0", "--dump-dom", f"{served}/{rel}")
        assert p.returncode == 0, p.stderr[-2000:]
        # Chromium logs every console message alike (no level): the site's pages log none
        errors += [f"{rel}: {line.strip()[:300]}" for line in p.stderr.splitlines() if ":CONSOLE" in line]
        if rel == "atlas/":  # the filters ran: they count the rows they show
            assert re.search(r'id="atlas-count">\d+ of \d+<', p.stdout), p.stdout[-1000:]
    assert not errors, errors[:10]

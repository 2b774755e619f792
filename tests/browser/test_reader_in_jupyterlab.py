"""The reader's copy of a chapter in a real JupyterLab (requirements.txt installs it), in Chromium:
its prose shows the chapter's measured numbers, not glue keys; its opening figure and collapsed
solutions show; and opening it leaves the file as it is (nothing for autosave to write).

The server runs on 127.0.0.1 from a temporary copy of reader/, with its own config, runtime and
workspace folders, and is ended with its process group. Also here: the reader's copies number the
figures as the built book does (needs `make book`)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from book_site import HTML_ROOT, SCREENSHOTS, require_book

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import reader_copy  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]
CHAPTER = "chapters/01_single_head_limits.ipynb"


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """The URL of a JupyterLab serving a copy of reader/ (no token: it listens on 127.0.0.1 only)."""
    tmp = tmp_path_factory.mktemp("jupyterlab")
    shutil.copytree(ROOT / "reader", tmp / "root")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
               JUPYTER_DATA_DIR=str(tmp / "data"))
    log = open(tmp / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=",
         "--ServerApp.password=", f"--ServerApp.root_dir={tmp / 'root'}", f"--LabApp.workspaces_dir={tmp / 'ws'}",
         "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "api/status", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{(tmp / 'server.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield url, tmp / "root"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        log.close()


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_a_chapter_in_jupyterlab_shows_its_numbers_not_glue_keys(jupyterlab, chromium_browser):
    url, root = jupyterlab
    before = (root / CHAPTER).read_bytes()
    glue = reader_copy.glue_data(nbformat.read(ROOT / CHAPTER, as_version=4))
    value = {k: glue[k]["text/plain"] for k in ("n_seeds", "mean_h1", "solved_h1")}
    page = chromium_browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        page.goto(f"{url}lab/tree/{CHAPTER}?reset", wait_until="load")
        opening = page.locator(".jp-MarkdownCell .jp-RenderedMarkdown").first
        opening.wait_for(timeout=90_000)
        page.wait_for_timeout(2000)  # MathJax and the attachment's image
        text = _squash(opening.inner_text())
        assert (f"Over {value['n_seeds']} seeds, one head reaches a mean accuracy of {value['mean_h1']} "
                f"and solves the task in {value['solved_h1']} of them") in text, text[:600]
        assert "glue" not in text and "{" not in text
        figure = opening.locator("img").first
        assert figure.evaluate("img => img.complete && img.naturalWidth > 300"), "the opening figure did not load"
        assert f"Fig. {reader_copy.figure_numbers()['fig-ch1-curves']}." in text  # the book's number for it
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "reader-jupyterlab-ch1.png"))
        exercises = page.locator(".jp-MarkdownCell", has_text="6. Exercises").first
        exercises.scroll_into_view_if_needed()
        solutions = exercises.locator("details > summary")
        assert solutions.count() >= 1 and solutions.first.text_content().strip() == "Solution"
        assert not exercises.locator("details").first.evaluate("d => d.open")  # collapsed until clicked
        shown = _squash(page.locator(".jp-Notebook").inner_text())
        assert not re.search(r"\{(glue|cite|numref)[\w:]*\}|:::\{", shown), "raw MyST in the rendered cells"
        # opened and shown: nothing changed, so autosave has nothing to write into the file
        assert page.locator(".jp-mod-dirty").count() == 0
    finally:
        page.close()
    assert (root / CHAPTER).read_bytes() == before


def test_the_reader_copies_number_figures_as_the_built_book_does():
    require_book()
    built = {}
    for page in reader_copy.toc_documents():
        path = HTML_ROOT / f"{page}.html"
        if path.is_file():
            for label, number in re.findall(r'<figure[^>]*id="([\w-]+)"[^>]*>.*?<span class="caption-number">'
                                            r"Fig\. ([\d.]+) </span>", path.read_text(encoding="utf-8"), re.S):
                built[label] = number  # "1.4" in a numbered chapter, "1" elsewhere
    assert built and reader_copy.figure_numbers() == built

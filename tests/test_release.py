"""Releases and notices: the CHANGELOG's dated versions agree with mha_lib.__version__, CONTRIBUTING
says how to release, and NOTICE (which ships in every wheel) covers every data and weight file."""
from __future__ import annotations

import datetime
import fnmatch
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import mha_lib

ROOT = Path(__file__).resolve().parent.parent
HEADING = re.compile(r"^## (.+)$", re.M)


def _releases() -> list[tuple[tuple[int, ...], datetime.date]]:
    headings = HEADING.findall((ROOT / "CHANGELOG.md").read_text())
    assert headings[0] == "Unreleased", headings[0]
    releases = []
    for heading in headings[1:]:
        found = re.fullmatch(r"(\d+)\.(\d+)\.(\d+) \((\d{4}-\d{2}-\d{2})\)", heading)
        assert found, f"CHANGELOG heading {heading!r} is not 'X.Y.Z (YYYY-MM-DD)'"
        releases.append((tuple(map(int, found.groups()[:3])), datetime.date.fromisoformat(found.group(4))))
    return releases


def test_every_released_version_has_a_date_and_the_newest_is_the_packages():
    releases = _releases()
    versions = [v for v, _ in releases]
    dates = [d for _, d in releases]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    assert dates == sorted(dates, reverse=True)
    assert ".".join(map(str, versions[0])) == mha_lib.__version__


def test_contributing_says_how_to_release():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text[text.index("## Releasing"):]
    for step in ("__version__", "## Unreleased", "git tag -a vX.Y.Z", "git push origin vX.Y.Z"):
        assert step in section, step


def _notice_patterns() -> list[str]:
    return re.findall(r"(mha_lib/(?:data|weights)/\S+)", (ROOT / "NOTICE").read_text())


def test_notice_names_the_source_and_licence_of_every_shipped_data_file():
    patterns = _notice_patterns()
    files = sorted(str(p.relative_to(ROOT)) for folder in ("data", "weights")
                   for p in (ROOT / "mha_lib" / folder).iterdir() if p.is_file())
    uncovered = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
    assert not uncovered, f"NOTICE does not say where these come from: {uncovered}"
    assert all(any(fnmatch.fnmatch(f, p) for f in files) for p in patterns), "NOTICE names a file that is gone"
    notice = (ROOT / "NOTICE").read_text()
    assert "Python Software Foundation" in notice and "tools/licenses/PSF-2.0.txt" in notice


def test_notice_and_the_psf_licence_are_license_files():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    files = project["tool"]["setuptools"]["license-files"]
    assert {"LICENSE", "NOTICE", "tools/licenses/PSF-2.0.txt"} <= set(files)
    assert all((ROOT / f).is_file() for f in files)
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in (ROOT / "tools/licenses/PSF-2.0.txt").read_text()


@pytest.mark.slow
def test_the_wheel_carries_the_notice_next_to_the_data(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "-w", str(tmp_path), str(ROOT)], check=True,
                   capture_output=True, cwd=tmp_path)
    wheel, = tmp_path.glob("mha_lib-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    info = f"mha_lib-{mha_lib.__version__}.dist-info/licenses/"
    assert {info + "NOTICE", info + "LICENSE", info + "tools/licenses/PSF-2.0.txt"} <= set(names)
    assert "mha_lib/data/parsed.json" in names

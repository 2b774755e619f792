"""The GitHub Actions workflows (.github/workflows/): valid against GitHub's workflow schema
(check-jsonschema's vendored copy, offline), the test workflow runs exactly the README's test
command, and the book workflow builds with the README's book command and deploys with the
official Pages actions."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
README = (ROOT / "README.md").read_text()


def _load(name: str) -> dict:
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    if True in workflow:  # YAML 1.1 reads the key `on` as the boolean true
        workflow["on"] = workflow.pop(True)
    return workflow


def _readme_command(what: str) -> str:
    """The README's one command whose comment starts with ``what`` (``make test  # runs every test``)."""
    commands = re.findall(rf"^(make \w+)\s+# {what}", README, flags=re.M)
    assert len(commands) == 1, commands
    return commands[0]


def _steps(workflow: dict):
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def _runs(workflow: dict) -> list[str]:
    return [step["run"].strip() for step in _steps(workflow) if "run" in step]


def _uses(workflow: dict) -> dict[str, str]:
    pairs = [step["uses"].split("@") for step in _steps(workflow) if "uses" in step]
    return dict(pairs)


@pytest.mark.slow
def test_every_workflow_is_valid_against_githubs_schema():
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert [f.name for f in files] == ["book.yml", "test.yml"]
    result = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                             *map(str, files)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_the_schema_check_can_fail(tmp_path):
    """The check above is a real one: a step with neither `run` nor `uses` is refused."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    steps:\n      - name: nothing\n")
    result = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                             str(bad)], capture_output=True, text=True)
    assert result.returncode != 0


def test_the_test_workflow_runs_exactly_the_readme_test_command_on_pushes_and_pull_requests():
    workflow = _load("test.yml")
    assert {"push", "pull_request"} <= set(workflow["on"])
    assert _runs(workflow) == [_readme_command("runs every test")] == ["make test"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "make test" in ci  # the project's own CI script runs the same command


def test_the_book_workflow_builds_both_editions_and_deploys_with_the_pages_actions():
    workflow = _load("book.yml")
    assert _runs(workflow) == [_readme_command("builds the HTML book")] == ["make book"]
    assert "push" in workflow["on"] and workflow["on"]["push"]["branches"] == ["main"]
    uses = _uses(workflow)
    assert {"actions/configure-pages", "actions/upload-pages-artifact", "actions/deploy-pages"} <= set(uses)
    upload = next(s for s in _steps(workflow) if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"  # English at the root, Chinese in zh/ (make book)
    # least privilege: the workflow reads; only the deploy job writes Pages, with an OIDC token
    assert workflow["permissions"] == {"contents": "read"}
    deploy = workflow["jobs"]["deploy"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    step_id = re.fullmatch(r"\$\{\{ steps\.(\w+)\.outputs\.page_url \}\}", deploy["environment"]["url"]).group(1)
    assert [s for s in deploy["steps"] if s.get("id") == step_id][0]["uses"].startswith("actions/deploy-pages@")
    # one deployment at a time, never cancelled halfway
    assert workflow["concurrency"] == {"group": "pages", "cancel-in-progress": False}


@pytest.mark.parametrize("name", ["test.yml", "book.yml"])
def test_both_builds_get_torch_from_the_cpu_index_and_use_the_caches(name):
    workflow = _load(name)
    url = re.search(r"PIP_EXTRA_INDEX_URL=(\S+)`", README).group(1)
    (job_name, job), = [(k, j) for k, j in workflow["jobs"].items() if any("run" in s for s in j["steps"])]
    assert job["env"]["PIP_EXTRA_INDEX_URL"] == url, job_name
    assert "3.11" in job["container"]  # the Python the README asks for, on Debian (chromium from apt)
    caches = {s["name"]: s["with"] for s in job["steps"] if s.get("uses", "").startswith("actions/cache@")}
    pip = caches["Cache pip downloads"]
    assert pip["path"] == "~/.cache/pip" and all(f in pip["key"] for f in ("requirements.txt", "constraints.txt"))
    models = caches["Cache exported live-view models"]
    assert models["path"] == "_build/models-cache"
    assert all(f in models["key"] for f in ("mha_lib/export/", "tools/export_site_models.py", "mha_lib/weights/"))
    node = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-node@"))["with"]
    assert node["cache"] == "npm" and (ROOT / node["cache-dependency-path"]).is_file()


def test_actions_are_pinned_to_one_major_version_across_the_workflows():
    versions: dict[str, set] = {}
    for name in ("test.yml", "book.yml"):
        for action, version in _uses(_load(name)).items():
            assert re.fullmatch(r"v\d+", version), f"{name}: {action}@{version} is not a major version tag"
            versions.setdefault(action, set()).add(version)
    assert all(len(v) == 1 for v in versions.values()), versions

"""The README's usage example runs as written."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- readme-example:.*?-->\s*```python\n(.*?)```", text, flags=re.S)
    assert match, "README lost its marked example"
    return match.group(1)


@pytest.mark.slow
def test_readme_example_runs():
    result = subprocess.run([sys.executable, "-c", readme_example()], capture_output=True, text=True,
                            cwd=ROOT / "tests")
    assert result.returncode == 0, result.stderr
    assert "torch.Size([2, 5, 64]) torch.Size([2, 8, 5, 5])" in result.stdout
    assert "[0, 2, 3, 4, 6, 7] torch.Size([2, 6, 5, 5])" in result.stdout

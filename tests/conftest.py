"""Shared pytest configuration and fixtures.

Hypothesis runs with the "ci" profile by default (derandomize=True: the same examples on every
run and every machine; deadline=None: no flaky time limits on a shared 2-core CPU). Select
another profile with ``pytest --hypothesis-profile=<name>``.
"""
from __future__ import annotations

import os

import pytest
import torch
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None)
settings.load_profile("ci")

# `make test` runs two pytest-xdist workers on two cores: each keeps to one torch thread, since two
# workers with two spinning threads each would oversubscribe the cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

# Every device the tests can run on here: CPU always, CUDA when a GPU is present.
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    """Parametrises a test over CPU and, when available, CUDA."""
    return torch.device(request.param)


@pytest.fixture
def single_thread():
    """Run a test with one torch CPU thread, then restore the previous count.

    Tests on tiny tensors gain nothing from intra-op threads, and on a shared, oversubscribed CPU
    two spinning threads can make each small op hundreds of times slower.
    Use with ``pytestmark = pytest.mark.usefixtures("single_thread")``.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

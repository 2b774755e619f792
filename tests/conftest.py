"""Shared pytest configuration and fixtures.

Two layers of tests: ``make test-fast`` runs every test not marked ``slow`` or ``browser`` (the edit
loop's check, a few minutes), ``make test`` runs them all. A test is ``slow`` when it takes more than
about a second on this project's 2-core machines: marked by hand with ``@pytest.mark.slow``, or by
using one of ``EXPENSIVE_FIXTURES`` (a MiniLM load, an ONNX export, a gate sweep), which are built once
per module or per session and marked here, in one place.

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

# Fixtures that take seconds to build: every test that uses one is marked slow (make test-fast leaves it out).
EXPENSIVE_FIXTURES = {
    "minilm", "bert", "hf_bert",  # all-MiniLM-L6-v2 in mha_lib or transformers
    "exported_toy", "exported_digits", "exported_minilm", "minilm_web", "minilm_split",  # ONNX exports (test_export)
    "layered_tiny",  # a two-layer BertEncoder split by layer (test_export)
    "gate_sweep",  # Hard-Concrete gates trained at six penalties (test_gates)
}


def pytest_collection_modifyitems(config, items):
    slow = pytest.mark.slow
    for item in items:
        if EXPENSIVE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(slow)


@pytest.fixture(scope="session")
def minilm():
    """``(BertEncoder, WordPieceTokenizer)``: all-MiniLM-L6-v2 loaded once per test session (in eval mode),
    shared by every test module that reads it. Tests must not change it: prune or train a copy."""
    pytest.importorskip("tokenizers")
    from mha_lib.pretrained import load_bert

    model, tokenizer = load_bert(verbose=False)
    return model.eval(), tokenizer


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

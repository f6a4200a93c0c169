"""Shared fixtures. Every test runs under the Khronos validation layer and fails on any message."""
from __future__ import annotations

import os

os.environ.setdefault("AKUNU_VALIDATION", "1")  # before akunu creates its Vulkan instance
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import akunu  # noqa: E402


@pytest.fixture(scope="session")
def device():
    return akunu.Device()


@pytest.fixture(autouse=True)
def no_validation_messages():
    akunu.clear_validation_messages()
    yield
    messages = akunu.validation_messages()
    assert not messages, "validation messages:\n" + "\n".join(messages)


@pytest.fixture
def rng(request):
    # A fresh, reproducible stream per test.
    return np.random.default_rng(abs(hash(request.node.nodeid)) % (2**32))

"""Shared fixtures. Every test runs under the Khronos validation layer and fails on any message."""
from __future__ import annotations

import os
import zlib

os.environ.setdefault("AKUNU_VALIDATION", "1")  # before akunu creates its Vulkan instance
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import akunu  # noqa: E402

# The suite tests the best Vulkan device, which on a machine without a GPU is lavapipe under the
# validation layer. lavapipe is not the default there (akunu's CPU backend is), so the suite
# names it: every test, and every process a test starts, runs where it ran before. Tests of the
# default itself clear AKUNU_DEVICE.
if not os.environ.get("AKUNU_DEVICE") and akunu.devices()[0]["backend"] == "vulkan":
    os.environ["AKUNU_DEVICE"] = "vulkan"

# One device for the whole session, opened before pytest imports the test modules: the Vulkan
# instance then lives as long as the session instead of being made again whenever the last
# model or buffer of a test has gone. On the H200 machine, a pytest session that let it go
# (with torch and transformers loaded by then) could not make another one
# (VK_ERROR_INCOMPATIBLE_DRIVER), and every later test fell back to the CPU backend; importing
# torch before or after akunu in a fresh process is fine, so the trigger is the teardown.
_SESSION_DEVICE = akunu.Device()


# The engine's backends. Modules whose tests hold for both say
# `pytestmark = pytest.mark.usefixtures("backend")`; every Model they load without an explicit
# device then runs on each backend in turn (AKUNU_DEVICE). AKUNU_TEST_BACKENDS=cpu (or vulkan)
# runs one of them.
BACKENDS = [b for b in os.environ.get("AKUNU_TEST_BACKENDS", "vulkan,cpu").split(",") if b]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AKUNU_DEVICE", request.param)
        yield request.param


@pytest.fixture(scope="session")
def device():
    return _SESSION_DEVICE


# Tests marked `gpu` need a GPU: a Vulkan device that is not a CPU (lavapipe and akunu's CPU
# backend are CPUs). Where the session's device is not one, they skip and say why.
def pytest_collection_modifyitems(config, items):
    if _SESSION_DEVICE.profile["type"] != "cpu":
        return
    skip = pytest.mark.skip(reason=f"needs a GPU; this session's device is {_SESSION_DEVICE.name}, a CPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_validation_messages():
    akunu.clear_validation_messages()
    yield
    messages = akunu.validation_messages()
    assert not messages, "validation messages:\n" + "\n".join(messages)


@pytest.fixture
def rng(request):
    # A fresh stream per test, the same in every run: str hashes change with PYTHONHASHSEED, so
    # the seed is a checksum of the test's id instead.
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))

"""Where the reference fixtures are (../shared/fixtures beside the checkout, or AKUNU_FIXTURES).

Fixture tests fail when the fixtures are missing, except where AKUNU_ALLOW_MISSING_FIXTURES=1
says the machine has none (the GPU machine, which receives the checkout without ../shared);
there they skip with that reason.
"""
from __future__ import annotations

import os
import pathlib

import pytest

FIXTURES = pathlib.Path(os.environ.get("AKUNU_FIXTURES") or
                        pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "fixtures")

requires_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir() and os.environ.get("AKUNU_ALLOW_MISSING_FIXTURES") == "1",
    reason=f"the reference fixtures ({FIXTURES}) are not on this machine",
)

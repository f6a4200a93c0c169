"""Every malformed input fails with a clear akunu.Error: opened, configured, validated and
planned as a user would, and never a crash."""
from __future__ import annotations

import re

import numpy as np
import pytest

import akunu
from support.malformed_cases import VALID, cases, write_all


def _load(path):
    """What a user does with a model file: open, inspect, config, validate, plan, dequantize."""
    m = akunu.open(str(path))
    _ = m.metadata, m.tensors
    akunu.plan(m, context=64, check_device=False)
    for t in m.tensors:
        m.tensor(t["name"], dequantize=True)


def test_there_are_at_least_20_cases():
    assert len(cases()) >= 20


@pytest.mark.parametrize("name, content, expected", cases(), ids=[c[0] for c in cases()])
def test_malformed_input_raises_a_clear_error(tmp_path, name, content, expected):
    write_all(tmp_path)  # every case, as files and directories
    with pytest.raises(akunu.Error) as e:
        _load(tmp_path / name)
    assert re.search(expected, str(e.value)), f"{name}: {e.value}"


def test_the_valid_base_file_loads(tmp_path):
    path = tmp_path / "valid.gguf"
    path.write_bytes(VALID)
    _load(path)
    m = akunu.open(str(path))
    assert m.tensor("token_embd.weight").shape == (16, 32)


def test_every_truncation_of_a_valid_file_fails_cleanly(tmp_path):
    """Cut the valid file at many points: each prefix is an error, never a crash."""
    rng = np.random.default_rng(0)
    cuts = sorted(set(range(0, 400)) | set(rng.integers(400, len(VALID) - 1, 60).tolist()))
    for cut in cuts:
        path = tmp_path / f"cut{cut}.gguf"
        path.write_bytes(VALID[:cut])
        with pytest.raises(akunu.Error):
            _load(path)

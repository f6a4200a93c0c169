"""akunu as an lm-evaluation-harness model (akunu.harness), on local tasks (a YAML over small
JSONL files in tests/python/support/lm_eval_tasks: multiple choice, generation and rolling
loglikelihood), against lm_eval's own `hf` model on the same weights (the trained fixture's HF
folder, float32 in transformers).

Tolerance: each request's loglikelihood within 0.02 of hf's (akunu computes in f16/f32 on its
backend, transformers in float32; the measured gap on these tasks is below 0.01); accuracies,
exact matches and the greedy generations equal."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from support.fixture_paths import FIXTURES, require, requires_fixtures

lm_eval = pytest.importorskip("lm_eval", reason="the harness model needs lm-evaluation-harness (pip install lm_eval)")
pytest.importorskip("datasets", reason="lm_eval's tasks are datasets")

import akunu.harness  # noqa: E402  (registers --model akunu)

pytestmark = requires_fixtures

TASKS_DIR = os.path.join(os.path.dirname(__file__), "support", "lm_eval_tasks")
TASKS = ["akunu_code_mc", "akunu_code_gen", "akunu_code_rolling"]
HF = FIXTURES / "trained-code-llama" / "hf"


def evaluate(model: str, model_args: str, tasks=TASKS, batch_size=1) -> dict:
    from lm_eval.tasks import TaskManager

    return lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=tasks, log_samples=True,
                                   batch_size=batch_size, task_manager=TaskManager(include_path=TASKS_DIR))


@pytest.fixture(scope="module")
def ours():
    return evaluate("akunu", f"path={require('trained-code-llama', 'hf')},device=cpu")


def assert_same_results(got: dict, want: dict, tol: float, greedy_flags: bool) -> None:
    """Accuracies, exact matches and generations equal, rolling perplexities within 0.1 %, each
    loglikelihood within `tol` (and with greedy_flags the same is_greedy)."""
    for metric in ("acc,none", "acc_norm,none"):
        assert got["results"]["akunu_code_mc"][metric] == want["results"]["akunu_code_mc"][metric]
    assert got["results"]["akunu_code_gen"]["exact_match,none"] == want["results"]["akunu_code_gen"]["exact_match,none"]
    for metric in ("word_perplexity,none", "byte_perplexity,none", "bits_per_byte,none"):
        assert got["results"]["akunu_code_rolling"][metric] == pytest.approx(
            want["results"]["akunu_code_rolling"][metric], rel=1e-3)
    for task in TASKS:
        for a, b in zip(got["samples"][task], want["samples"][task], strict=True):
            if task == "akunu_code_gen":
                assert a["resps"] == b["resps"]
                continue
            for (ra,), (rb,) in zip(a["resps"], b["resps"], strict=True):
                if isinstance(ra, (tuple, list)):
                    assert not greedy_flags or ra[1] == rb[1], (task, a["doc"])
                    ra, rb = ra[0], rb[0]
                assert abs(ra - rb) <= tol, (task, a["doc"], ra, rb)


@pytest.mark.slow
def test_results_equal_lm_evals_hf_model(ours):
    pytest.importorskip("transformers", reason="the reference is lm_eval's hf model")
    assert_same_results(ours, evaluate("hf", f"pretrained={HF},dtype=float32,device=cpu"), 0.02, False)


def test_loglikelihood_is_model_score(ours):
    """Each choice's loglikelihood is the sum of Model.score over its continuation tokens, split
    as lm_eval splits a pair: trailing spaces move to the continuation, whose tokens are those
    of context + continuation past the context's own token count."""
    m = akunu.Model(require("trained-code-llama", "hf"), context=512, device="cpu")
    for sample in ours["samples"]["akunu_code_mc"]:
        for (context, choice), ((ll, _),) in zip(sample["arguments"], sample["resps"], strict=True):
            spaces = len(context) - len(context.rstrip())
            ctx = m.tokenize(context[: len(context) - spaces])
            whole = m.tokenize(context + choice)
            cont = whole[len(ctx):]
            want = float(np.sum(m.score(ctx + cont)[len(ctx) - 1:])) if cont else 0.0
            # The harness runs the continuation after the cached context (decode steps, whose
            # attention sums products in eight lanes and its softmax through a polynomial exp)
            # and score() runs it in one prefill chunk (row by row): the same float32 values
            # added in another order, a few 1e-4 over a continuation's tokens.
            assert ll == pytest.approx(want, abs=1e-3), (context, choice)
    assert ours["results"]["akunu_code_mc"]["acc,none"] > 0.5  # a trained code model knows `import numpy as np`


def test_batched_requests_equal_the_per_request_path(ours):
    """batch_size 4: loglikelihoods through score_batch within 0.02 of the per-request path (a
    batched step's GEMMs round activations to halves, docs/batch.md; the tolerance held against
    hf), the same greedy flags, accuracies and rolling perplexities, and generate_until through
    generate_batch: the same generations."""
    batched = evaluate("akunu", f"path={require('trained-code-llama', 'hf')},device=cpu", batch_size=4)
    assert_same_results(batched, ours, 0.02, True)


def test_prefix_reuse_changes_nothing():
    lm = akunu.harness.AkunuLM(path=str(require("trained-code-llama", "hf")), device="cpu", context=256)
    ids = lm.tok_encode("import numpy as np\nimport os\n")
    fresh = [lm._loglikelihood_tokens([(None, ids[:k], ids[k:])])[0] for k in (3, 5, 8)]
    lm._cached = []
    lm.model.reset()
    again = lm._loglikelihood_tokens([(None, ids[:k], ids[k:]) for k in (8, 5, 3)])[::-1]
    np.testing.assert_allclose([f[0] for f in fresh], [a[0] for a in again], atol=1e-4)


@pytest.mark.slow
def test_command_line(tmp_path, ours):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "akunu.harness", "--model", "akunu", "--model_args",
                        f"path={require('trained-code-llama', 'hf')},device=cpu", "--tasks", "akunu_code_gen",
                        "--include_path", TASKS_DIR, "--output_path", str(out)],
                       capture_output=True, text=True, timeout=600, env=os.environ | {"HF_DATASETS_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert results["results"]["akunu_code_gen"]["exact_match,none"] == \
        ours["results"]["akunu_code_gen"]["exact_match,none"]

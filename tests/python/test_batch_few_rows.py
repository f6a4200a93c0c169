"""A batched step of two to four rows runs a table of exactly its rows (docs/batch.md): where
the weights take the tile GEMV of several rows of x (kernels.gemm_tile_rows), its products are
that kernel for the step's rows, with no other row window recorded beside it.

A step of more rows runs the short tiles (or the CPU backend's GEMM), which sum each product in
another order, and on a GPU whose GEMMs take activations as halves the tile GEMV rounds those
halves again to int16 blocks where the short tiles multiply them as they are: a sequence's
log-probabilities in a step of few rows equal those it gets in a step of nine within
FEW_ROW_TOL (1.6e-3 at most on an H200), far inside test_batch.py's LOGIT_TOL. Where no few
tables exist (the CPU backend) the test holds the two step sizes of its own GEMM to each other.
"""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu._akunu import kernels
from support.fixture_paths import require

pytestmark = pytest.mark.usefixtures("backend")

Q8 = ("tiny-llama3-random", "gguf", "tiny-llama3-random-q8_0.gguf")
FEW_ROW_TOL = 5e-3  # absolute, on log-probabilities: summation order and x's rounding (docstring)
TOKENS = 8


TABLE_ROWS = 4  # engine/batch_pipeline.cpp kFewRowsMost


def tile_rows(m):
    return kernels.gemm_tile_rows(m.device, kernels.tile_type(m.device, "q8_0") or "q8_0")


def prompts(m, n, seed):
    rng = np.random.default_rng(seed)
    return [[int(x) for x in rng.integers(3, m.config.vocab_size, 4 + 3 * i)] for i in range(n)]


def decode(b, all_ids, tokens=TOKENS):
    """Every prompt joins at once and decodes `tokens` tokens; returns each one's logprobs."""
    seqs = [b.add(ids) for ids in all_ids]
    out = {s: [] for s in seqs}
    while min(len(v) for v in out.values()) < tokens:
        for seq, _, logprob in b.step():
            out[seq].append(logprob)
    return [np.array(out[s][:tokens]) for s in seqs]


def product_rows(rows):
    return [r for r in rows if r["label"].split(".")[-1] in ("attn_q", "attn_qkv", "ffn_down", "output")]


@pytest.fixture(scope="module")
def model():
    return akunu.Model(require(*Q8), context=600, progress=False)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_step_of_few_rows_runs_the_tile_gemv_of_its_rows(model, n):
    b = akunu.Batch(model, max_sequences=8)
    decode(b, prompts(model, n, seed=n), tokens=2)
    rows = product_rows(b.profile())  # the last step: n decode rows
    if tile_rows(model) < n:  # the CPU backend: its own GEMM
        assert {r["kernel"].split("_")[0] for r in rows} != {"gemv"}
        return
    tiled = [r for r in rows if r["kernel"].startswith("gemm_rows_")]
    assert {r["label"] for r in tiled} == {r["label"] for r in rows}
    # XROWS: the step's own rows in its table, else the short table window's
    assert {r["spec"][4] for r in tiled} == {n if n <= TABLE_ROWS else tile_rows(model)}
    # in a table of its own rows, one command a product: no other row window beside it
    assert (len(rows) == len(tiled)) == (n <= TABLE_ROWS)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_few_rows_score_as_more_rows_do(model, n):
    """The same n sequences decoding alone and beside five more (a step past the few-row
    tables, in the short table): the same tokens' log-probabilities within FEW_ROW_TOL."""
    ids = prompts(model, n, seed=10 + n)
    alone = decode(akunu.Batch(model, max_sequences=8), ids)
    beside = decode(akunu.Batch(model, max_sequences=12), ids + prompts(model, 5, seed=99))[:n]
    for a, w in zip(alone, beside):
        np.testing.assert_allclose(a, w, atol=FEW_ROW_TOL, rtol=0)


def test_steps_move_between_the_tables_as_sequences_join_and_leave(model):
    """A sequence decoding through steps of 1, 2, 3 and back to 1 rows (the others joining and
    leaving) gets the log-probabilities it gets alone, within FEW_ROW_TOL past its first."""
    ids = prompts(model, 3, seed=7)
    want = decode(akunu.Batch(model, max_sequences=4), ids[:1], tokens=10)[0]
    b = akunu.Batch(model, max_sequences=4)
    first, got, others = b.add(ids[0]), [], []
    while len(got) < 10:
        if len(got) in (2, 4):
            others.append(b.add(ids[len(others) + 1][:1]))  # one-token prompts: decode rows at once
        if len(got) == 7:
            for s in others:
                b.remove(s)
        for seq, _, logprob in b.step():
            if seq == first:
                got.append(logprob)
    np.testing.assert_allclose(np.array(got[1:]), want[1:], atol=FEW_ROW_TOL, rtol=0)

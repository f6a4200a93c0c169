"""A batched step of one row runs the one-row table (docs/batch.md): its matrix products are the
GEMVs of a Model's decode step, planned as a decode step's (Q/K/V in one dispatch, the pre-norms
folded into the GEMVs), not GEMM row tiles carrying one live row of four or thirty-two.

So a sequence decoding alone in a batch gives the log-probabilities of the Model's own decode
within ONE_ROW_TOL, far inside the batch's general LOGIT_TOL (test_batch.py): both sum every
product in the GEMV's order over float activations; only attention differs (attention_rows
reads the sequence's blocks and sums in another order than the Model's split attention). The
first token comes from the prompt's multi-row step and is held to the token only.
"""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from support.fixture_paths import require

pytestmark = pytest.mark.usefixtures("backend")

FIXTURES = {
    "llama-f16": ("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf"),
    "llama-q8_0": ("tiny-llama3-random", "gguf", "tiny-llama3-random-q8_0.gguf"),
    "gemma3-q8_0": ("tiny-gemma3-random", "gguf", "tiny-gemma3-random-q8_0.gguf"),
    "qwen3-f16": ("tiny-qwen3-random", "gguf", "tiny-qwen3-random-f16.gguf"),
}
ONE_ROW_TOL = 1e-3  # absolute, on log-probabilities: attention's summation order only
F16_STEP = 2e-3  # a KV value's f16 rounding step near 1: one rounding apart at most
TOKENS = 12


def decode_alone(b, ids):
    seq = b.add(ids)
    tokens, logprobs = [], []
    while len(tokens) < TOKENS:
        for _, token, logprob in b.step():
            tokens.append(token)
            logprobs.append(logprob)
    return seq, tokens, np.array(logprobs)


def product_kernels(rows):
    return {r["kernel"].split("_")[0] for r in rows if r["label"].split(".")[-1] in ("attn_qkv", "attn_q", "output")}


@pytest.mark.parametrize("name", FIXTURES)
def test_a_sequence_alone_decodes_as_the_model(name):
    m = akunu.Model(require(*FIXTURES[name]), context=600, progress=False)
    ids = [int(x) for x in np.random.default_rng(3).integers(3, m.config.vocab_size, 20)]
    want = m.generate(ids, max_tokens=TOKENS, stream=False)
    b = akunu.Batch(m, max_sequences=4)
    seq, tokens, logprobs = decode_alone(b, ids)
    assert tokens == list(want.token_ids)
    np.testing.assert_allclose(logprobs[1:], np.array(want.logprobs)[1:], atol=ONE_ROW_TOL, rtol=0)
    rows = b.profile()  # the last step: one row
    assert product_kernels(rows) == {"gemv"}
    # and one attention command a layer: no query tiles' kernel beside the rows' own
    assert sum(r["label"].endswith(".attention") for r in rows) == m.config.n_layers
    # RoPE and the KV write ride on the Q/K/V GEMV where the Model's decode step has them there
    labels = {r["label"].split(".")[-1] for r in rows}
    assert ("rope_kv" in labels) == ("rope_kv" in {r["label"].split(".")[-1] for r in m.dispatch_table()})
    # The rows the one-row steps wrote are the Model's decode rows to an f16 step (both the
    # decode GEMVs' K and V); the prompt's rows, from the GEMMs, within test_batch.py's bound.
    kv, n = b.kv_cache(seq), len(ids)
    assert kv.current_length == m.kv_cache.current_length == n + TOKENS - 1
    for layer in range(m.config.n_layers):
        for got, want in ((kv.k(layer, dequantize=True), m.kv_cache.k(layer, dequantize=True)),
                          (kv.v(layer, dequantize=True), m.kv_cache.v(layer, dequantize=True))):
            np.testing.assert_allclose(got[:, n:], want[:, n:], atol=F16_STEP, rtol=F16_STEP)
            np.testing.assert_allclose(got[:, :n], want[:, :n], atol=5e-2)


def test_two_rows_run_the_row_tiles_and_one_row_the_gemvs():
    """The one-row table is taken by the rows a step runs, not by the batch's sequences: a
    second sequence's step of two rows runs the row tiles again, and when it leaves the first
    goes back to the GEMVs with its cache as it was."""
    m = akunu.Model(require(*FIXTURES["llama-f16"]), context=600, progress=False)
    ids = [int(x) for x in np.random.default_rng(4).integers(3, m.config.vocab_size, 9)]
    b = akunu.Batch(m, max_sequences=4)
    first = b.add(ids)
    b.step()
    b.step()
    assert product_kernels(b.profile()) == {"gemv"}
    other = b.add(ids[:1])
    b.step()
    assert product_kernels(b.profile()) == {"gemm"}
    b.remove(other)
    before = b.length(first)
    out = b.step()
    assert [s for s, _, _ in out] == [first] and b.length(first) == before + 1
    assert product_kernels(b.profile()) == {"gemv"}

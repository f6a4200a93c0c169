"""Greedy and beam search of akunu.whisper on the random fixture model, on akunu's engine and
on the transformers reference (tests/python/whisper_reference.py): the fixture's greedy tokens,
transformers' own beam search, slots that do not disturb each other, language detection."""
from __future__ import annotations

import json

import numpy as np
import pytest

from akunu.whisper.language import detect_languages
from akunu.whisper.rules import LogitRules
from akunu.whisper.search import Task, search
from akunu.whisper.tokens import WhisperTokens
from support.fixture_paths import require
from whisper_reference import open_engine, transformers_mel

CLIPS = ("jfk", "weather")


@pytest.fixture(scope="module", params=["akunu", "reference"])
def random_model(request):
    path = require("whisper", "tiny-whisper-random", "hf")
    engine = open_engine(request.param, path)
    return request.param, engine, WhisperTokens(engine.tokenizer, engine.config["n_vocab"])


def fixture_mel(clip) -> np.ndarray:
    """The clip's mel as transformers makes it (audio padded to 30 s first)."""
    pytest.importorskip("transformers", reason="the fixture's mel is transformers'")
    sf = pytest.importorskip("soundfile", reason="soundfile is not installed")
    audio, _ = sf.read(require("whisper", "audio", f"{clip}.wav"), dtype="float32")
    return transformers_mel(np.pad(audio, (0, 480000 - len(audio))))


def plain(tokens) -> LogitRules:
    return LogitRules(tokens, [], None, False, None)


def run(engine, tokens, prompt, beams, max_new=16, windows=(0,), **kw):
    tasks = [Task(w, prompt, prompt.index(tokens.sot), plain(tokens)) for w in windows]
    return search(engine, tasks, tokens, temperature=0.0, beam_size=beams, best_of=1, patience=1.0, length_penalty=1.0,
                  max_new_tokens=max_new, n_text_ctx=engine.config["n_text_ctx"], rng=None, slots=8, **kw)


def test_greedy_matches_the_fixture(random_model):
    """Plain argmax over the engine's logits gives the fixture's 16 greedy tokens up to the first
    step whose top-2 margin is small enough to flip under float32 reordering."""
    pytest.importorskip("transformers", reason="the fixture mel is transformers'")
    _, engine, tokens = random_model
    refs = json.loads(require("whisper", "tiny-whisper-random", "ref", "refs.json").read_text())
    engine.encode(np.stack([fixture_mel(c) for c in CLIPS]))
    got = run(engine, tokens, [50257, 50362], 1, windows=(0, 1))
    for clip, d in zip(CLIPS, got):
        want = refs[clip]["greedy16"]
        assert d.best.tokens == want or refs[clip]["min_margin"] < 0.05, clip
        assert d.best.tokens[:4] == want[:4], clip


@pytest.mark.parametrize("beams", [3, 4])
def test_beam_search_matches_transformers(random_model, beams):
    """Beam search over the slots (beams split by copy_sequence) picks transformers' sequence
    and its length-normalised score, without any suppression."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    pytest.importorskip("transformers", reason="transformers is not installed")
    from whisper_reference import ReferenceWhisperModel

    _, engine, tokens = random_model
    mel = fixture_mel("weather")
    engine.encode(mel)
    d = run(engine, tokens, [50257, 50362], beams, max_new=12)[0]
    hf = ReferenceWhisperModel.load(require("whisper", "tiny-whisper-random", "hf"))._m
    with torch.no_grad():
        out = hf.generate(torch.from_numpy(mel[None]), decoder_input_ids=torch.tensor([[50257, 50362]]),
                          num_beams=beams, max_new_tokens=12, do_sample=False, length_penalty=1.0,
                          suppress_tokens=None, begin_suppress_tokens=None, return_timestamps=False,
                          output_scores=True, return_dict_in_generate=True)
    assert d.best.tokens == out.sequences[0, 2:].tolist()
    np.testing.assert_allclose(d.best.score(1.0), float(out.sequences_scores[0]), rtol=1e-3)


def test_slots_of_a_batch_do_not_disturb_each_other(random_model):
    """Two windows decoded together (beam 3 each, six slots copying KV among themselves) give
    what each gives alone."""
    _, engine, tokens = random_model
    rng = np.random.default_rng(7)
    mels = rng.normal(size=(2, 80, 3000)).astype(np.float32)
    engine.encode(mels)
    together = run(engine, tokens, [50257, 50362], 3, max_new=10, windows=(0, 1))
    for w in (0, 1):
        engine.encode(mels[w])
        alone = run(engine, tokens, [50257, 50362], 3, max_new=10)[0]
        assert alone.best.tokens == together[w].best.tokens
        assert abs(alone.best.sum_logprob - together[w].best.sum_logprob) < 1e-3


class _LanguageStub:
    """An engine whose first step favours one language token."""

    def __init__(self, favoured):
        self.favoured, self.calls = favoured, []

    def reset(self, seq):
        pass

    def set_audio(self, seq, window):
        self.calls.append(window)

    def decode(self, seqs, toks, all_logits=False):
        logits = np.zeros((len(seqs), 51865), np.float32)
        logits[:, 220] = 50.0  # a text token, likelier than any language: must not count
        for i, w in enumerate(self.calls[-len(seqs):]):
            logits[i, self.favoured[w]] = 5.0
        return logits


def test_language_detection_reads_only_language_tokens(random_model):
    _, engine, _ = random_model
    multi = WhisperTokens(engine.tokenizer, 51865)
    assert multi.multilingual
    de, fr = multi.language_ids["de"], multi.language_ids["fr"]
    found = detect_languages(_LanguageStub({0: de, 1: fr}), multi, [0, 1], slots=8)
    assert [f[0] for f in found] == ["de", "fr"] and found[0][1] > 0.5
    assert abs(sum(found[0][2].values()) - 1) < 1e-6


def test_sampling_is_seeded_and_keeps_the_likeliest_candidate(random_model):
    """Above temperature 0, best_of candidates are drawn in their own slots; the same seed
    draws the same ones, and the kept one has the best length-normalised log-prob."""
    _, engine, tokens = random_model
    engine.encode(np.random.default_rng(3).normal(size=(80, 3000)).astype(np.float32))
    task = [Task(0, [50257, 50362], 0, plain(tokens))]

    def draw(seed):
        return search(engine, task, tokens, temperature=1.0, beam_size=1, best_of=3, patience=1.0, length_penalty=1.0,
                      max_new_tokens=8, n_text_ctx=448, rng=np.random.default_rng(seed), slots=8)[0]

    a, b, c = draw(1), draw(1), draw(2)
    assert len(a.candidates) == 3 and [h.tokens for h in a.candidates] == [h.tokens for h in b.candidates]
    assert [h.tokens for h in a.candidates] != [h.tokens for h in c.candidates]
    assert a.best.score(1.0) == max(h.score(1.0) for h in a.candidates)
    assert len({tuple(h.tokens) for h in a.candidates}) > 1  # each slot samples on its own


class _Recorder:
    """Forwards every call to the engine and keeps the token lists given to decode, and to
    decode_greedy (each slot's first token: its prompt's last, which the chain feeds)."""

    def __init__(self, engine):
        self.engine, self.fed = engine, []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def decode(self, seqs, tokens, all_logits=False):
        self.fed.append([list(t) for t in tokens])
        return self.engine.decode(seqs, tokens, all_logits)

    def decode_greedy(self, seqs, tokens, *args, **kw):
        self.fed.append([[t] for t in tokens])
        return self.engine.decode_greedy(seqs, tokens, *args, **kw)


def test_multilingual_transcription_detects_or_takes_the_language(random_model):
    """The random model read as a multilingual one (its vocabulary has the language tokens):
    without a language the first window picks one and reports it; with one, every window's
    prompt carries it and the task."""
    from akunu.whisper import Whisper

    _, engine, _ = random_model
    spy = _Recorder(engine)
    w = Whisper("random", engine=spy)
    w.tokens = WhisperTokens(w.tokenizer, 51865)
    x = np.random.default_rng(5).normal(scale=0.1, size=16000 * 2).astype(np.float32)
    r = w.transcribe(x, max_new_tokens=3)
    assert r.language in w.tokens.language_ids and 0 < r.language_probability <= 1
    assert spy.fed[0] == [[w.tokens.sot]]  # the detection step
    spy.fed.clear()
    r = w.transcribe(x, language="de", task="translate", max_new_tokens=3)
    de = w.tokens.language_ids["de"]
    after_sot = [t for call in spy.fed[1:3] for t in call[0]]  # one decode, or a decode and a chain's first step
    assert r.language == "de" and after_sot[:3] == [de, w.tokens.translate, w.tokens.no_timestamps]

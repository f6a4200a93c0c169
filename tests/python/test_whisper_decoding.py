"""akunu.whisper's decoding rules without a model: the timestamp grammar, suppression, the
segment split and seek, compression ratio, DTW, the median filter, word splitting and
punctuation merging, against faster-whisper's and transformers' own functions where they are
installed and against hand-worked cases otherwise."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import akunu
from akunu.whisper import alignment, output
from akunu.whisper.fallback import WindowResult, _needs_fallback, compression_ratio
from akunu.whisper.options import TranscribeOptions
from akunu.whisper.result import Segment, Transcription, Word
from akunu.whisper.rules import LogitRules, log_softmax
from akunu.whisper.segments import split_by_timestamps
from akunu.whisper.tokens import WhisperTokens
from support.fixture_paths import require

N_VOCAB = 51864  # tiny.en's
TB = 50363  # its first timestamp token
EOT = 50256


@pytest.fixture(scope="module")
def tokens():
    tok = akunu.Tokenizer.from_file(require("whisper", "tiny-whisper-random", "hf", "tokenizer.json"))
    return WhisperTokens(tok, N_VOCAB)


def rules(tokens, timestamps=True, max_initial=50, blank=True):
    return LogitRules(tokens, tokens.suppressed([-1]), [220, EOT] if blank else None, timestamps, max_initial)


def allowed(x):
    return set(np.flatnonzero(np.isfinite(x)).tolist())


# ---------------------------------------------------------------- special tokens


def test_special_tokens_of_the_english_vocabulary(tokens):
    assert (tokens.eot, tokens.sot, tokens.no_timestamps, tokens.timestamp_begin) == (EOT, 50257, 50362, TB)
    assert (tokens.transcribe, tokens.translate, tokens.sot_prev, tokens.no_speech) == (50358, 50357, 50360, 50361)
    assert not tokens.multilingual and tokens.sot_sequence == [50257]
    # previous text is clipped to the last n_text_ctx // 2 - 1 tokens
    prompt = tokens.prompt(list(range(300)), timestamps=False, prefix=None, n_text_ctx=448)
    assert prompt[0] == tokens.sot_prev and prompt[1:224] == list(range(77, 300)) and prompt[224:] == [50257, 50362]


def test_multilingual_prompts_carry_language_and_task(tokens):
    multi = WhisperTokens(tokens.tokenizer, 51865)
    de = multi.with_language("de", "translate")
    assert de.sot_sequence == [multi.sot, multi.language_ids["de"], multi.translate] and de.language == "de"
    assert multi.with_language("fr").sot_sequence[1:] == [multi.language_ids["fr"], multi.transcribe]
    assert tokens.with_language("de").sot_sequence == [tokens.sot]  # English-only: no language token
    with pytest.raises(ValueError, match="'xx' is not one of Whisper's codes"):
        multi.with_language("xx")


def test_non_speech_tokens_match_faster_whisper(tokens):
    fw = pytest.importorskip("faster_whisper.tokenizer", reason="faster-whisper is not installed")
    tk = pytest.importorskip("tokenizers", reason="tokenizers is not installed")
    hf = tk.Tokenizer.from_file(str(require("whisper", "tiny-whisper-random", "hf", "tokenizer.json")))
    want = fw.Tokenizer(hf, multilingual=False)
    assert tokens.non_speech == list(want.non_speech_tokens)
    ids = hf.encode(" And so, my fellow Americans: ask not (what) 'your' country-can do!", add_special_tokens=False).ids
    assert tokens.split_to_words(ids + [EOT]) == want.split_to_word_tokens(ids + [EOT])


# ---------------------------------------------------------------- logit rules


def test_first_step_is_a_timestamp_no_later_than_the_initial_limit(tokens, rng):
    x = rules(tokens, max_initial=50).apply(rng.normal(size=N_VOCAB), [])
    assert allowed(x) == set(range(TB, TB + 51))


def test_blank_and_suppressed_tokens_never_start_the_text(tokens, rng):
    r = rules(tokens, timestamps=False)
    first, later = r.apply(rng.normal(size=N_VOCAB), []), r.apply(rng.normal(size=N_VOCAB), [400])
    assert not {220, EOT} & allowed(first) and {220, EOT} <= allowed(later)
    assert not set(tokens.suppressed([-1])) & (allowed(first) | allowed(later))
    assert {TB, TB + 100} <= allowed(later)  # without the grammar, timestamps are not forbidden


@pytest.mark.parametrize("generated, can_text, can_eot, lowest_ts", [
    ([TB + 10, 400], True, True, TB + 11),  # inside a segment: text, its end (not before its start + 1), or the end
    ([TB + 10, 400, TB + 30], False, True, TB + 30),  # a segment ended: the next start (>= its end) or the end
    ([TB + 10, 400, TB + 30, TB + 30], True, True, None),  # a pair closed: text only (or the end)
])
def test_timestamp_grammar(tokens, generated, can_text, can_eot, lowest_ts):
    logits = np.full(N_VOCAB, -10.0)
    logits[:TB] = 5.0  # text far likelier than the timestamps together: the mass rule does not interfere
    x = rules(tokens).apply(logits, generated)
    ok = allowed(x)
    assert bool(ok & set(range(0, EOT))) == can_text and (EOT in ok) == can_eot
    stamps = sorted(t for t in ok if t >= TB)
    assert (stamps[0] if stamps else None) == lowest_ts
    assert tokens.no_timestamps not in ok


def test_timestamps_win_when_their_total_probability_beats_every_text_token(tokens):
    logits = np.full(N_VOCAB, -10.0)
    logits[400] = 3.0  # the likeliest single token is text
    logits[TB + 11:TB + 40] = 1.0  # but together the timestamps are likelier
    x = rules(tokens).apply(logits, [TB + 10, 400])
    assert min(allowed(x)) >= TB


def test_nan_logits_end_the_text_instead_of_crashing(tokens):
    x = rules(tokens, timestamps=False).apply(np.full(N_VOCAB, np.nan), [400])
    assert allowed(x) == {EOT} and np.isfinite(log_softmax(x)[EOT])


# ---------------------------------------------------------------- segments and seek


def test_split_at_timestamp_pairs_and_seek_to_the_last_complete_segment():
    toks = [TB, 1, 2, TB + 100, TB + 100, 3, TB + 250, TB + 260, 4]  # the last segment is unfinished
    segs, seek, single = split_by_timestamps(toks, TB, 10.0, 1000, 3000, 30.0)
    assert [(s["start"], s["end"]) for s in segs] == [(10.0, 12.0), (12.0, 15.0)]
    assert seek == 1000 + 250 * 2 and not single
    segs, seek, single = split_by_timestamps([TB, 1, 2, TB + 100], TB, 0.0, 0, 1100, 11.0)
    assert len(segs) == 1 and segs[0]["end"] == 2.0 and seek == 1100 and single  # a lone final timestamp
    segs, seek, _ = split_by_timestamps([1, 2, 3], TB, 30.0, 3000, 1200, 12.0)
    assert (segs[0]["start"], segs[0]["end"], seek) == (30.0, 42.0, 4200)  # no timestamps: the whole window


def _result(text, avg, no_speech=0.1, t=0.0):
    return WindowResult([1], text, avg, no_speech, t, compression_ratio(text), [avg])


@pytest.mark.parametrize("text, avg, no_speech, fails", [
    ("a plain sentence", -0.3, 0.1, False),
    ("again and again " * 20, -0.3, 0.1, True),  # repeats itself
    ("a plain sentence", -1.5, 0.1, True),  # unlikely
    ("a plain sentence", -1.5, 0.9, False),  # unlikely, but silence: no better text to find
])
def test_fallback_criteria(text, avg, no_speech, fails):
    assert _needs_fallback(_result(text, avg, no_speech), TranscribeOptions()) == fails


def test_compression_ratio_is_zlibs():
    text = "the same words again " * 20
    assert compression_ratio(text) == len(text.encode()) / len(zlib.compress(text.encode())) > 2.4
    assert compression_ratio("And so my fellow Americans") < 2.4
    fw = pytest.importorskip("faster_whisper.transcribe", reason="faster-whisper is not installed")
    assert compression_ratio(text) == fw.get_compression_ratio(text)


# ---------------------------------------------------------------- alignment


@pytest.mark.parametrize("shape", [(1, 1), (5, 9), (13, 40), (31, 17)])
def test_dtw_matches_transformers(shape, rng):
    gw = pytest.importorskip("transformers.models.whisper.generation_whisper", reason="transformers is not installed")
    cost = rng.normal(size=shape).astype(np.float32)
    rows, cols = alignment.dtw(cost.astype(np.float64))
    want_rows, want_cols = gw._dynamic_time_warping(cost)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(cols, want_cols)
    assert rows[0] == cols[0] == 0 and rows[-1] == shape[0] - 1 and cols[-1] == shape[1] - 1
    assert np.all(np.diff(rows) >= 0) and np.all(np.diff(cols) >= 0)


def test_median_filter_with_reflected_edges(rng):
    x = rng.normal(size=(3, 4, 23))
    got = alignment.median_filter(x, 7)
    padded = np.pad(x, ((0, 0), (0, 0), (3, 3)), mode="reflect")
    want = np.stack([np.median(padded[..., i:i + 7], axis=-1) for i in range(23)], axis=-1)
    np.testing.assert_array_equal(got, want)
    assert alignment.median_filter(x[..., :3], 7) is not None  # too short to filter: unchanged


def test_merge_punctuations_matches_faster_whisper():
    fw = pytest.importorskip("faster_whisper.transcribe", reason="faster-whisper is not installed")
    words = [" And", " so", ",", " my", " (", "fellow", ")", " Americans", ".", " \"ask", "\""]

    def fresh():
        return [dict(word=w, tokens=[i], start=i, end=i + 1) for i, w in enumerate(words)]

    opts = TranscribeOptions()
    got, want = fresh(), fresh()
    alignment.merge_punctuations(got, opts.prepend_punctuations, opts.append_punctuations)
    fw.merge_punctuations(want, opts.prepend_punctuations, opts.append_punctuations)
    assert got == want and any(w["word"] == "" for w in got)


def test_default_alignment_heads_are_the_second_half():
    assert alignment.default_heads(4, 2) == [[2, 0], [2, 1], [3, 0], [3, 1]]


# ---------------------------------------------------------------- options and output


@pytest.mark.parametrize("bad", [dict(beam_size=0), dict(temperature=-1.0), dict(temperature=(0.0, float("nan"))),
                                 dict(best_of=0), dict(task="summarize"), dict(max_new_tokens=0)])
def test_bad_options_are_named(bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        TranscribeOptions.from_kwargs(**bad)
    with pytest.raises(TypeError, match="beam"):
        TranscribeOptions.from_kwargs(beams=5)


def test_subtitle_formats():
    seg = Segment(0, 0, 0.0, 3661.5, " Hello there.", [1], 0.0, -0.1, 1.0, 0.01,
                  [Word(" Hello", 0.0, 0.5, 0.9), Word(" there.", 0.5, 3661.5, 0.8)])
    r = Transcription(" Hello there.", [seg])
    assert output.render(r, "txt") == "Hello there.\n"
    assert output.render(r, "srt") == "1\n00:00:00,000 --> 01:01:01,500\nHello there.\n\n"
    assert output.render(r, "vtt") == "WEBVTT\n\n00:00.000 --> 01:01:01.500\nHello there.\n\n"
    assert output.render(r, "vtt", words=True).count(" --> ") == 2
    assert '"probability": 0.9' in output.render(r, "json")
    with pytest.raises(ValueError, match="format"):
        output.render(r, "doc")

"""Python's share of a Whisper decode step: akunu.whisper's search (rules, log-softmax, greedy
or beam bookkeeping) against an engine that answers at once with fixed logits, so what is timed
is the Python alone. Compare with the engine's own step time to see what Python adds.

    python bench/whisper_search.py [--tokenizer PATH/tokenizer.json] [--steps 100]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import time

import numpy as np

import akunu
from akunu.whisper.longform import make_rules
from akunu.whisper.options import TranscribeOptions
from akunu.whisper.search import Task, search
from akunu.whisper.tokens import WhisperTokens

FIXTURES = pathlib.Path(os.environ.get("AKUNU_FIXTURES")
                        or pathlib.Path(__file__).resolve().parents[2] / "shared" / "fixtures")
FIXTURE = FIXTURES / "whisper" / "tiny-whisper-random" / "hf" / "tokenizer.json"


class InstantEngine:
    """The WhisperModel calls search makes, answering with the same random logits every step
    (<|endoftext|> never likely, so every run takes the same number of steps)."""

    def __init__(self, n_vocab: int, eot: int):
        self.calls = 0
        self.logits = np.random.default_rng(0).normal(size=(8, n_vocab)).astype(np.float32)
        self.logits[:, eot] = -30.0

    def reset(self, seq):
        pass

    def set_audio(self, seq, window):
        pass

    def copy_sequence(self, src, dst):
        pass

    def decode(self, seqs, tokens, all_logits=False):
        self.calls += 1
        return self.logits[:len(seqs)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenizer", default=str(FIXTURE), help="a Whisper tokenizer.json (default: the fixture's)")
    p.add_argument("--steps", type=int, default=100)
    args = p.parse_args()
    tokens = WhisperTokens(akunu.Tokenizer.from_file(args.tokenizer), 51864)
    print("| timestamps | beam | ms per step |\n|---|---|---|")
    for timestamps in (False, True):
        rules = make_rules(tokens, TranscribeOptions(timestamps=timestamps), None)
        prompt = tokens.sot_sequence + ([] if timestamps else [tokens.no_timestamps])
        for beam in (1, 5):
            engine = InstantEngine(51864, tokens.eot)
            start = time.perf_counter()
            search(engine, [Task(0, prompt, 0, rules)], tokens, temperature=0.0, beam_size=beam, best_of=1,
                   patience=1.0, length_penalty=1.0, max_new_tokens=args.steps, n_text_ctx=448, rng=None, slots=8)
            ms = (time.perf_counter() - start) / engine.calls * 1000
            print(f"| {timestamps} | {beam} | {ms:.2f} |")


if __name__ == "__main__":
    main()

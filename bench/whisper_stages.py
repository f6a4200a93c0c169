"""Whisper end to end by stage, on one device: the log-mel spectrogram, the encoder, and the whole
transcribe (greedy and beam 5), per clip, then a batch of the same clip N times as one
transcribe call (batched encoder and decoder steps), as seconds and x real time. Medians of
--runs after a warm-up run.

    python bench/whisper_stages.py MODEL_DIR CLIP.wav [CLIP.wav ...] [--device vulkan] [--batch 16]
        [--tuning whisper_chain=0 whisper_chain=16]

With several --tuning settings, the whole report once per setting, each on a model loaded with
it (greedy decoding per step against chains of steps on the device, in one call).

Then the device time of the last encoder pass and decoder step by command (Whisper.profile).
The decoder's share is the transcribe time less the mel and encoder times of its windows (a
clip over 30 s runs one encoder pass per window, counted here from its duration).
"""
from __future__ import annotations

import argparse
import math
import pathlib
import statistics
import time
import wave

import numpy as np

import akunu
from akunu.audio import load_audio


def read_clip(path: str) -> np.ndarray:
    """16-bit PCM WAV through the standard library (machines without soundfile), else
    akunu.audio.load_audio."""
    if not path.endswith(".wav"):
        return load_audio(path)
    with wave.open(path) as f:
        pcm = np.frombuffer(f.readframes(f.getnframes()), np.int16).reshape(-1, f.getnchannels())
        return load_audio(pcm.mean(axis=1).astype(np.float32) / 32768, f.getframerate())


def median_s(f, runs: int) -> float:
    f()  # warm-up: pipelines, first allocations
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def clip_row(w, clip: str, runs: int) -> str:
    """One clip's row: mel, encoder, greedy and beam 5 times."""
    audio = read_clip(clip)
    seconds = len(audio) / 16000
    windows = max(1, math.ceil(seconds / 30))
    mel = w.mel(audio)
    mel_s = median_s(lambda: w.mel(audio), runs)
    enc_s = median_s(lambda: w.encode(mel), runs)
    greedy = median_s(lambda: w.transcribe(audio, beam_size=1, temperature=0.0), runs)
    beam = median_s(lambda: w.transcribe(audio, beam_size=5, temperature=0.0), runs)
    decoder = greedy - windows * (mel_s + enc_s)
    return (f"| {pathlib.Path(clip).name} | {seconds:.1f} | {mel_s * 1e3:.1f} | {enc_s * 1e3:.1f} | "
            f"{greedy * 1e3:.1f} | {decoder / greedy:.0%} | {seconds / greedy:,.0f}x | {beam * 1e3:.1f} | "
            f"{seconds / beam:,.0f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("clips", nargs="+")
    ap.add_argument("--device", default=None)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tuning", nargs="+", default=[""], help="tuning settings (key=value,...), one report each")
    a = ap.parse_args()
    for tuning in a.tuning:
        report(akunu.load(a.model, device=a.device, tuning=tuning), a, tuning)


def report(w, a, tuning: str) -> None:
    print(f"device: {w.engine.device.name}, tuning: {tuning or '(defaults)'}, chain steps: "
          f"{getattr(w.engine, 'chain_steps', 0)}")
    print("| clip | seconds | mel ms | encoder ms | greedy ms | decoder share | x real time | beam 5 ms "
          "| x real time |")
    print("|---|---|---|---|---|---|---|---|---|")
    for clip in a.clips:
        print(clip_row(w, clip, a.runs))
    audio = read_clip(a.clips[0])
    seconds = len(audio) / 16000
    w.transcribe(audio, beam_size=1, temperature=0.0)
    for what in ("encoder", "decoder"):  # the last window's encoder pass and decoder step
        rows = w.profile(what)
        print(f"\n{what}: {sum(r['ms'] for r in rows):.3f} ms of device time, {len(rows)} commands")
        print(akunu.profile_table(rows, by="label"))
    batch_s = median_s(lambda: w.transcribe([audio] * a.batch, beam_size=1, temperature=0.0), a.runs)
    print(f"batch of {a.batch} x {pathlib.Path(a.clips[0]).name}, greedy: {batch_s * 1e3:.1f} ms, "
          f"{a.batch * seconds / batch_s:,.0f}x real time aggregate\n")


if __name__ == "__main__":
    main()

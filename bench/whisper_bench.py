"""Whisper transcription speed: akunu against faster-whisper, side by side in one run.

Each system runs in its own worker process (the model loaded once, outside the timings); the
driver asks every worker for every case in turn, round after round, so that the load of a
shared machine falls on all systems alike. A case is a clip and a beam size, transcribed from
the file path with timestamps on and no conditioning on previous text (faster-whisper's
`transcribe(beam_size=..., temperature=0, condition_on_previous_text=False)`).

    python bench/whisper_bench.py [--model DIR] [--repeats 3] [--clips jfk long] [--beams 1 5]
        [--akunu NAME=PYTHON ...]      # more akunu builds (another venv's python): before/after
        [--compute-types int8 float32] [--threads 2] [--json out.json]

akunu runs on its CPU backend with AKUNU_THREADS=--threads (or --akunu-threads); faster-whisper
with cpu_threads=--threads.
For akunu the stage split comes from timing each engine call: mel, encoder, decoder steps
(decode, decode_top's beam steps, decode_greedy's chains, and the K/V copies), and what is
left of the wall time: Python (search, rules, audio loading). Reports the median seconds and x
real time of each system and case, and the median CPU seconds of the worker process (all its
threads: what a loaded machine does not inflate).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

FIXTURES = pathlib.Path(os.environ.get("AKUNU_FIXTURES")
                        or pathlib.Path(__file__).resolve().parents[2] / "shared" / "fixtures")
AUDIO = FIXTURES / "whisper" / "audio"
DEFAULT_MODEL = pathlib.Path.home() / ".cache" / "akunu" / "whisper-tiny.en-ct2"
STAGES = ("mel", "encode", "decode", "python")


# ---------------------------------------------------------------- workers

class StageTimer:
    """Wraps an engine: the seconds spent in each of its calls, by stage."""

    CALLS = {"mel": "mel", "encode": "encode", "decode": "decode", "decode_top": "decode", "decode_greedy": "decode",
             "copy_sequence": "decode", "set_audio": "decode"}

    def __init__(self, engine):
        self._engine = engine
        self.seconds = dict.fromkeys(STAGES, 0.0)

    def __getattr__(self, name):
        attr = getattr(self._engine, name)
        stage = self.CALLS.get(name)
        if stage is None:
            return attr

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds[stage] += time.perf_counter() - start
        return timed


def _akunu_worker(model: str):
    import akunu

    w = akunu.load(model, device="cpu")
    timer = StageTimer(w.engine)
    w.engine = timer

    def run(clip: str, beam: int) -> dict:
        timer.seconds = dict.fromkeys(STAGES, 0.0)
        start, cpu = time.perf_counter(), time.process_time()
        r = w.transcribe(clip, beam_size=beam, timestamps=True, condition_on_previous_text=False)
        total = time.perf_counter() - start
        stages = dict(timer.seconds)
        stages["python"] = total - sum(stages.values())
        return dict(seconds=total, cpu_seconds=time.process_time() - cpu, stages=stages, text=r.text)
    return run


def _faster_whisper_worker(model: str, compute_type: str, threads: int):
    import faster_whisper

    m = faster_whisper.WhisperModel(model, device="cpu", compute_type=compute_type, cpu_threads=threads)

    def run(clip: str, beam: int) -> dict:
        start, cpu = time.perf_counter(), time.process_time()
        segments, _ = m.transcribe(clip, beam_size=beam, temperature=0.0, condition_on_previous_text=False)
        text = "".join(s.text for s in segments)  # a generator: decoding happens here
        return dict(seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu, text=text)
    return run


def worker(kind: str, model: str, threads: int) -> None:
    """Answers one JSON request ({clip, beam}) per stdin line with one JSON line."""
    run = _akunu_worker(model) if kind == "akunu" else _faster_whisper_worker(model, kind, threads)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        print(json.dumps(run(req["clip"], req["beam"])), flush=True)


# ---------------------------------------------------------------- driver

class Worker:
    def __init__(self, name: str, python: str, kind: str, args):
        akunu_threads = args.akunu_threads or args.threads
        env = dict(os.environ, AKUNU_THREADS=str(akunu_threads), OMP_NUM_THREADS=str(args.threads))
        cmd = [python, __file__, "--worker", kind, "--model", str(args.model), "--threads", str(args.threads)]
        self.name = name
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.name} exited (code {self.proc.wait()})")
        return json.loads(line)

    def ask(self, clip: str, beam: int) -> dict:
        self.proc.stdin.write(json.dumps(dict(clip=clip, beam=beam)) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def duration(path: pathlib.Path) -> float:
    import soundfile

    info = soundfile.info(str(path))
    return info.frames / info.samplerate


def report(results: dict, durations: dict, names: list[str]) -> str:
    lines = ["| clip | beam | system | median s | x real time | runs (s) | CPU s | mel | encoder | decoder | Python |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (clip, beam), by_name in results.items():
        for name in names:
            runs = by_name[name]
            secs = [r["seconds"] for r in runs]
            med = statistics.median(secs)
            split = ["" for _ in STAGES]
            if "stages" in runs[0]:
                split = [f"{statistics.median(r['stages'][s] for r in runs):.3f}" for s in STAGES]
            cpu = statistics.median(r["cpu_seconds"] for r in runs)
            lines.append(f"| {clip} | {beam} | {name} | {med:.3f} | {durations[clip] / med:.1f} | "
                         f"{' '.join(f'{s:.2f}' for s in secs)} | {cpu:.3f} | " + " | ".join(split) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=str(DEFAULT_MODEL), help="a CTranslate2 Whisper folder (both systems load it)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--clips", nargs="+", default=["jfk", "long"], help="names in the fixtures' audio folder")
    p.add_argument("--beams", nargs="+", type=int, default=[1, 5])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--akunu-threads", type=int, help="akunu's threads, when not --threads")
    p.add_argument("--compute-types", nargs="*", default=["int8", "float32"], help="faster-whisper's, one worker each")
    p.add_argument("--akunu", nargs="*", default=[], metavar="NAME=PYTHON",
                   help="more akunu workers, each with another interpreter (a venv with another akunu build)")
    p.add_argument("--json", help="write every run's numbers here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.model, args.threads)

    specs = [("akunu", sys.executable, "akunu")] + [(s.split("=", 1)[0], s.split("=", 1)[1], "akunu")
                                                    for s in args.akunu]
    specs += [(f"fw-{ct}", sys.executable, ct) for ct in args.compute_types]
    workers = [Worker(name, python, kind, args) for name, python, kind in specs]
    names = [w.name for w in workers]
    cases = [(clip, beam) for clip in args.clips for beam in args.beams]
    durations = {clip: duration(AUDIO / f"{clip}.wav") for clip in args.clips}
    results = {case: {n: [] for n in names} for case in cases}
    load = [os.getloadavg()]
    for _ in range(args.repeats):
        for clip, beam in cases:
            for w in workers:
                results[(clip, beam)][w.name].append(w.ask(str(AUDIO / f"{clip}.wav"), beam))
        load.append(os.getloadavg())
    for w in workers:
        w.close()
    print(f"threads {args.threads}; load average (1 min) during the run: "
          f"{min(x[0] for x in load):.1f} to {max(x[0] for x in load):.1f}")
    print(report(results, durations, names))
    for (clip, beam), by_name in results.items():
        texts = {n: by_name[n][-1]["text"].strip() for n in names}
        if len(set(texts.values())) > 1:
            print(f"\n{clip} beam {beam}: the texts differ:\n" + "\n".join(f"  {n}: {t}" for n, t in texts.items()))
    if args.json:
        rows = [dict(clip=c, beam=b, system=n, runs=runs) for (c, b), by in results.items() for n, runs in by.items()]
        pathlib.Path(args.json).write_text(json.dumps(dict(load=load, rows=rows), indent=1))


if __name__ == "__main__":
    main()

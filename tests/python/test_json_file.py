"""JSON side files (config.json, tokenizer.json, tokenizer_config.json, a shard index) read with
the limits of cpp/akunu/formats/json_file.h: nesting depth, size, regular files only, and
messages that name the file but never echo its contents."""
from __future__ import annotations

import json
import os
import resource
import threading

import pytest

import akunu
from akunu import _akunu
from support.fixture_paths import FIXTURES, requires_fixtures

HF = FIXTURES / "tiny-llama3-random" / "hf"


def _nested(depth: int, kind: str) -> str:
    """A `kind` step (normalizer, pre_tokenizer, decoder, post_processor) nested `depth` deep."""
    key, leaf = {"normalizer": ("normalizers", '{"type":"NFC"}'),
                 "pre_tokenizer": ("pretokenizers", '{"type":"WhitespaceSplit"}'),
                 "decoder": ("decoders", '{"type":"Fuse"}'),
                 "post_processor": ("processors", '{"type":"ByteLevel"}')}[kind]
    return f'{{"type":"Sequence","{key}":[' * depth + leaf + "]}" * depth


def _tokenizer_json(kind: str, depth: int) -> str:
    base = json.loads((HF / "tokenizer.json").read_text())
    base[kind] = None
    text = json.dumps(base)
    return text.replace(f'"{kind}": null', f'"{kind}": {_nested(depth, kind)}', 1)


@requires_fixtures
@pytest.mark.parametrize("kind", ["normalizer", "pre_tokenizer", "decoder", "post_processor"])
def test_deep_nesting_is_refused_quickly(kind):
    """100,000 nested Sequence steps (a few MB) used to crash the process or take gigabytes: the
    depth is bounded before anything recursive runs, in time and memory linear in the text."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(akunu.Error, match=r"x\.json: JSON nested deeper than 64 levels at byte \d+"):
        _akunu.Tokenizer.from_json(_tokenizer_json(kind, 100_000), None, "x.json")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB
    _akunu.Tokenizer.from_json(_tokenizer_json(kind, 20), None, "x.json")  # a shallow Sequence still loads


def test_deep_nesting_in_every_json_reader(tmp_path):
    deep = "[" * 70 + "]" * 70
    with pytest.raises(akunu.Error, match="cfg: JSON nested deeper than 64 levels"):
        _akunu.config_from_json(f'{{"a": {deep}}}', "cfg")
    (tmp_path / "config.json").write_text(f'{{"a": {deep}}}')
    with pytest.raises(akunu.Error, match="config.json: JSON nested deeper than 64 levels"):
        akunu.open(str(tmp_path / "config.json"))
    header = f'{{"a": {deep}}}'.encode()
    (tmp_path / "m.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    with pytest.raises(akunu.Error, match="m.safetensors: the header: JSON nested deeper than 64 levels"):
        akunu.open(str(tmp_path / "m.safetensors"))
    assert _akunu.read_side_file(str(tmp_path / "config.json")).startswith(b'{"a": [[[')


def test_raw_json_errors_name_the_file_and_not_its_contents(tmp_path):
    with pytest.raises(akunu.Error, match=r"^cfg: invalid JSON: a number is out of the range of a double$"):
        _akunu.config_from_json('{"rope_theta": 1e999}', "cfg")
    (tmp_path / "config.json").write_text('{"secret-words": sesame}')
    with pytest.raises(akunu.Error, match="config.json: invalid JSON at byte") as e:
        akunu.open(str(tmp_path / "config.json"))
    assert "sesame" not in str(e.value) and "json.exception" not in str(e.value)


def test_only_regular_files_of_bounded_size_are_read(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    zero = tmp_path / "tokenizer.json"
    zero.symlink_to("/dev/zero")
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(65 << 20)
    calls = [(lambda p=p: _akunu.read_side_file(str(p)), m) for p, m in [
        (fifo, "is not a regular file"), (zero, "is not a regular file"), (loop, "symlink loop"),
        (big, "more than the 64 MiB")]]
    calls += [(lambda: akunu.Tokenizer.from_file(tmp_path), "tokenizer.json' is not a regular file"),
              (lambda: akunu.Tokenizer.from_file(fifo), "is not a regular file"),
              (lambda: akunu.Tokenizer.from_file(loop), "symlink loop"),
              (lambda: akunu.open(str(loop)), "symlink loop")]
    errors = []

    def run():  # in a thread, so that a read that blocks (a FIFO) fails the test instead of hanging it
        for call, _ in calls:
            try:
                call()
                errors.append(None)
            except akunu.Error as e:
                errors.append(str(e))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    assert len(errors) == len(calls), f"call {len(errors)} blocked"
    for (_, message), error in zip(calls, errors):
        assert error is not None and message in error, (message, error)


@requires_fixtures
def test_side_files_symlinked_to_other_files_are_never_echoed(tmp_path):
    """config.json, tokenizer.json, the shard index or a shard linked to some other file (not
    JSON, not safetensors): the error names the model's file and what is wrong, never the
    bytes of the file the link leads to."""
    import shutil
    secret = tmp_path / "secret.txt"
    secret.write_text("sesame: the password is open-sesame\n" * 4)

    def linked(name, rename=None):
        d = tmp_path / name.replace(".", "_")
        shutil.copytree(HF, d)
        if rename:
            (d / "model.safetensors").rename(d / rename)
        (d / name).unlink(missing_ok=True)
        (d / name).symlink_to(secret)
        return d

    cases = [(linked("config.json"), "config.json: invalid JSON at byte"),
             (linked("tokenizer.json"), "tokenizer.json: invalid JSON at byte"),
             (linked("model.safetensors.index.json", "model-00001-of-00001.safetensors"),
              "model.safetensors.index.json: invalid JSON at byte"),
             (linked("model.safetensors"), "model.safetensors: malformed safetensors file: header length")]
    for d, message in cases:
        first = akunu.Tokenizer.from_file if "tokenizer" in message else akunu.open
        for call, args in ((first, {}), (akunu.Model, {"context": 32, "progress": False, "device": "cpu"})):
            with pytest.raises(akunu.Error, match=message) as e:
                call(str(d), **args)
            assert "sesame" not in str(e.value), str(e.value)

"""Models by name from the local Hugging Face cache (akunu.hub): a fixture model laid out in a
temporary cache in the hub's layout and loaded by repo id with HF_HUB_OFFLINE=1, so nothing is
downloaded."""
from __future__ import annotations

import hashlib
import pathlib
import shutil

import numpy as np
import pytest

import akunu
from akunu import hub
from support.fixture_paths import require, requires_fixtures

pytest.importorskip("huggingface_hub", reason="models by name resolve through huggingface_hub")
pytestmark = requires_fixtures

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def lay_out(cache: pathlib.Path, repo_id: str, files: dict[str, pathlib.Path]) -> pathlib.Path:
    """The hub cache's layout: models--org--name/{blobs/<sha256>, refs/main, snapshots/<commit>/
    name -> ../../blobs/<sha256>}. Returns the snapshot folder."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for name, source in files.items():
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        shutil.copyfile(source, repo / "blobs" / digest)
        (snapshot / name).symlink_to(pathlib.Path("..", "..", "blobs", digest))
    return snapshot


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hf" / "hub"


def test_cache_dir_follows_hf_home(hf_cache):
    assert hub.cache_dir() == hf_cache
    assert hub.offline()


def test_model_by_repo_id_equals_the_files(hf_cache):
    hf = require("tiny-llama3-random", "hf")
    lay_out(hf_cache, "akunu-test/tiny-llama3", {p.name: p for p in hf.iterdir()})
    by_name = akunu.Model("akunu-test/tiny-llama3", context=64, device="cpu")
    assert by_name.path.startswith(str(hf_cache))
    by_path = akunu.Model(hf, context=64, device="cpu")
    ids = by_path.tokenize("def main():")
    assert by_name.tokenize("def main():") == ids
    np.testing.assert_array_equal(by_name.eval(ids, all_logits=True), by_path.eval(ids, all_logits=True))


def test_gguf_file_of_a_repo(hf_cache):
    gguf = require("tiny-qwen3-random", "gguf", "tiny-qwen3-random-q8_0.gguf")
    lay_out(hf_cache, "akunu-test/tiny-qwen3-GGUF", {gguf.name: gguf})
    m = akunu.load("akunu-test/tiny-qwen3-GGUF", gguf_file=gguf.name, context=64, device="cpu")
    assert isinstance(m, akunu.Model)
    assert m.config.architecture == "qwen3"


def test_offline_and_not_cached_says_so(hf_cache):
    with pytest.raises(akunu.Error, match=r"not in the local Hugging Face cache .*HF_HUB_OFFLINE is set"):
        akunu.Model("akunu-test/not-there")
    with pytest.raises(akunu.Error, match=r"akunu-test/not-there/x.gguf is not in the local"):
        akunu.Model("akunu-test/not-there", gguf_file="x.gguf")


def test_a_gguf_repo_without_gguf_file_names_the_argument(hf_cache):
    gguf = require("tiny-qwen3-random", "gguf", "tiny-qwen3-random-q8_0.gguf")
    lay_out(hf_cache, "akunu-test/only-gguf", {gguf.name: gguf})
    with pytest.raises(akunu.Error, match="gguf_file="):
        akunu.Model("akunu-test/only-gguf")


def test_paths_are_left_alone(tmp_path):
    assert hub.resolve(str(tmp_path)) == str(tmp_path)
    assert not hub.is_repo_id(str(tmp_path))
    assert hub.is_repo_id("org/name") and not hub.is_repo_id("model.gguf")

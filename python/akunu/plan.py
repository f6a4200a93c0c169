"""akunu.plan(): will this model fit, before anything is allocated?

    >>> print(akunu.plan("model.gguf", context=8192))

The plan reads headers only, validates the model against its architecture, and sizes the
weights (by dtype), the KV cache, the decode and prefill scratch buffers, and the total, then
compares them with the device's memory heaps.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from akunu import _akunu
from akunu._device import split_selectors
from akunu._inputs import fit_context


def _mib(n: int) -> str:
    if n < 2**20:
        return f"{n / 2**10:,.1f} KiB"
    if n < 2**30:
        return f"{n / 2**20:,.1f} MiB"
    return f"{n / 2**30:,.2f} GiB"


@dataclass
class MemoryPlan:
    config: _akunu.ModelConfig
    context: int
    prefill_chunk: int
    kv_dtype: str
    weights_by_dtype: list[tuple[str, int]]
    weights_bytes: int
    weights_estimated: bool
    kv_bytes: int
    decode_scratch: list[tuple[str, int]]
    prefill_scratch: list[tuple[str, int]]
    decode_scratch_bytes: int
    prefill_scratch_bytes: int
    total_bytes: int
    fork_bytes: int = 0  # what each Model.fork() adds: its KV cache and scratch (weights are shared)
    kv_max_bytes: int = 0    # the KV cache at the full context (blocks grow to it)
    kv_full_bytes: int = 0   # every layer pre-allocated for the whole context
    kv_block_bytes: int = 0  # one block of 256 positions (0: nothing in blocks)
    kv_ring_rows: int = 0    # rows per head of each sliding-window ring (0: no rings)
    kv_recent_rows: int = 0  # rows per KV head of a recent window's f16 rings ("int4h+w8"; 0: none)
    kv_recent_bytes: int = 0  # those rings, K and V of every layer (in kv_bytes)
    kv_layers: list[str] = field(default_factory=list)  # each layer's layout: full, blocks, ring
    device: str | None = None
    device_bytes: int = 0
    fits: bool | None = None
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        c = self.config
        rows = [f"memory plan: {c.architecture}, {c.n_layers} layers, dim {c.dim}, context {self.context}, "
                f"prefill chunk {self.prefill_chunk}, KV {self.kv_dtype}"]
        est = " (estimated from the config)" if self.weights_estimated else ""
        rows.append(f"  {'weights' + est:<44}{_mib(self.weights_bytes):>16}")
        for name, n in self.weights_by_dtype:
            rows.append(f"    {name:<42}{_mib(n):>16}")
        layouts = ", ".join(f"{n} {k}" for k, n in sorted(
            {k: self.kv_layers.count(k) for k in self.kv_layers}.items()))
        kv = f"KV cache ({layouts})" if layouts else "KV cache (self and cross attention)"
        rows.append(f"  {kv:<44}{_mib(self.kv_bytes):>16}")
        if self.kv_block_bytes:
            rows.append(f"    {'grows per 256 positions by':<42}{_mib(self.kv_block_bytes):>16}")
            rows.append(f"    {'at the full context':<42}{_mib(self.kv_max_bytes):>16}")
        if self.kv_ring_rows:
            rows.append(f"    {'ring rows per sliding layer':<42}{self.kv_ring_rows:>16,}")
        if self.kv_recent_rows:
            rows.append(f"    {f'recent window, {self.kv_recent_rows} f16 rows':<42}{_mib(self.kv_recent_bytes):>16}")
        if self.kv_full_bytes != self.kv_bytes:
            rows.append(f"    {'pre-allocated, without rings':<42}{_mib(self.kv_full_bytes):>16}")
        rows.append(f"  {'decode scratch':<44}{_mib(self.decode_scratch_bytes):>16}")
        rows.append(f"  {'prefill scratch':<44}{_mib(self.prefill_scratch_bytes):>16}")
        rows.append(f"  {'total':<44}{_mib(self.total_bytes):>16}")
        rows.append(f"  {'each fork() adds (KV cache and scratch)':<44}{_mib(self.fork_bytes):>16}")
        if self.device is not None:
            verdict = "fits" if self.fits else "DOES NOT FIT"
            rows.append(f"  {self.device} ({_mib(self.device_bytes)} device memory): {verdict}")
            rows.extend(f"    {n}" for n in self.notes)
        return "\n".join(rows)


def load_config(model) -> _akunu.ModelConfig:
    """A ModelConfig from a path (GGUF, safetensors file or dir, config.json), a config dict,
    an opened akunu.open() model, or a ModelConfig (returned as is)."""
    if isinstance(model, _akunu.ModelConfig):
        return model
    if isinstance(model, dict):
        return _akunu.config_from_json(json.dumps(model), "config dict")
    if isinstance(model, _akunu.ModelFiles):
        return _akunu.load_config(model)
    return _akunu.load_config(_akunu.open_model(os.fspath(model)))


def plan(model, context: int | None = None, prefill_chunk: int = 512, kv_dtype: str = "f16",
         device: str | int | None = None, weights_dtype: str = "F16", max_chain: int = 64,
         check_device: bool = True, kv_alloc: str = "full", kv_ring: bool = False,
         tuning: dict | str | None = None, max_sequences: int = 8, devices: list | None = None,
         split: list | None = None) -> MemoryPlan | SplitPlan:
    """Plans the memory of `model` (a path, config dict, ModelConfig or opened model).

    `context`: positions (None: the trained length); more than the model was trained for is
    clipped to that, with an akunu.ContextWarning, as Model does. `kv_alloc` and `kv_ring` as
    for Model: with "blocks" the KV cache counts what is allocated at load (its first block),
    and kv_max_bytes what it grows to at the full context.

    `device`: an index or name part (default: AKUNU_DEVICE, else akunu.find_device()'s); the
    plan says whether it fits there, refuses weight types that device's kernels cannot run (as
    Model does), and counts the weights in the layout that device uploads (its
    profile's tile-major matrices, with a tied head's second copy). With check_device=False the
    weights are counted as the file stores them. `weights_dtype` sizes the weights of
    config-only models. `tuning`: settings over AKUNU_TUNE, as for Model (some change the
    scratch a model plans, e.g. prefill_dequant_rows).

    A Whisper model is planned for `max_sequences` sequence slots (and encoder windows), as
    WhisperModel.load allocates them: the KV cache holds each slot's self- and cross-attention
    K/V and each window's cross K/V, the decode scratch the decoder's rows and the greedy
    chain's buffers (tuning whisper_chain), the prefill scratch the encoder's windows.

    `devices` (a list of selectors, as for Model): the plan of the model split by layers across
    them (a SplitPlan: the layers each part takes, as Model(devices=..., split=...) would split
    them, and each part's MemoryPlan with whether it fits on its device).
    """
    files = None
    if isinstance(model, _akunu.ModelFiles):
        files = model
    elif not isinstance(model, (dict, _akunu.ModelConfig)):
        files = _akunu.open_model(os.fspath(model))
    config = load_config(files if files is not None else model)
    if files is not None:
        _akunu.validate_model(files, config)
    what = files.path if files is not None else f"{config.architecture} config"
    context = fit_context(context, config.max_context, what, config.as_dict()["rope_scaling"], config.max_context)
    selector = None if not check_device else ("" if device is None else str(device))
    if kv_alloc not in ("full", "blocks"):
        raise ValueError(f"kv_alloc must be 'full' or 'blocks', not {kv_alloc!r}")
    selectors = split_selectors(devices, "", split)
    if selectors:
        if not check_device:
            raise ValueError("a split plan (devices=[...]) is checked against its devices: check_device must be True")
        return _plan_split(config, files, selectors, split, tuning, context=context, prefill_chunk=prefill_chunk,
                           max_chain=max_chain, kv_dtype=kv_dtype, weights_dtype=weights_dtype,
                           kv_blocks=kv_alloc == "blocks", kv_ring=bool(kv_ring))
    d = _akunu.plan_memory(config, files, context, prefill_chunk, max_chain, kv_dtype, weights_dtype, selector,
                           kv_alloc == "blocks", bool(kv_ring), tuning, max_sequences)
    return MemoryPlan(config=config, **d)


@dataclass
class SplitPlan:
    """akunu.plan(model, devices=[...]): the layers each device takes (as Model(devices=...)
    splits them) and each part's memory plan: its layers' weights and KV cache, the embedding on
    the first part, the head on the last, and a scratch set on each."""
    layers: list[tuple[int, int]]  # per part: (first, last + 1)
    parts: list[MemoryPlan]

    @property
    def fits(self) -> bool:
        return all(p.fits for p in self.parts)

    def __str__(self) -> str:
        c = self.parts[0].config
        verdict = "fits" if self.fits else "DOES NOT FIT"
        rows = [f"split plan: {c.architecture}, {c.n_layers} layers over {len(self.parts)} devices: {verdict}"]
        for i, ((first, last), p) in enumerate(zip(self.layers, self.parts)):
            extra = (" + embedding" if first == 0 else "") + (" + head" if last == c.n_layers else "")
            rows.append(f"part {i}: layers {first} to {last - 1}{extra} on {p.device}: "
                        f"{_mib(p.total_bytes)} of {_mib(p.device_bytes)}, {'fits' if p.fits else 'DOES NOT FIT'}")
            rows.extend("  " + line for line in str(p).splitlines())
        return "\n".join(rows)


def _plan_split(config, files, selectors: list[str], split, tuning, **options) -> SplitPlan:
    """The plan of a model split by layers across the devices of `selectors` (docs/devices.md)."""
    split = [float(x) for x in split or []]
    layers = [tuple(r) for r in _akunu.split_layers(config.n_layers, selectors, split, tuning)]
    parts = []
    for (first, last), selector in zip(layers, selectors):
        d = _akunu.plan_memory(config, files, device=selector, tuning=tuning, first_layer=first, last_layer=last,
                               **options)
        d["kv_layers"] = d["kv_layers"][first:last]  # the layouts of the part's own layers
        parts.append(MemoryPlan(config=config, **d))
    # Parts on one physical device (two logical devices of it) share its memory.
    shared: dict[int, list[int]] = {}
    for i, selector in enumerate(selectors):
        shared.setdefault(_akunu.find_device(selector)["index"], []).append(i)
    for group in (g for g in shared.values() if len(g) > 1):
        need = sum(parts[i].total_bytes for i in group)
        if need > parts[group[0]].device_bytes:
            for i in group:
                parts[i].fits = False
                parts[i].notes.append(f"parts {', '.join(map(str, group))} share {parts[i].device}: together they "
                                      f"need {_mib(need)} of its {_mib(parts[i].device_bytes)}")
    return SplitPlan(layers=layers, parts=parts)

"""Random but valid ggml blocks built in NumPy, for kernel and model tests, and GGUF files
re-typed into them with gguf-py's writer.

Every byte of a block is random except its f16 scales, which are finite and of a chosen
magnitude: quants and packed sub-block scales are valid as any bytes in these formats.
"""
from __future__ import annotations

import pathlib

import numpy as np

# Elements and bytes per block, and the byte offsets of the block's f16 scales (ggml-common.h).
BLOCK_FORMATS = {
    "Q8_0": (32, 34, [0]),
    "Q4_0": (32, 18, [0]),
    "Q4_1": (32, 20, [0, 2]),
    "Q5_0": (32, 22, [0]),
    "Q2_K": (256, 84, [80, 82]),  # {scales[16]; qs[64]; d; dmin}
    "Q4_K": (256, 144, [0, 2]),   # {d; dmin; scales[12]; qs[128]}
    "Q5_K": (256, 176, [0, 2]),   # {d; dmin; scales[12]; qh[32]; qs[128]}
    "Q6_K": (256, 210, [208]),    # {ql[128]; qh[64]; scales[16]; d}
}


def random_blocks(rng, wtype: str, n: int, scale: float | None = None) -> np.ndarray:
    """n weights of `wtype` as raw blocks, uint8 [n / block, block bytes]. The f16 scales are
    `scale`, or uniform in [-0.05, 0.05] per block when None."""
    block, nbytes, halves = BLOCK_FORMATS[wtype]
    raw = rng.integers(0, 256, (n // block, nbytes), dtype=np.uint8)
    for off in halves:
        d = rng.uniform(-0.05, 0.05, len(raw)) if scale is None else np.full(len(raw), scale)
        raw[:, off:off + 2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw


def _writer_with_metadata(reader, dst: pathlib.Path, drop=frozenset()):
    """A gguf-py writer for `dst` holding `reader`'s metadata, less the keys in `drop`."""
    import gguf

    writer = gguf.GGUFWriter(dst, reader.fields["general.architecture"].contents())
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture" or field.name in drop:
            continue  # the writer adds the first two itself
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub_type)
    return writer


def _finish(writer, dst: pathlib.Path) -> pathlib.Path:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


def copy_gguf(src: pathlib.Path, dst: pathlib.Path, drop=frozenset(), add: dict | None = None) -> pathlib.Path:
    """Copies the GGUF `src` (F32/F16 tensors) to `dst` without the metadata keys in `drop`,
    and with the float keys in `add`."""
    import gguf

    reader = gguf.GGUFReader(src)
    writer = _writer_with_metadata(reader, dst, drop)
    for key, v in (add or {}).items():
        writer.add_float32(key, v)
    for t in reader.tensors:
        writer.add_tensor(t.name, np.asarray(t.data).reshape([int(d) for d in reversed(t.shape)]))
    return _finish(writer, dst)


def retype_gguf(src: pathlib.Path, dst: pathlib.Path, wtype: str, scale: float, seed: int = 0) -> pathlib.Path:
    """Copies the GGUF `src` to `dst` with every 2-D tensor replaced by random `wtype` blocks
    (f16 scales `scale`); metadata and 1-D tensors are kept."""
    import gguf

    reader = gguf.GGUFReader(src)
    writer = _writer_with_metadata(reader, dst)
    rng = np.random.default_rng(seed)
    qtype = gguf.GGMLQuantizationType[wtype]
    for t in reader.tensors:
        shape = [int(d) for d in reversed(t.shape)]  # NumPy order: [rows, row length]
        if len(shape) == 2:
            raw = random_blocks(rng, wtype, shape[0] * shape[1], scale).reshape(shape[0], -1)
            writer.add_tensor(t.name, raw, raw_dtype=qtype)
        else:
            writer.add_tensor(t.name, np.asarray(t.data).reshape(shape))
    return _finish(writer, dst)

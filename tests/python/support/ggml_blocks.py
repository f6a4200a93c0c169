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
    "Q5_0": (32, 22, [0]),        # {d; qh[4]; qs[16]}
    "Q5_1": (32, 24, [0, 2]),     # {d; m; qh[4]; qs[16]}
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


def copy_gguf(src: pathlib.Path, dst: pathlib.Path, drop=frozenset(), add: dict | None = None) -> pathlib.Path:
    """Copies the GGUF `src` (F32/F16 tensors) to `dst` without the metadata keys in `drop`,
    and with the float keys in `add`."""
    reader, writer = _copy_metadata(src, dst, tuple(drop))
    for key, v in (add or {}).items():
        writer.add_float32(key, v)
    for t in reader.tensors:
        writer.add_tensor(t.name, np.asarray(t.data).reshape([int(d) for d in reversed(t.shape)]))
    _finish(writer)
    return dst


def retype_gguf(src: pathlib.Path, dst: pathlib.Path, wtype: str, scale: float, seed: int = 0) -> pathlib.Path:
    """Copies the GGUF `src` to `dst` with every 2-D tensor replaced by random `wtype` blocks
    (f16 scales `scale`), or for "F64" by normal values of standard deviation `scale`; metadata
    and 1-D tensors are kept."""
    import gguf

    reader, writer = _copy_metadata(src, dst)
    rng = np.random.default_rng(seed)
    qtype = gguf.GGMLQuantizationType[wtype]
    for t in reader.tensors:
        shape = [int(d) for d in reversed(t.shape)]  # NumPy order: [rows, row length]
        if len(shape) == 2 and wtype == "F64":
            writer.add_tensor(t.name, rng.standard_normal(shape) * scale)
        elif len(shape) == 2:
            raw = random_blocks(rng, wtype, shape[0] * shape[1], scale).reshape(shape[0], -1)
            writer.add_tensor(t.name, raw, raw_dtype=qtype)
        else:
            writer.add_tensor(t.name, np.asarray(t.data).reshape(shape))
    _finish(writer)
    return dst


def with_vocab(src: pathlib.Path, dst: pathlib.Path, vocab: int, seed: int = 0) -> pathlib.Path:
    """Copies the llama GGUF `src` to `dst` with a vocabulary of `vocab` tokens ("<t{i}>" past
    the first three of `src`): token_embd.weight becomes random f32 [vocab, dim] (standard
    deviation 0.02), which the model uses as its head too (output.weight is dropped). Float
    tensors only (make_random_gguf's f16 or f32 files)."""
    import gguf

    skip = ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "llama.vocab_size")
    reader, writer = _copy_metadata(src, dst, skip)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()[:3]
    writer.add_token_list(tokens + [f"<t{i}>" for i in range(len(tokens), vocab)])
    writer.add_token_scores([0.0] * vocab)
    writer.add_token_types([int(gguf.TokenType.CONTROL)] * 3 + [int(gguf.TokenType.NORMAL)] * (vocab - 3))
    writer.add_vocab_size(vocab)
    rng = np.random.default_rng(seed)
    for t in reader.tensors:
        shape = [int(d) for d in reversed(t.shape)]
        if t.name == "token_embd.weight":
            writer.add_tensor(t.name, (rng.standard_normal((vocab, shape[1]), np.float32) * 0.02))
        elif t.name != "output.weight":
            writer.add_tensor(t.name, np.asarray(t.data).reshape(shape))  # float types: dtype says it
    _finish(writer)
    return dst


def _copy_metadata(src: pathlib.Path, dst: pathlib.Path, skip=()):
    """A reader of `src` and a writer of `dst` holding the metadata of `src` but `skip`."""
    import gguf

    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture" or field.name in skip:
            continue  # the writer adds these itself
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub_type)
    return reader, writer


def _finish(writer) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

"""Writers and a reader for Whisper's non-HF files, independent of akunu: CTranslate2's
model.bin (version 6, as the fixtures README describes it) and whisper.cpp's GGML file.
Used to build small and malformed files, and to read tiny.en's model.bin with NumPy alone."""
from __future__ import annotations

import struct

import numpy as np

CT2_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2, np.dtype(np.int32): 3,
              np.dtype(np.float16): 4}
CT2_NUMPY = {v: k for k, v in CT2_DTYPES.items()}


def ct2_string(s: str) -> bytes:
    raw = s.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def ct2_variable(name: str, a: np.ndarray, dtype: int | None = None, nbytes: int | None = None) -> bytes:
    """One variable; dtype/nbytes override what `a` says (for malformed files)."""
    a = np.asarray(a)  # not ascontiguousarray, which makes a scalar 1-D
    data = a.tobytes()
    out = ct2_string(name) + struct.pack("<B", a.ndim) + b"".join(struct.pack("<I", d) for d in a.shape)
    out += struct.pack("<B", CT2_DTYPES[a.dtype] if dtype is None else dtype)
    return out + struct.pack("<I", len(data) if nbytes is None else nbytes) + data


def ct2_bytes(variables: list[bytes], aliases: dict[str, str] | None = None, version: int = 6,
              spec: str = "WhisperSpec") -> bytes:
    out = struct.pack("<I", version) + ct2_string(spec) + struct.pack("<II", 3, len(variables)) + b"".join(variables)
    aliases = aliases or {}
    return out + struct.pack("<I", len(aliases)) + b"".join(ct2_string(a) + ct2_string(t) for a, t in aliases.items())


def read_ct2(path) -> dict[str, np.ndarray]:
    """Every variable of a model.bin as a NumPy array (aliases resolved)."""
    f = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, f, pos)
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        (n,) = take("<H")
        pos += n
        return f[pos - n:pos - 1].decode()

    take("<I")
    string()
    _, count = take("<II")
    out = {}
    for _ in range(count):
        name = string()
        (rank,) = take("<B")
        dims = take(f"<{rank}I")
        dtype, nbytes = take("<BI")
        out[name] = np.frombuffer(f, CT2_NUMPY[dtype], nbytes // CT2_NUMPY[dtype].itemsize, pos).reshape(dims)
        pos += nbytes
    (n_alias,) = take("<I")
    for _ in range(n_alias):
        alias, target = string(), string()
        out[alias] = out[target]
    return out


# ---- whisper.cpp GGML ----------------------------------------------------------------------------
GGML_F32, GGML_F16 = 0, 1


def ggml_tensor(name: str, a: np.ndarray, type_id: int | None = None, ne: list[int] | None = None,
                data: bytes | None = None) -> bytes:
    """A tensor record: ne is the NumPy shape reversed unless given."""
    ne = list(a.shape[::-1]) if ne is None else ne
    type_id = (GGML_F16 if a.dtype == np.float16 else GGML_F32) if type_id is None else type_id
    raw = name.encode()
    head = struct.pack("<3i", len(ne), len(raw), type_id) + struct.pack(f"<{len(ne)}i", *ne)
    return head + raw + (np.ascontiguousarray(a).tobytes() if data is None else data)


def ggml_whisper_bytes(hparams: list[int], filters: np.ndarray, tokens: list[bytes], tensors: list[bytes]) -> bytes:
    """hparams: n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx,
    n_text_state, n_text_head, n_text_layer, n_mels, ftype."""
    out = b"lmgg" + struct.pack("<11i", *hparams) + struct.pack("<2i", *filters.shape)
    out += filters.astype(np.float32).tobytes() + struct.pack("<i", len(tokens))
    out += b"".join(struct.pack("<I", len(t)) + t for t in tokens)
    return out + b"".join(tensors)


def split_ggml_whisper(data: bytes) -> tuple[bytes, list[tuple[str, list[int], int, bytes]]]:
    """A whisper.cpp file as (everything before the tensors, [(name, ne, type id, data)]);
    f32 and f16 tensors only, as its converter writes them."""
    pos = 4 + 11 * 4
    n_mel, n_fft = struct.unpack_from("<2i", data, pos)
    pos += 8 + 4 * n_mel * n_fft
    (n_tokens,) = struct.unpack_from("<i", data, pos)
    pos += 4
    for _ in range(n_tokens):
        (length,) = struct.unpack_from("<I", data, pos)
        pos += 4 + length
    header, tensors = data[:pos], []
    while pos < len(data):
        n_dims, name_len, type_id = struct.unpack_from("<3i", data, pos)
        ne = list(struct.unpack_from(f"<{n_dims}i", data, pos + 12))
        pos += 12 + 4 * n_dims
        name = data[pos:pos + name_len].decode()
        pos += name_len
        size = int(np.prod(ne)) * (4 if type_id == GGML_F32 else 2)
        tensors.append((name, ne, type_id, data[pos:pos + size]))
        pos += size
    return header, tensors

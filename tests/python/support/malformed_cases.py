"""Malformed model inputs, each with the error akunu must raise for it.

Used three ways: the table-driven pytest (test_malformed.py), the AddressSanitizer replay of
the same files in C++ (tests/cpp/fuzz/malformed_replay.cpp), and as the fuzzers' seed corpus.
`python tests/python/support/malformed_cases.py OUTDIR` writes every case to OUTDIR/<name> (a
file or a directory).
"""
from __future__ import annotations

import json
import pathlib
import struct
import sys

if not __package__:  # run as a script: the support package lives in tests/python
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from support.gguf_bytes import ARR, BOOL, STR, U32, gguf, gstr, kv, tensor_info, tiny_llama_gguf  # noqa: E402
from support.safetensors_writer import safetensors_bytes  # noqa: E402
from support.whisper_bytes import ct2_bytes, ct2_variable, ggml_tensor, ggml_whisper_bytes  # noqa: E402

ARCH = kv("general.architecture", STR, "llama")
VALID = tiny_llama_gguf()


def _st_header(header: dict, data: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def _truncated_tensor() -> bytes:
    return VALID[: len(VALID) - 100]


def _whisper_cases() -> list[tuple[str, object, str]]:
    """CTranslate2 model.bin directories and whisper.cpp GGML files."""
    w = np.zeros((6, 4), np.float16)
    ok = ct2_variable("encoder/conv1/bias", np.zeros(4, np.float16))
    ct2 = {"ct2_truncated": ct2_bytes([ok])[:-12], "ct2_bad_version": ct2_bytes([ok], version=5),
           "ct2_zero_dim": ct2_bytes([ct2_variable("a", np.zeros((0, 4), np.float16))]),
           "ct2_byte_count": ct2_bytes([ct2_variable("a", w, nbytes=16)]),
           "ct2_unknown_dtype": ct2_bytes([ct2_variable("a", w, dtype=9)]),
           "ct2_fused_rows": ct2_bytes([ct2_variable("encoder/layer_0/self_attention/linear_0/weight",
                                                     np.zeros((4, 4), np.float16))]),
           "ct2_not_whisper": ct2_bytes([ok], spec="TransformerSpec"),
           "ct2_unknown_variable": ct2_bytes([ct2_variable("encoder/mystery", w)]),
           "ct2_bad_alias": ct2_bytes([ok], {"x": "missing/target"}),
           "ct2_int8_weights": ct2_bytes([ct2_variable("encoder/conv1/weight", np.zeros((4, 2, 3), np.int8))])}
    expected = {"ct2_truncated": "is it truncated", "ct2_bad_version": "binary version 5, akunu reads version 6",
                "ct2_zero_dim": "variable a: dimension 0 is 0", "ct2_byte_count": "needs 48 bytes, the file gives 16",
                "ct2_unknown_dtype": "unknown dtype 9", "ct2_fused_rows": "do not split into 3 equal blocks",
                "ct2_not_whisper": "TransformerSpec model; akunu reads CTranslate2 Whisper models only",
                "ct2_unknown_variable": "encoder/mystery .* not part of a Whisper model",
                "ct2_bad_alias": "alias x names missing/target",
                "ct2_int8_weights": "is I8 without encoder/conv1/weight_scale"}
    out = [(name, {"model.bin": data}, expected[name]) for name, data in ct2.items()]
    hp = [51864, 1500, 4, 1, 1, 448, 4, 1, 1, 2, 1]
    mel = np.zeros((2, 201), np.float32)

    def ggml(tensors, hparams=hp, tokens=(b"a",)):
        return ggml_whisper_bytes(hparams, mel, list(tokens), tensors)
    t = np.zeros((4, 4), np.float16)
    out += [
        ("ggml_truncated", ggml([ggml_tensor("encoder.conv1.bias", t)])[:-5], "is it truncated"),
        ("ggml_bad_hparam", ggml([], hparams=hp[:1] + [0] + hp[2:]), "n_audio_ctx = 0 is outside"),
        ("ggml_filter_shape", ggml_whisper_bytes(hp, np.zeros((2, 200), np.float32), [b"a"], []),
         "filter bank is \\[2, 200\\], expected \\[2, 201\\]"),
        ("ggml_unknown_type", ggml([ggml_tensor("a", t, type_id=12)]), "tensor a has ggml type 12"),
        ("ggml_bad_dims", ggml([ggml_tensor("a", t, ne=[4, 4, 1, 1, 1])]), "n_dims 5"),
        ("ggml_partial_block", ggml([ggml_tensor("a", t, type_id=8, ne=[33], data=b"")]),
         "rows of 33 are not a whole number of Q8_0 blocks"),
        ("ggml_duplicate", ggml([ggml_tensor("a", t), ggml_tensor("a", t)]), "duplicate tensor a"),
        ("ggml_vocab_too_big", ggml([], tokens=[b"a"] * 3, hparams=[2] + hp[1:]), "holds 3 tokens"),
    ]
    return out


def cases() -> list[tuple[str, object, str]]:
    """(name, content, regex of the expected error). Content: bytes for a file, or a dict
    {filename: bytes} for a model directory."""
    f32 = np.zeros(4, np.float32)
    st_ok = safetensors_bytes({"a": f32})
    return [
        ("empty_file", b"", "neither GGUF nor safetensors"),
        ("bad_magic", b"GGUX" + VALID[4:], "neither GGUF nor safetensors"),
        ("truncated_header", b"GGUF\x03\x00\x00\x00\x01", "file ends inside the tensor count"),
        ("gguf_version_1", gguf([ARCH], [], version=1), "version 1 is obsolete"),
        ("gguf_version_99", gguf([ARCH], [], version=99), "unsupported GGUF version 99"),
        ("gguf_big_endian", gguf([ARCH], [], version=0x03000000), "big-endian GGUF is not supported"),
        ("huge_tensor_count", gguf([ARCH], [], n_tensors=2**62), "tensor count .* is larger than the file"),
        ("huge_kv_count", gguf([ARCH], [], n_kv=2**40), "metadata count .* is larger than the file"),
        ("huge_string_length", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**62) + b"abc" + b"\0" * 32,
         "file ends inside a metadata key"),
        ("non_utf8_key", gguf([kv(b"general.\xff\xfe", STR, "x")], []), "is not valid UTF-8"),
        ("duplicate_key", gguf([ARCH, ARCH], []), "duplicate metadata key general.architecture"),
        ("unknown_value_type", gguf([gstr("k") + struct.pack("<I", 99)], []), "unknown value type 99"),
        ("huge_array_count", gguf([gstr("k") + struct.pack("<IIQ", 9, U32, 2**61)], []),
         "array of .* elements does not fit"),
        ("nested_arrays_too_deep",
         gguf([kv("k", ARR, (ARR, [(ARR, [(ARR, [(ARR, [(ARR, [(ARR, [(ARR, [(ARR, [(U32, [1])])])])])])])])]))], []),
         "nested deeper than 8"),
        ("bool_not_0_or_1", gguf([gstr("k") + struct.pack("<IB", BOOL, 7)], []), "bool value 7"),
        ("alignment_not_power_of_two", gguf([ARCH, kv("general.alignment", U32, 24)], []), "not a power of two"),
        ("too_many_dims", gguf([ARCH], [tensor_info("t", [1, 1, 1, 1, 1], 0, 0)], b"\0" * 32), "5 dimensions"),
        ("zero_dim", gguf([ARCH], [tensor_info("t", [4, 0], 0, 0)], b"\0" * 32), "dimension 1 is 0"),
        ("dims_overflow_64_bits", gguf([ARCH], [tensor_info("t", [2**40, 2**40], 0, 0)], b"\0" * 32),
         "overflows 64 bits"),
        ("unknown_ggml_type", gguf([ARCH], [tensor_info("t", [4], 200, 0)], b"\0" * 32), "unknown ggml type id 200"),
        ("partial_block", gguf([ARCH], [tensor_info("t", [33], 2, 0)], b"\0" * 64),
         "not a whole number of Q4_0 blocks"),
        ("misaligned_offset", gguf([ARCH], [tensor_info("t", [4], 0, 4)], b"\0" * 64),
         "not a multiple of the alignment"),
        ("offset_past_eof", gguf([ARCH], [tensor_info("t", [4], 0, 4096)], b"\0" * 32),
         "extends past the end of the file"),
        ("overlapping_tensors", gguf([ARCH], [tensor_info("a", [16], 0, 0), tensor_info("b", [16], 0, 32)], b"\0" * 96),
         "tensors a and b overlap"),
        ("duplicate_tensor", gguf([ARCH], [tensor_info("a", [4], 0, 0), tensor_info("a", [4], 0, 32)], b"\0" * 64),
         "duplicate tensor a"),
        ("truncated_tensor_data", _truncated_tensor(), "extends past the end of the file"),
        ("whisper_ggml", b"lmgg" + b"\0" * 64, "hyper-parameter n_vocab = 0 is outside"),
        ("legacy_ggjt", b"tjgg" + b"\0" * 64, "legacy llama.cpp GGML file .* not supported"),
        ("unknown_architecture", gguf([kv("general.architecture", STR, "rwkv9")], []), "unknown architecture 'rwkv9'"),
        ("missing_block_count", gguf([ARCH, kv("llama.embedding_length", U32, 8)], []),
         "required metadata key llama.block_count is missing"),
        ("arch_key_wrong_type", gguf([kv("general.architecture", U32, 5)], []), "expected a string, found u32"),
        ("shape_mismatch", VALID.replace(struct.pack("<QQ", 32, 16), struct.pack("<QQ", 16, 32), 1),
         "token_embd.weight: expected \\[32, 32\\] F32, found \\[32, 16\\]"),
        ("st_header_past_eof", struct.pack("<Q", 10_000) + b"{}", "header length 10000 does not fit"),
        ("st_bad_json", struct.pack("<Q", 5) + b"{nope", "invalid JSON"),
        ("st_header_not_object", _st_header([1, 2]), "not a JSON object"),
        ("st_unknown_dtype", _st_header({"a": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}}, b"\0" * 4),
         "unsupported dtype F8_E4M3 in tensor a"),
        ("st_size_mismatch", _st_header({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, b"\0" * 16),
         "needs 12 bytes, data_offsets give 16"),
        ("st_offsets_past_eof", _st_header({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8),
         "lie outside"),
        ("st_overlap", _st_header({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                   "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, b"\0" * 24),
         "overlap"),
        ("st_negative_shape", _st_header({"a": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}}, b"\0" * 16),
         "non-integer or negative"),
        ("st_shape_overflow", _st_header({"a": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 16]}},
                                         b"\0" * 16), "overflows 64 bits"),
        ("st_bad_offsets", _st_header({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0]}}, b"\0" * 16),
         "data_offsets"),
        ("dir_missing_shard", {"model.safetensors.index.json": json.dumps(
            {"weight_map": {"a": "model-00001.safetensors", "b": "model-00002.safetensors"}}).encode(),
            "model-00001.safetensors": st_ok}, "names shard 'model-00002.safetensors', which is missing"),
        ("dir_index_tensor_not_in_shard", {"model.safetensors.index.json": json.dumps(
            {"weight_map": {"zz": "model-00001.safetensors"}}).encode(), "model-00001.safetensors": st_ok},
         "lists tensor zz in .* which does not hold it"),
        ("dir_shard_path_escape", {"model.safetensors.index.json": json.dumps(
            {"weight_map": {"a": "../x.safetensors"}}).encode()}, "must be a file beside the index"),
        ("dir_bad_config_json", {"model.safetensors": st_ok, "config.json": b"{\"model_type\": "}, "invalid JSON"),
        ("dir_bad_mlx_bits", {"model.safetensors": st_ok, "config.json": json.dumps(
            {"model_type": "llama", "quantization": {"group_size": 64, "bits": 5}}).encode()},
         "group_size 64 / bits 5 is not one of"),
    ] + _whisper_cases()


def write_all(out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, content, _ in cases():
        if isinstance(content, dict):
            (out / name).mkdir(exist_ok=True)
            for fname, data in content.items():
                (out / name / fname).write_bytes(data)
        else:
            (out / name).write_bytes(content)


if __name__ == "__main__":
    write_all(pathlib.Path(sys.argv[1]))

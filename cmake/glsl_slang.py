"""Compiles a GLSL compute shader to SPIR-V 1.6 with the glslang inside PyPI's slangpy wheel
(slangpy/libslang-glslang-*.so, Slang's `glslang_compile_1_2` entry point), for the kernels
that need GL_KHR_cooperative_matrix and GL_NV_cooperative_matrix2, which Debian 12's glslang
(12.0) predates. shaders/kernels.cmake runs it when AKUNU_SLANG_GLSLANG names that library.

    python glsl_slang.py --lib LIB.so -I DIR [-D NAME[=VALUE]]... IN.comp OUT.spv

That entry point takes one source text and no include callback, so `#include "file"` lines
are expanded here (the including file's folder first, then the -I folders) and the -D
definitions are placed after `#version`.
"""
import argparse
import ctypes
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
STAGE_COMPUTE = 6            # Slang's SlangStage for compute
ACTION_COMPILE_GLSL = 0      # glslang_CompileRequest_1_2.action: GLSL to SPIR-V

Callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)


class SpirvVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int)]


class CompileRequest(ctypes.Structure):  # Slang's glslang_CompileRequest_1_2 (slang-glslang.h)
    _fields_ = [("sizeInBytes", ctypes.c_size_t), ("sourcePath", ctypes.c_char_p),
                ("inputBegin", ctypes.c_void_p), ("inputEnd", ctypes.c_void_p),
                ("diagnosticFunc", Callback), ("diagnosticUserData", ctypes.c_void_p),
                ("outputFunc", Callback), ("outputUserData", ctypes.c_void_p),
                ("slangStage", ctypes.c_int), ("action", ctypes.c_uint),
                ("optimizationLevel", ctypes.c_uint), ("debugInfoType", ctypes.c_uint),
                ("spirvTargetName", ctypes.c_char_p), ("spirvVersion", SpirvVersion),
                ("entryPointName", ctypes.c_char_p)]


def expand(path: pathlib.Path, include_dirs: list[pathlib.Path], depth: int = 0) -> str:
    """The file's text with its #include lines replaced by the files they name."""
    if depth > 32:
        raise SystemExit(f"{path}: includes nested more than 32 deep")
    out = []
    for line in path.read_text().splitlines():
        m = INCLUDE.match(line)
        if not m:
            out.append(line)
            continue
        for folder in [path.parent, *include_dirs]:
            found = folder / m.group(1)
            if found.is_file():
                out.append(expand(found, include_dirs, depth + 1))
                break
        else:
            raise SystemExit(f"{path}: cannot find include \"{m.group(1)}\" in {[str(d) for d in include_dirs]}")
    return "\n".join(out)


def source_text(path: pathlib.Path, include_dirs: list[pathlib.Path], defines: list[str]) -> str:
    lines = expand(path, include_dirs).splitlines()
    # Includes are expanded already; the extension that allows them would make glslang look
    # for an includer that this entry point does not have.
    lines = [l for l in lines if "GL_GOOGLE_include_directive" not in l]
    version = next((i for i, l in enumerate(lines) if l.lstrip().startswith("#version")), None)
    if version is None:
        raise SystemExit(f"{path}: no #version line")
    definitions = []
    for d in defines:
        name, _, value = d.partition("=")
        definitions.append(f"#define {name} {value or 1}")
    return "\n".join(lines[:version + 1] + definitions + lines[version + 1:]) + "\n"


def compile_glsl(lib_path: str, source: str, source_path: str) -> bytes:
    lib = ctypes.CDLL(lib_path)
    text = source.encode()
    buf = ctypes.create_string_buffer(text, len(text))
    diagnostics, spirv = [], []

    @Callback
    def on_diagnostic(data, n, _):
        diagnostics.append(ctypes.string_at(data, n))

    @Callback
    def on_output(data, n, _):
        spirv.append(ctypes.string_at(data, n))

    req = CompileRequest()
    req.sizeInBytes = ctypes.sizeof(CompileRequest)
    req.sourcePath = source_path.encode()
    req.inputBegin = ctypes.addressof(buf)
    req.inputEnd = ctypes.addressof(buf) + len(text)
    req.diagnosticFunc, req.outputFunc = on_diagnostic, on_output
    req.slangStage, req.action = STAGE_COMPUTE, ACTION_COMPILE_GLSL
    req.optimizationLevel = 0  # the driver optimizes; spirv-opt's passes are not needed here
    req.spirvVersion = SpirvVersion(1, 6, 0)
    req.entryPointName = b"main"
    rc = lib.glslang_compile_1_2(ctypes.byref(req))
    message = b"".join(diagnostics).decode(errors="replace").strip()
    if rc != 0 or not spirv:
        raise SystemExit(f"{source_path}: glslang failed ({rc}):\n{message}")
    if message:
        print(f"{source_path}: {message}", file=sys.stderr)
    return b"".join(spirv)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", required=True, help="slangpy's libslang-glslang-*.so")
    ap.add_argument("-I", dest="include_dirs", action="append", default=[], type=pathlib.Path)
    ap.add_argument("-D", dest="defines", action="append", default=[])
    ap.add_argument("source", type=pathlib.Path)
    ap.add_argument("output", type=pathlib.Path)
    a = ap.parse_args()
    spirv = compile_glsl(a.lib, source_text(a.source, a.include_dirs, a.defines), str(a.source))
    a.output.write_bytes(spirv)


if __name__ == "__main__":
    main()

"""cmake/glsl_slang.py, which builds the cooperative-matrix-2 kernels with slangpy's glslang: the
source text it hands that compiler (includes expanded, definitions after #version), and, where
the library is at hand (.slang/ or AKUNU_SLANG_GLSLANG), gemm_cm2.comp compiled to SPIR-V."""
import importlib.util
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("glsl_slang", ROOT / "cmake" / "glsl_slang.py")
glsl_slang = importlib.util.module_from_spec(spec)
spec.loader.exec_module(glsl_slang)


def test_source_text_expands_includes_and_places_definitions(tmp_path):
    inc = tmp_path / "inc"
    (inc / "sub").mkdir(parents=True)
    (inc / "a.glsl").write_text('#include "sub/b.glsl"\nfloat a() { return b(); }\n')
    (inc / "sub" / "b.glsl").write_text("float b() { return 1.0; }\n")
    main = tmp_path / "k.comp"
    main.write_text('#version 450\n#extension GL_GOOGLE_include_directive : require\n'
                    '#include "a.glsl"\nvoid main() {}\n')
    text = glsl_slang.source_text(main, [inc], ["KERNEL_NAME=k", "FLAG"])
    lines = text.splitlines()
    assert lines[:3] == ["#version 450", "#define KERNEL_NAME k", "#define FLAG 1"]
    assert "GL_GOOGLE_include_directive" not in text and "#include" not in text
    # Nested includes in order, each once where it was named.
    assert text.index("float b()") < text.index("float a()") < text.index("void main()")


def test_source_text_names_a_missing_include(tmp_path):
    main = tmp_path / "k.comp"
    main.write_text('#version 450\n#include "nowhere.glsl"\n')
    with pytest.raises(SystemExit, match='cannot find include "nowhere.glsl"'):
        glsl_slang.source_text(main, [tmp_path], [])


def test_gemm_cm2_compiles_to_spirv(tmp_path):
    # The library scripts/install.sh (and gpu_payload.sh) keep in .slang/, or another one.
    libs = [os.environ.get("AKUNU_SLANG_GLSLANG", ""),
            *map(str, sorted((ROOT / ".slang").glob("libslang-glslang-*.so")))]
    lib = next((x for x in libs if x and pathlib.Path(x).is_file()), None)
    if not lib:
        pytest.skip("slangpy's libslang-glslang .so is not in .slang/ or AKUNU_SLANG_GLSLANG "
                    "(scripts/install.sh fetches it)")
    src = ROOT / "shaders" / "gemm_cm2.comp"
    spirv = glsl_slang.compile_glsl(lib, glsl_slang.source_text(src, [ROOT / "shaders" / "include"], []), str(src))
    assert spirv[:4] == b"\x03\x02\x23\x07" and len(spirv) % 4 == 0  # the SPIR-V magic, little-endian words

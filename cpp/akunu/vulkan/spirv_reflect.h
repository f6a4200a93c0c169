// A small SPIR-V reader: the interface a compute kernel declares, so that pipelines are built
// from the shader itself and host code cannot disagree with it.
//
// It finds each storage-buffer binding (and whether the kernel writes it, from `readonly` /
// NonWritable) and the size of the push-constant block, which pipeline creation and every
// dispatch check against the host struct.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace akunu {

struct ShaderBinding {
    uint32_t set = 0;
    uint32_t binding = 0;
    bool written = true;  // false when every member is NonWritable (GLSL `readonly`)
};

struct ShaderInterface {
    std::vector<ShaderBinding> bindings;  // sorted by binding number
    uint32_t push_constant_bytes = 0;  // 0 when the kernel has no push-constant block
    // Declares the CooperativeMatrixKHR capability (the cooperative-matrix-2 kernels), which
    // validation layers older than 1.3.255 (Debian 12's) reject as an unknown operand.
    bool cooperative_matrix_khr = false;
};

// Throws akunu::Error naming `name` when the words are not a valid compute module we understand.
ShaderInterface reflect_spirv(const uint32_t* words, size_t n_words, const std::string& name);

}  // namespace akunu

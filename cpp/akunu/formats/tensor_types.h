// The tensor-type traits table: every ggml type id, plus the plain dtypes safetensors uses.
//
// One row per type holds what the loader, the dequantizer, the memory plan and the Python
// bindings need: elements and bytes per block, the name, the NumPy dtype of its raw data and
// the CPU dequantizer (null when akunu cannot dequantize the type yet). Adding a type is one
// row plus its dequant function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace akunu {

// Values below 64 are ggml's own type ids (ggml.h `enum ggml_type`), as stored in GGUF.
enum class TensorType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
    // akunu's own ids for safetensors dtypes that ggml has no id for.
    U8 = 100,
    U32 = 101,
    // MLX affine quantization, as akunu uploads it (mlx_weights.h): `bits`-bit codes in groups
    // of G elements, each group with an f32 scale and bias (w = scale * code + bias).
    MLX4_G32 = 102,
    MLX4_G64 = 103,
    MLX4_G128 = 104,
    MLX8_G32 = 105,
    MLX8_G64 = 106,
    MLX8_G128 = 107,
    // The CPU backend's tile-major matrices (formats/tiles.h): the same blocks as the base type,
    // regrouped so that 32 consecutive rows are read together. Produced by its loader only.
    F32_T32 = 110,
    F16_T32 = 111,
    BF16_T32 = 112,
    Q8_0_T32 = 113,
    Q4_0_T32 = 114,
    Q4_1_T32 = 115,
    Q4_K_T32 = 116,
    Q5_K_T32 = 117,
    Q6_K_T32 = 118,
    // Vulkan devices' tiles of the 32-element block formats: each row's codes in 16-byte chunks.
    Q8_0_T32V = 119,
    Q4_0_T32V = 120,
    Q4_1_T32V = 121,
    // The CPU backend's tiles of Q5_0 and Q5_1 (after the others: ids are never reused).
    Q5_0_T32 = 122,
    Q5_1_T32 = 123,
};

// Writes n = blocks * block_size floats from `src`.
using DequantFn = void (*)(const uint8_t* src, float* dst, size_t blocks);

struct TensorTypeTraits {
    TensorType type;
    const char* name;  // "Q4_K", as llama.cpp prints it
    uint32_t block_size;  // elements per block
    uint32_t block_bytes;  // bytes per block
    const char* numpy_dtype;  // dtype of the raw data as NumPy sees it ("uint8" for block formats)
    DequantFn dequant;  // null: akunu cannot dequantize this type
};

// Null when `ggml_id` is not a type id ggml defines (or one it has removed).
const TensorTypeTraits* find_ggml_type(uint32_t ggml_id);
// Null when `id` is neither a ggml id nor one of akunu's own.
const TensorTypeTraits* find_type(uint32_t id);
const TensorTypeTraits& type_traits(TensorType type);
// "Q4_K" -> Q4_K, also safetensors names ("F16", "BF16", "U8", ...). Null when unknown.
const TensorTypeTraits* find_type_by_name(const std::string& name);

// Bytes of a tensor of `n_elements` of `type`; throws when n is not a whole number of blocks.
size_t tensor_bytes(const TensorTypeTraits& type, uint64_t n_elements, const std::string& tensor);

// Dequantizes `n_elements` (a whole number of blocks) to float32, or throws
// "unsupported type X in tensor Y".
void dequantize(const TensorTypeTraits& type, const uint8_t* src, float* dst, uint64_t n_elements,
                const std::string& tensor);

}  // namespace akunu

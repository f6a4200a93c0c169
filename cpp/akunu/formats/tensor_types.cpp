// The tensor-type traits table and its lookups.
#include "akunu/formats/tensor_types.h"

#include <cstring>

#include "akunu/formats/dequant.h"
#include "akunu/core/error.h"

namespace akunu {

namespace {

using T = TensorType;
namespace dq = dequant;

// Block sizes and bytes follow ggml.c's type_traits (ggml-common.h block structs).
const TensorTypeTraits kTypes[] = {
    {T::F32, "F32", 1, 4, "float32", dq::f32},
    {T::F16, "F16", 1, 2, "float16", dq::f16},
    {T::Q4_0, "Q4_0", 32, 18, "uint8", dq::q4_0},
    {T::Q4_1, "Q4_1", 32, 20, "uint8", dq::q4_1},
    {T::Q5_0, "Q5_0", 32, 22, "uint8", dq::q5_0},
    {T::Q5_1, "Q5_1", 32, 24, "uint8", dq::q5_1},
    {T::Q8_0, "Q8_0", 32, 34, "uint8", dq::q8_0},
    {T::Q8_1, "Q8_1", 32, 36, "uint8", nullptr},
    {T::Q2_K, "Q2_K", 256, 84, "uint8", nullptr},
    {T::Q3_K, "Q3_K", 256, 110, "uint8", nullptr},
    {T::Q4_K, "Q4_K", 256, 144, "uint8", dq::q4_k},
    {T::Q5_K, "Q5_K", 256, 176, "uint8", dq::q5_k},
    {T::Q6_K, "Q6_K", 256, 210, "uint8", dq::q6_k},
    {T::Q8_K, "Q8_K", 256, 292, "uint8", nullptr},
    {T::IQ2_XXS, "IQ2_XXS", 256, 66, "uint8", nullptr},
    {T::IQ2_XS, "IQ2_XS", 256, 74, "uint8", nullptr},
    {T::IQ3_XXS, "IQ3_XXS", 256, 98, "uint8", nullptr},
    {T::IQ1_S, "IQ1_S", 256, 50, "uint8", nullptr},
    {T::IQ4_NL, "IQ4_NL", 32, 18, "uint8", nullptr},
    {T::IQ3_S, "IQ3_S", 256, 110, "uint8", nullptr},
    {T::IQ2_S, "IQ2_S", 256, 82, "uint8", nullptr},
    {T::IQ4_XS, "IQ4_XS", 256, 136, "uint8", nullptr},
    {T::I8, "I8", 1, 1, "int8", dq::i8},
    {T::I16, "I16", 1, 2, "int16", dq::i16},
    {T::I32, "I32", 1, 4, "int32", dq::i32},
    {T::I64, "I64", 1, 8, "int64", nullptr},
    {T::F64, "F64", 1, 8, "float64", dq::f64},
    {T::IQ1_M, "IQ1_M", 256, 56, "uint8", nullptr},
    {T::BF16, "BF16", 1, 2, "uint16", dq::bf16},  // NumPy has no bfloat16: raw bits
    {T::TQ1_0, "TQ1_0", 256, 54, "uint8", nullptr},
    {T::TQ2_0, "TQ2_0", 256, 66, "uint8", nullptr},
    {T::MXFP4, "MXFP4", 32, 17, "uint8", nullptr},
    {T::NVFP4, "NVFP4", 64, 36, "uint8", nullptr},
    {T::Q1_0, "Q1_0", 128, 18, "uint8", nullptr},
    {T::U8, "U8", 1, 1, "uint8", dq::u8},
    {T::U32, "U32", 1, 4, "uint32", dq::u32},
    // Blocks are groups: codes (G * bits / 8 bytes) plus an f32 scale and bias. On the device
    // the codes of all groups come first, then the (scale, bias) pairs (mlx_weights.h).
    {T::MLX4_G32, "MLX4_G32", 32, 24, "uint8", nullptr},
    {T::MLX4_G64, "MLX4_G64", 64, 40, "uint8", nullptr},
    {T::MLX4_G128, "MLX4_G128", 128, 72, "uint8", nullptr},
    {T::MLX8_G32, "MLX8_G32", 32, 40, "uint8", nullptr},
    {T::MLX8_G64, "MLX8_G64", 64, 72, "uint8", nullptr},
    {T::MLX8_G128, "MLX8_G128", 128, 136, "uint8", nullptr},
    // Tile-major: a tensor's blocks in another order (formats/tiles.h), so no flat dequantizer.
    {T::F32_T32, "F32_T32", 1, 4, "float32", nullptr},
    {T::F16_T32, "F16_T32", 1, 2, "float16", nullptr},
    {T::BF16_T32, "BF16_T32", 1, 2, "uint16", nullptr},
    {T::Q8_0_T32, "Q8_0_T32", 32, 34, "uint8", nullptr},
    {T::Q4_0_T32, "Q4_0_T32", 32, 18, "uint8", nullptr},
    {T::Q4_1_T32, "Q4_1_T32", 32, 20, "uint8", nullptr},
    {T::Q4_K_T32, "Q4_K_T32", 256, 144, "uint8", nullptr},
    {T::Q5_K_T32, "Q5_K_T32", 256, 176, "uint8", nullptr},
    {T::Q6_K_T32, "Q6_K_T32", 256, 210, "uint8", nullptr},
    {T::Q8_0_T32V, "Q8_0_T32V", 32, 34, "uint8", nullptr},
    {T::Q4_0_T32V, "Q4_0_T32V", 32, 18, "uint8", nullptr},
    {T::Q4_1_T32V, "Q4_1_T32V", 32, 20, "uint8", nullptr},
    {T::Q5_0_T32, "Q5_0_T32", 32, 22, "uint8", nullptr},
    {T::Q5_1_T32, "Q5_1_T32", 32, 24, "uint8", nullptr},
};

}  // namespace

const TensorTypeTraits* find_ggml_type(uint32_t ggml_id) {
    if (ggml_id >= 64) return nullptr;  // akunu's own ids are not ggml ids
    for (const auto& t : kTypes)
        if (uint32_t(t.type) == ggml_id) return &t;
    return nullptr;
}

const TensorTypeTraits* find_type(uint32_t id) {
    for (const auto& t : kTypes)
        if (uint32_t(t.type) == id) return &t;
    return nullptr;
}

const TensorTypeTraits& type_traits(TensorType type) {
    for (const auto& t : kTypes)
        if (t.type == type) return t;
    throw Error("unknown tensor type id " + std::to_string(uint32_t(type)));
}

const TensorTypeTraits* find_type_by_name(const std::string& name) {
    for (const auto& t : kTypes)
        if (name == t.name) return &t;
    return nullptr;
}

size_t tensor_bytes(const TensorTypeTraits& type, uint64_t n, const std::string& tensor) {
    AKUNU_CHECK(n % type.block_size == 0, "tensor " + tensor + ": " + std::to_string(n) + " elements of " + type.name +
                                              " is not a whole number of " + std::to_string(type.block_size) +
                                              "-element blocks");
    const uint64_t blocks = n / type.block_size;
    AKUNU_CHECK(blocks <= UINT64_MAX / type.block_bytes, "tensor " + tensor + ": size overflows 64 bits");
    return size_t(blocks * type.block_bytes);
}

void dequantize(const TensorTypeTraits& type, const uint8_t* src, float* dst, uint64_t n, const std::string& tensor) {
    AKUNU_CHECK(type.dequant, std::string("unsupported type ") + type.name + " in tensor " + tensor +
                                  ": akunu cannot dequantize it yet");
    tensor_bytes(type, n, tensor);  // checks whole blocks
    type.dequant(src, dst, size_t(n / type.block_size));
}

}  // namespace akunu

// MLX affine-quantized matrices: their weight type and their device bytes (mlx_weights.h).
#include "akunu/formats/mlx_weights.h"

#include <cstring>

#include "akunu/core/error.h"

namespace akunu {

namespace {

// The MLX weight types, in the traits table; each block is a group: codes, then 8 bytes of
// (scale, bias), so the bits per code follow from the block's size.
constexpr TensorType kMlxTypes[] = {TensorType::MLX4_G32, TensorType::MLX4_G64, TensorType::MLX4_G128,
                                    TensorType::MLX8_G32, TensorType::MLX8_G64, TensorType::MLX8_G128};
constexpr size_t kPairBytes = 8;

size_t code_bytes(const TensorTypeTraits& t) { return t.block_bytes - kPairBytes; }
int code_bits(const TensorTypeTraits& t) { return int(code_bytes(t) * 8 / t.block_size); }

std::string part_name(const TensorInfo& weight, const char* part) {
    const std::string& n = weight.name;
    const std::string stem = n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0 ? n.substr(0, n.size() - 7) : n;
    return stem + part;
}

const TensorInfo& part(const ModelFiles& files, const TensorInfo& weight, const char* suffix) {
    const std::string name = part_name(weight, suffix);
    const TensorInfo* t = files.find(name);
    AKUNU_CHECK(t, files.path() + ": tensor " + name + " is missing (MLX quantized " + weight.name + " needs it)");
    return *t;
}

}  // namespace

TensorType mlx_weight_type(const ModelFiles& files, const TensorInfo& weight, uint64_t in) {
    const std::string where = files.path() + ": tensor " + weight.name;
    AKUNU_CHECK(weight.type->type == TensorType::U32 && weight.shape.size() == 2 && in > 0,
                where + ": an MLX quantized matrix is a 2-D U32 tensor");
    const TensorInfo& scales = part(files, weight, ".scales");
    AKUNU_CHECK(scales.shape.size() == 2 && scales.shape[0] == weight.shape[0] && scales.shape[1] > 0 &&
                    in % scales.shape[1] == 0 && weight.shape[1] * 32 % in == 0,
                where + ": codes " + shape_string(weight.shape) + " and scales " + shape_string(scales.shape) +
                    " do not describe a quantized matrix of " + std::to_string(in) + " inputs");
    const int bits = int(weight.shape[1] * 32 / in), group = int(in / scales.shape[1]);
    for (TensorType type : kMlxTypes) {
        const TensorTypeTraits& t = type_traits(type);
        if (code_bits(t) == bits && int(t.block_size) == group) return type;
    }
    throw Error(where + ": MLX quantization with " + std::to_string(bits) + " bits in groups of " +
                std::to_string(group) +
                " is not supported by akunu's kernels yet (supported: 4 or 8 bits in groups of 32, 64 or 128)");
}

std::vector<uint8_t> pack_mlx_weight(const ModelFiles& files, const TensorInfo& weight, TensorType type) {
    const TensorInfo &scales = part(files, weight, ".scales"), &biases = part(files, weight, ".biases");
    AKUNU_CHECK(biases.shape == scales.shape, files.path() + ": tensor " + biases.name + ": expected " +
                                                  shape_string(scales.shape) + ", found " + shape_string(biases.shape));
    const size_t groups = size_t(scales.n_elements);
    const TensorTypeTraits& t = type_traits(type);
    AKUNU_CHECK(groups * code_bytes(t) == weight.bytes, files.path() + ": tensor " + weight.name + " does not hold " +
                                                            std::to_string(groups) + " groups of " + t.name);
    std::vector<float> s(groups), b(groups);
    dequantize(*scales.type, scales.data, s.data(), groups, scales.name);
    dequantize(*biases.type, biases.data, b.data(), groups, biases.name);
    std::vector<uint8_t> out(weight.bytes + groups * kPairBytes);
    std::memcpy(out.data(), weight.data, weight.bytes);
    for (size_t g = 0; g < groups; ++g) {
        const float pair[2] = {s[g], b[g]};
        std::memcpy(out.data() + weight.bytes + kPairBytes * g, pair, kPairBytes);
    }
    return out;
}

}  // namespace akunu

// MLX affine-quantized matrices, as akunu uploads them.
//
// MLX stores a quantized [out, in] matrix as three tensors: `X.weight` U32 [out, in * bits / 32]
// holding the codes (element j of a word in bits j * bits .. j * bits + bits - 1, low bits
// first), and `X.scales`, `X.biases` [out, in / G] (f16, bf16 or f32), with
// w = scale * code + bias for each group of G elements. akunu uploads the packed codes as they
// are, followed by one (scale, bias) pair of f32 per group: the MLX<bits>_G<G> weight types
// that shaders/include/mlx_affine.glsl reads. f32 keeps bf16 and f16 scales exact.
#pragma once

#include <cstdint>
#include <vector>

#include "akunu/formats/model_files.h"

namespace akunu {

// The weight type of an MLX quantized matrix with `in` inputs, from its shapes (the codes'
// width gives the bits, the scales' count the group size). Throws, naming the tensor, for
// shapes that do not fit and for bits or group sizes akunu's kernels do not run (4 and 8 bits,
// groups of 32, 64 and 128).
TensorType mlx_weight_type(const ModelFiles& files, const TensorInfo& weight, uint64_t in);

// The device bytes of that matrix: codes, then [groups] (scale, bias) f32 pairs.
std::vector<uint8_t> pack_mlx_weight(const ModelFiles& files, const TensorInfo& weight, TensorType type);

}  // namespace akunu

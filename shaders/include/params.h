// Host-shader parameter structs: the one definition of every kernel's push-constant block.
//
// Included by GLSL kernels and by C++ (cpp/akunu/kernels.cpp). Only 4-byte scalars appear, so
// C++, std430 and the scalar layout agree; C++ checks each size with static_assert, and pipeline
// creation checks it again against the kernel's SPIR-V.
#ifndef AKUNU_PARAMS_H
#define AKUNU_PARAMS_H

#ifdef __cplusplus
#include <cstdint>
namespace akunu {
using uint = uint32_t;
#define AKUNU_PARAMS_SIZE(type, bytes) static_assert(sizeof(type) == (bytes), #type " must match the GLSL block");
#else
#define AKUNU_PARAMS_SIZE(type, bytes)
#endif

// Kernels index large 1-D problems with a 2-D grid of workgroups (maxComputeWorkGroupCount[0]
// is 65,535 on many devices); element i = (group.y * groups.x + group.x) * local_size + local.

// fill_*: out[i] = value for i < n. fill_u32 stores `bits` instead of `value`.
struct FillParams {
    uint n;       // elements
    float value;
    uint bits;
};
AKUNU_PARAMS_SIZE(FillParams, 12)

// copy_u32: dst[i] = src[i] for i < n 32-bit words.
struct CopyParams {
    uint n;  // 32-bit words
};
AKUNU_PARAMS_SIZE(CopyParams, 4)

// add_*: out[i] = a[i] + b[i] for i < n, computed in fp32.
struct AddParams {
    uint n;  // elements
};
AKUNU_PARAMS_SIZE(AddParams, 4)

// rmsnorm_*: y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * (w + weight_offset).
// weight_offset is 0 for llama-style norms and 1 for gemma's (1 + w).
struct RmsNormParams {
    uint rows;
    uint dim;
    float eps;
    float weight_offset;
};
AKUNU_PARAMS_SIZE(RmsNormParams, 16)

// gemv_*: y[n] = sum_k W[n, k] * x[k] for n < rows; W row-major [rows, k].
struct GemvParams {
    uint rows;
    uint k;
};
AKUNU_PARAMS_SIZE(GemvParams, 8)

#ifdef __cplusplus
}  // namespace akunu
#endif
#endif  // AKUNU_PARAMS_H

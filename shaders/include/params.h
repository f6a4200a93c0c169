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

// gemv_*: y[n] = sum_k W[n, k] * x[k] for n < rows; W row-major [rows, k] of the variant's
// weight type (block formats: rows of k/32 blocks).
// accumulate = 1 adds to y instead of overwriting it: the residual add fused into the O and
// down projections.
struct GemvParams {
    uint rows;
    uint k;
    uint accumulate;
};
AKUNU_PARAMS_SIZE(GemvParams, 12)

// The step state: what changes from one decode step to the next, read by kernels from a small
// device buffer so that a recorded command buffer is replayed unchanged.
struct StepState {
    uint pos;         // position of the token being decoded (its KV-cache slot)
    uint token_slot;  // index into token_ids of the token being embedded
};

// embed_*: out[0:dim] = scale * W[token_ids[step.token_slot], :]
struct EmbedParams {
    uint dim;
    float scale;
};
AKUNU_PARAMS_SIZE(EmbedParams, 8)

// rope_kv: rotates Q and K of one token in place (qkv = [q | k | v], f32) by the cos/sin table
// row of step.pos, and writes K and V into the f16 caches at that position.
struct RopeKvParams {
    uint n_heads;
    uint n_kv_heads;
    uint head_dim;
    uint max_len;      // cache rows per head
    uint interleaved;  // 1: pairs (2i, 2i+1) (GGUF llama); 0: pairs (i, i + head_dim/2) (HF, NeoX)
    uint rotate;       // 0: no RoPE (encoders)
};
AKUNU_PARAMS_SIZE(RopeKvParams, 24)

// Decode attention is split along the sequence (flash-decoding): attention_split gives each
// (query head, chunk of AKUNU_ATTENTION_CHUNK cache rows) a workgroup that writes a partial
// result [head_dim values, running max, sum of exps]; attention_merge combines the chunks.
// Rows attended: [max(0, pos + 1 - window), pos]; query head h reads KV head
// h / (n_heads / n_kv_heads).
#define AKUNU_ATTENTION_CHUNK 256
struct AttentionParams {
    uint n_heads;
    uint n_kv_heads;
    uint head_dim;
    uint max_len;
    uint window;    // 0: none
    float scale;
    float softcap;  // 0: none
    uint n_chunks;  // ceil(max_len / AKUNU_ATTENTION_CHUNK)
};
AKUNU_PARAMS_SIZE(AttentionParams, 32)

// act_*: out[i] = act(gate[i]) * up[i] (SiLU or GELU-tanh).
struct ActParams {
    uint n;
};
AKUNU_PARAMS_SIZE(ActParams, 4)

// argmax: token_ids[out_slot] = argmax(logits[0:n]), lowest index on ties.
struct ArgmaxParams {
    uint n;
    uint out_slot;
};
AKUNU_PARAMS_SIZE(ArgmaxParams, 8)

#ifdef __cplusplus
}  // namespace akunu
#endif
#endif  // AKUNU_PARAMS_H

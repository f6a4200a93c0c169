// MLX affine-quantized weights as akunu uploads them (cpp/akunu/mlx_weights.h): the packed
// codes of every group in order (MLX_BITS bits per element, low bits first in each 32-bit
// word), then one (scale, bias) f32 pair per group at byte W_HEADERS; w = scale * code + bias.
// Included by weights.glsl for the WTYPE_MLX variants, which define MLX_BITS and W_BLOCK (the
// group size); the includer defines W_TOTAL_BLOCKS, the groups of the whole bound matrix.
layout(std430, binding = W_BINDING) readonly buffer Wu { uint wu[]; };
layout(std430, binding = W_BINDING) readonly buffer Wp { vec2 wp[]; };
#define MLX_PER_WORD (32 / MLX_BITS)
#define MLX_WORDS (W_BLOCK / MLX_PER_WORD)  // code words per group
#define W_HEADERS (W_TOTAL_BLOCKS * MLX_WORDS * 4)

vec2 mlx_scale_bias(uint group) { return wp[W_HEADERS / 8 + group]; }
float mlx_code(uint word, uint j) { return float((word >> (j * MLX_BITS)) & ((1u << MLX_BITS) - 1u)); }

// Elements 8 * part .. 8 * part + 7 of a group: what one invocation of the GEMM or the
// embedding reads at a time.
void w_block8(uint block, uint part, out float v[8]) {
    const vec2 sb = mlx_scale_bias(block);
    const uint first = block * MLX_WORDS + part * (8 / MLX_PER_WORD);
    for (uint j = 0; j < 8; ++j) v[j] = sb.x * mlx_code(wu[first + j / MLX_PER_WORD], j % MLX_PER_WORD) + sb.y;
}

// The GEMV's lane split: each lane of a group reads one word of codes (8 or 4 elements) and
// the x values beside it, so neighbouring invocations read neighbouring words of W and of x.
#ifdef W_X4
#define W_LANES MLX_WORDS
float w_lane_dot(uint block, uint xblock, uint lane) {
    const vec2 sb = mlx_scale_bias(block);
    const uint u = wu[block * MLX_WORDS + lane];
    const uint x0 = (xblock * W_BLOCK + lane * MLX_PER_WORD) / 4;
    const vec4 xa = W_X4(x0);
    float s = dot(vec4(mlx_code(u, 0), mlx_code(u, 1), mlx_code(u, 2), mlx_code(u, 3)), xa);
    vec4 xsum = xa;
#if MLX_BITS == 4
    const vec4 xb = W_X4(x0 + 1);
    s += dot(vec4(mlx_code(u, 4), mlx_code(u, 5), mlx_code(u, 6), mlx_code(u, 7)), xb);
    xsum += xb;
#endif
    return sb.x * s + sb.y * dot(xsum, vec4(1.0));
}
#endif

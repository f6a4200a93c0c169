// CPU GEMV, GEMM and embedding for MLX affine-quantized weights, in the layout akunu uploads
// them (mlx_weights.h, the layout shaders/include/mlx_affine.glsl reads): the codes of every
// group in order, then one (scale, bias) f32 pair per group after all of them. Same semantics,
// parameters and workgroup geometry as the gemv_mlx*, gemm_mlx* and embed_mlx* shaders.
//
// Rows are dequantized to floats a chunk at a time and multiplied with the float kernels' dot
// product and GEMM tile: MLX checkpoints are rare on CPUs, and this keeps one path for them.
#include <algorithm>
#include <string>
#include <vector>

#include "akunu/vulkan/cpu_kernel.h"
#include "akunu/cpu/matmul_parts.h"
#include "akunu/cpu/row_dot.h"
#include "params.h"

namespace akunu::cpu {

namespace {

// An uploaded MLX matrix of `rows` rows of k elements; the type (CpuArgs::variant) gives bits
// and group size, as tensor_types.h numbers them: MLX4_G32, _G64, _G128, MLX8_G32, ...
struct MlxMatrix {
    const uint32_t* codes;
    const float* pairs;  // (scale, bias) per group
    uint32_t bits, group, words;  // words of codes per group
    size_t groups_per_row;

    MlxMatrix(const uint8_t* base, uint32_t type, size_t rows, size_t k) {
        const uint32_t i = type - uint32_t(TensorType::MLX4_G32);
        bits = i < 3 ? 4 : 8;
        group = 32u << (i % 3);
        words = group * bits / 32;
        groups_per_row = k / group;
        codes = reinterpret_cast<const uint32_t*>(base);
        pairs = reinterpret_cast<const float*>(base + rows * groups_per_row * words * 4);
    }

    // Elements [e0, e1) of row r, both multiples of the group size, into out[0 : e1 - e0].
    void dequant(size_t r, size_t e0, size_t e1, float* out) const {
        const uint32_t per_word = 32 / bits, mask = (1u << bits) - 1u;
        for (size_t g = r * groups_per_row + e0 / group; g < r * groups_per_row + e1 / group; ++g, out += group) {
            const float scale = pairs[2 * g], bias = pairs[2 * g + 1];
            const uint32_t* w = codes + g * words;
            for (uint32_t j = 0; j < group; ++j)
                out[j] = scale * float((w[j / per_word] >> (j % per_word * bits)) & mask) + bias;
        }
    }
};

// Workgroups of spec[1] rows (gemv.comp ROWS); each row dequantized whole, then a float dot.
void gemv(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<GemvParams>();
    const size_t rows_per_group = a.spec[1] ? a.spec[1] : 4;
    const size_t r0 = begin * rows_per_group, r1 = std::min<size_t>(end * rows_per_group, p.rows);
    if (r0 >= r1) return;
    const MlxMatrix w(a.b[0], a.variant, p.rows, p.k);
    const RowDotFn dot = row_dot(TensorType::F32);
    float inv_rms;
    const float* x = gemv_input(a, &inv_rms);
    thread_local std::vector<float> row;
    if (row.size() < p.k) row.resize(p.k);  // once: the longest row
    float* y = a.at<float>(2);
    for (size_t r = r0; r < r1; ++r) {
        w.dequant(r, 0, p.k, row.data());
        const float v = dot(reinterpret_cast<const uint8_t*>(row.data()), x, p.k) * inv_rms;
        y[r] = p.accumulate ? y[r] + v : v;
    }
}

void fill(const CpuArgs& a, size_t n0, size_t nt, size_t k0, size_t kc, float (*wt)[kGemmTile]) {
    const auto& p = a.p<GemmParams>();
    const MlxMatrix w(a.b[0], a.variant, p.n, p.k);
    alignas(32) float row[kGemmChunk];
    for (size_t j = 0; j < kGemmTile; ++j) {
        if (j < nt) w.dequant(n0 + j, k0, k0 + kc, row);
        for (size_t kk = 0; kk < kc; ++kk) wt[kk][j] = j < nt ? row[kk] : 0.0f;
    }
}

void gemm(const CpuArgs& a, size_t begin, size_t end) { gemm_workgroups(a, begin, end, fill); }

// embed.comp's items are AKUNU_EMBED_BLOCK_ITEM elements, 64 per workgroup; a token row
// belongs to the range that holds its first item and is written whole, by one thread.
void embed(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<EmbedParams>();
    const auto& step = *a.at<const StepState>(2);
    const MlxMatrix w(a.b[0], a.variant, p.vocab, p.dim);
    const size_t items = p.dim / AKUNU_EMBED_BLOCK_ITEM, rows = std::min(p.rows, step.n_tokens);
    const size_t r1 = std::min(rows, (end * 64 + items - 1) / items);
    float* out = a.at<float>(3);
    for (size_t row = (begin * 64 + items - 1) / items; row < r1; ++row) {
        const uint32_t token = a.at<const uint32_t>(1)[step.token_slot + row];
        if (token >= p.vocab) continue;  // as embed.comp: nothing is read past W, the row is left as it is
        float* dst = out + row * p.dim;
        w.dequant(token, 0, p.dim, dst);
        for (size_t c = 0; c < p.dim; ++c) dst[c] *= p.scale;
    }
}

}  // namespace

void register_mlx(void (*add_row)(const KernelRow&)) {
    static std::vector<std::string> names;  // the registry keeps the names' pointers
    if (names.empty())
        for (const char* kernel : {"gemv", "gemm", "embed"})
            for (const char* type : {"mlx4_g32", "mlx4_g64", "mlx4_g128", "mlx8_g32", "mlx8_g64", "mlx8_g128"})
                names.push_back(std::string(kernel) + "_" + type);
    for (size_t i = 0; i < names.size(); ++i) {
        const uint32_t type = uint32_t(TensorType::MLX4_G32) + uint32_t(i % 6);
        const size_t kernel = i / 6;
        add_row({names[i].c_str(),
                 {kernel == 0   ? gemv
                  : kernel == 1 ? gemm
                                : embed,
                  type,
                  kernel == 0   ? 4u
                  : kernel == 1 ? 1u
                                : 16u}});
    }
}

}  // namespace akunu::cpu

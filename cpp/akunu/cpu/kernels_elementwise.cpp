// CPU kernels without reductions across threads: fill, copy, read, add, rmsnorm, the gated
// activations, to_half, last_row, softcap and the embedding lookup. Each matches its .comp file (shaders/).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "akunu/vulkan/cpu_kernel.h"
#include "akunu/cpu/vec_math.h"
#include "akunu/cpu/weight_rows.h"
#include "akunu/core/half.h"
#include "params.h"

namespace akunu::cpu {

namespace {

constexpr size_t kGroup = 256;  // local_size_x of the elementwise kernels

enum Dtype : uint32_t { kF32, kF16, kU32 };

float load(const uint8_t* p, size_t i, uint32_t dtype) {
    return dtype == kF16 ? half_to_float(reinterpret_cast<const uint16_t*>(p)[i])
                         : reinterpret_cast<const float*>(p)[i];
}
void store(uint8_t* p, size_t i, uint32_t dtype, float v) {
    if (dtype == kF16)
        reinterpret_cast<uint16_t*>(p)[i] = float_to_half(v);
    else
        reinterpret_cast<float*>(p)[i] = v;
}

void fill(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<FillParams>();
    const size_t e0 = begin * kGroup, e1 = std::min<size_t>(end * kGroup, p.n);
    for (size_t i = e0; i < e1; ++i) {
        if (a.variant == kU32)
            a.at<uint32_t>(0)[i] = p.bits;
        else
            store(a.b[0], i, a.variant, p.value);
    }
}

void copy(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<CopyParams>();
    const size_t per_group = (p.n % 4 == 0 ? 4 : 1) * kGroup;
    const size_t w0 = std::min<size_t>(begin * per_group, p.n), w1 = std::min<size_t>(end * per_group, p.n);
    if (w1 > w0) std::memmove(a.b[1] + w0 * 4, a.b[0] + w0 * 4, (w1 - w0) * 4);
}

// read_u32: every 16-byte vector is read; one of four all-ones words writes flag[0] (copy.comp).
void read(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<CopyParams>();
    const uint32_t* src = a.at<const uint32_t>(0);
    const size_t v1 = std::min<size_t>(end * kGroup, p.n / 4);
    for (size_t v = begin * kGroup; v < v1; ++v)
        if ((src[4 * v] & src[4 * v + 1] & src[4 * v + 2] & src[4 * v + 3]) == 0xFFFFFFFFu)
            a.at<uint32_t>(1)[0] = uint32_t(v);
}

// A run of elements at a time, each within one row (a plain loop for fp32, which vectorizes).
void add(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<AddParams>();
    const size_t total = size_t(p.n) * p.rows;
    for (size_t g = begin * kGroup, e = std::min(end * kGroup, total); g < e;) {
        const size_t r = g / p.n, i0 = g % p.n, i1 = std::min<size_t>(p.n, i0 + (e - g));
        if (a.variant == kF32) {
            const float *x = a.at<const float>(0) + r * p.a_stride, *y = a.at<const float>(1) + r * p.b_stride;
            float* z = a.at<float>(2) + r * p.c_stride;
            for (size_t i = i0; i < i1; ++i) z[i] = x[i] + y[i];
        } else {
            for (size_t i = i0; i < i1; ++i)
                store(a.b[2], r * p.c_stride + i, a.variant,
                      load(a.b[0], r * p.a_stride + i, a.variant) + load(a.b[1], r * p.b_stride + i, a.variant));
        }
        g += i1 - i0;
    }
}

void rmsnorm(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<RmsNormParams>();
    for (size_t row = begin; row < std::min<size_t>(end, p.rows); ++row) {
        const size_t base = (row / p.group) * p.group_stride + (row % p.group) * p.dim;
        float sum_sq = 0.0f;
        for (size_t i = 0; i < p.dim; ++i) {
            const float v = load(a.b[0], base + i, a.variant);
            sum_sq += v * v;
        }
        const float scale = 1.0f / std::sqrt(sum_sq / float(p.dim) + p.eps);
        for (size_t i = 0; i < p.dim; ++i)
            store(a.b[2], base + i, a.variant,
                  load(a.b[0], base + i, a.variant) * scale * (load(a.b[1], i, a.variant) + p.weight_offset));
    }
}

enum Act : uint32_t { kSilu, kGeluTanh, kGeluErf };  // kGeluErf: ungated (out = act(gate)), the encoders

void act(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<ActParams>();
    const float* gate = a.at<float>(0);
    const float* up = a.at<float>(1);
    float* out = a.at<float>(2);
    const size_t i0 = begin * kGroup, i1 = std::min<size_t>(end * kGroup, p.n);
    if (i1 <= i0) return;
    const VecMath& vm = vec_math();
    if (a.variant == kGeluErf) return vm.gelu(gate + i0, out + i0, i1 - i0);
    (a.variant == kSilu ? vm.silu_mul : vm.gelu_tanh_mul)(gate + i0, up + i0, out + i0, i1 - i0);
}

// to_half (act.comp with ACT_NONE): x as halves, for a GEMM that reads them.
void to_half(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<ActParams>();
    const size_t i0 = begin * kGroup, i1 = std::min<size_t>(end * kGroup, p.n);
    if (i0 < i1) vec_math().to_half(a.at<float>(0) + i0, a.at<uint16_t>(2) + i0, i1 - i0);
}

void last_row(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<LastRowParams>();
    const auto& step = *a.at<const StepState>(2);
    const size_t i0 = begin * kGroup, i1 = std::min<size_t>(end * kGroup, p.dim);
    if (i1 > i0)
        std::memmove(a.at<float>(1) + i0, a.at<float>(0) + size_t(step.n_tokens - 1) * p.dim + i0, (i1 - i0) * 4);
}

// softcap.comp: x = cap * tanh(x / cap) in place over the step's rows (gemma2's final logits).
void softcap(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<SoftcapParams>();
    const auto& step = *a.at<const StepState>(1);
    const size_t total = size_t(std::min(p.rows, step.n_tokens)) * p.n;
    float* x = a.at<float>(0);
    for (size_t i = begin * kGroup, e = std::min(end * kGroup, total); i < e; ++i)
        x[i] = p.cap * std::tanh(std::clamp(x[i] / p.cap, -15.0f, 15.0f));
}

// Workgroups of 64 items; an item is one element (float types) or AKUNU_EMBED_BLOCK_ITEM
// elements of a block.
void embed(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<EmbedParams>();
    const auto& step = *a.at<const StepState>(2);
    const WeightType& w = weight_type(a.variant);
    const size_t item = w.block_size == 1 ? 1 : AKUNU_EMBED_BLOCK_ITEM;
    const size_t items = p.dim / item, rows = std::min(p.rows, step.n_tokens);
    const size_t i0 = begin * 64, i1 = std::min(end * 64, rows * items);
    float* out = a.at<float>(3);
    for (size_t i = i0; i < i1;) {
        const size_t row = i / items, c0 = (i % items) * item;
        const size_t c1 = std::min<size_t>(p.dim, c0 + (i1 - i) * item);
        const uint32_t token = a.at<const uint32_t>(1)[step.token_slot + row] - p.first_row;
        i += (c1 - c0) / item;
        if (token >= p.vocab) continue;  // another window's row (EmbedParams.first_row)
        float* dst = out + row * p.dim;
        dequant_range(w, w.row(a.b[0], token, p.dim), c0, c1, dst + c0);
        for (size_t c = c0; c < c1; ++c) dst[c] *= p.scale;
    }
}

}  // namespace

void register_elementwise(void (*add_row)(const KernelRow&)) {
    add_row({"fill_f32", {fill, kF32, 16}});
    add_row({"fill_f16", {fill, kF16, 16}});
    add_row({"fill_u32", {fill, kU32, 16}});
    add_row({"copy_u32", {copy, 0, 16}});
    add_row({"read_u32", {read, 0, 16}});
    add_row({"add_f32", {add, kF32, 16}});
    add_row({"add_f16", {add, kF16, 16}});
    add_row({"rmsnorm_f32", {rmsnorm, kF32, 1}});
    add_row({"rmsnorm_f16", {rmsnorm, kF16, 1}});
    add_row({"act_silu", {act, kSilu, 8}});
    add_row({"act_gelu_tanh", {act, kGeluTanh, 8}});
    add_row({"act_gelu", {act, kGeluErf, 8}});
    add_row({"to_half", {to_half, 0, 16}});
    add_row({"last_row", {last_row, 0, 64}});
    add_row({"softcap", {softcap, 0, 16}});
    for (const WeightType& w : weight_types()) add_row({w.embed_kernel, {embed, uint32_t(w.type), 16}});
}

}  // namespace akunu::cpu

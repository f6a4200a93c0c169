// The recent window on the CPU, as shaders/include/kv_recent.glsl reads it: a query at pos
// reads the keys and values at t > pos - recent from f16 copies, the step's own rows from its
// f32 [q | k | v] rows (rounded to f16, as the ring stores them) and older ones from the rings,
// position t in row t % recent_rows. A kernel row's variant carries kRecent where the cache has
// a window; the three bindings follow the kernel's others.
#pragma once

#include <cstddef>
#include <cstdint>

#include "akunu/cpu/row_dot.h"
#include "akunu/cpu/vec_math.h"
#include "akunu/vulkan/cpu_kernel.h"
#include "params.h"

namespace akunu::cpu {

constexpr uint32_t kRecent = 1u << 23;

struct RecentRows {
    const float* step_rows = nullptr;  // [rows, kv_stride] of [q | k | v]
    const uint16_t* k_ring = nullptr;  // [n_kv, recent_rows, head_dim] f16
    const uint16_t* v_ring = nullptr;
    size_t recent = 0, recent_rows = 0, kv_stride = 0, k_at = 0, v_at = 0, head_dim = 0, step_pos = 0, n_kv = 0;
    void (*to_half)(const float* x, uint16_t* out, size_t n) = nullptr;  // vec_math's, rounding to nearest even
    HalfRowFn to_float = nullptr;

    bool holds(size_t t, size_t pos) const { return t + recent > pos; }

    // A batched step's row (params.h BatchRow): its sequence's rings (the rings hold
    // [sequences, n_kv, recent_rows, head_dim]) and its sequence's rows of the step, the first,
    // at position `first`, in step row `first_row`.
    RecentRows for_row(size_t seq, size_t first_row, size_t first) const {
        if (recent == 0) return *this;
        RecentRows r = *this;
        const size_t ring = seq * n_kv * recent_rows * head_dim;
        r.k_ring += ring;
        r.v_ring += ring;
        r.step_rows += first_row * kv_stride;
        r.step_pos = first;
        return r;
    }

    // Key (values = false) or value t of KV head kvh, head_dim floats (at most
    // AKUNU_FLASH_MAX_HEAD_DIM).
    void row(bool values, size_t kvh, size_t t, float* out) const {
        if (t >= step_pos) {
            const float* x = step_rows + (t - step_pos) * kv_stride + (values ? v_at : k_at) + kvh * head_dim;
            uint16_t h[AKUNU_FLASH_MAX_HEAD_DIM];
            to_half(x, h, head_dim);
            to_float(h, out, head_dim);
            return;
        }
        to_float((values ? v_ring : k_ring) + (kvh * recent_rows + t % recent_rows) * head_dim, out, head_dim);
    }
};

// The window of a kernel whose recent bindings start at `first` (none unless kRecent).
inline RecentRows recent_rows(const CpuArgs& a, const AttentionParams& p, int first, size_t step_pos) {
    RecentRows r;
    if (!(a.variant & kRecent)) return r;
    r.step_rows = a.at<const float>(first);
    r.k_ring = a.at<const uint16_t>(first + 1);
    r.v_ring = a.at<const uint16_t>(first + 2);
    r.recent = p.recent;
    r.recent_rows = p.recent_rows;
    r.kv_stride = p.kv_stride;
    r.head_dim = p.head_dim;
    r.n_kv = p.n_kv_heads;
    r.k_at = size_t(p.n_heads) * p.head_dim;
    r.v_at = r.k_at + size_t(p.n_kv_heads) * p.head_dim;
    r.step_pos = step_pos;
    r.to_half = vec_math().to_half;
    r.to_float = half_row();
    return r;
}

}  // namespace akunu::cpu

// What each kernel takes on a device: the predicates the decode plan (plan.h) decides from, and
// the launchers (kernels.h) check their arguments against. Each answers from the device profile
// (with its tuning) and the weight type alone, never from a model, so that a plan and a launcher
// can never disagree about what a kernel can do.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "akunu/engine/kv_format.h"
#include "akunu/formats/dtype.h"
#include "akunu/formats/tensor_types.h"
#include "akunu/model/arch.h"
#include "akunu/vulkan/device_profile.h"

namespace akunu::kernels {

// How a GEMV of Q8_0, Q4_0 or Q4_1 weights holds x: as fp32 (float products), or rounded per
// block of 32 for integer dot products, to int16 (step max|x| / 32767: within 2^-16 of the
// block's largest |x|, as the CPU backend's GEMV rounds it) or to int8 (step max|x| / 127, half
// to even, as llama.cpp's q8_1). Where a kernel cannot take the rounding asked for
// (gemv_int16, gemv_int_dot), it takes fp32.
enum class XRounding : uint8_t { kFloat, kInt16, kInt8 };

// A GEMM's rows and strides, and its row window (gemm(), kernels.h).
struct GemmShape {
    size_t m, n, k, ldx, ldy;
    uint32_t min_rows = 0, max_rows = 0;
    DType x_dtype = DType::kF32;  // f16 where gemm_takes_half_x
};

// Whether a GEMV of `producer` weights hands the next norm forward (GemvNormOut) to GEMVs of
// `consumer` weights on this device: float weights on gemv_core.glsl's kernels, Vulkan devices.
bool gemv_hands_norm_forward(const DeviceProfile& device, TensorType producer, TensorType consumer);
// The engine's: int8 with AKUNU_INT8=1 (DeviceProfile::int8_activations), fp32 with
// tuning float_x=1 (float_x), else int16.
XRounding engine_x_rounding(const DeviceProfile& device);
// Whether a tile GEMV of these weights and workgroups (gemv_tiles_groups; 0: any) takes part in
// a hand-off on this device: where it has at most one workgroup per compute unit (or the device
// does not say how many it has). The hand-off pays where the GEMV before leaves compute units
// idle that the next one's workgroups start on at once (1b's down, 64 workgroups, then Q/K/V,
// 96); into or out of a GEMV of many workgroups (7b's gate/up, 688; Q/K/V, 384) it loses: the
// early workgroups find no unit free, and their staging reads x past L1 (bench/NOTES.md, "GEMV
// hand-offs: no barrier between two few-tile GEMVs").
bool gemv_hands_off(const DeviceProfile& device, TensorType wtype, uint32_t tiles);
// Whether decode attention of this many heads hands its output off to the O GEMV: on the same
// terms, one workgroup a head being the least it runs (more chunks behind long contexts).
bool attention_hands_off(const DeviceProfile& device, uint32_t n_heads);
// Whether a float GEMV (gemv.comp) of these weights waits for attention's hand-off: the O
// projection of a decode step, which loads its first weights of each row before it waits. Float
// GEMVs take no other hand-off: their many small workgroups, waiting, would hold the compute
// units that the GEMV before still needs (bench/NOTES.md, "Tried and dropped: float GEMVs that
// hand x off"). The O GEMV's wait gains a little where attention leaves many units idle (small
// models) and nothing elsewhere (bench/NOTES.md, "A float O GEMV that waits for attention, its
// first weights loaded before").
bool gemv_waits_for_attention(const DeviceProfile& device, TensorType wtype);
// Whether gemv() of these weights takes any hand-off on this device: a tile GEMV's (any, where
// its shape allows it: gemv_hands_off) or a float O GEMV's wait for attention.
bool gemv_takes_handoff(const DeviceProfile& device, TensorType wtype);
// Whether gemv_parts() folds rope_kv for matrices of this type into this cache: the tile GEMV
// (gemv_tiles.comp, adjacent pairs only: its rows are fixed by the tile layout) or the float one
// (gemv_parts.comp, both pairings) on a Vulkan device. An f16 cache (full rows, a ring, blocks or
// a batch's pool, for a one-row step) is written by the GEMV too; a quantized one's RoPE alone
// is folded, and kv_write packs its rows after, or the attention does (attention_packs_newest).
bool gemv_folds_rope_kv(const DeviceProfile& device, TensorType wtype, const KvBindings& cache,
                        bool half_split = false);
// Whether attention() packs the step's own K and V row into this quantized cache itself
// (AttentionNewest::kPacked), so that no kv_store dispatch comes between the Q/K/V GEMV and
// attention: on a Vulkan device, a cache of full rows or blocks (with or without a recent
// window), rows that attention_split reads as whole vectors (AttentionSplitShape::lane_vecs 1).
bool attention_packs_newest(const DeviceProfile& device, const KvBindings& cache, uint32_t head_dim);
// Whether attention() rotates a rotated cache's output back itself (attention_split's UNROTATE),
// so that no hadamard_rows dispatch follows it: a rotated cache on a Vulkan device.
bool attention_unrotates(const DeviceProfile& device, const KvBindings& cache);
// Whether gemv_gate_up() takes these weights, rows of k and activation (SiLU and tanh-GELU).
bool gemv_fuses_gate_up(const DeviceProfile& device, TensorType wtype, size_t k, Activation act);
// Whether gemv_parts() takes matrices of this type and row length on this device: on Vulkan
// devices the tile-major Q8_0/Q4_0/Q4_1 (gemv_tiles.comp) and float weights with rows of a
// multiple of 4 (gemv_parts.comp), whose workgroups each own rows of one matrix.
bool gemv_fuses_parts(const DeviceProfile& device, TensorType wtype, size_t k);
// Whether gemv() takes the integer-dot path for this weight type and row length (x as int8).
bool gemv_int_dot(const DeviceProfile& device, TensorType wtype, size_t k);
// Whether gemv() and gemv_parts() can round x to int16 for this weight type: tile-major Q8_0,
// Q4_0 and Q4_1 (gemv_tiles.comp) on gemv_int_dot devices, any k.
bool gemv_int16(const DeviceProfile& device, TensorType wtype);
// The rounding gemv() and gemv_parts() take for these weights when asked for `asked`.
XRounding gemv_x_rounding(const DeviceProfile& device, TensorType wtype, size_t k, XRounding asked);
// Whether folding an RMSNorm into gemv() is cheap: true where each workgroup reads x once for
// all its rows (float weights, Q8_0/Q4_0/Q4_1 on every path, the CPU backend); gemv.comp's
// path for the k-quants and MLX weights reads x once per row and block, and the norm's weight
// would double those loads.
bool gemv_folds_norm(const DeviceProfile& device, TensorType wtype, size_t k);
// Whether folding the gated activation into gemv() is cheap: only where x is formed once for
// many rows: the tile GEMV (32 rows per workgroup), the integer-dot path (16
// rows per workgroup on a 32-wide subgroup) and the CPU backend (once per thread's range of
// rows). The float GEMVs (gemv_core.glsl) take 4 rows per workgroup, so each element's activation would
// be computed rows / 4 times, and folding it there slowed float decode (bench/NOTES.md, "Two
// dependent dispatches fewer per layer: the activation in the down GEMV, the attention merge in
// the split").
bool gemv_folds_activation(const DeviceProfile& device, TensorType wtype, size_t k);
// Whether gemm() takes X as halves (GemmShape.x_dtype f16): the cooperative-matrix GEMM, which
// converts X to halves anyway, with k and ldx multiples of 8. A prefill chunk's norms and
// activation then write halves once, instead of each column of GEMM tiles converting them.
bool gemm_takes_half_x(const DeviceProfile& d, size_t k, size_t ldx);
// out[m, n] (rows ldy halves apart) = act(X · Wg^T) * (X · Wu^T) as halves: a prefill chunk's
// gate and up projections and the gated activation in one dispatch (gemm_cm2.comp's GATED),
// the down projection's X written straight from the accumulators. Needs gemm_fuses_gated:
// f16 W and X as halves where gemm() runs gemm_cm2.comp, SiLU or GELU (tanh), and indirect
// counts (the act_* of shorter chunks keeps to its row window by them alone).
// tuning gemm_gated=0 turns it off (A/B).
bool gemm_fuses_gated(const DeviceProfile& d, TensorType wtype, Activation act, const GemmShape& shape);
// The most rows for which gemm() of these weights runs gemm_rows.comp, the tile GEMV of several
// rows of x (DeviceProfile::gemm_tile_rows; 0: never): tile-major Q8_0, Q4_0 and Q4_1 on a
// Vulkan device.
uint32_t gemm_tile_rows(const DeviceProfile& d, TensorType wtype);
// Whether dequant_f16() takes weights of this type (the block formats of ggml).
bool dequantizes_to_f16(TensorType wtype);
// Whether flash_attention takes flash_cm.comp (cooperative matrices: devices with gemm_coopmat,
// an f16 cache in one buffer, head_dim 64 or 128) rather than the scalar flash_attention.comp.
// tuning flash_coopmat=0 keeps the scalar kernel.
bool flash_attention_coopmat(const DeviceProfile& d, const KvBindings& cache, uint32_t head_dim);
// The query rows of a tile of a batched step (attention_tiles): a run of one sequence's rows
// attends in tiles of this many rows, AKUNU_FLASH_CM_ROWS on flash_cm (the conditions of
// flash_attention_coopmat, on the pool's f16 blocks), AKUNU_FLASH_ROWS on the scalar
// flash_attention (every format); 0: every row goes through attention_rows (tuning
// batch_flash=0, the CPU backend, a head_dim the flash kernels do not take).
uint32_t batch_tile_rows(const DeviceProfile& d, const KvBindings& cache, uint32_t head_dim);
// Whether a table of `rows` rows of a batched step attends its rows outside the query tiles
// (decode rows, and prompt rows where no tile takes them) in attention_split's layout rather
// than one workgroup per row and head (attention_rows.comp): Vulkan devices with subgroup
// shuffles over 8 lanes or more, head_dim a multiple of 8 up to AKUNU_ATTENTION_CHUNK, rows x
// heads within one dispatch's x, and partials (batch_row_partial_floats) within the batch
// scratch's budget for them. tuning batch_row_attention=0 keeps attention_rows (A/B).
bool batch_row_split(const DeviceProfile& d, uint32_t rows, uint32_t n_heads, uint32_t head_dim, uint32_t max_len);

// The workgroups of a tile GEMV of matrices of these rows: what a GEMV waiting for it counts.
uint32_t gemv_tiles_groups(const std::array<size_t, 3>& rows);

}  // namespace akunu::kernels

// KV-cache storage formats and the layout of one layer's K (or V) buffer.
//
// f16 stores values. The quantized formats (see shaders/include/kv_format.glsl for the codes)
// store each (head, position) row of head_dim values as packed 32-bit words, 8 bits (q8) or
// 4 bits (int4, fp4) per value, plus one f16 scale per row:
//
//   [n_kv_heads, max_len, head_dim * bits / 32] u32   packed codes
//   (padding to 16 bytes, the storage-buffer offset alignment, where the codes need it)
//   [n_kv_heads, max_len] f16                         row scales
//
// K and V may differ: q8/int4 and q8/fp4 keep keys, which attention is more sensitive to, in
// 8 bits and values in 4 (docs/kv-quality.md has the measurements).
//
// int4h stores int4 rows of Hadamard-rotated K and V: each head's K (after RoPE), V and Q are
// multiplied by the orthonormal, symmetric Walsh-Hadamard matrix H (hadamard_rows), which spreads
// a row's outlier channels over all of them before the row scale is taken. Scores need no
// change, (Hq)·(Hk) = q·k; the attention output sum p (Hv) is rotated back once, H H = I.
#pragma once

#include <cstdint>
#include <string>

#include "akunu/vulkan/dispatch.h"

namespace akunu {

enum class KvDType { kF16, kQ8, kInt4, kFp4, kQ8Int4, kQ8Fp4, kInt4H, kFp4H };
// "f16", "q8", "int4", "fp4", "q8/int4", "q8/fp4", "int4h", "fp4h"
KvDType parse_kv_dtype(const std::string& name);
const char* kv_dtype_name(KvDType t);

// The recent window of a quantized format: a query at position p reads the keys and values at
// positions > p - recent from f16 copies (the step's own rows from its Q/K/V rows, older ones
// from a ring of f16 rows per layer and KV head, kv_recent.h) and older ones from the cache's
// codes. Most of a quantized cache's error sits in the few latest keys a query attends most.
// Spelled "<format>+w<recent>" ("int4h+w8"), or "<format>+w" for kKvRecentDefault.
struct KvFormat {
    KvDType dtype = KvDType::kF16;
    int recent = 0;  // 0: no window
};
// The window "+w" alone gives: the size at which the window's error gain levels off on
// akunu's kv-quality corpus (docs/kv-quality.md).
constexpr int kKvRecentDefault = 8;
constexpr int kKvRecentMax = 256;
// "int4h", "q8/int4+w16", "fp4+w"; throws for an unknown format, a window on f16 or out of
// range (1 to kKvRecentMax).
KvFormat parse_kv_format(const std::string& name);
std::string kv_format_name(const KvFormat& f);  // "int4h+w8", or the dtype's name without a window
// Shader-variant suffix of the stored codes: "q8", "q8_int4", ... ("int4" for int4h, "fp4" for
// fp4h).
std::string kv_variant_suffix(KvDType t);
// The storage format of the keys (values = false) or the values: one of f16, q8, int4, fp4.
KvDType kv_side(KvDType t, bool values);
// Whether the cache holds Hadamard-rotated rows (int4h, fp4h): Q, K and V are rotated before
// the cache write, and the attention output after attention (by a decode attention itself on a
// Vulkan device: kernel_policy.h attention_unrotates).
bool kv_rotated(KvDType t);
// The power-of-two block the rotation runs over: the largest that divides head_dim, at most 256
// (a block-diagonal H where head_dim is not a power of two).
int kv_rotation_block(int head_dim);
// The code id of a side format (core/kv_codes.h): kKvF16, kKvQ8, kKvInt4 or kKvFp4.
uint32_t kv_code_id(KvDType side);
// Bits per stored value of a side format: 16, 8 or 4.
int kv_value_bits(KvDType side);
// Bytes of one (head, position) row of a side: values plus, when quantized, one f16 scale.
uint64_t kv_row_bytes(KvDType side, int head_dim);

struct KvLayout {
    uint64_t data_bytes;  // the values (f16) or packed codes
    uint64_t scale_offset;  // where the row scales start; == bytes for f16
    uint64_t bytes;  // the whole buffer
};
// The K or V buffer of a side format; throws when head_dim does not pack into whole words.
KvLayout kv_layout(KvDType side, int n_kv_heads, int max_len, int head_dim);

// Where a layer's rows live (shaders/include/kv_rows.glsl): one buffer per side holding every
// position, the same as a ring of fewer positions (sliding-window layers), or blocks of
// AKUNU_KV_BLOCK positions allocated as the sequence grows and found through a block table.
// kBatch: blocks of a pool that many sequences share (kv_pool.h), the block tables of all its
// sequences side by side; each row of a batched step finds its sequence's (params.h BatchRow).
enum class KvRows { kFull, kRing, kBlocks, kBatch };
const char* kv_rows_name(KvRows r);  // "full", "ring", "blocks", "batch"

// What the attention kernels bind for one layer: values (or codes) and, when quantized, the
// row scales, ranges of the same two buffers; or, for a cache in blocks, the two block tables.
struct KvBindings {
    KvDType dtype;  // the cache format (kv_side gives K's and V's)
    Binding k, v;  // f16 [n_kv, cache_rows, head_dim] or u32 codes; blocks: u64 [blocks] addresses
    Binding k_scales, v_scales;  // f16 [n_kv, cache_rows]; unset for f16 and for blocks
    KvRows rows = KvRows::kFull;
    uint32_t cache_rows = 0;  // rows per head: the context (full), the ring's length; 0 for blocks
    uint32_t sequences = 1;  // kBatch: the block tables side by side in k and v
    // The recent window (KvFormat): its size, the ring's rows per head and the rings, f16
    // [n_kv, recent_rows, head_dim] each; the table builder adds the step's own [q | k | v]
    // rows (f32, step_kv_stride floats apart) that the attention reads the current rows from.
    uint32_t recent = 0, recent_rows = 0;
    Binding k_recent, v_recent;
    Binding step_kv;
    uint32_t step_kv_stride = 0;
    bool in_blocks() const { return rows == KvRows::kBlocks || rows == KvRows::kBatch; }
};

// What a dispatch table's attention reads for each layer: one sequence's cache (KVCache) or the
// pool of a batch (KvPool).
class KvSource {
public:
    virtual ~KvSource() = default;
    virtual KvBindings bindings(int layer) const = 0;
};

// Bytes of one side of one layer in a block of AKUNU_KV_BLOCK positions: the codes (or f16
// values) [n_kv, AKUNU_KV_BLOCK, ...], then a quantized side's scales [n_kv, AKUNU_KV_BLOCK].
KvLayout kv_block_layout(KvDType side, int n_kv_heads, int head_dim);

}  // namespace akunu

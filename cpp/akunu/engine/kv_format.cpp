// KV-cache formats: names, sizes and the buffer layout the cache, the kernels and the memory
// plan share.
#include "akunu/engine/kv_format.h"

#include "akunu/core/error.h"
#include "akunu/core/kv_codes.h"
#include "params.h"

namespace akunu {

KvDType parse_kv_dtype(const std::string& name) {
    if (name == "f16") return KvDType::kF16;
    if (name == "q8") return KvDType::kQ8;
    if (name == "int4") return KvDType::kInt4;
    if (name == "fp4") return KvDType::kFp4;
    if (name == "q8/int4") return KvDType::kQ8Int4;
    if (name == "q8/fp4") return KvDType::kQ8Fp4;
    if (name == "int4h") return KvDType::kInt4H;
    if (name == "fp4h") return KvDType::kFp4H;
    throw Error("unknown kv_dtype '" + name +
                "'; expected f16, q8, int4, fp4, q8/int4, q8/fp4 (keys/values), int4h or fp4h (Hadamard-rotated "
                "int4 or fp4)");
}

KvFormat parse_kv_format(const std::string& name) {
    const size_t plus = name.find('+');
    KvFormat f{parse_kv_dtype(name.substr(0, plus)), 0};
    if (plus == std::string::npos) return f;
    const std::string window = name.substr(plus + 1);
    const std::string digits = window.size() > 1 ? window.substr(1) : "";
    AKUNU_CHECK(!window.empty() && window[0] == 'w' && digits.find_first_not_of("0123456789") == std::string::npos &&
                    digits.size() <= 3,
                "kv_dtype '" + name + "': expected '<format>+w<recent>' (\"int4h+w8\": the 8 latest keys and " +
                    "values of each query in f16) or '<format>+w' (a window of " + std::to_string(kKvRecentDefault) +
                    ")");
    f.recent = digits.empty() ? kKvRecentDefault : std::stoi(digits);
    AKUNU_CHECK(f.dtype != KvDType::kF16, "kv_dtype '" + name +
                                              "': the recent window keeps f16 copies beside a quantized cache; an "
                                              "f16 cache has none (use q8, int4, fp4, q8/int4, q8/fp4, int4h or fp4h)");
    AKUNU_CHECK(f.recent >= 1 && f.recent <= kKvRecentMax,
                "kv_dtype '" + name + "': the window must hold 1 to " + std::to_string(kKvRecentMax) + " positions");
    return f;
}

std::string kv_format_name(const KvFormat& f) {
    std::string s = kv_dtype_name(f.dtype);
    return f.recent > 0 ? s + "+w" + std::to_string(f.recent) : s;
}

const char* kv_dtype_name(KvDType t) {
    switch (t) {
        case KvDType::kF16: return "f16";
        case KvDType::kQ8: return "q8";
        case KvDType::kInt4: return "int4";
        case KvDType::kFp4: return "fp4";
        case KvDType::kQ8Int4: return "q8/int4";
        case KvDType::kQ8Fp4: return "q8/fp4";
        case KvDType::kInt4H: return "int4h";
        case KvDType::kFp4H: return "fp4h";
    }
    return "?";
}

std::string kv_variant_suffix(KvDType t) {
    std::string s = kv_dtype_name(kv_rotated(t) ? kv_side(t, false) : t);
    for (char& ch : s)
        if (ch == '/') ch = '_';
    return s;
}

KvDType kv_side(KvDType t, bool values) {
    if (t == KvDType::kQ8Int4) return values ? KvDType::kInt4 : KvDType::kQ8;
    if (t == KvDType::kQ8Fp4) return values ? KvDType::kFp4 : KvDType::kQ8;
    if (t == KvDType::kInt4H) return KvDType::kInt4;
    if (t == KvDType::kFp4H) return KvDType::kFp4;
    return t;
}

uint32_t kv_code_id(KvDType side) {
    return side == KvDType::kQ8 ? kKvQ8 : side == KvDType::kInt4 ? kKvInt4 : side == KvDType::kFp4 ? kKvFp4 : kKvF16;
}

bool kv_rotated(KvDType t) { return t == KvDType::kInt4H || t == KvDType::kFp4H; }

int kv_rotation_block(int head_dim) {
    int block = 1;
    while (block < 256 && head_dim % (block * 2) == 0) block *= 2;
    return block;
}

int kv_value_bits(KvDType side) { return side == KvDType::kF16 ? 16 : side == KvDType::kQ8 ? 8 : 4; }

uint64_t kv_row_bytes(KvDType side, int head_dim) {
    const uint64_t values = uint64_t(head_dim) * uint64_t(kv_value_bits(side)) / 8;
    return side == KvDType::kF16 ? values : values + 2;
}

KvLayout kv_layout(KvDType t, int n_kv_heads, int max_len, int head_dim) {
    const uint64_t rows = uint64_t(n_kv_heads) * uint64_t(max_len);
    if (t == KvDType::kF16) {
        const uint64_t bytes = rows * uint64_t(head_dim) * 2;
        return {bytes, bytes, bytes};
    }
    AKUNU_CHECK(head_dim % 8 == 0, "kv_dtype " + std::string(kv_dtype_name(t)) +
                                       " packs whole 32-bit words per row: head_dim " + std::to_string(head_dim) +
                                       " is not a multiple of 8; use kv_dtype f16");
    const uint64_t data = rows * uint64_t(head_dim) * uint64_t(kv_value_bits(t)) / 8;
    const uint64_t scale_offset = (data + 15) / 16 * 16;
    return {data, scale_offset, scale_offset + (rows * 2 + 3) / 4 * 4};
}

KvLayout kv_block_layout(KvDType side, int n_kv_heads, int head_dim) {
    // The shaders find a quantized side's scales right after its words (kv_rows.glsl
    // KV_SCALE_BASE): a block's words fill whole 16-byte units, so no padding comes between.
    const KvLayout l = kv_layout(side, n_kv_heads, AKUNU_KV_BLOCK, head_dim);
    AKUNU_CHECK(l.scale_offset == l.data_bytes, "kv_block_layout: the scales must follow the words");
    return l;
}

const char* kv_rows_name(KvRows r) {
    switch (r) {
        case KvRows::kFull: return "full";
        case KvRows::kRing: return "ring";
        case KvRows::kBlocks: return "blocks";
        case KvRows::kBatch: return "batch";
    }
    return "?";
}

}  // namespace akunu

// The KV-cache storage formats on the CPU (the codes themselves: core/kv_codes.h). CPU kernel
// variants carry the K format in bits 0-7 and the V format in bits 8-15 (and the layout
// higher, kv_rows.h).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "akunu/cpu/kv_rows.h"
#include "akunu/cpu/row_dot.h"
#include "akunu/core/half.h"
#include "akunu/core/kv_codes.h"

namespace akunu::cpu {

// Bytes of one row's values (f16) or packed codes.
inline size_t kv_row_bytes(uint32_t f, uint32_t head_dim) {
    return f == kKvF16 ? head_dim * 2u : head_dim / kv_per_word(f) * 4u;
}

// Reads cache rows of one side (K or V) of any format and layout: a row's values without the
// row scale, and the row scale (1 for f16).
struct KvSide {
    KvRowMap rows;
    uint32_t format;
    uint32_t head_dim;

    float scale(const KvRowMap::Row& r) const { return r.scale ? half_to_float(*r.scale) : 1.0f; }

    // All head_dim values of a row, without the row scale. `to_float` is half_row(). Code j of
    // a little-endian word sits in its bytes in order, so the codes are read as bytes: q8's
    // byte i is code i, and int4's and fp4's byte i holds codes 2i (low nibble) and 2i + 1
    // (q8_row, int4_row, fp4_row: AVX2 where the processor has it; kv_code reads one code at a
    // time).
    void values(const KvRowMap::Row& r, float* out, HalfRowFn to_float) const {
        const uint8_t* b = r.data;
        if (format == kKvF16) {
            to_float(reinterpret_cast<const uint16_t*>(b), out, head_dim);
        } else if (format == kKvQ8) {
            static const CodeRowFn q8 = q8_row();
            q8(b, out, head_dim);
        } else if (format == kKvInt4) {
            static const CodeRowFn int4 = int4_row();
            int4(b, out, head_dim);
        } else {
            static const CodeRowFn fp4 = fp4_row();
            fp4(b, out, head_dim);
        }
    }
};

}  // namespace akunu::cpu

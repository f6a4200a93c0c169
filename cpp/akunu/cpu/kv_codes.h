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
    CodeRowFn read;  // the format's row conversion (kv_row_reader), chosen once

    KvSide(const KvRowMap& rows, uint32_t format, uint32_t head_dim)
        : rows(rows), format(format), head_dim(head_dim), read(kv_row_reader(format)) {}

    // The same side seen from a sequence whose block table starts `first_block` entries in.
    KvSide from_block(size_t first_block) const {
        KvSide s = *this;
        s.rows = rows.from_block(first_block);
        return s;
    }

    float scale(const KvRowMap::Row& r) const { return r.scale ? half_to_float(*r.scale) : 1.0f; }

    // All head_dim values of a row, without the row scale.
    void values(const KvRowMap::Row& r, float* out) const { read(r.data, out, head_dim); }
};

}  // namespace akunu::cpu

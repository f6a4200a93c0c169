// Row windows of weight matrices (weight_windows.h).
#include "akunu/engine/weight_windows.h"

#include <algorithm>

#include "akunu/core/error.h"
#include "akunu/formats/tiles.h"

namespace akunu {

size_t weight_binding_limit(const DeviceProfile& d) {
    const size_t device = size_t(d.max_storage_buffer_range);
    const int kib = d.tuning.weight_binding_kib;
    return kib > 0 ? std::min(device, size_t(kib) * 1024) : device;
}

std::vector<WeightWindow> weight_windows(const Weight& w, const DeviceProfile& d, size_t limit, const char* what) {
    const size_t bytes = w.buffer.size();
    if (bytes <= limit) return {{0, size_t(w.shape[0]), Binding(w.buffer)}};
    const TensorTypeTraits& t = type_traits(w.type);
    AKUNU_CHECK(t.dequant || cpu::tile_layout(w.type),
                std::string(what) + ": a " + t.name + " matrix of " + std::to_string(bytes >> 20) +
                    " MiB cannot be bound in windows of rows, and this device binds at most " +
                    std::to_string(limit >> 20) + " MiB at once");
    // Rows come in granules: one row, or a tile of 32 rows, of `granule_bytes`.
    const size_t rows = size_t(w.shape[0]), k = size_t(w.shape[1]);
    const cpu::TileLayout* tiles = cpu::tile_layout(w.type);
    const size_t granule = tiles ? cpu::kTileRows : 1;
    const size_t granule_bytes = tiles ? cpu::tile_bytes(*tiles, k) : k / t.block_size * t.block_bytes;
    // A step of granules whose weight bytes and output floats both start aligned.
    const size_t align = std::max<size_t>(1, size_t(d.min_storage_buffer_offset_alignment));
    size_t step = 1;
    while ((step * granule_bytes) % align != 0 || (step * granule * 4) % align != 0) ++step;
    const size_t per_window = limit / (step * granule_bytes) * step;  // granules
    AKUNU_CHECK(per_window > 0, std::string(what) + ": " + std::to_string(step * granule) + " rows of " +
                                    std::to_string(k) + " " + t.name + " weights take " +
                                    std::to_string(step * granule_bytes) + " bytes, more than one binding of " +
                                    std::to_string(limit) + " bytes on this device");
    std::vector<WeightWindow> out;
    for (size_t g = 0; g * granule < rows; g += per_window) {
        const size_t first = g * granule, n = std::min(rows - first, per_window * granule);
        const size_t offset = g * granule_bytes;
        const bool last = first + n == rows;
        out.push_back({first, n, Binding(w.buffer, offset, last ? 0 : per_window * granule_bytes)});
    }
    return out;
}

}  // namespace akunu

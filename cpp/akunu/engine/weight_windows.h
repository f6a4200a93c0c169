// Weight matrices bound in windows of whole rows, for devices that bind less at once than a
// matrix holds (maxStorageBufferRange: 128 MiB on lavapipe and many integrated GPUs, less than
// the embedding table of a model with a large vocabulary).
//
// A matrix stays one buffer; a kernel that reads it is dispatched once per window, each
// binding the window's bytes and writing the window's rows of its output (kernels::embed skips
// the tokens outside its window). The windows are computed once, when a table is built, and
// recorded with it: nothing of this runs per step. Where a matrix fits one binding there is one
// window, the whole buffer, and the table is what it was without windows.
#pragma once

#include <cstddef>
#include <vector>

#include "akunu/vulkan/device_profile.h"
#include "akunu/vulkan/dispatch.h"
#include "akunu/engine/weights.h"

namespace akunu {

struct WeightWindow {
    size_t first_row = 0;  // rows [first_row, first_row + rows) of the matrix
    size_t rows = 0;
    Binding w;  // their bytes in the weight's buffer (the last window: to the buffer's end)
};

// The most bytes of a weight matrix bound at once: the device's maxStorageBufferRange, or less
// where tuning weight_binding_kib says (tests).
size_t weight_binding_limit(const DeviceProfile& d);

// The row windows of `w` (shape [rows, k]) on a device that binds `limit` bytes at once. Every
// window but the last holds a multiple of rows whose bytes and whose f32 output (4 bytes a row)
// start on the device's binding-offset alignment, in whole tiles for tile-major types. Throws
// naming `what` where a window cannot be formed (MLX weights, whose scales follow all rows).
std::vector<WeightWindow> weight_windows(const Weight& w, const DeviceProfile& d, size_t limit, const char* what);
inline std::vector<WeightWindow> weight_windows(const Weight& w, const DeviceProfile& d, const char* what) {
    return weight_windows(w, d, weight_binding_limit(d), what);
}

}  // namespace akunu

// Models larger than one device, split by layers (docs/devices.md): consecutive layers on each
// device, the last ones possibly on akunu's CPU backend, as llama.cpp's partial offload does.
//
// Each part is a Model of its own (model.h) over a LoadedModel whose LayerRange names its
// layers: it holds those layers' weights and KV cache, its own scratch, and dispatch tables
// recorded once for its layers. The first part embeds the tokens, the last one ends in the head
// and sampler; between them the residual stream ([rows, dim] f32, as the whole model's table has
// it after the boundary's layer) passes once per boundary per step through host-visible memory.
#pragma once

#include <cstdint>
#include <vector>

#include "akunu/engine/layer_range.h"
#include "akunu/vulkan/device_profile.h"

namespace akunu {

// The layers each of several devices takes, in order. `split` gives layer counts (whole numbers
// that sum to n_layers) or proportions; empty, the parts follow the devices' free memory
// (free_bytes). Throws for a spec that leaves a device without layers, more devices than
// layers, or a count or share that is not positive.
std::vector<LayerRange> split_layers(int n_layers, const std::vector<double>& split,
                                     const std::vector<uint64_t>& free_bytes);

// What a device offers a part: the memory it reports available, else its largest heap.
uint64_t free_device_bytes(const DeviceProfile& device);

// Whether two devices run the same kernels (so a norm handed forward by one's GEMV can be read
// by the other's), as two logical devices on one physical device do.
bool same_kernels(const DeviceProfile& a, const DeviceProfile& b);

}  // namespace akunu

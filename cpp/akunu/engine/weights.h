// Model weights on the device (docs/architecture.md, "Loading a model", step 7): every tensor
// the architecture needs, uploaded from the memory map. Matrices keep their file type
// (quantized weights stay quantized on the GPU); 1-D tensors (norms, biases) become f32, which
// every kernel reads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "akunu/vulkan/buffer.h"
#include "akunu/model/model_config.h"
#include "akunu/formats/model_files.h"
#include "akunu/engine/layer_range.h"

namespace akunu {

struct DeviceProfile;

struct UploadItem {
    TensorRole role;
    int layer;  // -1: model-level
    const TensorInfo* tensor;
    TensorType device_type;  // the type the buffer holds
    size_t bytes;  // the buffer's size
};

// What the loader uploads, in order; the memory plan sums the same list. Projection matrices
// of the types `tiles` covers (DeviceProfile::weight_tiles) become tile-major (formats/tiles.h),
// and a decoder whose head is tied to its embedding of such a type keeps the embedding twice:
// as stored, for lookups, and in tiles, as the head (an extra kOutput item).
std::vector<UploadItem> plan_weight_uploads(const ModelFiles& files, const ModelConfig& c,
                                            WeightTiles tiles = WeightTiles::kNone);

// Whether a part of a split model holding `layers` uploads `item` of `items` (split.h): its
// layers' tensors, the attention norm of the layer after its last (a GEMV may hand that norm
// forward), the embedding where it starts at layer 0, and the output norm and head where it
// ends the model (a tied head: the embedding).
bool part_uploads(const std::vector<UploadItem>& items, const UploadItem& item, int n_layers, LayerRange layers);

// One uploaded tensor (or, for a tensor another part of a split model holds, its type and
// shape alone, which the decode plan reads).
struct Weight {
    Buffer buffer;
    TensorType type = TensorType::F32;
    std::vector<uint64_t> shape;  // NumPy order
    explicit operator bool() const { return bool(buffer); }
};

struct LayerWeights {
    Weight attn_norm, q, k, v, q_bias, k_bias, v_bias, o, q_norm, k_norm, post_attn_norm;
    Weight ffn_norm, gate, up, down, post_ffn_norm;
};

struct ModelWeights {
    Weight token_embd, output_norm, output;  // output is empty when embeddings are tied
    std::vector<LayerWeights> layers;
    std::vector<float> rope_divisors;  // GGUF llama3 rope_freqs, read on the CPU
    size_t bytes = 0;  // sum of buffer sizes
};

// Throws, naming the first matrix of `items` whose type the device's kernels do not run (and
// the backend: the CPU backend or the Vulkan device), before anything is uploaded.
void check_weight_types(const std::vector<UploadItem>& items, const DeviceProfile& device, const std::string& path);

// One tensor of the plan on the device (matrices as stored or in tiles, MLX ones with their
// scales and biases from `files`, 1-D tensors as f32).
Weight upload_weight(const std::shared_ptr<Device>& device, const ModelFiles& files, const UploadItem& item);

// The first `rows` rows of a float matrix (a convolution's [out, in * kernel]) as Q8_0 tiles
// (ggml's quantize_row_q8_0 per block of 32: scale max|x| / 127 as f16, codes round(x / scale)):
// a cheaper copy of part of a head, or of a whole matrix.
Weight upload_q8_rows(const std::shared_ptr<Device>& device, const TensorInfo& tensor, size_t rows);

// Whether a float matrix can be held as Q8_0 tiles (its row length a multiple of 32), and
// `item` planned that way: upload_weight then rounds it at load (upload_q8_rows).
bool q8_tiles_fit(const UploadItem& item);
UploadItem in_q8_tiles(UploadItem item);
// ... and a Q8_0 copy of its first `rows` rows (upload_q8_rows), planned: its type and bytes.
UploadItem in_q8_tiles(UploadItem item, size_t rows);

// Uploads the weights of a validated model (those of a part holding `layers`: part_uploads);
// `progress(done, total)` is called per tensor. Tiles as the device's profile says
// (plan_weight_uploads).
ModelWeights upload_weights(const std::shared_ptr<Device>& device, const ModelFiles& files, const ModelConfig& c,
                            const std::function<void(size_t, size_t)>& progress = {}, LayerRange layers = {});

}  // namespace akunu

// Weight upload: matrices byte for byte (MLX quantized ones with their scales and biases,
// mlx_weights.h), 1-D tensors dequantized to f32.
#include "akunu/engine/weights.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

#include "akunu/formats/tiles.h"
#include "akunu/vulkan/device.h"
#include "akunu/core/error.h"
#include "akunu/core/half.h"
#include "akunu/engine/kernels.h"
#include "akunu/formats/mlx_weights.h"
#include "akunu/formats/quantize.h"
#include "akunu/engine/validate.h"

namespace akunu {

namespace {

// Matrices read by row index (lookups) stay as stored; every other matrix is a GEMV/GEMM weight.
bool is_lookup(TensorRole role) {
    return role == TensorRole::kTokenEmbd || role == TensorRole::kPositionEmbd || role == TensorRole::kTokenTypes;
}

// `item` as a device that keeps `tiles` matrices in tiles holds it.
UploadItem in_tiles(UploadItem item, WeightTiles tiles) {
    if (const cpu::TileLayout* l = cpu::tile_layout_for(item.device_type, tiles)) {
        item.device_type = l->tiled;
        item.bytes = cpu::tiled_bytes(*l, item.tensor->shape[0], item.tensor->shape[1]);
    }
    return item;
}

}  // namespace

std::vector<UploadItem> plan_weight_uploads(const ModelFiles& files, const ModelConfig& c, WeightTiles tiles) {
    const ArchDescriptor& a = c.arch();
    const bool gguf = files.gguf() != nullptr;
    std::vector<UploadItem> out;
    for (const ExpectedTensor& e : expected_tensors(c)) {
        if (e.role == TensorRole::kRopeFreqs) continue;  // used on the CPU to build the RoPE tables
        const std::string name = tensor_name(a, e.role, e.layer, gguf);
        const TensorInfo* t = name.empty() ? nullptr : files.find(name);
        if (!t) continue;
        if (t->shape.size() == 1) {
            out.push_back({e.role, e.layer, t, TensorType::F32, size_t(t->n_elements) * 4});
        } else if (files.format() == ModelFormat::kMlx && t->type->type == TensorType::U32) {
            const TensorType mlx = mlx_weight_type(files, *t, e.shape.back());
            const uint64_t n = e.shape[0] * e.shape[1];
            out.push_back({e.role, e.layer, t, mlx, tensor_bytes(type_traits(mlx), n, t->name)});
        } else {
            const UploadItem item{e.role, e.layer, t, t->type->type, t->bytes};
            // Lookups, and convolutions (3-D, read as [out, in * kernel]), stay as stored.
            out.push_back(is_lookup(e.role) || t->shape.size() != 2 ? item : in_tiles(item, tiles));
        }
    }
    if (tiles != WeightTiles::kNone && a.causal) {  // a tied head: the embedding a second time, in tiles
        bool has_head = false;
        for (const UploadItem& u : out) has_head |= u.role == TensorRole::kOutput;
        for (const UploadItem& u : out)
            if (!has_head && u.role == TensorRole::kTokenEmbd && u.device_type == u.tensor->type->type) {
                const UploadItem head = in_tiles({TensorRole::kOutput, -1, u.tensor, u.device_type, u.bytes}, tiles);
                if (head.device_type != u.device_type) {
                    out.push_back(head);
                    break;
                }
            }
    }
    return out;
}

void check_weight_types(const std::vector<UploadItem>& items, const DeviceProfile& device, const std::string& path) {
    for (const UploadItem& it : items)
        AKUNU_CHECK(it.tensor->shape.size() == 1 || kernels::weight_type_supported(it.device_type),
                    path + ": tensor " + it.tensor->name + " has weight type " + it.tensor->type->name + ", which " +
                        (device.cpu_backend ? std::string("the CPU backend") : "the Vulkan kernels on " + device.name) +
                        " do" + (device.cpu_backend ? "es" : "") +
                        " not support yet (supported: " + kernels::supported_weight_types() + ")");
}

bool part_uploads(const std::vector<UploadItem>& items, const UploadItem& item, int n_layers, LayerRange layers) {
    using R = TensorRole;
    if (item.layer >= 0)
        return layers.holds(item.layer, n_layers) || (item.role == R::kAttnNorm && item.layer == layers.end(n_layers));
    const bool head = layers.heads(n_layers);
    if (item.role == R::kTokenEmbd) {
        const bool own_head =
            std::any_of(items.begin(), items.end(), [](const UploadItem& u) { return u.role == R::kOutput; });
        return layers.embeds() || (head && !own_head);
    }
    return head;  // the output norm and the head
}

// A matrix's rows and row length ([out, in * kernel] for a convolution).
static std::pair<size_t, size_t> matrix_extent(const TensorInfo& tensor) {
    const size_t rows = size_t(tensor.shape[0]);
    return {rows, rows ? size_t(tensor.n_elements) / rows : 0};
}

bool q8_tiles_fit(const UploadItem& item) {
    const TensorInfo& t = *item.tensor;
    return t.shape.size() >= 2 && t.type->block_size == 1 && !is_lookup(item.role) && matrix_extent(t).second % 32 == 0;
}

UploadItem in_q8_tiles(UploadItem item) { return in_q8_tiles(item, matrix_extent(*item.tensor).first); }

UploadItem in_q8_tiles(UploadItem item, size_t rows) {
    AKUNU_CHECK(q8_tiles_fit(item), "tensor " + item.tensor->name + ": no Q8_0 tiles of a " + item.tensor->type->name +
                                        " tensor whose rows are not a multiple of 32 long");
    const auto [all_rows, k] = matrix_extent(*item.tensor);
    AKUNU_CHECK(rows <= all_rows, "tensor " + item.tensor->name + ": no Q8_0 copy of " + std::to_string(rows) +
                                      " of its " + std::to_string(all_rows) + " rows");
    const cpu::TileLayout& l = *cpu::tile_layout(TensorType::Q8_0_T32);
    item.device_type = l.tiled;
    item.bytes = cpu::tiled_bytes(l, rows, k);
    return item;
}

Weight upload_weight(const std::shared_ptr<Device>& device, const ModelFiles& files, const UploadItem& item) {
    files.file_of(*item.tensor).check_intact();  // reads below come straight from the map
    if (item.device_type == TensorType::Q8_0_T32 && item.tensor->type->block_size == 1)  // rounded at load
        return upload_q8_rows(device, *item.tensor, size_t(item.tensor->shape[0]));
    Weight w;
    w.type = item.device_type;
    w.shape = item.tensor->shape;
    if (item.device_type == item.tensor->type->type) {
        w.buffer = Buffer::allocate(device, item.tensor->data, item.bytes);
    } else if (const cpu::TileLayout* l = cpu::tile_layout(item.device_type)) {
        // Packed straight into mapped memory where there is some (the CPU backend, lavapipe,
        // ReBAR and unified-memory GPUs), on several threads: a 7b model is 3.6 GB of tiles.
        const unsigned threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
        w.buffer = Buffer::allocate(device, item.bytes);
        if (void* mapped = w.buffer.contents()) {
            cpu::pack_tiles(*l, item.tensor->data, w.shape[0], w.shape[1], static_cast<uint8_t*>(mapped), threads);
        } else {
            std::vector<uint8_t> tiles(item.bytes);
            cpu::pack_tiles(*l, item.tensor->data, w.shape[0], w.shape[1], tiles.data(), threads);
            w.buffer.write(tiles.data(), tiles.size());
        }
    } else if (item.tensor->type->type == TensorType::U32) {
        const std::vector<uint8_t> packed = pack_mlx_weight(files, *item.tensor, item.device_type);
        w.buffer = Buffer::allocate(device, packed.data(), packed.size());
        const TensorTypeTraits& t = type_traits(item.device_type);
        w.shape = {w.shape[0],
                   item.bytes / t.block_bytes * t.block_size / w.shape[0]};  // [out, in], not the packed codes
    } else {
        std::vector<float> f(size_t(item.tensor->n_elements));
        dequantize(*item.tensor->type, item.tensor->data, f.data(), item.tensor->n_elements, item.tensor->name);
        w.buffer = Buffer::allocate(device, f.data(), item.bytes);
    }
    return w;
}

Weight upload_q8_rows(const std::shared_ptr<Device>& device, const TensorInfo& tensor, size_t rows) {
    constexpr size_t kBlock = 32, kBytes = 2 + kBlock;  // ggml's block_q8_0: f16 d, 32 codes
    const TensorTypeTraits& t = *tensor.type;
    const size_t k = matrix_extent(tensor).second, row_bytes = k / t.block_size * t.block_bytes;
    AKUNU_CHECK(tensor.shape.size() >= 2 && rows <= tensor.shape[0] && k % kBlock == 0 && k % t.block_size == 0,
                "tensor " + tensor.name + ": no Q8_0 copy of " + std::to_string(rows) + " rows");
    std::vector<uint8_t> blocks(rows * k / kBlock * kBytes);
    std::vector<float> x(k);
    for (size_t r = 0; r < rows; ++r) {
        dequantize(t, tensor.data + r * row_bytes, x.data(), k, tensor.name);
        quantize::q8_0_blocks(x.data(), k, blocks.data() + r * k / kBlock * kBytes);  // the CPU GEMV's rounding of x
    }
    const cpu::TileLayout& l = *cpu::tile_layout(TensorType::Q8_0_T32);
    std::vector<uint8_t> tiles(cpu::tiled_bytes(l, rows, k));
    cpu::pack_tiles(l, blocks.data(), rows, k, tiles.data());
    Weight w;
    w.type = l.tiled;
    w.shape = {rows, k};
    w.buffer = Buffer::allocate(device, tiles.data(), tiles.size());
    return w;
}

ModelWeights upload_weights(const std::shared_ptr<Device>& device, const ModelFiles& files, const ModelConfig& c,
                            const std::function<void(size_t, size_t)>& progress, LayerRange layers) {
    ModelWeights m;
    m.layers.resize(size_t(c.n_layers));
    const auto items = plan_weight_uploads(files, c, device->profile().weight_tiles);
    using R = TensorRole;
    check_weight_types(items, device->profile(), files.path());
    for (size_t i = 0; i < items.size(); ++i) {
        const UploadItem& it = items[i];
        Weight w;
        if (part_uploads(items, it, c.n_layers, layers)) {
            w = upload_weight(device, files, it);
            m.bytes += it.bytes;
        } else {
            w.type = it.device_type;
            w.shape = it.tensor->shape;
        }
        LayerWeights* L = it.layer >= 0 ? &m.layers[size_t(it.layer)] : nullptr;
        Weight* slot = nullptr;
        switch (it.role) {
            case R::kTokenEmbd: slot = &m.token_embd; break;
            case R::kOutputNorm: slot = &m.output_norm; break;
            case R::kOutput: slot = &m.output; break;
            case R::kAttnNorm: slot = &L->attn_norm; break;
            case R::kAttnQ: slot = &L->q; break;
            case R::kAttnK: slot = &L->k; break;
            case R::kAttnV: slot = &L->v; break;
            case R::kAttnQBias: slot = &L->q_bias; break;
            case R::kAttnKBias: slot = &L->k_bias; break;
            case R::kAttnVBias: slot = &L->v_bias; break;
            case R::kAttnOutput: slot = &L->o; break;
            case R::kAttnQNorm: slot = &L->q_norm; break;
            case R::kAttnKNorm: slot = &L->k_norm; break;
            case R::kPostAttnNorm: slot = &L->post_attn_norm; break;
            case R::kFfnNorm: slot = &L->ffn_norm; break;
            case R::kFfnGate: slot = &L->gate; break;
            case R::kFfnUp: slot = &L->up; break;
            case R::kFfnDown: slot = &L->down; break;
            case R::kPostFfnNorm: slot = &L->post_ffn_norm; break;
            default:
                throw Error("tensor " + it.tensor->name + ": decoder models do not use role " +
                            tensor_role_name(it.role));
        }
        *slot = std::move(w);
        if (progress) progress(i + 1, items.size());
    }
    if (c.rope_freqs_tensor) {
        const TensorInfo* t = files.find(tensor_name(c.arch(), R::kRopeFreqs, 0, true));
        AKUNU_CHECK(t && t->n_elements == uint64_t(c.head_dim / 2), "rope_freqs.weight must hold head_dim / 2 values");
        m.rope_divisors.resize(size_t(t->n_elements));
        dequantize(*t->type, t->data, m.rope_divisors.data(), t->n_elements, t->name);
    }
    return m;
}

}  // namespace akunu

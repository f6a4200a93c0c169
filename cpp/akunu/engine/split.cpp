// A model split by layers (split.h): choosing the parts, loading them, and running them in turn.
#include "akunu/engine/split.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "akunu/core/error.h"
#include "akunu/engine/model.h"
#include "akunu/vulkan/device.h"

namespace akunu {

namespace {

std::string layer_span(LayerRange r) {
    return "layers " + std::to_string(r.first) + " to " + std::to_string(r.last - 1);
}

// Counts in proportion to `shares` (largest remainders first), summing to n.
std::vector<int> proportional(const std::vector<double>& shares, int n) {
    const double total = std::accumulate(shares.begin(), shares.end(), 0.0);
    std::vector<int> counts;
    std::vector<std::pair<double, size_t>> rest;
    int given = 0;
    for (size_t i = 0; i < shares.size(); ++i) {
        const double exact = shares[i] / total * n;
        counts.push_back(int(std::floor(exact)));
        given += counts.back();
        rest.push_back({exact - std::floor(exact), i});
    }
    std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t k = 0; given < n; ++k, ++given) ++counts[rest[k % rest.size()].second];
    return counts;
}

}  // namespace

std::vector<LayerRange> split_layers(int n_layers, const std::vector<double>& split,
                                     const std::vector<uint64_t>& free_bytes) {
    const size_t parts = free_bytes.size();
    AKUNU_CHECK(parts >= 1, "a split needs at least one device");
    AKUNU_CHECK(int(parts) <= n_layers, "a split over " + std::to_string(parts) +
                                            " devices needs a layer for each; the model has " +
                                            std::to_string(n_layers) + " layers");
    std::vector<double> shares(free_bytes.begin(), free_bytes.end());
    if (!split.empty()) {
        AKUNU_CHECK(split.size() == parts, "split has " + std::to_string(split.size()) + " entries for " +
                                               std::to_string(parts) + " devices; give one per device");
        for (size_t i = 0; i < parts; ++i)
            AKUNU_CHECK(std::isfinite(split[i]) && split[i] > 0,
                        "split entry " + std::to_string(i) + " is " + std::to_string(split[i]) +
                            ": each device takes a positive number (or share) of layers; leave a device out "
                            "instead of giving it none");
        shares = split;
    } else if (std::all_of(shares.begin(), shares.end(), [](double s) { return s <= 0; })) {
        shares.assign(parts, 1.0);  // no device reports its memory: equal parts
    }
    const bool counts_given = !split.empty() &&
                              std::all_of(split.begin(), split.end(), [](double v) { return v == std::floor(v); }) &&
                              std::accumulate(split.begin(), split.end(), 0.0) == double(n_layers);
    std::vector<int> counts;
    if (counts_given)
        for (double v : split) counts.push_back(int(v));
    else
        counts = proportional(shares, n_layers);
    std::vector<LayerRange> out;
    int first = 0;
    for (size_t i = 0; i < parts; ++i) {
        AKUNU_CHECK(counts[i] > 0, "the split gives device " + std::to_string(i) + " none of the model's " +
                                       std::to_string(n_layers) +
                                       " layers; give it a larger share (split=[...]) or leave it out");
        out.push_back({first, first + counts[i]});
        first += counts[i];
    }
    return out;
}

uint64_t free_device_bytes(const DeviceProfile& d) {
    return d.available_bytes > 0 ? d.available_bytes : usable_heap_bytes(d);
}

bool same_kernels(const DeviceProfile& a, const DeviceProfile& b) {
    return a.name == b.name && a.cpu_backend == b.cpu_backend && a.type == b.type;
}

// ---- loading -----------------------------------------------------------------------------------

std::unique_ptr<Model> Model::with_runtime(std::shared_ptr<const LoadedModel> base) {
    std::unique_ptr<Model> m(new Model());
    m->base_ = std::move(base);
    m->create_runtime({});
    return m;
}

std::unique_ptr<Model> Model::load_split(std::shared_ptr<LoadedModel> headers, const LoadOptions& options) {
    if (options.progress) options.progress("device", 0, 0);
    AKUNU_CHECK(options.device.empty(), "give either device or devices (a split), not both");
    std::vector<std::shared_ptr<Device>> devices;
    std::vector<uint64_t> free;
    for (const std::string& selector : options.devices) {
        devices.push_back(Device::create(selector, options.tuning));
        free.push_back(free_device_bytes(devices.back()->profile()));
    }
    const std::vector<LayerRange> ranges = split_layers(headers->config.n_layers, options.split, free);
    // One chunk length for every part (a chunk passes through all of them), and the last part's
    // chain length.
    LoadOptions o = options;
    if (o.prefill_chunk == 0) {
        o.prefill_chunk = 512;
        for (const auto& d : devices)
            if (d->profile().cpu_backend) o.prefill_chunk = 128;
    }
    // Every step of a split is its own submission, so a chain only saves the caller's calls;
    // a short one wastes fewer steps where generation stops inside it.
    if (o.chain == 0) o.chain = 4;
    std::vector<std::unique_ptr<Model>> parts;
    for (size_t i = 0; i < devices.size(); ++i) {
        auto b = std::make_shared<LoadedModel>();
        b->files = headers->files;
        b->config = headers->config;
        b->fingerprint = headers->fingerprint;
        b->context = headers->context;
        b->eos_id = headers->eos_id;
        b->layers = ranges[i];
        b->norm_in = i > 0 && same_kernels(devices[i - 1]->profile(), devices[i]->profile());
        b->norm_out = i + 1 < devices.size() && same_kernels(devices[i]->profile(), devices[i + 1]->profile());
        place_loaded(*b, devices[i], o, " part " + std::to_string(i) + " (" + layer_span(ranges[i]) + ")");
        parts.push_back(with_runtime(std::move(b)));
    }
    std::unique_ptr<Model> last = std::move(parts.back());
    parts.pop_back();
    last->front_ = std::move(parts);
    return last;
}

// ---- running the parts -------------------------------------------------------------------------

std::vector<Model*> Model::all_parts() {
    std::vector<Model*> out;
    for (const auto& p : front_) out.push_back(p.get());
    out.push_back(this);
    return out;
}

std::vector<const Model*> Model::parts() const {
    std::vector<const Model*> out;
    for (const auto& p : front_) out.push_back(p.get());
    out.push_back(this);
    return out;
}

const KVCache& Model::layer_cache(int layer) const {
    for (const Model* p : parts())
        if (p->kv_->holds(layer)) return *p->kv_;
    throw Error("layer " + std::to_string(layer) + " is out of range (0 to " + std::to_string(config().n_layers - 1) +
                ")");
}

void Model::step_all(int token) {
    const std::vector<Model*> parts = all_parts();
    try {
        for (size_t i = 0; i < parts.size(); ++i) {
            parts[i]->step(token);
            if (i + 1 < parts.size()) parts[i]->hand_to(*parts[i + 1], parts[i]->handed_bytes(false, 1));
        }
    } catch (...) {
        align_parts();
        throw;
    }
}

void Model::align_parts() {
    int length = kv_->current_length();
    for (const Model* p : parts()) length = std::min(length, p->kv_->current_length());
    for (Model* p : all_parts()) p->kv_->set_length(length);
}

size_t Model::handed_bytes(bool prefill, size_t rows) const {
    const size_t row = size_t(config().dim) * 4;
    return prefill ? rows * row : 2 * row + scratch_->get("norm_sums").size();
}

// Both streams live in host memory (create_runtime): one copy between the mappings, nothing
// allocated.
void Model::hand_to(Model& next, size_t bytes) const {
    void* to = next.split_in_.contents();
    const void* from = split_out_.contents();
    AKUNU_CHECK(from && to, "a split model's hand-off needs its residual streams mapped");
    std::memcpy(to, from, bytes);
}

void Model::split_chain(int token) {
    DoneChain done{{}, {}, kv_->current_length()};
    for (int k = 0, t = token; k < base_->chain; ++k) {
        step_all(t);
        uint32_t id = 0;
        float lp = 0;
        scratch_->get("token_ids").read(&id, 4, 4);
        scratch_->get("sampled_logprobs").read(&lp, 4, 4);
        t = int(id);
        done.ids.push_back(t);
        done.logprobs.push_back(lp);
    }
    done_chains_.push_back(std::move(done));
}

bool Model::split_chain_next(std::vector<int>& ids, std::vector<float>& logprobs, int& first_pos, bool more) {
    if (done_chains_.empty() && owed_chains_ > 0) {
        --owed_chains_;
        split_chain(owed_from_);
    }
    if (done_chains_.empty()) return false;
    DoneChain done = std::move(done_chains_.front());
    done_chains_.erase(done_chains_.begin());
    ids = std::move(done.ids), logprobs = std::move(done.logprobs), first_pos = done.first_pos;
    owed_from_ = ids.back();  // the newest chain run: the next continues from its last id
    if (more && kv_->current_length() + (owed_chains_ + 1) * base_->chain <= base_->context) ++owed_chains_;
    return true;
}

// ---- the KV rows of every part -----------------------------------------------------------------

size_t Model::kv_rows_bytes(int n, int from) const {
    size_t total = 0;
    for (const Model* p : parts()) total += p->kv_->rows_bytes(n, from);
    return total;
}

std::vector<uint8_t> Model::save_kv_rows(int n) const {
    std::vector<uint8_t> out;
    for (const Model* p : parts()) {
        const std::vector<uint8_t> rows = p->kv_->save_rows(n);
        out.insert(out.end(), rows.begin(), rows.end());
    }
    return out;
}

void Model::load_kv_rows(const uint8_t* data, size_t size, int n, int from) {
    const size_t want = kv_rows_bytes(n, from);
    AKUNU_CHECK(size == want, "KV rows for " + std::to_string(n) + " positions take " + std::to_string(want) +
                                  " bytes in this cache, not " + std::to_string(size));
    size_t at = 0;
    for (Model* p : all_parts()) {
        const size_t bytes = p->kv_->rows_bytes(n, from);
        p->kv_->load_rows(data + at, bytes, n, from);
        at += bytes;
    }
}

}  // namespace akunu

// Model state: capture and restore (fork, save_state, load_state), the saved-state format and
// the model fingerprint. load_state checks everything before it changes anything.
#include "akunu/engine/model_state.h"

#include <algorithm>
#include <cstring>

#include "akunu/core/error.h"
#include "akunu/engine/model.h"

namespace akunu {

namespace {

constexpr char kMagic[10] = {'A', 'K', 'U', 'N', 'U', 'S', 'T', 'A', 'T', 'E'};
constexpr size_t kSampleBytes = 64 << 10;  // fingerprint: weight bytes hashed at each end
constexpr size_t kMiddleBytes = 64;  // fingerprint: weight bytes hashed mid-tensor

// The payload before the KV rows: sampler, token, logprob, logits.
size_t head_payload_bytes(int vocab) { return sizeof(SamplerState) + 4 + 4 + size_t(vocab) * 4; }

std::string dtype_field(const char (&name)[8]) { return std::string(name, strnlen(name, sizeof name)); }

}  // namespace

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t hash) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 0x100000001b3ull;
    return hash;
}

uint64_t model_fingerprint(const ModelFiles& files, const ModelConfig& c) {
    uint64_t h = fnv1a64(c.architecture.data(), c.architecture.size());
    const double numbers[] = {double(c.n_layers),          double(c.dim),
                              double(c.n_heads),           double(c.n_kv_heads),
                              double(c.head_dim),          double(c.ffn_dim),
                              double(c.vocab_size),        double(c.norm_eps),
                              double(c.rope_theta),        double(c.rope_theta_local),
                              double(int(c.rope_scaling)), double(c.rope_factor),
                              double(c.sliding_window),    double(c.attn_softcap),
                              double(c.attn_scale),        double(c.embed_scale),
                              double(c.tied_embeddings),   double(c.qkv_bias)};
    h = fnv1a64(numbers, sizeof numbers, h);
    for (const TensorInfo& t : files.tensors()) {
        h = fnv1a64(t.name.data(), t.name.size() + 1, h);  // with the terminator: names stay apart
        h = fnv1a64(t.type->name, std::strlen(t.type->name), h);
        h = fnv1a64(t.shape.data(), t.shape.size() * sizeof(uint64_t), h);
        const size_t mid = std::min(kMiddleBytes, t.bytes);
        h = fnv1a64(t.data + (t.bytes - mid) / 2, mid, h);
    }
    // The first and last kSampleBytes of tensor data, in tensor order.
    size_t left = kSampleBytes;
    for (auto it = files.tensors().begin(); it != files.tensors().end() && left > 0; ++it) {
        const size_t n = std::min(left, it->bytes);
        h = fnv1a64(it->data, n, h);
        left -= n;
    }
    left = kSampleBytes;
    for (auto it = files.tensors().rbegin(); it != files.tensors().rend() && left > 0; ++it) {
        const size_t n = std::min(left, it->bytes);
        h = fnv1a64(it->data + it->bytes - n, n, h);
        left -= n;
    }
    return h;
}

ModelState Model::capture_state() {
    ModelUse::Scope in_use(use_);
    drain();
    ModelState st;
    st.length = kv_->current_length();
    st.sampler = sampler_;
    scratch_->get("token_ids").read(&st.token, 4, 4);  // slot 1: the last sampled id
    scratch_->get("sampled_logprobs").read(&st.logprob, 4, 4);
    st.logits.resize(size_t(config().vocab_size));
    scratch_->get("logits").read(st.logits.data(), st.logits.size() * 4);
    st.kv_from = kv_->sliding_from();
    st.kv = save_kv_rows(st.length);
    return st;
}

void Model::restore_state(const ModelState& st) {
    ModelUse::Scope in_use(use_);
    AKUNU_CHECK(st.length >= 0 && st.length <= context(),
                "the state holds " + std::to_string(st.length) + " positions but this model's context is " +
                    std::to_string(context()) + "; load the model with a context of at least " +
                    std::to_string(st.length));
    AKUNU_CHECK(st.logits.size() == size_t(config().vocab_size),
                "the state's logits are not one row of this vocabulary");
    AKUNU_CHECK(st.kv_from >= 0 && st.kv_from <= st.length,
                "the state's sliding-window rows start outside its positions");
    const size_t rows_bytes = kv_rows_bytes(st.length, st.kv_from);
    AKUNU_CHECK(st.kv.size() == rows_bytes, "the state's KV rows take " + std::to_string(st.kv.size()) + " bytes; " +
                                                std::to_string(st.length) + " positions of this model's cache take " +
                                                std::to_string(rows_bytes));
    check_sampler(st.sampler);
    drain();
    set_sampler(st.sampler);
    scratch_->get("token_ids").write(&st.token, 4, 4);
    scratch_->get("sampled_logprobs").write(&st.logprob, 4, 4);
    scratch_->get("logits").write(st.logits.data(), st.logits.size() * 4);
    load_kv_rows(st.kv.data(), st.kv.size(), st.length, st.kv_from);
}

std::vector<uint8_t> Model::save_state() {
    ModelUse::Scope in_use(use_);
    const ModelState st = capture_state();
    StateHeader h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.version = kStateFormatVersion;
    h.fingerprint = fingerprint();
    const char* dtype = kv_dtype_name(kv_->dtype());
    std::memcpy(h.kv_dtype, dtype, std::min(std::strlen(dtype), sizeof h.kv_dtype));  // zero-padded
    h.n_layers = uint32_t(kv_->n_layers());
    h.n_kv_heads = uint32_t(kv_->n_kv_heads());
    h.head_dim = uint32_t(kv_->head_dim());
    h.vocab = uint32_t(config().vocab_size);
    h.length = uint32_t(st.length);
    h.context = uint32_t(context());
    h.sliding_from = uint32_t(st.kv_from);
    h.payload_bytes = head_payload_bytes(config().vocab_size) + st.kv.size();

    std::vector<uint8_t> out(sizeof h + h.payload_bytes + 8);
    uint8_t* p = out.data();
    auto put = [&](const void* src, size_t n) {
        if (n) std::memcpy(p, src, n);  // an empty cache's rows are an empty vector (data() may be null)
        p += n;
    };
    put(&h, sizeof h);
    put(&st.sampler, sizeof st.sampler);
    put(&st.token, 4);
    put(&st.logprob, 4);
    put(st.logits.data(), st.logits.size() * 4);
    put(st.kv.data(), st.kv.size());
    const uint64_t sum = fnv1a64(out.data(), size_t(p - out.data()));
    put(&sum, 8);
    return out;
}

void Model::load_state(const uint8_t* data, size_t size) {
    ModelUse::Scope in_use(use_);
    const std::string what = "load_state: ";
    const std::string fix = "; load it into the model that saved it";
    StateHeader h;
    AKUNU_CHECK(size >= sizeof h, what + "not an akunu state: " + std::to_string(size) + " bytes, fewer than its " +
                                      std::to_string(sizeof h) + "-byte header");
    std::memcpy(&h, data, sizeof h);
    AKUNU_CHECK(std::memcmp(h.magic, kMagic, sizeof kMagic) == 0,
                what + "not an akunu state: it does not start with \"AKUNUSTATE\"");
    AKUNU_CHECK(h.version == kStateFormatVersion,
                what + "state format version " + std::to_string(h.version) + ", but this akunu reads version " +
                    std::to_string(kStateFormatVersion) + "; save the state again with this version of akunu");
    // (a damaged size field may be anything: no overflow in the sum)
    const uint64_t want_size = h.payload_bytes > (UINT64_MAX >> 1) ? UINT64_MAX : sizeof h + h.payload_bytes + 8;
    AKUNU_CHECK(size == want_size, what + "the state is truncated or has trailing bytes: its header announces " +
                                       std::to_string(want_size) + " bytes, " + std::to_string(size) + " are there");
    uint64_t sum;
    std::memcpy(&sum, data + size - 8, 8);
    AKUNU_CHECK(fnv1a64(data, size - 8) == sum, what + "checksum mismatch: the state is damaged (save it again)");

    // Intact: now whether it belongs to this model, the most telling difference first.
    const std::string dtype = dtype_field(h.kv_dtype), ours = kv_dtype_name(kv_->dtype());
    AKUNU_CHECK(dtype == ours,
                what + "the state holds a '" + dtype + "' KV cache, this model's is '" + ours + "'" + fix);
    const std::pair<const char*, std::pair<uint32_t, int>> shape[] = {{"n_layers", {h.n_layers, kv_->n_layers()}},
                                                                      {"n_kv_heads", {h.n_kv_heads, kv_->n_kv_heads()}},
                                                                      {"head_dim", {h.head_dim, kv_->head_dim()}},
                                                                      {"vocab", {h.vocab, config().vocab_size}}};
    for (const auto& [name, v] : shape)
        AKUNU_CHECK(int64_t(v.first) == v.second, what + "the state was saved by a model with " + name + " " +
                                                      std::to_string(v.first) + ", this one has " +
                                                      std::to_string(v.second) + fix);
    AKUNU_CHECK(h.fingerprint == fingerprint(),
                what + "the state was saved by a different model of the same shape (fingerprint " +
                    std::to_string(h.fingerprint) + ", this model " + std::to_string(fingerprint()) +
                    ": other weights, types or files)" + fix);
    AKUNU_CHECK(int64_t(h.length) <= context(),
                what + "the state holds " + std::to_string(h.length) + " positions but this model's context is " +
                    std::to_string(context()) + "; load the model with a context of at least " +
                    std::to_string(h.length));
    AKUNU_CHECK(h.sliding_from <= h.length, what + "the state's sliding-window rows start at " +
                                                std::to_string(h.sliding_from) + ", past its " +
                                                std::to_string(h.length) + " positions");
    const size_t kv_bytes = kv_rows_bytes(int(h.length), int(h.sliding_from));
    AKUNU_CHECK(h.payload_bytes == head_payload_bytes(config().vocab_size) + kv_bytes,
                what + "the state's payload is " + std::to_string(h.payload_bytes) + " bytes; " +
                    std::to_string(h.length) + " positions of this model take " +
                    std::to_string(head_payload_bytes(config().vocab_size) + kv_bytes));

    ModelState st;
    const uint8_t* p = data + sizeof h;
    auto get = [&](void* dst, size_t n) {
        std::memcpy(dst, p, n);
        p += n;
    };
    st.length = int(h.length);
    st.kv_from = int(h.sliding_from);
    get(&st.sampler, sizeof st.sampler);
    get(&st.token, 4);
    get(&st.logprob, 4);
    AKUNU_CHECK(st.token < h.vocab,
                what + "the state's last token " + std::to_string(st.token) + " is outside the vocabulary");
    st.logits.resize(h.vocab);
    get(st.logits.data(), st.logits.size() * 4);
    st.kv.assign(p, p + kv_bytes);
    restore_state(st);  // checks the sampler settings before it writes anything
}

}  // namespace akunu

// The C API over Model: exceptions become statuses plus a thread-local message (c_api_guard.h).
// A handle carries the model, its tokenizer and the stop ids generate() ends at; its own
// ModelUse refuses a second thread for the length of a whole call (generate is many steps).
#include <cstring>
#include <string>

#include "akunu/api/c_api_guard.h"
#include "akunu/engine/kv_format.h"
#include "akunu/engine/model.h"
#include "akunu/engine/model_use.h"
#include "akunu/tokenizer/tokenizer.h"

struct akunu_model {
    std::unique_ptr<akunu::Model> model;
    std::shared_ptr<akunu::Tokenizer> tokenizer;
    std::vector<int> stop_ids;
    akunu::ModelUse use;
};

namespace akunu::c_api {
std::string& last_error() {
    thread_local std::string message;
    return message;
}
}  // namespace akunu::c_api

using akunu::c_api::fits;
using akunu::c_api::guarded;
using akunu::c_api::invalid;

namespace {

// The model's stop ids: the tokenizer's, or the file's EOS when the model has no tokenizer.
std::vector<int> default_stop_ids(const akunu_model& h) {
    if (h.tokenizer) return h.tokenizer->stop_ids();
    const int eos = h.model->eos_id();
    return eos >= 0 ? std::vector<int>{eos} : std::vector<int>{};
}

bool is_stop(const akunu_model& h, int token) {
    return std::find(h.stop_ids.begin(), h.stop_ids.end(), token) != h.stop_ids.end();
}

const akunu::Tokenizer& tokenizer_of(const akunu_model& h) {
    AKUNU_CHECK(h.tokenizer, h.model->files().path() + " has no tokenizer (no GGUF vocabulary or tokenizer.json)");
    return *h.tokenizer;
}

}  // namespace

extern "C" {

const char* akunu_last_error(void) { return akunu::c_api::last_error().c_str(); }

akunu_status akunu_model_create(const char* path, int context, akunu_model** out) {
    akunu_model_options options = akunu_model_options_default();
    options.context = context;
    return akunu_model_create_with(path, &options, out);
}

akunu_model_options akunu_model_options_default(void) {
    return {akunu::LoadOptions().context, nullptr, nullptr, 0, nullptr, 0, nullptr, nullptr};
}

akunu_status akunu_model_create_with(const char* path, const akunu_model_options* options, akunu_model** out) {
    if (!path || !options || !out) return invalid("akunu_model_create_with: path, options and out must not be NULL");
    *out = nullptr;
    if ((options->n_devices && !options->devices) || (options->n_split && !options->split))
        return invalid("akunu_model_create_with: devices (split) is NULL with n_devices (n_split) > 0");
    for (size_t i = 0; i < options->n_devices; ++i)
        if (!options->devices[i])
            return invalid(("akunu_model_create_with: devices[" + std::to_string(i) + "] is NULL").c_str());
    return guarded([&] {
        akunu::LoadOptions o;
        o.context = options->context;
        if (options->device) o.device = options->device;
        o.devices.assign(options->devices, options->devices + options->n_devices);
        o.split.assign(options->split, options->split + options->n_split);
        if (options->kv_dtype) {
            const akunu::KvFormat f = akunu::parse_kv_format(options->kv_dtype);
            o.kv_dtype = f.dtype;
            o.kv_recent = f.recent;
        }
        if (options->tuning) o.tuning = options->tuning;
        auto h = std::make_unique<akunu_model>();
        h->model = akunu::Model::load(path, o);
        h->model->reset();  // the load's warm-up step leaves nothing behind
        h->tokenizer = akunu::Tokenizer::from_model(h->model->files());
        h->stop_ids = default_stop_ids(*h);
        *out = h.release();
        return AKUNU_OK;
    });
}

void akunu_model_free(akunu_model* model) { delete model; }

akunu_status akunu_model_eval(akunu_model* model, const int32_t* ids, size_t n_ids) {
    if (!model || (!ids && n_ids)) return invalid("akunu_model_eval: NULL model or ids");
    return guarded([&] {
        akunu::ModelUse::Scope in_use(model->use);
        model->model->eval(std::vector<int>(ids, ids + n_ids));
        return AKUNU_OK;
    });
}

akunu_status akunu_model_generate(akunu_model* model, int32_t* out_ids, size_t max_tokens, size_t* n_out) {
    if (!model || !out_ids || !n_out) return invalid("akunu_model_generate: NULL argument");
    *n_out = 0;
    return guarded([&] {
        akunu::ModelUse::Scope in_use(model->use);
        akunu::Model& m = *model->model;
        AKUNU_CHECK(m.kv_cache().current_length() > 0,
                    "akunu_model_generate: the cache is empty; evaluate a prompt first (akunu_model_eval)");
        for (size_t i = 0; i < max_tokens; ++i) {
            const int token = m.sampled_token();
            out_ids[(*n_out)++] = token;
            if (is_stop(*model, token) || m.kv_cache().current_length() >= m.context()) break;
            m.decode(token);
        }
        return AKUNU_OK;
    });
}

const float* akunu_model_logits(akunu_model* model) {
    if (!model) return nullptr;
    return static_cast<const float*>(model->model->scratch().get("logits").contents());
}

int akunu_model_vocab_size(const akunu_model* model) { return model ? model->model->config().vocab_size : 0; }
int akunu_model_kv_length(const akunu_model* model) { return model ? model->model->kv_cache().current_length() : 0; }
void akunu_model_reset(akunu_model* model) {
    if (model)
        guarded([&] {
            akunu::ModelUse::Scope in_use(model->use);
            model->model->reset();
            return AKUNU_OK;
        });
}

akunu_sampling akunu_sampling_greedy(void) { return akunu_sampling{0.0f, 0, 1.0f, 0.0f, 0}; }

akunu_status akunu_model_set_sampling(akunu_model* model, const akunu_sampling* s) {
    if (!model || !s) return invalid("akunu_model_set_sampling: NULL argument");
    if (s->top_k < 0) return invalid("akunu_model_set_sampling: top_k must be >= 0 (0: off)");
    return guarded([&] {
        akunu::ModelUse::Scope in_use(model->use);
        // A temperature too small to divide logits by is greedy (as the Python Sampler treats it).
        const float t = s->temperature > 0.0f && s->temperature < 1e-30f ? 0.0f : s->temperature;
        model->model->set_sampler(akunu::SamplerState{t, uint32_t(s->top_k), s->top_p, s->min_p, uint32_t(s->seed),
                                                      uint32_t(s->seed >> 32), 0, 0});
        return AKUNU_OK;
    });
}

akunu_status akunu_model_set_stop_ids(akunu_model* model, const int32_t* ids, size_t n) {
    if (!model || (!ids && n)) return invalid("akunu_model_set_stop_ids: NULL model or ids");
    const int vocab = model->model->config().vocab_size;
    for (size_t i = 0; i < n; ++i)
        if (ids[i] < 0 || ids[i] >= vocab) return invalid("akunu_model_set_stop_ids: an id is outside the vocabulary");
    return guarded([&] {
        akunu::ModelUse::Scope in_use(model->use);
        model->stop_ids.assign(ids, ids + n);
        return AKUNU_OK;
    });
}

akunu_status akunu_model_stop_ids(const akunu_model* model, int32_t* out, size_t cap, size_t* n) {
    if (!model || !n || (!out && cap)) return invalid("akunu_model_stop_ids: NULL argument");
    *n = model->stop_ids.size();
    std::copy_n(model->stop_ids.begin(), std::min(*n, cap), out);
    return fits(*n, cap, "akunu_model_stop_ids");
}

akunu_status akunu_model_tokenize(akunu_model* model, const char* text, size_t len, int add_special, int32_t* out,
                                  size_t cap, size_t* n) {
    if (!model || !n || (!text && len) || (!out && cap)) return invalid("akunu_model_tokenize: NULL argument");
    *n = 0;
    return guarded([&] {
        const std::vector<int> ids = tokenizer_of(*model).encode(std::string_view(text ? text : "", len), add_special);
        *n = ids.size();
        std::copy_n(ids.begin(), std::min(*n, cap), out);
        return fits(*n, cap, "akunu_model_tokenize");
    });
}

akunu_status akunu_model_detokenize(akunu_model* model, const int32_t* ids, size_t n_ids, int skip_special, char* out,
                                    size_t cap, size_t* n) {
    if (!model || !n || (!ids && n_ids) || (!out && cap)) return invalid("akunu_model_detokenize: NULL argument");
    *n = 0;
    return guarded([&] {
        const std::string text = tokenizer_of(*model).decode(std::vector<int>(ids, ids + n_ids), skip_special);
        *n = text.size();
        std::memcpy(out, text.data(), std::min(*n, cap));
        if (*n < cap) out[*n] = '\0';
        return fits(*n + 1, cap, "akunu_model_detokenize");
    });
}

akunu_status akunu_model_memory(const akunu_model* model, akunu_memory* out) {
    if (!model || !out) return invalid("akunu_model_memory: NULL argument");
    const akunu::Model& m = *model->model;
    out->weights = m.weight_bytes();
    out->kv_cache = m.kv_cache().bytes();
    out->scratch = m.scratch().bytes() + m.scratch().prefill_bytes();
    out->total = out->weights + out->kv_cache + out->scratch;
    return AKUNU_OK;
}

}  // extern "C"

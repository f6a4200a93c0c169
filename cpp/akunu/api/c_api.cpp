// The C API over Model: exceptions become statuses plus a thread-local message.
#include "akunu/api/akunu.h"

#include <string>

#include "akunu/vulkan/device.h"
#include "akunu/core/error.h"
#include "akunu/engine/model.h"

struct akunu_model {
    std::unique_ptr<akunu::Model> model;
};

namespace {

thread_local std::string g_last_error;

template <class F>
akunu_status guarded(F&& f) {
    try {
        g_last_error.clear();
        f();
        return AKUNU_OK;
    } catch (const std::exception& e) {
        g_last_error = e.what();
        return AKUNU_ERROR;
    } catch (...) {
        g_last_error = "unknown error";
        return AKUNU_ERROR;
    }
}

akunu_status invalid(const char* message) {
    g_last_error = message;
    return AKUNU_INVALID_ARGUMENT;
}

}  // namespace

extern "C" {

const char* akunu_last_error(void) { return g_last_error.c_str(); }

akunu_status akunu_model_create(const char* path, int context, akunu_model** out) {
    if (!path || !out) return invalid("akunu_model_create: path and out must not be NULL");
    *out = nullptr;
    return guarded([&] {
        akunu::LoadOptions o;
        o.context = context;
        auto m = std::make_unique<akunu_model>();
        m->model = akunu::Model::load(path, o);
        *out = m.release();
    });
}

void akunu_model_free(akunu_model* model) { delete model; }

akunu_status akunu_model_eval(akunu_model* model, const int32_t* ids, size_t n_ids) {
    if (!model || (!ids && n_ids)) return invalid("akunu_model_eval: NULL model or ids");
    return guarded([&] { model->model->eval(std::vector<int>(ids, ids + n_ids)); });
}

akunu_status akunu_model_generate(akunu_model* model, int32_t* out_ids, size_t max_tokens, size_t* n_out) {
    if (!model || !out_ids || !n_out) return invalid("akunu_model_generate: NULL argument");
    *n_out = 0;
    return guarded([&] {
        akunu::Model& m = *model->model;
        // An empty cache has no sampled token of a prompt (only the load's warm-up one).
        AKUNU_CHECK(m.kv_cache().current_length() > 0,
                    "akunu_model_generate: the cache is empty; evaluate a prompt first (akunu_model_eval)");
        for (size_t i = 0; i < max_tokens; ++i) {
            const int token = m.sampled_token();
            out_ids[(*n_out)++] = token;
            if (token == m.eos_id() || m.kv_cache().current_length() >= m.context()) break;
            m.decode(token);
        }
    });
}

const float* akunu_model_logits(akunu_model* model) {
    if (!model) return nullptr;
    return static_cast<const float*>(model->model->scratch().get("logits").contents());
}

int akunu_model_vocab_size(const akunu_model* model) { return model ? model->model->config().vocab_size : 0; }
int akunu_model_kv_length(const akunu_model* model) { return model ? model->model->kv_cache().current_length() : 0; }
void akunu_model_reset(akunu_model* model) {
    if (model) model->model->reset();
}

}  // extern "C"

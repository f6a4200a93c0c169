// The C API over Encoder: texts in, one embedding per text out, through the model's tokenizer.
// Texts are taken as they are (no sentence-transformers lowercasing or truncation: the Python
// Encoder applies those settings); a text longer than the model's positions is an error.
#include <string>

#include "akunu/api/c_api_guard.h"
#include "akunu/engine/encoder.h"
#include "akunu/engine/model_use.h"
#include "akunu/tokenizer/tokenizer.h"

struct akunu_encoder {
    std::unique_ptr<akunu::Encoder> encoder;
    std::shared_ptr<akunu::Tokenizer> tokenizer;
    akunu::ModelUse use;
};

using akunu::c_api::guarded;
using akunu::c_api::invalid;

extern "C" {

akunu_status akunu_encoder_create(const char* path, akunu_encoder** out) {
    if (!path || !out) return invalid("akunu_encoder_create: path and out must not be NULL");
    *out = nullptr;
    return guarded([&] {
        auto h = std::make_unique<akunu_encoder>();
        h->encoder = akunu::Encoder::load(path, akunu::EncoderOptions{});
        h->tokenizer = akunu::Tokenizer::from_model(h->encoder->files());
        *out = h.release();
        return AKUNU_OK;
    });
}

void akunu_encoder_free(akunu_encoder* encoder) { delete encoder; }

int akunu_encoder_dim(const akunu_encoder* encoder) { return encoder ? encoder->encoder->config().dim : 0; }

akunu_status akunu_encoder_embed(akunu_encoder* encoder, const char* const* texts, size_t n_texts, int pooling,
                                 int normalize, float* out) {
    if (!encoder || !texts || !out || n_texts == 0)
        return invalid("akunu_encoder_embed: NULL encoder, texts or out, or no texts");
    if (pooling != 0 && pooling != 1) return invalid("akunu_encoder_embed: pooling must be 0 (mean) or 1 (cls)");
    for (size_t i = 0; i < n_texts; ++i)
        if (!texts[i]) return invalid("akunu_encoder_embed: a text is NULL");
    return guarded([&] {
        akunu::ModelUse::Scope in_use(encoder->use);
        std::vector<std::vector<int>> ids(n_texts);
        for (size_t i = 0; i < n_texts; ++i) {
            ids[i] = encoder->tokenizer->encode(texts[i]);
            AKUNU_CHECK(int(ids[i].size()) <= encoder->encoder->max_tokens(),
                        "akunu_encoder_embed: text " + std::to_string(i) + " has " + std::to_string(ids[i].size()) +
                            " tokens; the model takes at most " + std::to_string(encoder->encoder->max_tokens()));
        }
        encoder->encoder->embed(ids, pooling ? akunu::Pooling::kCls : akunu::Pooling::kMean, normalize != 0, out);
        return AKUNU_OK;
    });
}

}  // extern "C"

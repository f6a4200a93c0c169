// derive() and the RoPE frequency table.
#include "akunu/model/model_config.h"

#include <cmath>
#include <utility>

#include "akunu/core/error.h"

namespace akunu {

const char* rope_scaling_name(RopeScaling s) {
    switch (s) {
        case RopeScaling::kNone: return "none";
        case RopeScaling::kLinear: return "linear";
        case RopeScaling::kLlama3: return "llama3";
    }
    return "?";
}

void derive(ModelConfig& c) {
    const ArchDescriptor& arch = find_arch(c.architecture);
    c.architecture = arch.name;
    // Bounds far beyond any real model keep every size computed from the config inside 64 bits.
    auto in_range = [&](int v, int hi, const char* key) {
        AKUNU_CHECK(v > 0 && v <= hi, c.source + ": " + key + " = " + std::to_string(v) + " is out of range (1 to " +
                                          std::to_string(hi) + ")");
    };
    auto positive = [&](int v, const char* key) { in_range(v, 1 << 24, key); };
    in_range(c.n_layers, 4096, "n_layers");
    in_range(c.dim, 1 << 18, "dim (hidden size)");
    in_range(c.n_heads, 4096, "n_heads");
    in_range(c.ffn_dim, 1 << 20, "ffn_dim (intermediate size)");
    positive(c.vocab_size, "vocab_size");
    if (c.n_kv_heads == 0) c.n_kv_heads = c.n_heads;
    in_range(c.n_kv_heads, 4096, "n_kv_heads");
    AKUNU_CHECK(c.n_heads % c.n_kv_heads == 0, c.source + ": n_heads " + std::to_string(c.n_heads) +
                                                   " is not a multiple of n_kv_heads " + std::to_string(c.n_kv_heads));
    if (c.head_dim == 0) {
        AKUNU_CHECK(c.dim % c.n_heads == 0, c.source + ": dim " + std::to_string(c.dim) +
                                                " is not a multiple of n_heads " + std::to_string(c.n_heads) +
                                                " and no head_dim is given");
        c.head_dim = c.dim / c.n_heads;
    }
    in_range(c.head_dim, 4096, "head_dim");
    // Every number the file gives is finite, whichever key and format it came from (a NaN
    // rope base of gemma3's sliding layers made every logit NaN).
    const std::pair<const char*, float> numbers[] = {
        {"norm epsilon", c.norm_eps},
        {"rope theta", c.rope_theta},
        {"rope theta of sliding layers (rope.freq_base_swa / rope_local_base_freq)", c.rope_theta_local},
        {"rope scaling factor", c.rope_factor},
        {"rope low_freq_factor", c.rope_low_freq_factor},
        {"rope high_freq_factor", c.rope_high_freq_factor},
        {"attention soft-capping", c.attn_softcap},
        {"final soft-capping", c.final_softcap},
        {"query_pre_attn_scalar", c.query_pre_attn_scalar}};
    for (const auto& [key, value] : numbers)
        AKUNU_CHECK(std::isfinite(value),
                    c.source + ": " + key + " = " + std::to_string(value) + " is not a finite number");
    AKUNU_CHECK(c.rope_theta_local >= 0, c.source + ": rope theta of sliding layers must be positive (0: rope theta)");
    AKUNU_CHECK(c.query_pre_attn_scalar >= 0, c.source + ": query_pre_attn_scalar must be positive (0: head_dim)");
    AKUNU_CHECK(arch.rope_hf == RopeStyle::kNone || c.head_dim % 2 == 0,
                c.source + ": head_dim " + std::to_string(c.head_dim) + " must be even for RoPE");
    AKUNU_CHECK(c.norm_eps > 0 && c.norm_eps < 1,
                c.source + ": norm epsilon " + std::to_string(c.norm_eps) + " is out of range");
    AKUNU_CHECK(c.rope_theta > 0, c.source + ": rope theta must be positive");
    if (c.rope_theta_local <= 0) c.rope_theta_local = c.rope_theta;
    if (c.max_context <= 0) c.max_context = 2048;
    in_range(c.max_context, 1 << 24, "max_context");
    AKUNU_CHECK(c.n_token_types >= 0 && c.n_token_types <= 1024, c.source + ": token type count is out of range");
    if (c.rope_scaling == RopeScaling::kLlama3) {
        AKUNU_CHECK(
            c.rope_original_context > 0 && c.rope_factor > 0 && c.rope_high_freq_factor > c.rope_low_freq_factor,
            c.source +
                ": llama3 rope scaling needs original_max_position_embeddings > 0, factor > 0 and "
                "high_freq_factor > low_freq_factor");
    }
    AKUNU_CHECK(c.rope_factor > 0, c.source + ": rope scaling factor must be positive");

    c.q_dim = c.n_heads * c.head_dim;
    c.kv_dim = c.n_kv_heads * c.head_dim;
    c.gqa_ratio = c.n_heads / c.n_kv_heads;
    const float qpas = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : float(c.head_dim);
    c.attn_scale = 1.0f / std::sqrt(qpas);
    c.embed_scale = arch.embed_scale_sqrt_dim ? std::sqrt(float(c.dim)) : 1.0f;
    // A cap the config leaves out is the architecture's (gemma2: 50 and 30, as in transformers
    // and llama.cpp); one it gives as null or 0 is off.
    if (c.attn_softcap < 0) c.attn_softcap = arch.default_attn_softcap;
    if (c.final_softcap < 0) c.final_softcap = arch.default_final_softcap;

    // Sliding layers: an explicit per-layer list wins; otherwise the arch's pattern, when the
    // model has a window at all.
    if (c.sliding_window < 0) c.sliding_window = 0;
    if (!c.layer_sliding.empty()) {
        AKUNU_CHECK(c.layer_sliding.size() == size_t(c.n_layers),
                    c.source + ": the per-layer attention list has " + std::to_string(c.layer_sliding.size()) +
                        " entries for " + std::to_string(c.n_layers) + " layers");
    } else if (c.sliding_window > 0 && arch.sliding_period > 0) {
        c.layer_sliding.resize(size_t(c.n_layers));
        for (int l = 0; l < c.n_layers; ++l)
            c.layer_sliding[size_t(l)] = l % arch.sliding_period < arch.sliding_per_period;
    }
    if (c.sliding_window == 0) c.layer_sliding.clear();
    c.n_sliding_layers = 0;
    for (bool s : c.layer_sliding) c.n_sliding_layers += s ? 1 : 0;
    if (arch.encoder) {
        in_range(c.encoder_layers, 4096, "encoder_layers");
        in_range(c.encoder_heads, 4096, "encoder_attention_heads");
        in_range(c.encoder_ffn_dim, 1 << 20, "encoder_ffn_dim");
        in_range(c.n_mels, 4096, "num_mel_bins");
        in_range(c.audio_ctx, 1 << 20, "max_source_positions");
        AKUNU_CHECK(c.dim % c.encoder_heads == 0, c.source + ": d_model " + std::to_string(c.dim) +
                                                      " is not a multiple of encoder_attention_heads " +
                                                      std::to_string(c.encoder_heads));
    }
}

ModelConfig encoder_stack(const ModelConfig& c) {
    const ArchDescriptor& arch = c.arch();
    AKUNU_CHECK(arch.encoder, c.source + ": " + c.architecture + " has no encoder stack");
    ModelConfig e = c;
    e.architecture = arch.encoder;
    e.n_layers = c.encoder_layers;
    e.n_heads = e.n_kv_heads = c.encoder_heads;
    e.head_dim = 0;
    e.ffn_dim = c.encoder_ffn_dim;
    e.max_context = c.audio_ctx;
    e.tied_embeddings = false;
    derive(e);
    return e;
}

std::vector<float> rope_inv_freq(const ModelConfig& c, bool sliding_layer, const float* divisors) {
    const int half = c.head_dim / 2;
    const double theta = sliding_layer ? c.rope_theta_local : c.rope_theta;
    std::vector<float> out(static_cast<size_t>(half));
    for (int i = 0; i < half; ++i) {
        // Computed as transformers does: 1 / theta^(2i/d), in double then rounded.
        double f = 1.0 / std::pow(theta, double(2 * i) / double(c.head_dim));
        if (!sliding_layer && divisors) {
            f /= double(divisors[i]);
        } else if (!sliding_layer && c.rope_scaling == RopeScaling::kLinear) {
            f /= c.rope_factor;
        } else if (!sliding_layer && c.rope_scaling == RopeScaling::kLlama3) {
            // Meta's llama3 rule: keep high frequencies, divide low ones by `factor`, and blend
            // in between by wavelength relative to the original context.
            const double pi = 3.14159265358979323846;
            const double low_wavelen = c.rope_original_context / c.rope_low_freq_factor;
            const double high_wavelen = c.rope_original_context / c.rope_high_freq_factor;
            const double wavelen = 2 * pi / f;
            if (wavelen > low_wavelen) {
                f /= c.rope_factor;
            } else if (wavelen >= high_wavelen) {
                const double smooth = (c.rope_original_context / wavelen - c.rope_low_freq_factor) /
                                      (c.rope_high_freq_factor - c.rope_low_freq_factor);
                f = (1 - smooth) * f / c.rope_factor + smooth * f;
            }
        }
        out[size_t(i)] = float(f);
    }
    return out;
}

}  // namespace akunu

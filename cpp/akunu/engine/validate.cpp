// Tensor expectations per architecture, and the validation pass over a model's files.
#include "akunu/engine/validate.h"

#include <cstring>

#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"

namespace akunu {

namespace {

// Pre-norm LayerNorm stacks with biased projections (whisper; K has no bias, which a file may
// still carry): an encoder stack (not causal) reads audio through two Conv1d of kernel 3; a
// decoder stack reads tokens, attends to its encoder's output (cross-attention) and ends in a
// head tied to its embedding unless the file has one.
std::vector<ExpectedTensor> prenorm_stack_tensors(const ModelConfig& c) {
    using R = TensorRole;
    const bool decoder = c.arch().causal;
    const uint64_t dim = uint64_t(c.dim), q = uint64_t(c.q_dim), ffn = uint64_t(c.ffn_dim);
    std::vector<ExpectedTensor> out;
    auto add = [&](R role, int layer, bool required, std::vector<uint64_t> shape) {
        out.push_back({role, layer, required, std::move(shape)});
    };
    auto norm = [&](R w, R b, int layer) {
        add(w, layer, true, {dim});
        add(b, layer, true, {dim});
    };
    auto linear = [&](R w, R b, int layer, uint64_t rows, uint64_t cols) {
        add(w, layer, true, {rows, cols});
        add(b, layer, b != R::kAttnKBias, {rows});
    };
    if (decoder) {
        add(R::kTokenEmbd, -1, true, {uint64_t(c.vocab_size), dim});
        add(R::kOutput, -1, !c.tied_embeddings, {uint64_t(c.vocab_size), dim});
    } else {
        add(R::kConv1, -1, true, {dim, uint64_t(c.n_mels), 3});
        add(R::kConv1Bias, -1, true, {dim});
        add(R::kConv2, -1, true, {dim, dim, 3});
        add(R::kConv2Bias, -1, true, {dim});
    }
    add(R::kPositionEmbd, -1, true, {uint64_t(c.max_context), dim});
    for (int l = 0; l < c.n_layers; ++l) {
        norm(R::kAttnNorm, R::kAttnNormBias, l);
        linear(R::kAttnQ, R::kAttnQBias, l, q, dim);
        linear(R::kAttnK, R::kAttnKBias, l, q, dim);
        linear(R::kAttnV, R::kAttnVBias, l, q, dim);
        linear(R::kAttnOutput, R::kAttnOutputBias, l, dim, q);
        if (decoder) {
            norm(R::kCrossNorm, R::kCrossNormBias, l);
            linear(R::kCrossQ, R::kCrossQBias, l, q, dim);
            add(R::kCrossK, l, true, {q, dim});
            linear(R::kCrossV, R::kCrossVBias, l, q, dim);
            linear(R::kCrossOutput, R::kCrossOutputBias, l, dim, q);
        }
        norm(R::kFfnNorm, R::kFfnNormBias, l);
        linear(R::kFfnUp, R::kFfnUpBias, l, ffn, dim);
        linear(R::kFfnDown, R::kFfnDownBias, l, dim, ffn);
    }
    norm(R::kOutputNorm, R::kOutputNormBias, -1);
    return out;
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
    const ArchDescriptor& a = c.arch();
    if (a.norm == NormKind::kLayer && !a.norm_after_residual) return prenorm_stack_tensors(c);
    using R = TensorRole;
    const uint64_t dim = uint64_t(c.dim), q = uint64_t(c.q_dim), kv = uint64_t(c.kv_dim), ffn = uint64_t(c.ffn_dim),
                   hd = uint64_t(c.head_dim), vocab = uint64_t(c.vocab_size);
    const bool encoder = a.norm == NormKind::kLayer;  // bert: post-norm with LayerNorm biases
    std::vector<ExpectedTensor> out;
    auto add = [&](R role, int layer, bool required, std::vector<uint64_t> shape) {
        out.push_back({role, layer, required, std::move(shape)});
    };
    add(R::kTokenEmbd, -1, true, {vocab, dim});
    if (encoder) {
        add(R::kPositionEmbd, -1, true, {uint64_t(c.max_context), dim});
        if (c.n_token_types > 0) add(R::kTokenTypes, -1, true, {uint64_t(c.n_token_types), dim});
        add(R::kEmbdNorm, -1, true, {dim});
        add(R::kEmbdNormBias, -1, true, {dim});
    } else {
        add(R::kOutputNorm, -1, true, {dim});
        add(R::kOutput, -1, !c.tied_embeddings, {vocab, dim});
        add(R::kRopeFreqs, -1, false, {hd / 2});
    }
    for (int l = 0; l < c.n_layers; ++l) {
        if (!encoder) add(R::kAttnNorm, l, true, {dim});
        add(R::kAttnQ, l, true, {q, dim});
        add(R::kAttnK, l, true, {kv, dim});
        add(R::kAttnV, l, true, {kv, dim});
        if (c.qkv_bias) {
            add(R::kAttnQBias, l, true, {q});
            add(R::kAttnKBias, l, true, {kv});
            add(R::kAttnVBias, l, true, {kv});
        }
        add(R::kAttnOutput, l, true, {dim, q});
        if (encoder) add(R::kAttnOutputBias, l, true, {dim});
        if (a.qk_norm) {
            add(R::kAttnQNorm, l, true, {hd});
            add(R::kAttnKNorm, l, true, {hd});
        }
        if (a.post_attn_norm) add(R::kPostAttnNorm, l, true, {dim});
        if (a.post_attn_norm && encoder) add(R::kPostAttnNormBias, l, true, {dim});
        if (!encoder) add(R::kFfnNorm, l, true, {dim});
        if (a.gated_ffn) add(R::kFfnGate, l, true, {ffn, dim});
        add(R::kFfnUp, l, true, {ffn, dim});
        if (encoder) add(R::kFfnUpBias, l, true, {ffn});
        add(R::kFfnDown, l, true, {dim, ffn});
        if (encoder) add(R::kFfnDownBias, l, true, {dim});
        if (a.post_ffn_norm) add(R::kPostFfnNorm, l, true, {dim});
        if (a.post_ffn_norm && encoder) add(R::kPostFfnNormBias, l, true, {dim});
    }
    return out;
}

namespace {

std::string replace_suffix(const std::string& name, const char* from, const char* to) {
    const size_t n = std::string(from).size();
    if (name.size() >= n && name.compare(name.size() - n, n, from) == 0) return name.substr(0, name.size() - n) + to;
    return name;
}

// MLX stores a quantized [out, in] matrix as U32 [out, in * bits / 32] plus f16/bf16 scales and
// biases [out, in / group_size] beside it.
void check_mlx(const ModelFiles& files, const TensorInfo& t, const std::vector<uint64_t>& want,
               std::vector<std::string>& errors) {
    const MlxQuantization& q = files.mlx();
    const uint64_t in = want.back();
    if (in * uint64_t(q.bits) % 32 != 0 || in % uint64_t(q.group_size) != 0) {
        errors.push_back("tensor " + t.name + ": input size " + std::to_string(in) + " does not fit " +
                         std::to_string(q.bits) + "-bit groups of " + std::to_string(q.group_size));
        return;
    }
    std::vector<uint64_t> packed = want, groups = want;
    packed.back() = in * uint64_t(q.bits) / 32;
    groups.back() = in / uint64_t(q.group_size);
    if (t.shape != packed)
        errors.push_back("tensor " + t.name + ": expected packed U32 " + shape_string(packed) + ", found " +
                         shape_string(t.shape));
    for (const char* part : {".scales", ".biases"}) {
        const std::string name = replace_suffix(t.name, ".weight", part);
        const TensorInfo* s = files.find(name);
        if (!s)
            errors.push_back("tensor " + name + " is missing (MLX quantized " + t.name + " needs it)");
        else if (s->shape != groups)
            errors.push_back("tensor " + name + ": expected " + shape_string(groups) + ", found " +
                             shape_string(s->shape));
    }
}

// HF's position-id buffer [1, n] (I64 or I32) is not a weight; akunu counts positions itself,
// so the buffer must hold what it would: 0, 1, ..., n - 1, for n up to the trained context.
void check_position_ids(const ModelFiles& files, const ModelConfig& c, bool gguf, std::vector<std::string>& errors) {
    const std::string name = tensor_name(c.arch(), TensorRole::kPositionIds, 0, gguf);
    const TensorInfo* t = name.empty() ? nullptr : files.find(name);
    if (!t) return;
    const TensorType type = t->type->type;
    const uint64_t n = t->n_elements;
    if ((type != TensorType::I64 && type != TensorType::I32) || n > uint64_t(c.max_context) || t->shape.empty() ||
        t->shape.back() != n) {
        errors.push_back("tensor " + name + ": expected position ids I64 [1, n] with n <= " +
                         std::to_string(c.max_context) + ", found " + t->type->name + " " + shape_string(t->shape));
        return;
    }
    for (uint64_t i = 0; i < n; ++i) {
        int64_t v = 0;
        if (type == TensorType::I64) {
            std::memcpy(&v, t->data + 8 * i, 8);
        } else {
            int32_t v32 = 0;
            std::memcpy(&v32, t->data + 4 * i, 4);
            v = v32;
        }
        if (v != int64_t(i)) {
            errors.push_back("tensor " + name + ": position ids must count 0, 1, 2, ...; entry " + std::to_string(i) +
                             " holds " + std::to_string(v) + " (akunu numbers positions itself)");
            return;
        }
    }
}

// Each tensor of one stack of the model: present where required, its shape, a type akunu reads.
void check_tensors(const ModelFiles& files, const ModelConfig& c, bool gguf, std::vector<std::string>& errors) {
    const ArchDescriptor& a = c.arch();
    for (const ExpectedTensor& e : expected_tensors(c)) {
        const std::string name = tensor_name(a, e.role, e.layer, gguf);
        if (name.empty()) continue;  // this format has no such tensor (rope_freqs in HF)
        const TensorInfo* t = files.find(name);
        if (!t) {
            if (e.required) errors.push_back("tensor " + name + " is missing (expected " + shape_string(e.shape) + ")");
            continue;
        }
        if (files.format() == ModelFormat::kMlx && t->type->type == TensorType::U32 && e.shape.size() == 2) {
            check_mlx(files, *t, e.shape, errors);
            continue;
        }
        if (t->shape != e.shape)
            errors.push_back("tensor " + name + ": expected " + shape_string(e.shape) + " " + t->type->name +
                             ", found " + shape_string(t->shape));
        if (!t->type->dequant || t->type->type == TensorType::U32 || t->type->type == TensorType::U8)
            errors.push_back("tensor " + name + ": type " + t->type->name +
                             " is not supported (akunu reads F32, F16, BF16, "
                             "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K and MLX affine weights; its kernels run " +
                             kernels::supported_weight_types() + ")");
    }
}

}  // namespace

void validate_model(const ModelFiles& files, const ModelConfig& model) {
    if (!files.has_weights()) return;  // a config.json alone: shapes only
    const bool gguf = files.gguf() != nullptr;
    std::vector<std::string> errors;
    std::vector<ModelConfig> stacks = {model};  // an encoder-decoder's encoder too
    if (model.arch().encoder) stacks.push_back(encoder_stack(model));
    for (const ModelConfig& c : stacks) check_tensors(files, c, gguf, errors);
    check_position_ids(files, model, gguf, errors);
    if (errors.empty()) return;
    const ModelConfig& c = model;
    std::string message = files.path() + ": the model does not match its " + c.architecture + " config (" +
                          std::to_string(errors.size()) + " problem" + (errors.size() > 1 ? "s" : "") + "):";
    for (size_t i = 0; i < errors.size() && i < 12; ++i) message += "\n  " + errors[i];
    if (errors.size() > 12) message += "\n  ... and " + std::to_string(errors.size() - 12) + " more";
    throw Error(message);
}

}  // namespace akunu

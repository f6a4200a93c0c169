// Python view of ModelConfig, the architecture table, validation, RoPE tables and the memory plan.
#include "akunu/vulkan/device.h"
#include "akunu/core/error.h"
#include "akunu/formats/json_file.h"
#include "akunu/engine/memory_plan.h"
#include "akunu/engine/split.h"
#include "akunu/engine/validate.h"
#include "bindings.h"

namespace akunu::py_bindings {

static py::dict config_dict(const ModelConfig& c) {
    py::dict d;
    d["architecture"] = c.architecture;
    d["n_layers"] = c.n_layers;
    d["dim"] = c.dim;
    d["n_heads"] = c.n_heads;
    d["n_kv_heads"] = c.n_kv_heads;
    d["head_dim"] = c.head_dim;
    d["ffn_dim"] = c.ffn_dim;
    d["vocab_size"] = c.vocab_size;
    d["max_context"] = c.max_context;
    d["n_token_types"] = c.n_token_types;
    d["norm_eps"] = c.norm_eps;
    d["rope_theta"] = c.rope_theta;
    d["rope_theta_local"] = c.rope_theta_local;
    d["rope_scaling"] = rope_scaling_name(c.rope_scaling);
    d["rope_factor"] = c.rope_factor;
    d["rope_freqs_tensor"] = c.rope_freqs_tensor;
    d["tied_embeddings"] = c.tied_embeddings;
    d["qkv_bias"] = c.qkv_bias;
    d["sliding_window"] = c.sliding_window;
    d["layer_sliding"] = c.layer_sliding;
    d["attn_softcap"] = c.attn_softcap;
    d["final_softcap"] = c.final_softcap;
    d["query_pre_attn_scalar"] = c.query_pre_attn_scalar;
    d["q_dim"] = c.q_dim;
    d["kv_dim"] = c.kv_dim;
    d["gqa_ratio"] = c.gqa_ratio;
    d["attn_scale"] = c.attn_scale;
    d["embed_scale"] = c.embed_scale;
    return d;
}

static py::list sizes(const std::vector<NamedSize>& v) {
    py::list out;
    for (const auto& s : v) out.append(py::make_tuple(s.name, s.bytes));
    return out;
}

static py::dict arch_dict(const ArchDescriptor& a) {
    static const char* kRope[] = {"none", "interleaved", "half-split"};
    static const char* kAct[] = {"silu", "gelu_tanh", "gelu"};
    py::dict d;
    d["name"] = a.name;
    d["norm"] = a.norm == NormKind::kRms ? "rms" : "layer";
    d["norm_plus_one"] = a.norm_plus_one;
    d["activation"] = kAct[int(a.activation)];
    d["gated_ffn"] = a.gated_ffn;
    d["rope_gguf"] = kRope[int(a.rope_gguf)];
    d["rope_hf"] = kRope[int(a.rope_hf)];
    d["qk_norm"] = a.qk_norm;
    d["post_attn_norm"] = a.post_attn_norm;
    d["post_ffn_norm"] = a.post_ffn_norm;
    d["embed_scale_sqrt_dim"] = a.embed_scale_sqrt_dim;
    d["tied_embeddings"] = a.tied_embeddings;
    d["qkv_bias"] = a.qkv_bias;
    d["causal"] = a.causal;
    d["norm_after_residual"] = a.norm_after_residual;
    d["sliding_period"] = a.sliding_period;
    d["sliding_per_period"] = a.sliding_per_period;
    return d;
}

void init_config(py::module_& m) {
    py::class_<ModelConfig>(m, "ModelConfig")
        .def_readonly("architecture", &ModelConfig::architecture)
        .def_readonly("n_layers", &ModelConfig::n_layers)
        .def_readonly("dim", &ModelConfig::dim)
        .def_readonly("n_heads", &ModelConfig::n_heads)
        .def_readonly("n_kv_heads", &ModelConfig::n_kv_heads)
        .def_readonly("head_dim", &ModelConfig::head_dim)
        .def_readonly("ffn_dim", &ModelConfig::ffn_dim)
        .def_readonly("vocab_size", &ModelConfig::vocab_size)
        .def_readonly("max_context", &ModelConfig::max_context)
        .def_readonly("q_dim", &ModelConfig::q_dim)
        .def_readonly("kv_dim", &ModelConfig::kv_dim)
        .def_readonly("tied_embeddings", &ModelConfig::tied_embeddings)
        .def_readonly("sliding_window", &ModelConfig::sliding_window)
        .def("as_dict", &config_dict)
        .def("__repr__", [](const ModelConfig& c) {
            return "ModelConfig(" + c.architecture + ", layers=" + std::to_string(c.n_layers) +
                   ", dim=" + std::to_string(c.dim) + ", heads=" + std::to_string(c.n_heads) + "/" +
                   std::to_string(c.n_kv_heads) + ", head_dim=" + std::to_string(c.head_dim) +
                   ", ffn=" + std::to_string(c.ffn_dim) + ", vocab=" + std::to_string(c.vocab_size) + ")";
        });

    m.def("load_config", &load_config, py::arg("files"));
    m.def(
        "config_from_json",
        [](const std::string& text, const std::string& source) {
            return config_from_json(parse_json(text, source), source);
        },
        py::arg("text"), py::arg("source") = "config");
    m.def("validate_model", &validate_model, py::arg("files"), py::arg("config"));
    m.def("arch_table", [] {
        py::list out;
        for (const auto& a : arch_table()) out.append(arch_dict(a));
        return out;
    });
    m.def("supported_architectures", &supported_arch_names);
    m.def(
        "rope_inv_freq",
        [](const ModelConfig& c, bool sliding, std::optional<py::array_t<float, py::array::c_style>> divisors) {
            if (divisors)
                AKUNU_CHECK(divisors->size() == c.head_dim / 2, "rope divisors must have head_dim / 2 entries");
            auto v = rope_inv_freq(c, sliding, divisors ? divisors->data() : nullptr);
            return py::array_t<float>(py::ssize_t(v.size()), v.data());
        },
        py::arg("config"), py::arg("sliding") = false, py::arg("divisors") = py::none());
    m.def(
        "plan_memory",
        [](const ModelConfig& c, const std::shared_ptr<ModelFiles>& files, int context, int prefill_chunk,
           int max_chain, const std::string& kv_dtype, const std::string& weights_dtype,
           std::optional<std::string> device, bool kv_blocks, bool kv_ring, const py::object& tuning, int max_sequences,
           int first_layer, int last_layer) {
            PlanOptions o;
            o.layers = {first_layer, last_layer};
            o.max_sequences = max_sequences;
            o.context = context;
            o.prefill_chunk = prefill_chunk;
            o.max_chain = max_chain;
            const KvFormat f = parse_kv_format(kv_dtype);
            o.kv_dtype = f.dtype;
            o.kv_recent = f.recent;
            o.kv_blocks = kv_blocks;
            o.kv_ring = kv_ring;
            o.weights_dtype = weights_dtype;
            std::optional<DeviceInfo> info;
            if (device) info = find_device(*device, tuning_text(tuning));
            o.weight_tiles = info ? info->profile.weight_tiles : WeightTiles::kNone;
            if (info) o.device = info->profile;
            o.whisper_chain =
                (info ? info->profile.tuning : Tuning::from_environment(tuning_text(tuning))).whisper_chain;
            MemoryPlan p = plan_memory(c, files.get(), o);
            if (info) p = with_prefill_dequant(p, files.get(), info->profile.prefill_dequant_rows);
            py::dict d;
            d["context"] = p.options.context;
            d["prefill_chunk"] = p.options.prefill_chunk;
            d["kv_dtype"] = kv_format_name({p.options.kv_dtype, p.options.kv_recent});
            d["kv_recent_rows"] = p.kv.recent.rows;
            d["kv_recent_bytes"] = p.kv.recent.bytes;
            d["weights_by_dtype"] = sizes(p.weights_by_dtype);
            d["weights_bytes"] = p.weights_bytes;
            d["weights_estimated"] = p.weights_estimated;
            d["kv_bytes"] = p.kv_bytes;
            d["kv_max_bytes"] = p.kv_max_bytes;
            d["kv_full_bytes"] = p.kv_full_bytes;
            d["kv_block_bytes"] = p.kv.block_bytes;
            d["kv_ring_rows"] = p.kv.ring_rows;
            d["kv_layers"] = kv_layer_rows(p);
            d["decode_scratch"] = sizes(p.decode_scratch);
            d["prefill_scratch"] = sizes(p.prefill_scratch);
            d["decode_scratch_bytes"] = p.decode_scratch_bytes;
            d["prefill_scratch_bytes"] = p.prefill_scratch_bytes;
            d["total_bytes"] = p.total_bytes;
            d["fork_bytes"] = p.fork_bytes;
            if (info) {
                const PlanFit fit = check_fit(p, info->profile);
                d["device"] = info->profile.name;
                d["device_bytes"] = info->profile.device_local_bytes;
                d["fits"] = fit.fits;
                d["notes"] = fit.notes;
            }
            return d;
        },
        py::arg("config"), py::arg("files"), py::arg("context"), py::arg("prefill_chunk"), py::arg("max_chain"),
        py::arg("kv_dtype"), py::arg("weights_dtype"), py::arg("device"), py::arg("kv_blocks") = false,
        py::arg("kv_ring") = false, py::arg("tuning") = py::none(), py::arg("max_sequences") = 8,
        py::arg("first_layer") = 0, py::arg("last_layer") = -1);
    m.def(
        "split_layers",
        [](int n_layers, const std::vector<std::string>& devices, const std::vector<double>& split,
           const py::object& tuning) {
            // [(first, last)] per device, as a Model split over `devices` takes them (split.h).
            std::vector<uint64_t> free;
            for (const std::string& d : devices)
                free.push_back(free_device_bytes(find_device(d, tuning_text(tuning)).profile));
            py::list out;
            for (const LayerRange& r : split_layers(n_layers, split, free)) out.append(py::make_tuple(r.first, r.last));
            return out;
        },
        py::arg("n_layers"), py::arg("devices"), py::arg("split") = std::vector<double>{},
        py::arg("tuning") = py::none());
}

std::vector<std::string> kv_layer_rows(const MemoryPlan& plan) {
    std::vector<std::string> out;
    for (KvRows r : plan.kv.layers) out.push_back(kv_rows_name(r));
    return out;
}

}  // namespace akunu::py_bindings

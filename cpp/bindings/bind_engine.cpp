// Python view of the engine: Model loading, decoding, and NumPy views of its KV cache and
// scratch buffers (zero-copy where the memory is host-visible; each view keeps the model alive).
#include <cstring>

#include "akunu/vulkan/device.h"
#include "akunu/core/error.h"
#include "akunu/engine/model.h"
#include "bindings.h"

namespace akunu::py_bindings {

static DType scratch_dtype(const std::string& name) {
    for (const char* u32 :
         {"token_ids", "step", "batch_token_ids", "batch_step", "sampler", "batch_dispatch", "step_dispatch"})
        if (name == u32) return DType::kU32;
    return DType::kF32;
}

// `with engine.held():` makes the calls inside one use of the model (model_use.h).
struct HeldUse {
    std::shared_ptr<Model> model;
    std::unique_ptr<ModelUse::Scope> scope;
};

py::list profile_rows(const std::vector<ProfileRow>& rows) {
    py::list out;
    for (const auto& r : rows) {
        // Each distinct range once: a GEMV of one matrix binds its W and y again in the slots of
        // a fused GEMV's second and third.
        size_t bytes = 0;
        const auto& bs = r.cmd->bindings;
        for (size_t i = 0; i < bs.size(); ++i) {
            bool again = false;
            for (size_t j = 0; j < i && !again; ++j)
                again = bs[j].buffer == bs[i].buffer && bs[j].offset == bs[i].offset && bs[j].bytes() == bs[i].bytes();
            if (!again) bytes += bs[i].bytes();
        }
        py::dict d;
        d["label"] = r.cmd->label;
        d["kernel"] = r.cmd->pipeline->name();
        d["spec"] = py::tuple(py::cast(r.cmd->pipeline->spec()));
        d["ms"] = r.ms;
        d["bytes_bound"] = bytes;
        out.append(d);
    }
    return out;
}

void init_engine(py::module_& m) {
    py::class_<HeldUse>(m, "HeldUse")
        .def("__enter__", [](HeldUse& h) { h.scope = std::make_unique<ModelUse::Scope>(h.model->use()); })
        .def("__exit__", [](HeldUse& h, const py::args&) { h.scope.reset(); });
    py::class_<Model, std::shared_ptr<Model>>(m, "Engine")
        .def(py::init([](const std::string& path, int context, const std::string& device, py::object progress,
                         int chain, int prefill_chunk, const std::string& kv_dtype, bool kv_blocks, bool kv_ring,
                         const py::object& tuning, const std::vector<std::string>& devices,
                         const std::vector<double>& split) {
                 LoadOptions o;
                 o.devices = devices;
                 o.split = split;
                 o.tuning = tuning_text(tuning);
                 const KvFormat f = parse_kv_format(kv_dtype);
                 o.kv_dtype = f.dtype;
                 o.kv_recent = f.recent;
                 o.kv_blocks = kv_blocks;
                 o.kv_ring = kv_ring;
                 o.context = context;
                 o.device = device;
                 o.chain = chain;
                 o.prefill_chunk = prefill_chunk;
                 o.progress = progress_callback(progress);
                 py::gil_scoped_release release;
                 return std::shared_ptr<Model>(Model::load(path, o));
             }),
             py::arg("path"), py::arg("context") = 4096, py::arg("device") = "", py::arg("progress") = py::none(),
             py::arg("chain") = 0, py::arg("prefill_chunk") = 0, py::arg("kv_dtype") = "f16",
             py::arg("kv_blocks") = false, py::arg("kv_ring") = false, py::arg("tuning") = py::none(),
             py::arg("devices") = std::vector<std::string>{}, py::arg("split") = std::vector<double>{})
        .def_property_readonly("config", &Model::config)
        .def_property_readonly("context", &Model::context)
        .def_property_readonly("device", &Model::device_ptr)
        .def("kernel_statistics", [](const Model& mo) { return kernel_statistics_rows(mo.device()); })
        .def("decode", &Model::decode, py::call_guard<py::gil_scoped_release>())
        .def(
            "eval",
            [](Model& mo, const std::vector<int>& ids, bool all_logits, const std::vector<int>& taps) -> py::object {
                // all_logits: [len(ids), vocab] f32; taps: [len(taps), len(ids), dim] f32
                py::object logits = py::none(), hidden = py::none();
                float *logits_data = nullptr, *hidden_data = nullptr;
                if (all_logits) {
                    py::array_t<float> a({ids.size(), size_t(mo.config().vocab_size)});
                    logits_data = a.mutable_data();
                    logits = std::move(a);
                }
                if (!taps.empty()) {
                    py::array_t<float> a({taps.size(), ids.size(), size_t(mo.config().dim)});
                    hidden_data = a.mutable_data();
                    hidden = std::move(a);
                }
                {
                    py::gil_scoped_release release;
                    mo.eval(ids, logits_data, taps, hidden_data);
                }
                if (taps.empty()) return logits;
                return py::make_tuple(logits, hidden);
            },
            py::arg("ids"), py::arg("all_logits") = false, py::arg("taps") = std::vector<int>{})
        .def_property_readonly("prefill_chunk", &Model::prefill_chunk)
        .def("sampled_token", &Model::sampled_token)
        .def("sampled_logprob", &Model::sampled_logprob)
        .def(
            "set_sampler",
            [](Model& mo, float temperature, uint32_t top_k, float top_p, float min_p, uint64_t seed) {
                mo.set_sampler(
                    SamplerState{temperature, top_k, top_p, min_p, uint32_t(seed), uint32_t(seed >> 32), 0, 0});
            },
            py::arg("temperature"), py::arg("top_k"), py::arg("top_p"), py::arg("min_p"), py::arg("seed"))
        .def("decode_chain",
             [](Model& mo, int token) {
                 std::vector<float> logprobs;
                 std::vector<int> ids;
                 {
                     py::gil_scoped_release release;
                     ids = mo.decode_chain(token, &logprobs);
                 }
                 return py::make_tuple(ids, logprobs);
             })
        .def("chain_start", &Model::chain_start, py::call_guard<py::gil_scoped_release>())
        .def(
            "chain_next",
            [](Model& mo, bool more) -> py::object {
                std::vector<int> ids;
                std::vector<float> logprobs;
                int first = 0;
                bool got;
                {
                    py::gil_scoped_release release;
                    got = mo.chain_next(ids, logprobs, first, more);
                }
                if (!got) return py::none();
                return py::make_tuple(ids, logprobs, first);
            },
            py::arg("more") = true)
        .def_property_readonly("chain", &Model::chain)
        .def("reset", &Model::reset)
        .def("truncate", &Model::truncate)
        .def(
            "fork", [](Model& mo) { return std::shared_ptr<Model>(mo.fork()); },
            py::call_guard<py::gil_scoped_release>())
        .def("save_state",
             [](Model& mo) {
                 std::vector<uint8_t> bytes;
                 {
                     py::gil_scoped_release release;
                     bytes = mo.save_state();
                 }
                 return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
             })
        .def("load_state",
             [](Model& mo, py::buffer data) {
                 const py::buffer_info info = data.request();
                 AKUNU_CHECK(info.itemsize == 1 && info.ndim == 1 && info.strides[0] == 1,
                             "load_state takes bytes (a contiguous byte buffer)");
                 py::gil_scoped_release release;
                 mo.load_state(static_cast<const uint8_t*>(info.ptr), size_t(info.size));
             })
        .def_property_readonly("fingerprint", &Model::fingerprint)
        .def_property_readonly("uses", &Model::uses)
        .def("held", [](const std::shared_ptr<Model>& mo) { return HeldUse{mo, nullptr}; })
        .def_property_readonly("kv_length", [](Model& mo) { return mo.kv_cache().current_length(); })
        .def(
            "kv_view",
            [](const std::shared_ptr<Model>& self, int layer, bool values, bool scales, bool copy) {
                const int n_layers = self->kv_cache().n_layers();
                AKUNU_CHECK(
                    layer >= 0 && layer < n_layers,
                    "layer " + std::to_string(layer) + " is out of range (0 to " + std::to_string(n_layers - 1) + ")");
                const KVCache& kv = self->layer_cache(layer);  // a split model's part that holds it
                const size_t heads = size_t(kv.n_kv_heads()), n = size_t(kv.current_length());
                const KvDType side = kv_side(kv.dtype(), values);
                const size_t words = size_t(kv.head_dim()) * size_t(kv_value_bits(side)) / 32;
                if (copy || kv.rows(layer) != KvRows::kFull) {
                    // A copy of rows [0, length), gathered in position order (blocks and rings
                    // are not one buffer; a copy asked for reads through the staging area).
                    const std::vector<uint8_t> bytes = kv.read_side(layer, values, scales, int(n));
                    if (scales || side == KvDType::kF16) {
                        py::array a(py::dtype("float16"), scales
                                                              ? std::vector<size_t>{heads, n}
                                                              : std::vector<size_t>{heads, n, size_t(kv.head_dim())});
                        std::memcpy(a.mutable_data(), bytes.data(), bytes.size());
                        return a;
                    }
                    py::array_t<uint32_t> a({heads, n, words});
                    std::memcpy(a.mutable_data(), bytes.data(), bytes.size());
                    return py::array(a);
                }
                const Buffer& b = values ? kv.v(layer) : kv.k(layer);
                const size_t rows = size_t(kv.max_length());
                if (scales) {
                    AKUNU_CHECK(kv_side(kv.dtype(), values) != KvDType::kF16, "an f16 KV cache has no row scales");
                    return buffer_view(b, DType::kF16, {heads, rows}, py::cast(self),
                                       size_t(kv.layout(values).scale_offset));
                }
                if (kv_side(kv.dtype(), values) == KvDType::kF16)
                    return buffer_view(b, DType::kF16, {heads, rows, size_t(kv.head_dim())}, py::cast(self));
                return buffer_view(b, DType::kU32, {heads, rows, words}, py::cast(self));
            },
            py::arg("layer"), py::arg("values"), py::arg("scales") = false, py::arg("copy") = false)
        .def_property_readonly("parts",
                               [](const Model& mo) {
                                   // A split model's parts in layer order (one part unless split).
                                   py::list out;
                                   for (const Model* p : mo.parts()) {
                                       py::dict d;
                                       d["device"] = p->device().profile().name;
                                       d["layers"] =
                                           py::make_tuple(p->layers().first, p->layers().end(mo.config().n_layers));
                                       d["weights_bytes"] = p->weight_bytes();
                                       d["kv_bytes"] = p->kv_cache().bytes();
                                       out.append(d);
                                   }
                                   return out;
                               })
        .def_property_readonly("kv_dtype",
                               [](const Model& mo) {
                                   return kv_format_name({mo.kv_cache().dtype(), mo.kv_cache().recent().plan().window});
                               })
        .def(
            "kv_recent_view",
            [](const std::shared_ptr<Model>& self, int layer, bool values) {
                // The recent window's ring of a layer: f16 [n_kv, ring rows, head_dim], position t
                // in row t % ring rows (kv_recent.h).
                const KVCache& kv = self->layer_cache(layer);
                const KvRecentPlan& rp = kv.recent().plan();
                AKUNU_CHECK(rp.window > 0, "the KV cache has no recent window (kv_dtype '<format>+w<n>' keeps one)");
                return buffer_view(values ? kv.recent().v(layer) : kv.recent().k(layer), DType::kF16,
                                   {size_t(kv.n_kv_heads()), size_t(rp.rows), size_t(kv.head_dim())}, py::cast(self));
            },
            py::arg("layer"), py::arg("values"))
        .def_property_readonly("kv_layers", [](const Model& mo) { return kv_layer_rows(mo.plan()); })
        .def_property_readonly("kv_sliding_from", [](const Model& mo) { return mo.kv_cache().sliding_from(); })
        .def_property_readonly("scratch_names",
                               [](const Model& mo) {
                                   std::vector<std::string> names;
                                   for (const auto& [name, b] : mo.scratch().all()) names.push_back(name);
                                   return names;
                               })
        .def(
            "scratch_view",
            [](const std::shared_ptr<Model>& self, const std::string& name, bool copy) {
                return buffer_view(self->scratch().get(name), scratch_dtype(name), {}, py::cast(self), 0, copy);
            },
            py::arg("name"), py::arg("copy") = false)
        .def("memory_report",
             [](const Model& mo) {
                 const MemoryPlan& p = mo.plan();
                 py::dict d;
                 d["weights"] = py::make_tuple(p.weights_bytes, mo.weight_bytes());
                 d["kv_cache"] = py::make_tuple(p.kv_bytes, mo.kv_cache().bytes());
                 d["kv_cache_max"] = p.kv_max_bytes;
                 d["kv_block"] = p.kv.block_bytes;
                 d["kv_blocks"] = mo.kv_cache().blocks_allocated();
                 d["kv_ring_rows"] = p.kv.ring_rows;
                 // A dict, not a tuple: the report's tuples are (planned, allocated) pairs.
                 d["kv_recent"] = py::dict(py::arg("window") = p.kv.recent.window, py::arg("rows") = p.kv.recent.rows,
                                           py::arg("bytes") = p.kv.recent.bytes);
                 d["kv_layers"] = kv_layer_rows(p);
                 d["decode_scratch"] = py::make_tuple(p.decode_scratch_bytes, mo.scratch().bytes());
                 d["prefill_scratch"] = py::make_tuple(p.prefill_scratch_bytes, mo.scratch().prefill_bytes());
                 d["fork"] = p.fork_bytes;
                 d["weight_sharers"] = mo.weight_sharers();
                 d["staging"] = mo.device().staging_bytes();
                 d["device_allocated"] = mo.device().allocated_bytes();
                 d["device_allocations"] = mo.device().allocations_total();
                 return d;
             })
        .def(
            "profile",
            [](Model& mo, int tokens) {
                std::vector<Model::ProfileRow> rows;
                {
                    py::gil_scoped_release release;
                    rows = mo.profile(tokens);
                }
                return profile_rows(rows);
            },
            py::arg("tokens") = 1)
        .def(
            "dispatch_table",
            [](const Model& mo, bool prefill) {
                return dispatch_rows(prefill ? mo.prefill_table() : mo.dispatch_table());
            },
            py::arg("prefill") = false)
        .def("barrier_count", &Model::barrier_count, py::arg("prefill") = false)
        .def(
            "pass_plan", [](const Model& mo, bool prefill) { return plan_dict(mo.pass_plan(prefill)); },
            py::arg("prefill") = false);
}

static const char* x_rounding_name(kernels::XRounding r) {
    return r == kernels::XRounding::kInt8 ? "int8" : r == kernels::XRounding::kInt16 ? "int16" : "float";
}

py::dict plan_dict(const DecodePlan& p) {
    static const char* kPlaces[kHandoffSlotsPerLayer] = {"attention->o", "o->gate_up", "gate_up->down",
                                                         "down->next_qkv"};
    py::list layers;
    for (const LayerPlan& lp : p.layers) {
        py::dict l;
        py::list handoffs;
        for (uint32_t j = 0; j < kHandoffSlotsPerLayer; ++j)
            if (lp.handoff_slot[j]) handoffs.append(kPlaces[j]);
        if (p.prefill) {
            l["gemm_gated"] = lp.gemm_gated;
            l["gemm_gated_from"] = lp.gemm_gated_from;
            l["attn_out_dtype"] = dtype_traits(lp.attn_out_dtype).name;
        } else {
            l["attn_norm_folded"] = lp.attn_norm_folded;
            l["ffn_norm_folded"] = lp.ffn_norm_folded;
            l["qkv_fused"] = lp.qkv_fused;
            l["rope_folded"] = lp.rope_folded;
            l["gate_up_fused"] = lp.gate_up_fused;
            l["gate_up_parts"] = lp.gate_up_parts;
            l["activation_folded"] = lp.activation_folded;
            l["o_norm_forward"] = lp.o_norm_forward;
            l["down_norm_forward"] = lp.down_norm_forward;
            l["handoffs"] = handoffs;
        }
        layers.append(l);
    }
    py::dict d;
    d["pass"] = p.prefill ? "prefill" : "decode";
    d["rows"] = p.rows;
    d["x_rounding"] = x_rounding_name(p.x_rounding);
    d["head_norm_folded"] = p.head_norm_folded;
    if (p.prefill) {
        d["half_x"] = py::make_tuple(p.half_x_dim, p.half_x_ffn);
        d["short_rows"] = p.short_rows;
        d["dequant_rows"] = p.dequant_bytes ? p.dequant_rows : 0u;
    } else {
        d["handoffs"] = p.handoffs;
    }
    d["layers"] = layers;
    return d;
}

py::list dispatch_rows(const DispatchTable& table) {
    py::list out;
    for (const DispatchCmd& c : table.commands()) {
        py::dict d;
        d["label"] = c.label;
        d["kernel"] = c.pipeline->name();
        d["spec"] = py::tuple(py::cast(c.pipeline->spec()));
        d["groups"] = py::make_tuple(c.groups[0], c.groups[1], c.groups[2]);
        if (c.chunk.follows()) {
            static const char* const kAxes[] = {"none", "linear", "x", "y"};
            py::dict chunk;
            chunk["axis"] = kAxes[size_t(c.chunk.axis)];
            chunk["rows"] = c.chunk.rows;
            chunk["min_rows"] = c.chunk.min_rows;
            chunk["max_rows"] = c.chunk.max_rows;
            d["chunk"] = chunk;
        } else {
            d["chunk"] = py::none();
        }
        d["position_block"] = c.position_block;
        d["awaits_previous"] = c.awaits_previous;
        py::list bindings, columns;
        for (const Binding& b : c.bindings) {
            bindings.append(py::make_tuple(b.buffer->size(), b.offset, b.bytes()));
            columns.append(b.row_stride ? py::object(py::make_tuple(b.row_stride, b.row_bytes))
                                        : py::object(py::none()));
        }
        d["bindings"] = bindings;
        d["columns"] = columns;
        out.append(d);
    }
    return out;
}

}  // namespace akunu::py_bindings

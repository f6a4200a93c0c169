// Python view of CommandList and the kernel launchers.
#include <cctype>
#include <optional>

#include "akunu/vulkan/command_list.h"
#include "akunu/formats/tiles.h"
#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "akunu/vulkan/shader_library.h"
#include "bindings.h"

namespace akunu::py_bindings {

namespace {
const char* const kXRoundings[] = {"float", "int16", "int8"};  // kernels::XRounding's order

kernels::XRounding x_rounding(const std::string& name) {
    for (size_t i = 0; i < 3; ++i)
        if (name == kXRoundings[i]) return kernels::XRounding(i);
    throw Error("x_rounding must be 'float', 'int16' or 'int8', got '" + name + "'");
}
const char* x_rounding_name(kernels::XRounding r) { return kXRoundings[size_t(r)]; }

Activation gated_activation_named(const std::string& name, const char* kernel) {
    AKUNU_CHECK(name == "silu" || name == "gelu_tanh",
                std::string(kernel) + ": activation must be 'silu' or 'gelu_tanh', got '" + name + "'");
    return name == "silu" ? Activation::kSilu : Activation::kGeluTanh;
}
}  // namespace

void init_kernels(py::module_& m) {
    py::class_<CommandList, std::shared_ptr<CommandList>>(m, "CommandList")
        .def(py::init([](const std::shared_ptr<Device>& d) { return std::make_shared<CommandList>(d); }))
        .def("begin", &CommandList::begin,
             "Starts (or restarts) recording. A list holds the buffers it records until then, so that "
             "temporaries passed to akunu._akunu.kernels outlive the commands that use them.")
        .def("end", &CommandList::end)
        .def("submit", &CommandList::submit)
        .def(
            "wait", [](CommandList& c) { c.wait(); }, py::call_guard<py::gil_scoped_release>())
        .def(
            "copy",
            [](CommandList& cl, const PyBuffer& src, size_t src_offset, const PyBuffer& dst, size_t dst_offset,
               size_t nbytes) { cl.copy(src.buffer, src_offset, dst.buffer, dst_offset, nbytes); },
            py::arg("src"), py::arg("src_offset"), py::arg("dst"), py::arg("dst_offset"), py::arg("nbytes"))
        .def("timestamp", &CommandList::timestamp)
        .def("elapsed_ms", &CommandList::elapsed_ms)
        .def_property_readonly("dispatch_count", &CommandList::dispatch_count)
        .def_property_readonly("barrier_count", &CommandList::barrier_count);

    auto k = m.def_submodule("kernels", "Records one kernel dispatch into a CommandList");
    auto dt = [](const std::string& s) { return parse_dtype(s); };
    k.def(
        "fill",
        [dt](CommandList& cl, const PyBuffer& out, const std::string& dtype, size_t n, float value, uint32_t bits) {
            kernels::fill(cl, out.buffer, dt(dtype), n, value, bits);
        },
        py::arg("cl"), py::arg("out"), py::arg("dtype"), py::arg("n"), py::arg("value") = 0.0f, py::arg("bits") = 0);
    k.def("copy", [](CommandList& cl, const PyBuffer& src, const PyBuffer& dst, size_t nbytes) {
        kernels::copy(cl, src.buffer, dst.buffer, nbytes);
    });
    k.def(
        "read",
        [](CommandList& cl, const PyBuffer& src, const PyBuffer& flag, size_t nbytes, size_t src_offset) {
            AKUNU_CHECK(src_offset <= src.buffer.size(), "read: src_offset is past the end of src");
            kernels::read(cl, Binding(src.buffer, src_offset, src.buffer.size() - src_offset), flag.buffer, nbytes);
        },
        py::arg("cl"), py::arg("src"), py::arg("flag"), py::arg("nbytes"), py::arg("src_offset") = 0,
        "Reads nbytes of src (from src_offset) and stores nothing: the device's read rate.");
    k.def("add",
          [dt](CommandList& cl, const PyBuffer& a, const PyBuffer& b, const PyBuffer& c, const std::string& dtype,
               size_t n) { kernels::add(cl, a.buffer, b.buffer, c.buffer, dt(dtype), n); });
    k.def(
        "rmsnorm",
        [dt](CommandList& cl, const PyBuffer& x, const PyBuffer& w, const PyBuffer& y, const std::string& dtype,
             size_t rows, size_t dim, float eps, float weight_offset) {
            kernels::rmsnorm(cl, x.buffer, w.buffer, y.buffer, dt(dtype), rows, dim, eps, weight_offset);
        },
        py::arg("cl"), py::arg("x"), py::arg("w"), py::arg("y"), py::arg("dtype"), py::arg("rows"), py::arg("dim"),
        py::arg("eps"), py::arg("weight_offset") = 0.0f);
    // wtype: an akunu dtype name ("f16") or a ggml type name ("Q4_0")
    auto weight_type = [](const std::string& wtype) {
        std::string name = wtype;
        for (auto& c : name) c = char(std::toupper(static_cast<unsigned char>(c)));
        const TensorTypeTraits* t = find_type_by_name(name);
        AKUNU_CHECK(t, "unknown weight type '" + wtype + "'");
        return t->type;
    };
    k.def(
        "gemv",
        [weight_type](CommandList& cl, const PyBuffer& w, const std::string& wtype, const PyBuffer& x,
                      const PyBuffer& y, size_t rows, size_t kk, const PyBuffer* norm_weight, float eps,
                      float weight_offset, const std::string& rounding, size_t w_offset, const PyBuffer* up,
                      const std::string& activation, bool accumulate, const PyBuffer* ready_sums,
                      uint32_t ready_partials, const PyBuffer* next_norm, float next_norm_offset,
                      const PyBuffer* normed, const PyBuffer* norm_sums) {
            AKUNU_CHECK(int(norm_weight != nullptr) + int(up != nullptr) + int(ready_sums != nullptr) <= 1,
                        "gemv: fold a norm or a gated activation, not both (nor either with ready_sums)");
            std::optional<kernels::GemvInput> input;
            if (norm_weight) input = kernels::GemvInput::rmsnorm(norm_weight->buffer, eps, weight_offset);
            if (ready_sums) input = kernels::GemvInput::rmsnorm_ready(ready_sums->buffer, ready_partials, eps);
            if (up) {
                input = kernels::GemvInput::gated(gated_activation_named(activation, "gemv"), up->buffer);
            }
            AKUNU_CHECK((next_norm != nullptr) == (normed != nullptr) && (normed != nullptr) == (norm_sums != nullptr),
                        "gemv: a norm handed forward needs next_norm, normed and norm_sums");
            std::optional<kernels::GemvNormOut> norm_out;
            if (next_norm)
                norm_out = kernels::GemvNormOut{next_norm->buffer, next_norm_offset, normed->buffer, norm_sums->buffer};
            AKUNU_CHECK(w_offset <= w.buffer.size(), "gemv: w_offset is past the end of W");
            kernels::gemv(cl, Binding(w.buffer, w_offset, w.buffer.size() - w_offset), weight_type(wtype), x.buffer,
                          y.buffer, rows, kk, accumulate, input ? &*input : nullptr, x_rounding(rounding), nullptr,
                          norm_out ? &*norm_out : nullptr);
        },
        py::arg("cl"), py::arg("w"), py::arg("wtype"), py::arg("x"), py::arg("y"), py::arg("rows"), py::arg("k"),
        py::arg("norm_weight") = nullptr, py::arg("eps") = 1e-5f, py::arg("weight_offset") = 0.0f,
        py::arg("x_rounding") = "float", py::arg("w_offset") = 0, py::arg("up") = nullptr,
        py::arg("activation") = "silu", py::arg("accumulate") = false, py::arg("ready_sums") = nullptr,
        py::arg("ready_partials") = 0, py::arg("next_norm") = nullptr, py::arg("next_norm_offset") = 0.0f,
        py::arg("normed") = nullptr, py::arg("norm_sums") = nullptr,
        "y = W @ x (y += with accumulate). x_rounding: 'float', 'int16' or 'int8', how Q8_0/Q4_0/Q4_1 rows hold x "
        "where the kernel can round it so (gemv_int16, gemv_int_dot), else fp32. A norm handed forward: with "
        "next_norm, normed and norm_sums, an accumulating GEMV also writes normed = y * (next_norm + "
        "next_norm_offset) and gemv_norm_partials sums of squares of y; a GEMV given those sums as ready_sums "
        "(ready_partials of them) reads its x as that norm's output.");
    k.def(
        "gemv_hands_norm_forward",
        [weight_type](const Device& d, const std::string& producer, const std::string& reader) {
            return kernels::gemv_hands_norm_forward(d.profile(), weight_type(producer), weight_type(reader));
        },
        py::arg("device"), py::arg("producer"), py::arg("reader"),
        "Whether a GEMV of `producer` weights hands a norm forward to GEMVs of `reader` weights on this device.");
    k.def(
        "gemv_norm_partials",
        [weight_type](const Device& d, const std::string& wtype, size_t rows) {
            return kernels::gemv_norm_partials(d.profile(), weight_type(wtype), rows);
        },
        py::arg("device"), py::arg("wtype"), py::arg("rows"),
        "The sums of squares a GEMV of this many rows writes when it hands a norm forward.");
    k.def(
        "gemv_parts",
        [weight_type](CommandList& cl, const std::array<const PyBuffer*, 3>& w, const std::string& wtype,
                      const PyBuffer& x, const std::array<const PyBuffer*, 3>& y, std::array<size_t, 3> rows, size_t kk,
                      const PyBuffer* norm_weight, float eps, float weight_offset, const PyBuffer* rope_cos,
                      const PyBuffer* rope_sin, const PyBuffer* k_cache, const PyBuffer* v_cache, const PyBuffer* step,
                      uint32_t head_dim, uint32_t cache_rows, bool ring, uint32_t positions, bool half_split,
                      const std::string& rounding) {
            std::optional<kernels::GemvInput> input;
            std::optional<kernels::GemvRopeKv> rope;
            if (rope_cos || rope_sin || k_cache || v_cache || step) {
                AKUNU_CHECK(rope_cos && rope_sin && k_cache && v_cache && step,
                            "gemv_parts: a folded rope_kv needs rope_cos, rope_sin, k_cache, v_cache and step");
                const KvBindings cache{
                    KvDType::kF16, k_cache->buffer, v_cache->buffer, {}, {}, ring ? KvRows::kRing : KvRows::kFull,
                    cache_rows};
                rope = kernels::GemvRopeKv{rope_cos->buffer, rope_sin->buffer, cache,     step->buffer,
                                           head_dim,         positions,        half_split};
            }
            if (norm_weight) input = kernels::GemvInput::rmsnorm(norm_weight->buffer, eps, weight_offset);
            for (int i = 0; i < 3; ++i)
                AKUNU_CHECK(w[size_t(i)] && y[size_t(i)], "gemv_parts: pass three W and three y buffers");
            kernels::gemv_parts(cl, {w[0]->buffer, w[1]->buffer, w[2]->buffer}, weight_type(wtype), x.buffer,
                                {y[0]->buffer, y[1]->buffer, y[2]->buffer}, rows, kk, input ? &*input : nullptr,
                                rope ? &*rope : nullptr, x_rounding(rounding));
        },
        py::arg("cl"), py::arg("w"), py::arg("wtype"), py::arg("x"), py::arg("y"), py::arg("rows"), py::arg("k"),
        py::arg("norm_weight") = nullptr, py::arg("eps") = 1e-5f, py::arg("weight_offset") = 0.0f,
        py::arg("rope_cos") = nullptr, py::arg("rope_sin") = nullptr, py::arg("k_cache") = nullptr,
        py::arg("v_cache") = nullptr, py::arg("step") = nullptr, py::arg("head_dim") = 0, py::arg("cache_rows") = 0,
        py::arg("ring") = false, py::arg("positions") = 0, py::arg("half_split") = false,
        py::arg("x_rounding") = "float",
        "y[i] = W[i] @ x for three matrices in one dispatch (Q, K and V; rows[2] = 0 for two), for tile-major "
        "Q8_0/Q4_0/Q4_1 and float weights on Vulkan devices. With rope_cos ... step: rope_kv folded in (RoPE on "
        "adjacent pairs of Q "
        "and K at step.pos, or on (i, i + head_dim / 2) if half_split, K and V stored to f16 caches [n_kv, cache_rows, "
        "head_dim], a ring if ring). x_rounding as in gemv.");
    k.def(
        "gemv_gate_up",
        [weight_type](CommandList& cl, const PyBuffer& w_gate, const PyBuffer& w_up, const std::string& wtype,
                      const PyBuffer& x, const PyBuffer& y, size_t rows, size_t kk, const std::string& activation,
                      const PyBuffer* norm_weight, float eps, float weight_offset) {
            std::optional<kernels::GemvInput> input;
            if (norm_weight) input = kernels::GemvInput::rmsnorm(norm_weight->buffer, eps, weight_offset);
            kernels::gemv_gate_up(cl, w_gate.buffer, w_up.buffer, weight_type(wtype), x.buffer, y.buffer, rows, kk,
                                  gated_activation_named(activation, "gemv_gate_up"), input ? &*input : nullptr);
        },
        py::arg("cl"), py::arg("w_gate"), py::arg("w_up"), py::arg("wtype"), py::arg("x"), py::arg("y"),
        py::arg("rows"), py::arg("k"), py::arg("activation") = "silu", py::arg("norm_weight") = nullptr,
        py::arg("eps") = 1e-5f, py::arg("weight_offset") = 0.0f,
        "y = act(W_gate @ x) * (W_up @ x) in one dispatch (float weights on Vulkan devices: gemv_fuses_gate_up), "
        "x through an RMSNorm with norm_weight.");
    k.def(
        "gemv_fuses_gate_up",
        [weight_type](const Device& d, const std::string& wtype, size_t kk, const std::string& activation) {
            return kernels::gemv_fuses_gate_up(d.profile(), weight_type(wtype), kk,
                                               gated_activation_named(activation, "gemv_fuses_gate_up"));
        },
        py::arg("device"), py::arg("wtype"), py::arg("k"), py::arg("activation") = "silu",
        "Whether gemv_gate_up takes these weights, rows of k and activation on this device.");
    k.def(
        "gemv_folds_rope_kv",
        [weight_type](const Device& d, const std::string& wtype, bool ring, bool half_split) {
            const KvBindings cache{KvDType::kF16, {}, {}, {}, {}, ring ? KvRows::kRing : KvRows::kFull, 1};
            return kernels::gemv_folds_rope_kv(d.profile(), weight_type(wtype), cache, half_split);
        },
        py::arg("device"), py::arg("wtype"), py::arg("ring"), py::arg("half_split") = false,
        "Whether gemv_parts folds rope_kv for this weight type (and RoPE pairing) into an f16 cache on this device.");
    k.def(
        "gemv_fuses_parts",
        [weight_type](const Device& d, const std::string& wtype, size_t kk) {
            return kernels::gemv_fuses_parts(d.profile(), weight_type(wtype), kk);
        },
        "Whether gemv_parts takes this weight type and row length on this device.");
    k.def(
        "gemv_int_dot",
        [weight_type](const Device& d, const std::string& wtype, size_t kk) {
            return kernels::gemv_int_dot(d.profile(), weight_type(wtype), kk);
        },
        "Whether gemv takes the integer-dot path on this device for this weight type and row length (x as int8).");
    k.def(
        "gemv_int16",
        [weight_type](const Device& d, const std::string& wtype) {
            return kernels::gemv_int16(d.profile(), weight_type(wtype));
        },
        "Whether gemv and gemv_parts round x to int16 for this weight type on this device when asked to.");
    k.def(
        "gemm_tile_rows",
        [weight_type](const Device& d, const std::string& wtype) {
            return kernels::gemm_tile_rows(d.profile(), weight_type(wtype));
        },
        "The most rows for which gemm of these weights runs the tile GEMV of several rows of x (gemm_rows.comp; X "
        "as halves rounded as gemv_x_rounding says, f32 X in float products), 0 where it never does.");
    k.def(
        "tile_type",
        [weight_type](const Device& d, const std::string& base) -> std::optional<std::string> {
            // The CPU backend's kernels read every tile layout (*_T32), Vulkan's the 32-element block
            // formats' (*_T32V), whether or not the engine loads a model's matrices in tiles.
            const WeightTiles kernels_read = d.profile().cpu_backend ? WeightTiles::kAll : WeightTiles::kBlocks32;
            if (const cpu::TileLayout* l = cpu::tile_layout_for(weight_type(base), kernels_read))
                return type_traits(l->tiled).name;
            return std::nullopt;
        },
        "The tile-major type (formats/tiles.h) this device's kernels read for matrices of `base` ('Q8_0' -> 'Q8_0_T32' "
        "on "
        "the CPU backend, 'Q8_0_T32V' on Vulkan devices), or None where they have none.");
    k.def(
        "engine_x_rounding", [](const Device& d) { return x_rounding_name(kernels::engine_x_rounding(d.profile())); },
        "How the engine's quantized GEMVs ask to hold x on this device: 'int16', 'int8' with AKUNU_INT8=1, 'float' "
        "with tuning float_x=1.");
    k.def(
        "gemv_x_rounding",
        [weight_type](const Device& d, const std::string& wtype, size_t kk, const std::string& asked) {
            return x_rounding_name(kernels::gemv_x_rounding(d.profile(), weight_type(wtype), kk, x_rounding(asked)));
        },
        py::arg("device"), py::arg("wtype"), py::arg("k"), py::arg("x_rounding"),
        "The x_rounding gemv takes for this weight type and row length when asked for x_rounding ('float' where it "
        "cannot).");
    k.def(
        "gemm",
        [weight_type](CommandList& cl, const PyBuffer& w, const std::string& wtype, const PyBuffer& x,
                      const PyBuffer& y, size_t m, size_t n, size_t kk, const PyBuffer& step, bool allow_coopmat,
                      uint32_t min_rows, uint32_t max_rows, bool accumulate) {
            // X as halves where its buffer holds f16 (gemm_takes_half_x), else f32.
            const DType x_dtype = x.dtype == DType::kF16 ? DType::kF16 : DType::kF32;
            kernels::gemm(cl, w.buffer, weight_type(wtype), x.buffer, y.buffer,
                          {m, n, kk, kk, n, min_rows, max_rows, x_dtype}, step.buffer, accumulate, allow_coopmat);
        },
        py::arg("cl"), py::arg("w"), py::arg("wtype"), py::arg("x"), py::arg("y"), py::arg("m"), py::arg("n"),
        py::arg("k"), py::arg("step"), py::arg("allow_coopmat") = true, py::arg("min_rows") = 0,
        py::arg("max_rows") = 0, py::arg("accumulate") = false);
    k.def(
        "gemm_gated",
        [](CommandList& cl, const PyBuffer& w_gate, const PyBuffer& w_up, const PyBuffer& x, const PyBuffer& out,
           size_t m, size_t n, size_t kk, const PyBuffer& step, const std::string& activation, uint32_t min_rows,
           uint32_t max_rows) {
            AKUNU_CHECK(x.dtype == DType::kF16, "gemm_gated: X must be f16");
            kernels::gemm_gated(cl, gated_activation_named(activation, "gemm_gated"), w_gate.buffer, w_up.buffer,
                                x.buffer, out.buffer, {m, n, kk, kk, n, min_rows, max_rows, DType::kF16}, step.buffer);
        },
        py::arg("cl"), py::arg("w_gate"), py::arg("w_up"), py::arg("x"), py::arg("out"), py::arg("m"), py::arg("n"),
        py::arg("k"), py::arg("step"), py::arg("activation") = "silu", py::arg("min_rows") = 0, py::arg("max_rows") = 0,
        "out [m, n] f16 = act(X @ W_gate.T) * (X @ W_up.T), X [m, k] f16, f16 weights: a prefill chunk's gate and up "
        "GEMMs and activation in one dispatch (cooperative matrix 2 devices: gemm_fuses_gated).");
    k.def(
        "gemm_fuses_gated",
        [](const Device& d, const std::string& activation, size_t m, size_t n, size_t kk) {
            return kernels::gemm_fuses_gated(d.profile(), TensorType::F16,
                                             gated_activation_named(activation, "gemm_fuses_gated"),
                                             {m, n, kk, kk, n, 0, 0, DType::kF16});
        },
        py::arg("device"), py::arg("activation"), py::arg("m"), py::arg("n"), py::arg("k"),
        "Whether gemm_gated runs for f16 weights and an f16 X of m rows here.");
    k.def(
        "dequant_f16",
        [weight_type](CommandList& cl, const PyBuffer& w, const std::string& wtype, const PyBuffer& out, size_t n,
                      size_t kk, const PyBuffer& step, uint32_t min_rows) {
            kernels::dequant_f16(cl, w.buffer, weight_type(wtype), out.buffer, n, kk, step.buffer, min_rows);
        },
        py::arg("cl"), py::arg("w"), py::arg("wtype"), py::arg("out"), py::arg("n"), py::arg("k"), py::arg("step"),
        py::arg("min_rows") = 0);
    k.def("embed", [weight_type](CommandList& cl, const PyBuffer& w, const std::string& wtype, size_t vocab,
                                 const PyBuffer& token_ids, const PyBuffer& step, const PyBuffer& out, size_t dim,
                                 float scale, size_t rows) {
        kernels::embed(cl, w.buffer, weight_type(wtype), vocab, token_ids.buffer, step.buffer, out.buffer, dim, scale,
                       rows);
    });
    k.def("to_half", [](CommandList& cl, const PyBuffer& x, const PyBuffer& out, size_t n) {
        kernels::to_half(cl, x.buffer, out.buffer, n);
    });
    k.def("softcap", [](CommandList& cl, const PyBuffer& x, const PyBuffer& step, size_t rows, size_t n, float cap) {
        kernels::softcap(cl, x.buffer, step.buffer, rows, n, cap);
    });
    k.def("sample", [](CommandList& cl, const PyBuffer& logits, const PyBuffer& token_ids, const PyBuffer& logprobs,
                       const PyBuffer& step, const PyBuffer& sampler, size_t n, size_t rows) {
        kernels::sample(cl, logits.buffer, token_ids.buffer, logprobs.buffer, step.buffer, sampler.buffer, n, 0, rows);
    });
    m.def("kernel_names", &kernel_names, "The embedded SPIR-V kernels (rows of shaders/kernels.cmake).");
}

}  // namespace akunu::py_bindings

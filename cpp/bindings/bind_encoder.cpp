// Python view of an Encoder: loading, embed() into a new NumPy array, and its dispatch table.
#include "akunu/vulkan/device.h"
#include "akunu/engine/encoder.h"
#include "akunu/engine/kernels.h"
#include "bindings.h"

namespace akunu::py_bindings {

void init_encoder(py::module_& m) {
    py::enum_<Pooling>(m, "Pooling").value("mean", Pooling::kMean).value("cls", Pooling::kCls);
    py::class_<Encoder, std::shared_ptr<Encoder>>(m, "Encoder")
        .def(py::init([](const std::string& path, const std::string& device, py::object progress, int batch_tokens,
                         const py::object& tuning) {
                 EncoderOptions o;
                 o.device = device;
                 o.tuning = tuning_text(tuning);
                 o.batch_tokens = batch_tokens;
                 o.progress = progress_callback(progress);
                 py::gil_scoped_release release;
                 return std::shared_ptr<Encoder>(Encoder::load(path, o));
             }),
             py::arg("path"), py::arg("device") = "", py::arg("progress") = py::none(), py::arg("batch_tokens") = 0,
             py::arg("tuning") = py::none())
        .def_property_readonly("config", &Encoder::config)
        .def_property_readonly("max_tokens", &Encoder::max_tokens)
        .def_property_readonly("batch_tokens", &Encoder::batch_tokens)
        .def_property_readonly("weight_bytes", &Encoder::weight_bytes)
        .def_property_readonly("device", &Encoder::device_ptr)
        .def("kernel_statistics", [](const Encoder& e) { return kernel_statistics_rows(e.device()); })
        .def_property_readonly("device_allocations", [](const Encoder& e) { return e.device().allocations_total(); })
        .def(
            "embed",
            [](Encoder& e, const std::vector<std::vector<int>>& texts, Pooling pooling, bool normalize) {
                py::array_t<float> out({texts.size(), size_t(e.config().dim)});  // [n, dim] f32
                float* data = out.mutable_data();
                py::gil_scoped_release release;
                e.embed(texts, pooling, normalize, data);
                return out;
            },
            py::arg("texts"), py::arg("pooling"), py::arg("normalize"))
        .def("dispatch_table", [](const Encoder& e) { return dispatch_rows(e.dispatch_table()); });

    // The encoder's kernels, one dispatch each (akunu.ops wraps them).
    py::module_ k = m.attr("kernels");
    k.def(
        "layernorm",
        [](CommandList& cl, const PyBuffer& x, const PyBuffer& w, const PyBuffer& b, const PyBuffer& y,
           const PyBuffer& step, size_t rows, size_t dim,
           float eps) { kernels::layernorm(cl, x.buffer, w.buffer, b.buffer, y.buffer, step.buffer, rows, dim, eps); },
        py::arg("cl"), py::arg("x"), py::arg("w"), py::arg("b"), py::arg("y"), py::arg("step"), py::arg("rows"),
        py::arg("dim"), py::arg("eps"));
    k.def("gelu", [](CommandList& cl, const PyBuffer& x, const PyBuffer& out, size_t n) {
        kernels::activation(cl, Activation::kGelu, x.buffer, out.buffer, n);
    });
    k.def(
        "encoder_attention",
        [](CommandList& cl, const PyBuffer& qkv, const PyBuffer& seq, const PyBuffer& step, const PyBuffer& out,
           uint32_t n_heads, uint32_t head_dim, uint32_t rows, uint32_t q_stride, uint32_t k_offset, uint32_t v_offset,
           uint32_t out_stride, float scale) {
            kernels::encoder_attention(cl, qkv.buffer, qkv.buffer, seq.buffer, step.buffer, out.buffer,
                                       {n_heads, head_dim, rows, q_stride, k_offset, v_offset, out_stride, scale});
        },
        py::arg("cl"), py::arg("qkv"), py::arg("seq"), py::arg("step"), py::arg("out"), py::arg("n_heads"),
        py::arg("head_dim"), py::arg("rows"), py::arg("q_stride"), py::arg("k_offset"), py::arg("v_offset"),
        py::arg("out_stride"), py::arg("scale"));
    k.def("pool",
          [](CommandList& cl, const PyBuffer& h, const PyBuffer& texts, const PyBuffer& out, size_t rows, size_t dim,
             size_t max_texts) { kernels::pool(cl, h.buffer, texts.buffer, out.buffer, rows, dim, max_texts); });
}

}  // namespace akunu::py_bindings

// Python view of an Encoder: loading, embed() into a new NumPy array, and its dispatch table.
#include "akunu/device.h"
#include "akunu/encoder.h"
#include "bindings.h"

namespace akunu::py_bindings {

void init_encoder(py::module_& m) {
    py::enum_<Pooling>(m, "Pooling").value("mean", Pooling::kMean).value("cls", Pooling::kCls);
    py::class_<Encoder, std::shared_ptr<Encoder>>(m, "Encoder")
        .def(py::init([](const std::string& path, const std::string& device, py::object progress, int batch_tokens) {
                 EncoderOptions o;
                 o.device = device;
                 o.batch_tokens = batch_tokens;
                 o.progress = progress_callback(progress);
                 py::gil_scoped_release release;
                 return std::shared_ptr<Encoder>(Encoder::load(path, o));
             }),
             py::arg("path"), py::arg("device") = "", py::arg("progress") = py::none(), py::arg("batch_tokens") = 0)
        .def_property_readonly("config", &Encoder::config)
        .def_property_readonly("max_tokens", &Encoder::max_tokens)
        .def_property_readonly("batch_tokens", &Encoder::batch_tokens)
        .def_property_readonly("weight_bytes", &Encoder::weight_bytes)
        .def_property_readonly("device_name", [](const Encoder& e) { return e.device().profile().name; })
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
}

}  // namespace akunu::py_bindings

// The _akunu extension module: exception translation plus one init function per area.
#include "akunu/core/error.h"
#include "bindings.h"

namespace akunu::py_bindings {

PYBIND11_MODULE(_akunu, m) {
    m.doc() = "akunu engine bindings; use the akunu package, not this module";
    // akunu.Error derives from RuntimeError so generic handlers still catch it.
    py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
    DeviceClass device_class = init_device(m);
    init_buffer(m, device_class);
    init_kernels(m);
    init_model(m);
    init_config(m);
    init_tokenizer(m);
    init_engine(m);
    init_encoder(m);
    init_audio(m);
    init_batch(m);
    init_whisper(m);
}

}  // namespace akunu::py_bindings

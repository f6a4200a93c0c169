// Shared pieces of the _akunu module: the per-area init functions and the Python-side buffer
// handle. The bindings convert types only; behaviour lives in cpp/akunu or python/akunu.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <optional>
#include <string>

#include <memory>
#include <vector>

#include "akunu/vulkan/buffer.h"
#include "akunu/vulkan/dispatch.h"
#include "akunu/formats/dtype.h"
#include "akunu/engine/memory_plan.h"
#include "akunu/engine/plan.h"
#include "akunu/engine/profile.h"

namespace akunu::py_bindings {

namespace py = pybind11;

// A Buffer as Python holds it: the engine buffer plus the element type and shape its NumPy
// view takes by default, and a count of live views so that free() cannot pull memory out from
// under an array. The Buffer's owner (Buffer::set_owner) is this object, so that a CommandList
// that records it keeps it alive.
struct PyBuffer : std::enable_shared_from_this<PyBuffer> {
    Buffer buffer;
    DType dtype = DType::kU8;
    std::vector<size_t> shape;  // empty: [size / itemsize]
    int live_views = 0;
};

// The NumPy array of `buffer` (one helper for every dtype): a zero-copy view whose base is
// `owner` (which must keep the buffer alive) when the memory is host-visible and no copy is
// asked for, otherwise a copy read back from the device (Buffer::read: through the staging area
// where mapped memory reads uncached, a discrete GPU's). An empty shape means the whole buffer
// as a 1-D array.
py::array buffer_view(const Buffer& buffer, DType dtype, std::vector<size_t> shape, py::object owner, size_t offset = 0,
                      bool copy = false);

// buffer_view for a Python Buffer; the view counts toward its live_views.
py::array numpy_view(const std::shared_ptr<PyBuffer>& self, DType dtype, std::vector<size_t> shape);

// A loader's progress(stage, done, total) callback that calls the Python `progress` under the
// GIL; empty when progress is None.
inline std::function<void(const std::string&, size_t, size_t)> progress_callback(py::object progress) {
    if (progress.is_none()) return {};
    return [progress](const std::string& stage, size_t done, size_t total) {
        py::gil_scoped_acquire gil;
        progress(stage, done, total);
    };
}

// Tuning settings as Python passes them: None, "key=value,..." or a dict whose values are
// bools, whole numbers, None ("auto") or strings; returned as "key=value,..." (core/tuning.h).
inline std::string tuning_text(const py::object& tuning) {
    if (tuning.is_none()) return "";
    if (py::isinstance<py::str>(tuning)) return tuning.cast<std::string>();
    if (!py::isinstance<py::dict>(tuning))
        throw py::type_error("tuning must be a dict, a \"key=value,...\" string or None");
    std::string out;
    for (const auto& [key, value] : tuning.cast<py::dict>()) {
        std::string v = value.is_none()                    ? "auto"
                        : py::isinstance<py::bool_>(value) ? (value.cast<bool>() ? "1" : "0")
                                                           : py::str(value).cast<std::string>();
        out += (out.empty() ? "" : ",") + py::str(key).cast<std::string>() + "=" + v;
    }
    return out;
}

// A pass's plan (engine/plan.h) as a Python dict: pass-wide choices and one dict per layer.
py::dict plan_dict(const DecodePlan& plan);

// A dispatch table as Python rows: {label, kernel, groups, bindings: [(size, offset, range)]}.
py::list dispatch_rows(const DispatchTable& table);
// A profile as Python gets it: [{label, kernel, ms, bytes_bound}], bytes_bound counting each
// distinct bound range once.
py::list profile_rows(const std::vector<ProfileRow>& rows);

// Device::kernel_statistics() as Python rows: {kernel, spec, statistics: {name: value}}.
py::list kernel_statistics_rows(const Device& device);

// Each layer's KV-cache layout ("full", "ring", "blocks"), as planned.
std::vector<std::string> kv_layer_rows(const MemoryPlan& plan);

using DeviceClass = py::class_<Device, std::shared_ptr<Device>>;

DeviceClass init_device(py::module_& m);
void init_buffer(py::module_& m, DeviceClass& device_class);  // adds Device.allocate/empty/upload
void init_kernels(py::module_& m);
void init_model(py::module_& m);
void init_config(py::module_& m);
void init_tokenizer(py::module_& m);
void init_engine(py::module_& m);
void init_encoder(py::module_& m);
void init_audio(py::module_& m);
void init_batch(py::module_& m);
void init_whisper(py::module_& m);

}  // namespace akunu::py_bindings

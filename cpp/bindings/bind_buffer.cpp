// Python view of Buffer: allocation, transfers and NumPy arrays over device memory.
#include <cstring>

#include "akunu/core/error.h"
#include "bindings.h"

namespace akunu::py_bindings {

static size_t element_count(const std::vector<size_t>& shape) {
    size_t n = 1;
    for (size_t s : shape) n *= s;
    return n;
}

static Residency parse_residency(bool host_visible) { return host_visible ? Residency::kAuto : Residency::kDeviceOnly; }

py::array buffer_view(const Buffer& b, DType dtype, std::vector<size_t> shape, py::object owner, size_t offset,
                      bool copy) {
    AKUNU_CHECK(b, "this buffer has been freed");
    const DTypeTraits& t = dtype_traits(dtype);
    AKUNU_CHECK(offset <= b.size(), "view offset past the end of the buffer");
    if (shape.empty()) {
        AKUNU_CHECK((b.size() - offset) % t.bytes == 0, "a buffer of " + std::to_string(b.size()) +
                                                            " bytes is not a whole number of " + t.name +
                                                            " elements; give a shape");
        shape = {(b.size() - offset) / t.bytes};
    }
    const size_t bytes = element_count(shape) * t.bytes;
    AKUNU_CHECK(bytes <= b.size() - offset, "a view of " + std::to_string(bytes) +
                                                " bytes does not fit in a buffer of " + std::to_string(b.size()) +
                                                " bytes");
    std::vector<py::ssize_t> dims(shape.begin(), shape.end()), strides(shape.size());
    py::ssize_t stride = py::ssize_t(t.bytes);
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        stride *= dims[i];
    }
    const py::dtype np_dtype(t.numpy_format);
    if (copy || !b.host_visible()) {  // a copy asked for, or device memory that cannot be mapped
        py::array out(np_dtype, dims, strides);
        b.read(out.mutable_data(), bytes, offset);
        return out;
    }
    return py::array(np_dtype, dims, strides, static_cast<char*>(b.contents()) + offset, owner);
}

py::array numpy_view(const std::shared_ptr<PyBuffer>& self, DType dtype, std::vector<size_t> shape) {
    AKUNU_CHECK(self->buffer, "this buffer has been freed");
    if (!self->buffer.host_visible()) return buffer_view(self->buffer, dtype, std::move(shape), py::none());
    // The capsule is the array's base: it holds the buffer (and so the device) alive and lets
    // free() know that a view still points into the mapping.
    auto* keep = new std::shared_ptr<PyBuffer>(self);
    ++self->live_views;
    py::capsule base(keep, [](void* p) {
        auto* holder = static_cast<std::shared_ptr<PyBuffer>*>(p);
        --(*holder)->live_views;
        delete holder;
    });
    return buffer_view(self->buffer, dtype, std::move(shape), base);
}

void init_buffer(py::module_& m, DeviceClass& device_class) {
    py::class_<PyBuffer, std::shared_ptr<PyBuffer>>(m, "Buffer")
        .def_property_readonly("size", [](const PyBuffer& b) { return b.buffer.size(); })
        .def_property_readonly("host_visible", [](const PyBuffer& b) { return b.buffer.host_visible(); })
        .def_property_readonly("dtype", [](const PyBuffer& b) { return dtype_traits(b.dtype).name; })
        .def_property_readonly("shape",
                               [](const PyBuffer& b) {
                                   if (!b.shape.empty()) return py::tuple(py::cast(b.shape));
                                   return py::tuple(py::make_tuple(b.buffer.size() / dtype_traits(b.dtype).bytes));
                               })
        .def_property_readonly("live_views", [](const PyBuffer& b) { return b.live_views; })
        .def_property_readonly("device",
                               [](const PyBuffer& b) {
                                   AKUNU_CHECK(b.buffer, "this buffer has been freed");
                                   return b.buffer.device_ptr();
                               })
        .def(
            "numpy",
            [](const std::shared_ptr<PyBuffer>& self, py::object dtype, py::object shape) {
                DType dt = dtype.is_none() ? self->dtype : parse_dtype(py::str(dtype));
                std::vector<size_t> sh = shape.is_none() ? (dtype.is_none() ? self->shape : std::vector<size_t>{})
                                                         : shape.cast<std::vector<size_t>>();
                return numpy_view(self, dt, sh);
            },
            py::arg("dtype") = py::none(), py::arg("shape") = py::none())
        .def(
            "write",
            [](PyBuffer& self, py::array data, size_t offset) {
                AKUNU_CHECK(data.flags() & py::array::c_style, "write needs a C-contiguous array");
                self.buffer.write(data.data(), size_t(data.nbytes()), offset);
            },
            py::arg("data"), py::arg("offset") = 0)
        .def(
            "read_bytes",
            [](const PyBuffer& self, size_t bytes, size_t offset) {
                const size_t size = self.buffer.size();  // checked before the result is allocated
                if (offset > size || bytes > size - offset)
                    throw py::value_error("read_bytes: " + std::to_string(bytes) + " bytes at offset " +
                                          std::to_string(offset) + " run past the buffer's " + std::to_string(size) +
                                          " bytes");
                std::string out(bytes, '\0');
                self.buffer.read(out.data(), bytes, offset);
                return py::bytes(out);
            },
            py::arg("nbytes"), py::arg("offset") = 0)
        .def(
            "free",
            [](PyBuffer& self) {
                AKUNU_CHECK(self.live_views == 0,
                            std::to_string(self.live_views) +
                                " NumPy view(s) still point into this buffer; delete them before free()");
                // Owners other than Python's own reference and the views': command lists that
                // recorded the buffer (CommandList::hold).
                const long lists = self.weak_from_this().use_count() - 1 - self.live_views;
                AKUNU_CHECK(lists <= 0, std::to_string(lists) +
                                            " CommandList(s) recorded this buffer; call begin() on them "
                                            "or delete them before free()");
                self.buffer.free();
            },
            "Releases the memory now. Refused while NumPy views point into it or a CommandList holds it (a "
            "list holds every buffer it records until its next begin() or its deletion).");

    device_class.def(
        "allocate",
        [](const std::shared_ptr<Device>& device, size_t bytes, bool host_visible) {
            auto b = std::make_shared<PyBuffer>();
            b->buffer = Buffer::allocate(device, bytes, parse_residency(host_visible));
            b->buffer.set_owner(b);
            return b;
        },
        py::arg("nbytes"), py::arg("host_visible") = true,
        "Allocates `nbytes`. host_visible=False keeps the memory unmapped (transfers are staged).");
    device_class.def(
        "empty",
        [](const std::shared_ptr<Device>& device, std::vector<size_t> shape, const std::string& dtype,
           bool host_visible) {
            auto b = std::make_shared<PyBuffer>();
            b->dtype = parse_dtype(dtype);
            b->shape = shape;
            b->buffer = Buffer::allocate(device, element_count(shape) * dtype_traits(b->dtype).bytes,
                                         parse_residency(host_visible));
            b->buffer.set_owner(b);
            return b;
        },
        py::arg("shape"), py::arg("dtype") = "f32", py::arg("host_visible") = true,
        "Allocates an array-shaped buffer; its numpy() view has this shape and dtype.");
}

}  // namespace akunu::py_bindings

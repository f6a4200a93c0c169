// Python view of model files: metadata, tensor listings and tensors as NumPy arrays.
#include "akunu/formats/tiles.h"
#include "akunu/core/error.h"
#include "akunu/formats/mel_filters.h"
#include "akunu/formats/model_files.h"
#include "akunu/core/utf8.h"
#include "bindings.h"

namespace akunu::py_bindings {

static py::object to_python(const GgufValue& v) {
    if (auto* u = std::get_if<uint64_t>(&v.value)) return py::int_(*u);
    if (auto* i = std::get_if<int64_t>(&v.value)) return py::int_(*i);
    if (auto* d = std::get_if<double>(&v.value)) return py::float_(*d);
    if (auto* b = std::get_if<bool>(&v.value)) return py::bool_(*b);
    if (auto* s = std::get_if<std::string>(&v.value)) {
        if (is_valid_utf8(*s)) return py::str(*s);
        return py::bytes(*s);  // GGUF strings are meant to be UTF-8; show what is there
    }
    const auto& arr = std::get<GgufArray>(v.value);
    py::list out(arr.items.size());
    for (size_t i = 0; i < arr.items.size(); ++i) out[i] = to_python(arr.items[i]);
    return out;
}

static py::dict tensor_dict(const TensorInfo& t) {
    py::dict d;
    d["name"] = t.name;
    d["dtype"] = t.type->name;
    d["shape"] = py::tuple(py::cast(t.shape));
    d["bytes"] = t.bytes;
    d["file"] = t.file;
    return d;
}

// A read-only copy of a tensor's bytes: a copy, not a view of the memory map, so that a file cut
// after open() raises akunu.Error on this call and never SIGBUS later (mapped_file.h).
static py::array raw_copy(const ModelFiles& model, const TensorInfo& t) {
    std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
    py::dtype dtype(t.type->numpy_dtype);
    if (t.type->block_size > 1) {  // block formats: [..., bytes per row] of uint8
        const uint64_t row_elems = t.shape.back();
        shape.back() = py::ssize_t(row_elems / t.type->block_size * t.type->block_bytes);
    }
    py::array a(dtype, shape);
    {
        py::gil_scoped_release release;
        model.read_tensor(t, a.mutable_data());
    }
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return a;
}

// A mel filter bank as NumPy float32 [n_mels, 201].
static py::array_t<float> mel_array(const std::vector<float>& bank) {
    const py::ssize_t bins = kWhisperFftBins;
    py::array_t<float> out({py::ssize_t(bank.size()) / bins, bins});
    std::copy(bank.begin(), bank.end(), out.mutable_data());
    return out;
}

void init_model(py::module_& m) {
    py::class_<ModelFiles, std::shared_ptr<ModelFiles>>(m, "ModelFiles")
        .def_property_readonly("format", [](const ModelFiles& f) { return model_format_name(f.format()); })
        .def_property_readonly("path", &ModelFiles::path)
        .def_property_readonly("metadata",
                               [](const ModelFiles& f) {
                                   py::dict d;
                                   if (const GgufFile* g = f.gguf()) {
                                       for (const auto& [k, v] : g->metadata()) d[py::str(k)] = to_python(v);
                                   } else if (const nlohmann::json* c = f.hf_config()) {
                                       d = py::module_::import("json").attr("loads")(c->dump());
                                   }
                                   return d;
                               })
        .def_property_readonly(
            "mel_filters", [](const ModelFiles& f) { return mel_array(f.mel_filters()); },
            "A Whisper model's mel filter bank, float32 [n_mels, 201]: the one a GGML file "
            "embeds, else Slaney filters as transformers' mel_filter_bank computes them.")
        .def_property_readonly("gguf_version", [](const ModelFiles& f) { return f.gguf() ? f.gguf()->version() : 0u; })
        .def_property_readonly("tensors",
                               [](const ModelFiles& f) {
                                   py::list out;
                                   for (const auto& t : f.tensors()) out.append(tensor_dict(t));
                                   return out;
                               })
        .def(
            "tensor",
            [](const std::shared_ptr<ModelFiles>& f, const std::string& name, bool dequantize_to_f32) -> py::array {
                const TensorInfo* t = f->find(name);
                if (!t) throw py::key_error("no tensor named '" + name + "' in " + f->path());
                if (!dequantize_to_f32) return raw_copy(*f, *t);
                py::array_t<float> out(std::vector<py::ssize_t>(t->shape.begin(), t->shape.end()));
                {
                    py::gil_scoped_release release;
                    std::vector<uint8_t> raw(t->bytes);
                    f->read_tensor(*t, raw.data());
                    dequantize(*t->type, raw.data(), out.mutable_data(), t->n_elements, t->name);
                }
                return out;
            },
            py::arg("name"), py::arg("dequantize") = false,
            "The tensor as NumPy: a read-only copy of its raw data (block formats as uint8 rows), or "
            "float32 when dequantize=True. A copy, not a view of the file: a file rewritten in place "
            "after open() raises akunu.Error here instead of crashing the process.");

    m.def(
        "dequantize",
        [](py::array_t<uint8_t, py::array::c_style> raw, const std::string& type_name) {
            const TensorTypeTraits* t = find_type_by_name(type_name);
            if (!t) throw Error("unknown tensor type '" + type_name + "'");
            AKUNU_CHECK(size_t(raw.size()) % t->block_bytes == 0,
                        std::to_string(raw.size()) + " bytes is not a whole number of " + t->name + " blocks (" +
                            std::to_string(t->block_bytes) + " bytes each)");
            const uint64_t n = uint64_t(raw.size()) / t->block_bytes * t->block_size;
            py::array_t<float> out{py::ssize_t(n)};
            dequantize(*t, raw.data(), out.mutable_data(), n, "(buffer)");
            return out;
        },
        py::arg("raw"), py::arg("type"), "Dequantizes raw blocks of a ggml type (\"Q4_K\", ...) to float32.");
    m.def(
        "pack_tiles",
        [](py::array_t<uint8_t, py::array::c_style> raw, const std::string& tiled_name, size_t rows, size_t k) {
            const TensorTypeTraits* t = find_type_by_name(tiled_name);
            const cpu::TileLayout* l = t ? cpu::tile_layout(t->type) : nullptr;
            AKUNU_CHECK(l, "'" + tiled_name + "' is not a tile-major type (Q4_0_T32, F16_T32, ...)");
            const TensorTypeTraits& base = type_traits(l->base);
            AKUNU_CHECK(rows > 0 && k % base.block_size == 0,
                        "pack_tiles: k = " + std::to_string(k) + " is not a whole number of " + base.name + " blocks");
            AKUNU_CHECK(size_t(raw.size()) == tensor_bytes(base, uint64_t(rows) * k, "(buffer)"),
                        "pack_tiles: " + std::to_string(raw.size()) + " bytes is not a [" + std::to_string(rows) +
                            ", " + std::to_string(k) + "] matrix of " + base.name);
            py::array_t<uint8_t> out{py::ssize_t(cpu::tiled_bytes(*l, rows, k))};
            cpu::pack_tiles(*l, raw.data(), rows, k, out.mutable_data());
            return out;
        },
        py::arg("raw"), py::arg("type"), py::arg("rows"), py::arg("k"),
        "A [rows, k] matrix of raw blocks (or float bits) regrouped into the tile-major type `type` "
        "(\"Q4_0_T32\", ...): the layout the engine uploads its projection matrices in.");
    m.def("tensor_types", [] {
        py::list out;
        for (uint32_t id = 0; id < 128; ++id)
            if (const TensorTypeTraits* t = find_type(id)) {
                py::dict d;
                d["id"] = id;
                d["name"] = t->name;
                d["block_size"] = t->block_size;
                d["block_bytes"] = t->block_bytes;
                d["numpy_dtype"] = t->numpy_dtype;
                d["dequantize"] = t->dequant != nullptr;
                out.append(d);
            }
        return out;
    });
    m.def(
        "whisper_mel_filters", [](int n_mels) { return mel_array(whisper_mel_filters(n_mels)); }, py::arg("n_mels"),
        "Whisper's Slaney mel filter bank, float32 [n_mels, 201], as transformers' mel_filter_bank computes it.");
    m.def("open_model", &ModelFiles::open, py::arg("path"),
          "Opens a model (GGUF, safetensors file/dir/index, MLX dir, config.json, or Whisper as a "
          "CTranslate2 model.bin/dir or whisper.cpp GGML file); reads headers only.");
}

}  // namespace akunu::py_bindings

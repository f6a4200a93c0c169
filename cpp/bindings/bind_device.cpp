// Python view of device enumeration, profiles, devices and the validation record.
#include "akunu/vulkan/device.h"
#include "akunu/core/error.h"
#include "akunu/vulkan/instance.h"
#include "bindings.h"

namespace akunu::py_bindings {

py::list kernel_statistics_rows(const Device& device) {
    py::list rows;
    for (const KernelStatistics& k : device.kernel_statistics()) {
        py::dict stats, row;
        for (const KernelStatistic& s : k.statistics) stats[py::str(s.name)] = s.value;
        row["kernel"] = k.kernel;
        row["spec"] = k.spec;
        row["statistics"] = stats;
        py::list code;
        for (const KernelCode& c : k.code)
            code.append(py::dict(py::arg("name") = c.name, py::arg("description") = c.description,
                                 py::arg("text") = c.text, py::arg("binary_bytes") = c.binary_bytes));
        row["code"] = code;
        rows.append(row);
    }
    return rows;
}

static const char* backend_name(Backend b) { return b == Backend::kCpu ? "cpu" : "vulkan"; }

static py::dict profile_dict(const DeviceProfile& p) {
    py::list heaps;
    for (const auto& h : p.heaps) {
        py::dict d;
        d["size_bytes"] = h.size_bytes;
        d["device_local"] = h.device_local;
        d["host_visible"] = h.host_visible;
        heaps.append(d);
    }
    py::dict d;
    d["name"] = p.name;
    d["type"] = device_type_name(p.type);
    d["vendor"] = p.vendor;
    d["vendor_id"] = p.vendor_id;
    d["device_id"] = p.device_id;
    d["driver"] = p.driver;
    d["api_version"] = std::to_string(VK_API_VERSION_MAJOR(p.api_version)) + "." +
                       std::to_string(VK_API_VERSION_MINOR(p.api_version)) + "." +
                       std::to_string(VK_API_VERSION_PATCH(p.api_version));
    d["subgroup_size"] = p.subgroup_size;
    d["subgroup_arithmetic"] = p.subgroup_arithmetic;
    d["subgroup_shuffle"] = p.subgroup_shuffle;
    d["subgroup_size_control"] = p.subgroup_size_control;
    d["shared_memory_bytes"] = p.shared_memory_bytes;
    d["max_workgroup_invocations"] = p.max_workgroup_invocations;
    d["max_workgroup_count_x"] = p.max_workgroup_count_x;
    d["max_storage_buffer_range"] = p.max_storage_buffer_range;
    d["max_push_constants_bytes"] = p.max_push_constants_bytes;
    d["min_storage_buffer_offset_alignment"] = p.min_storage_buffer_offset_alignment;
    d["max_memory_allocation_bytes"] = p.max_memory_allocation_bytes;
    d["fp16"] = p.fp16;
    d["int8"] = p.int8;
    d["integer_dot_product"] = p.integer_dot_product;
    d["cooperative_matrix"] = p.cooperative_matrix;
    d["cooperative_matrix2"] = p.cooperative_matrix2;
    d["gemm_coopmat"] = p.gemm_coopmat;
    d["gemm_coopmat2"] = p.gemm_coopmat2;
    d["gemm_short_tiles"] = p.gemm_short_rows > 0;
    d["gemm_short_rows"] = p.gemm_short_rows;
    d["gemm_tile_rows"] = p.gemm_tile_rows;
    d["indirect_counts"] = p.indirect_counts;
    d["prefill_dequant_rows"] = p.prefill_dequant_rows;
    d["gemv_int_dot"] = p.gemv_int_dot;
    // Which matrices load in tiles: "none", "blocks32" (Q8_0/Q4_0/Q4_1 as *_T32V), "all" (*_T32)
    // or "all_but_q5" (*_T32, Q5_0/Q5_1 in rows: tuning q5_tiles=0).
    d["weight_tiles"] = p.weight_tiles == WeightTiles::kAll        ? "all"
                        : p.weight_tiles == WeightTiles::kAllButQ5 ? "all_but_q5"
                        : p.weight_tiles == WeightTiles::kBlocks32 ? "blocks32"
                                                                   : "none";
    d["gemv_handoff"] = p.gemv_handoff;
    d["norm_forward"] = p.norm_forward;
    d["spin_wait"] = p.spin_wait;
    d["bfloat16"] = p.bfloat16;
    d["push_descriptors"] = p.push_descriptors;
    d["kernel_statistics"] = p.kernel_statistics;
    d["timestamps"] = p.timestamps;
    d["int8_activations"] = p.int8_activations;
    d["float_x"] = p.float_x;
    d["gemm_bf16"] = p.gemm_bf16;
    d["compute_units"] = p.compute_units;
    d["timestamp_period_ns"] = p.timestamp_period_ns;
    d["heaps"] = heaps;
    d["device_local_bytes"] = p.device_local_bytes;
    d["available_bytes"] = p.available_bytes;  // now: VK_EXT_memory_budget, MemAvailable (0: unknown)
    d["host_visible_device_bytes"] = p.host_visible_device_bytes;
    d["unified_memory"] = p.unified_memory;
    d["description"] = p.describe();
    d["tuning"] = p.tuning.describe();  // the keys that differ from the defaults, "key=value,..."
    return d;
}

// An entry of devices(): the profile plus where it sits in the list and what kind it is.
static py::dict info_dict(const DeviceInfo& info) {
    py::dict d = profile_dict(info.profile);
    d["index"] = info.index;
    d["backend"] = backend_name(info.backend);
    d["kind"] = device_kind(info.backend, info.profile);
    return d;
}

DeviceClass init_device(py::module_& m) {
    m.def(
        "devices",
        [] {
            py::list out;
            for (const auto& info : list_devices()) out.append(info_dict(info));
            return out;
        },
        "Every usable Vulkan device, most preferred first, then akunu's CPU backend (always the last\n"
        "entry), as dicts of the profile plus 'index' (what Device(), Model(device=...) and\n"
        "AKUNU_DEVICE take), 'backend' ('vulkan' or 'cpu') and 'kind' (\"discrete GPU (Vulkan)\",\n"
        "\"lavapipe (Vulkan on CPU)\", \"akunu CPU backend\", ...). find_device() says which one is the default.");
    m.def(
        "find_device",
        [](const std::string& selector) {
            const DeviceInfo info = find_device(selector);
            py::dict d = info_dict(info);
            d["reason"] = info.reason;
            return d;
        },
        py::arg("selector") = "",
        "The entry of devices() that Device(selector) would open, without opening it, plus 'reason': why\n"
        "it is chosen. '' gives the default: AKUNU_DEVICE if set, else the most preferred Vulkan GPU,\n"
        "else akunu's CPU backend (Vulkan drivers that run on the CPU, such as lavapipe, are chosen only\n"
        "by name: they run the same kernels far slower than the CPU backend).");

    DeviceClass device_class(m, "Device");
    device_class
        .def(py::init([](const std::string& selector, const py::object& tuning) {
                 return Device::create(selector, tuning_text(tuning));
             }),
             py::arg("selector") = "", py::arg("tuning") = py::none(),
             "selector: an index into devices(), part of a device name, 'vulkan' or 'cpu'; '' means AKUNU_DEVICE or "
             "the default (find_device()).\n"
             "tuning: a dict or \"key=value,...\" over AKUNU_TUNE (docs/configuration.md)")
        .def(py::init([](int index, const py::object& tuning) {
                 AKUNU_CHECK(index >= 0, "device index must be >= 0, got " + std::to_string(index));
                 return Device::create(std::to_string(index), tuning_text(tuning));
             }),
             py::arg("index"), py::arg("tuning") = py::none())
        .def(
            "tuning_value",
            [](const Device& d, const std::string& key) { return tuning_value(d.profile().tuning, key); },
            py::arg("key"), "The value of a tuning key on this device, as AKUNU_TUNE spells it")
        .def_property_readonly("profile", [](const Device& d) { return profile_dict(d.profile()); })
        .def_property_readonly("name", [](const Device& d) { return d.profile().name; })
        .def("__str__", [](const Device& d) { return d.profile().name; })
        .def("__repr__",
             [](const Device& d) {
                 return "Device('" + d.profile().name + "', backend='" + backend_name(d.backend()) + "')";
             })
        .def_property_readonly(
            "backend", [](const Device& d) { return backend_name(d.backend()); },
            "'vulkan', or 'cpu' for akunu's native CPU backend")
        .def_property_readonly(
            "kind", [](const Device& d) { return device_kind(d.backend(), d.profile()); },
            "What kind of device it is, as devices() names it: \"lavapipe (Vulkan on CPU)\", \"akunu CPU backend\", "
            "...")
        .def_property_readonly("allocated_bytes", &Device::allocated_bytes)
        .def_property_readonly("live_buffers", &Device::live_buffers)
        .def_property_readonly("allocations_total", &Device::allocations_total)
        .def_property_readonly("staging_bytes", &Device::staging_bytes,
                               "The staging area that staged reads and writes go through in pieces "
                               "(Device::reserve_staging: planned at load by the models on the device, at least "
                               "tuning staging_kib; 0 on the CPU backend)")
        .def("describe", [](const Device& d) { return d.profile().describe(); })
        .def("kernel_statistics", &kernel_statistics_rows,
             "What the driver compiled each kernel made so far to: [{kernel, spec, statistics: {name: value}}] "
             "(registers, shared memory, spills; VK_KHR_pipeline_executable_properties), [] where the device "
             "does not report it (profile['kernel_statistics']).");

    m.def(
        "tuning_keys",
        [] {
            py::list out;
            const Tuning defaults;
            for (const TuningKey& k : tuning_keys()) {
                py::dict d;
                d["name"] = k.name;
                d["kind"] = k.kind;
                d["default"] = tuning_value(defaults, k.name);
                d["meaning"] = k.meaning;
                out.append(d);
            }
            return out;
        },
        "Every tuning key: [{name, kind, default, meaning}] (core/tuning.h; docs/configuration.md)");
    m.def(
        "feature_variables",
        [] {
            py::list out;
            for (const FeatureVariable& v : feature_variables()) {
                py::dict d;
                d["name"] = v.name;
                d["meaning"] = v.meaning;
                out.append(d);
            }
            return out;
        },
        "The environment variables the engine reads beside AKUNU_TUNE: [{name, meaning}]");
    m.def("validation_messages", &validation_messages,
          "Validation-layer warnings and errors recorded since the last clear (AKUNU_VALIDATION=1).");
    m.def("clear_validation_messages", &clear_validation_messages);
    m.def("validation_enabled", [] { return Instance::get()->validation_enabled(); });
    return device_class;
}

}  // namespace akunu::py_bindings

// Python view of Whisper's audio front end: the log-mel spectrogram on a device.
#include "akunu/core/error.h"
#include "akunu/engine/whisper_mel.h"
#include "akunu/vulkan/device.h"
#include "bindings.h"

namespace akunu::py_bindings {

void init_audio(py::module_& m) {
    m.def(
        "whisper_log_mel",
        [](py::array_t<float, py::array::c_style | py::array::forcecast> samples,
           py::array_t<float, py::array::c_style | py::array::forcecast> filters, const py::object& device) {
            AKUNU_CHECK(samples.ndim() == 1, "whisper_log_mel: samples must be 1-D float32 [n]");
            AKUNU_CHECK(filters.ndim() == 2 && filters.shape(1) == py::ssize_t(WhisperMel::kBins),
                        "whisper_log_mel: filters must be float32 [n_mels, 201]");
            std::shared_ptr<Device> dev = py::isinstance<Device>(device)
                                              ? device.cast<std::shared_ptr<Device>>()
                                              : Device::create(device.cast<std::string>(), "");
            const size_t n = size_t(samples.size());
            const std::vector<float> bank(filters.data(), filters.data() + filters.size());
            py::array_t<float> out({py::ssize_t(filters.shape(0)), py::ssize_t(WhisperMel::frames(n))});
            {
                py::gil_scoped_release release;
                WhisperMel mel(dev, bank, std::max<size_t>(n, WhisperMel::kBins));
                mel.run(samples.data(), n, out.mutable_data());
            }
            return out;
        },
        py::arg("samples"), py::arg("filters"), py::arg("device") = "",
        "Whisper's log-mel spectrogram of float32 16-kHz samples [n] on a device (a Device, or a selector as "
        "Device() takes): float32 [n_mels, n // 160], as transformers' WhisperFeatureExtractor computes it "
        "(pad the clip to 30 s first for the encoder).");
}

}  // namespace akunu::py_bindings

// WhisperMel: tables, buffers and the recorded command list (whisper_mel.h).
#include "akunu/engine/whisper_mel.h"

#include <cmath>
#include <string>

#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "akunu/vulkan/device.h"
#include "params.h"

namespace akunu {

namespace {

// [2 * 201, 400]: row f holds cos(2 pi f n / 400) w[n], row 201 + f the sine, with w the
// periodic Hann window (torch.hann_window, transformers' window_function(400, "hann")).
std::vector<float> dft_table() {
    const size_t n_fft = WhisperMel::kFft, bins = WhisperMel::kBins;
    std::vector<float> t(2 * bins * n_fft);
    for (size_t f = 0; f < bins; ++f)
        for (size_t n = 0; n < n_fft; ++n) {
            const double w = 0.5 - 0.5 * std::cos(2.0 * M_PI * double(n) / double(n_fft));
            const double angle = 2.0 * M_PI * double((f * n) % n_fft) / double(n_fft);
            t[f * n_fft + n] = float(w * std::cos(angle));
            t[(bins + f) * n_fft + n] = float(w * std::sin(angle));
        }
    return t;
}

}  // namespace

WhisperMel::WhisperMel(std::shared_ptr<Device> device, const std::vector<float>& filters, size_t max_samples)
    : device_(std::move(device)), n_mels_(filters.size() / kBins), max_samples_(max_samples) {
    AKUNU_CHECK(
        n_mels_ > 0 && filters.size() == n_mels_ * kBins,
        "WhisperMel: the filter bank holds " + std::to_string(filters.size()) + " values, expected n_mels x 201");
    AKUNU_CHECK(max_samples >= kBins && max_samples <= (size_t(1) << 28),
                "WhisperMel: max_samples " + std::to_string(max_samples) + " is outside [201, 2^28]");
    const size_t frames = max_samples / kHop;
    auto alloc = [&](size_t bytes) { return Buffer::allocate(device_, bytes); };
    samples_ = alloc(max_samples * 4);
    const std::vector<float> dft = dft_table();
    dft_ = Buffer::allocate(device_, dft.data(), dft.size() * 4);
    filters_ = Buffer::allocate(device_, filters.data(), filters.size() * 4);
    power_ = alloc(frames * kBins * 4);
    out_ = alloc(n_mels_ * frames * 4);
    state_ = alloc(sizeof(MelState));

    table_ = std::make_unique<DispatchTable>(*device_);
    table_->set_label("log-mel");
    kernels::log_mel(*table_, samples_, dft_, filters_, power_, out_, state_, {kFft, kHop, n_mels_, max_samples});
    cl_ = std::make_unique<CommandList>(device_, 0);
    cl_->begin();
    table_->record(*cl_);
    cl_->end();
}

void WhisperMel::run(const float* samples, size_t n, float* out) {
    AKUNU_CHECK(n >= kBins && n <= max_samples_, "log-mel: " + std::to_string(n) +
                                                     " samples; this spectrogram takes 201 to " +
                                                     std::to_string(max_samples_) + " (pad short clips)");
    for (size_t i = 0; i < n; ++i)
        AKUNU_CHECK(std::isfinite(samples[i]), "log-mel: sample " + std::to_string(i) + " is not finite");
    samples_.write(samples, n * 4);
    const MelState st{uint32_t(n), uint32_t(frames(n))};
    state_.write(&st, sizeof st);
    cl_->submit_and_wait();
    out_.read(out, n_mels_ * frames(n) * 4);
}

}  // namespace akunu

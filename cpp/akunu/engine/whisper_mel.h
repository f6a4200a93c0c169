// WhisperMel: Whisper's log-mel spectrogram on a device, as transformers' WhisperFeatureExtractor
// computes it: frames of 400 samples every 160, centred (reflect-padded at both ends),
// Hann-windowed; the power spectrum (a product with a cos/sin table), the mel filter bank,
// log10 clamped at 1e-10, the floor at the maximum - 8, then (x + 4) / 4. The last STFT frame
// is dropped as Whisper drops it, so n samples give n / 160 frames; the caller pads a clip
// (to 30 s, 480,000 samples, for the encoder) before calling.
//
// Three kernels (kernels.h log_mel) recorded once into one command list at construction; a
// run writes the samples and two words of state, replays it and reads the result back.
#pragma once

#include <memory>
#include <vector>

#include "akunu/vulkan/buffer.h"
#include "akunu/vulkan/command_list.h"
#include "akunu/vulkan/dispatch.h"

namespace akunu {

class WhisperMel {
public:
    static constexpr size_t kFft = 400, kHop = 160, kBins = kFft / 2 + 1;

    // filters: [n_mels, 201] f32 (ModelFiles::mel_filters); max_samples: the most one run takes.
    WhisperMel(std::shared_ptr<Device> device, const std::vector<float>& filters, size_t max_samples);

    size_t n_mels() const { return n_mels_; }
    size_t max_samples() const { return max_samples_; }
    static size_t frames(size_t n_samples) { return n_samples / kHop; }
    // out: f32 [n_mels, n / 160], row-major. Throws akunu::Error, running nothing, when n is
    // past max_samples or under 201 (reflect padding needs more samples than half a frame), or
    // a sample is not finite.
    void run(const float* samples, size_t n, float* out);

private:
    std::shared_ptr<Device> device_;
    size_t n_mels_, max_samples_;
    Buffer samples_;  // [max_samples] f32
    Buffer dft_;  // [2 * 201, 400] f32: Hann-windowed cos rows, then sin rows
    Buffer filters_;  // [n_mels, 201] f32
    Buffer power_;  // [max_samples / 160, 201] f32
    Buffer out_;  // [n_mels, max_samples / 160] f32 (n_mels x n_frames used per run)
    Buffer state_;  // MelState
    std::unique_ptr<DispatchTable> table_;
    std::unique_ptr<CommandList> cl_;
};

}  // namespace akunu

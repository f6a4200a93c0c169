// CPU kernels of Whisper's log-mel spectrogram: mel_power, mel_log and mel_norm, each matching
// its .comp file (shaders/) over the same workgroups: a frame, a frame, the whole spectrogram.
#include <algorithm>
#include <cmath>
#include <limits>

#include "akunu/vulkan/cpu_kernel.h"
#include "params.h"

namespace akunu::cpu {

namespace {

// One workgroup per frame: the reflect-padded frame times the windowed cos/sin table.
void mel_power(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<MelParams>();
    const auto& state = *a.at<const MelState>(3);
    const float *samples = a.at<const float>(0), *dft = a.at<const float>(1);
    float frame[AKUNU_MEL_MAX_FFT];
    const long n = long(state.n_samples);
    for (size_t t = begin; t < std::min<size_t>(end, std::min(p.max_frames, state.n_frames)); ++t) {
        const long start = long(t * p.hop) - long(p.n_fft / 2);
        for (size_t i = 0; i < p.n_fft; ++i) {
            long s = start + long(i);
            s = s < 0 ? -s : (s >= n ? 2 * (n - 1) - s : s);  // numpy's "reflect" padding
            frame[i] = samples[s];
        }
        float* out = a.at<float>(2) + t * p.n_bins;
        for (size_t f = 0; f < p.n_bins; ++f) {
            const float *c = dft + f * p.n_fft, *s = dft + (p.n_bins + f) * p.n_fft;
            float re = 0.0f, im = 0.0f;
            for (size_t i = 0; i < p.n_fft; ++i) {
                re += frame[i] * c[i];
                im += frame[i] * s[i];
            }
            out[f] = re * re + im * im;
        }
    }
}

// One workgroup per frame: out[m, t] = log10(max(filters[m] . power[t], 1e-10)).
void mel_log(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<MelParams>();
    const auto& state = *a.at<const MelState>(3);
    const float *power = a.at<const float>(0), *filters = a.at<const float>(1);
    float* out = a.at<float>(2);
    const size_t frames = std::min(p.max_frames, state.n_frames);
    for (size_t t = begin; t < std::min(end, frames); ++t)
        for (size_t m = 0; m < p.n_mels; ++m) {
            float acc = 0.0f;
            for (size_t f = 0; f < p.n_bins; ++f) acc += filters[m * p.n_bins + f] * power[t * p.n_bins + f];
            out[m * frames + t] = std::log10(std::max(acc, 1e-10f));
        }
}

// One workgroup: out = (max(out, max(out) - 8) + 4) / 4.
void mel_norm(const CpuArgs& a, size_t begin, size_t) {
    if (begin > 0) return;
    const auto& p = a.p<MelParams>();
    const auto& state = *a.at<const MelState>(1);
    float* out = a.at<float>(0);
    const size_t n = size_t(p.n_mels) * std::min(p.max_frames, state.n_frames);
    float m = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < n; ++i) m = std::max(m, out[i]);
    for (size_t i = 0; i < n; ++i) out[i] = (std::max(out[i], m - 8.0f) + 4.0f) / 4.0f;
}

}  // namespace

void register_audio(void (*add_row)(const KernelRow&)) {
    add_row({"mel_power", {mel_power, 0, 1}});
    add_row({"mel_log", {mel_log, 0, 1}});
    add_row({"mel_norm", {mel_norm, 0, 1}});
}

}  // namespace akunu::cpu

// CPU kernels of Whisper's log-mel spectrogram: mel_power, mel_log and mel_norm, each matching
// its .comp file (shaders/) over the same workgroups: a frame, a frame, the whole spectrogram.
// The products run through vec_math's vectorized scores loop, over tables transposed once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "akunu/cpu/vec_math.h"
#include "akunu/vulkan/cpu_kernel.h"
#include "params.h"

namespace akunu::cpu {

namespace {

// rows x cols matrix m transposed into t (cols x rows), kept per thread while the same
// matrix comes again: the vectorized products read their table column-major.
const float* transposed(const float* m, size_t rows, size_t cols, std::vector<float>& t, const float*& cached) {
    if (cached != m || t.size() != rows * cols) {
        t.resize(rows * cols);
        for (size_t r = 0; r < rows; ++r)
            for (size_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
        cached = m;
    }
    return t.data();
}

// One workgroup per frame: the reflect-padded frame times the windowed cos/sin table.
void mel_power(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<MelParams>();
    const auto& state = *a.at<const MelState>(3);
    const float* samples = a.at<const float>(0);
    const size_t bins2 = 2 * size_t(p.n_bins);
    thread_local std::vector<float> table;  // [n_fft, 2 n_bins]
    thread_local const float* table_of = nullptr;
    const float* dft = transposed(a.at<const float>(1), bins2, p.n_fft, table, table_of);
    const VecMath& vm = vec_math();
    float frame[AKUNU_MEL_MAX_FFT], spec[2 * (AKUNU_MEL_MAX_FFT / 2 + 1)];
    const long n = long(state.n_samples);
    for (size_t t = begin; t < std::min<size_t>(end, std::min(p.max_frames, state.n_frames)); ++t) {
        const long start = long(t * p.hop) - long(p.n_fft / 2);
        for (size_t i = 0; i < p.n_fft; ++i) {
            long s = start + long(i);
            s = s < 0 ? -s : (s >= n ? 2 * (n - 1) - s : s);  // numpy's "reflect" padding
            frame[i] = samples[s];
        }
        vm.scores(frame, dft, bins2, p.n_fft, bins2, spec);
        float* out = a.at<float>(2) + t * p.n_bins;
        for (size_t f = 0; f < p.n_bins; ++f) out[f] = spec[f] * spec[f] + spec[p.n_bins + f] * spec[p.n_bins + f];
    }
}

// One workgroup per frame: out[m, t] = log10(max(filters[m] . power[t], 1e-10)).
void mel_log(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<MelParams>();
    const auto& state = *a.at<const MelState>(3);
    const float* power = a.at<const float>(0);
    thread_local std::vector<float> table;  // [n_bins, n_mels]
    thread_local const float* table_of = nullptr;
    const float* filters = transposed(a.at<const float>(1), p.n_mels, p.n_bins, table, table_of);
    const VecMath& vm = vec_math();
    float* out = a.at<float>(2);
    thread_local std::vector<float> mel;
    mel.resize(p.n_mels);
    const size_t frames = std::min(p.max_frames, state.n_frames);
    for (size_t t = begin; t < std::min(end, frames); ++t) {
        vm.scores(power + t * p.n_bins, filters, p.n_mels, p.n_bins, p.n_mels, mel.data());
        for (size_t m = 0; m < p.n_mels; ++m) out[m * frames + t] = std::log10(std::max(mel[m], 1e-10f));
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

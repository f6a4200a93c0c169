// Slaney-scale triangular filters with Slaney area normalisation (mel_filters.h).
#include "akunu/formats/mel_filters.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "akunu/core/error.h"

namespace akunu {

namespace {

// The Slaney mel scale: linear below 1 kHz, logarithmic above.
constexpr double kMinLogHz = 1000.0, kMinLogMel = 15.0, kLogStep = 27.0 / 1.8562979903656263;  // 27 / ln(6.4)

double hz_to_mel(double hz) {
    return hz < kMinLogHz ? 3.0 * hz / 200.0 : kMinLogMel + std::log(hz / kMinLogHz) * kLogStep;
}
double mel_to_hz(double mel) {
    return mel < kMinLogMel ? 200.0 * mel / 3.0 : kMinLogHz * std::exp((mel - kMinLogMel) / kLogStep);
}

}  // namespace

std::vector<float> whisper_mel_filters(int n_mels) {
    AKUNU_CHECK(n_mels > 0 && n_mels <= 512,
                "mel filter bank: n_mels " + std::to_string(n_mels) + " is outside [1, 512]");
    constexpr double kSampleRate = 16000.0, kMaxHz = 8000.0;
    // n_mels + 2 band edges evenly spaced in mel, in Hz.
    std::vector<double> edges(size_t(n_mels) + 2);
    const double mel_max = hz_to_mel(kMaxHz);
    for (size_t i = 0; i < edges.size(); ++i) edges[i] = mel_to_hz(mel_max * double(i) / double(n_mels + 1));
    std::vector<float> bank(size_t(n_mels) * kWhisperFftBins);
    for (int m = 0; m < n_mels; ++m) {
        const double lo = edges[m], mid = edges[m + 1], hi = edges[m + 2];
        const double norm = 2.0 / (hi - lo);  // Slaney: each triangle has unit area
        for (int f = 0; f < kWhisperFftBins; ++f) {
            const double hz = (kSampleRate / 2) * f / (kWhisperFftBins - 1);
            const double down = (hz - lo) / (mid - lo), up = (hi - hz) / (hi - mid);
            bank[size_t(m) * kWhisperFftBins + f] = float(std::max(0.0, std::min(down, up)) * norm);
        }
    }
    return bank;
}

}  // namespace akunu

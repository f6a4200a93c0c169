// Whisper's mel filter bank, computed as transformers' mel_filter_bank(num_frequency_bins=201,
// num_mel_filters=n_mels, min_frequency=0, max_frequency=8000, sampling_rate=16000,
// norm="slaney", mel_scale="slaney") computes it (and as OpenAI's librosa-made mel_filters.npz).
#pragma once

#include <vector>

namespace akunu {

constexpr int kWhisperFftBins = 201;  // n_fft / 2 + 1 for the 400-point FFT at 16 kHz

// [n_mels, 201] f32, row-major: mel band m's weight on FFT bin f at [m * 201 + f].
std::vector<float> whisper_mel_filters(int n_mels);

}  // namespace akunu

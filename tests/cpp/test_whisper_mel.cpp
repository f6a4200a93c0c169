// WhisperMel against a double-precision reference of the same definition (reflect-padded Hann
// frames, power spectrum, Slaney filters, log10, max - 8 floor, (x + 4) / 4), on the test
// device and on the CPU backend, at lengths that are not whole frames.
#include <algorithm>
#include <cmath>

#include "akunu/core/error.h"
#include "akunu/engine/whisper_mel.h"
#include "akunu/formats/mel_filters.h"
#include "vk_test.h"

namespace akunu::test {
namespace {

std::vector<float> reference_mel(const std::vector<float>& x, const std::vector<float>& filters, size_t n_mels) {
    const long n = long(x.size()), n_fft = 400, hop = 160, bins = 201;
    const size_t frames = x.size() / hop;
    std::vector<double> mel(n_mels * frames);
    std::vector<double> power(bins);
    for (size_t t = 0; t < frames; ++t) {
        for (long f = 0; f < bins; ++f) {
            double re = 0, im = 0;
            for (long i = 0; i < n_fft; ++i) {
                long s = long(t) * hop + i - n_fft / 2;
                s = s < 0 ? -s : (s >= n ? 2 * (n - 1) - s : s);
                const double w = 0.5 - 0.5 * std::cos(2 * M_PI * double(i) / double(n_fft));
                re += w * x[size_t(s)] * std::cos(2 * M_PI * double(f * i) / double(n_fft));
                im += w * x[size_t(s)] * std::sin(2 * M_PI * double(f * i) / double(n_fft));
            }
            power[size_t(f)] = re * re + im * im;
        }
        for (size_t m = 0; m < n_mels; ++m) {
            double acc = 0;
            for (long f = 0; f < bins; ++f) acc += double(filters[m * bins + size_t(f)]) * power[size_t(f)];
            mel[m * frames + t] = std::log10(std::max(acc, 1e-10));
        }
    }
    const double top = *std::max_element(mel.begin(), mel.end());
    std::vector<float> out(mel.size());
    for (size_t i = 0; i < mel.size(); ++i) out[i] = float((std::max(mel[i], top - 8.0) + 4.0) / 4.0);
    return out;
}

class WhisperMelTest : public VkTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(WhisperMelTest, MatchesTheDoublePrecisionDefinition) {
    auto dev = std::string(GetParam()) == "cpu" ? Device::create("cpu") : device();
    const std::vector<float> filters = whisper_mel_filters(80);
    WhisperMel mel(dev, filters, 4000);
    for (size_t n : {201u, 1111u, 4000u}) {
        const std::vector<float> x = random_floats(n, uint32_t(n), -0.5f, 0.5f);
        std::vector<float> got(80 * WhisperMel::frames(n), kPoison);
        mel.run(x.data(), n, got.data());
        const std::vector<float> want = reference_mel(x, filters, 80);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << "n " << n << " at " << i;
    }
}

TEST_P(WhisperMelTest, RefusesWhatItCannotRun) {
    auto dev = std::string(GetParam()) == "cpu" ? Device::create("cpu") : device();
    WhisperMel mel(dev, whisper_mel_filters(80), 1000);
    std::vector<float> x(1001, 0.0f), out(80 * 7);
    EXPECT_THROW(mel.run(x.data(), 1001, out.data()), Error);  // past max_samples
    EXPECT_THROW(mel.run(x.data(), 200, out.data()), Error);  // shorter than reflect padding needs
    x[5] = std::nanf("");
    EXPECT_THROW(mel.run(x.data(), 1000, out.data()), Error);
    EXPECT_THROW(WhisperMel(dev, std::vector<float>(80 * 200), 1000), Error);  // not [n_mels, 201]
}

INSTANTIATE_TEST_SUITE_P(Backends, WhisperMelTest, ::testing::Values("test_device", "cpu"));

}  // namespace
}  // namespace akunu::test

// Argument checks and workgroup geometry for the log-mel kernels (kernels.h log_mel).
#include "akunu/engine/kernel_launch.h"
#include "akunu/engine/kernels.h"
#include "params.h"

namespace akunu::kernels {

using namespace launch;

void log_mel(DispatchSink& s, const Binding& samples, const Binding& dft, const Binding& filters, const Binding& power,
             const Binding& out, const Binding& state, const MelShape& sh) {
    AKUNU_CHECK(sh.n_fft >= 2 && sh.n_fft <= AKUNU_MEL_MAX_FFT && sh.hop > 0,
                "log_mel: n_fft " + std::to_string(sh.n_fft) + " must be in [2, " + std::to_string(AKUNU_MEL_MAX_FFT) +
                    "] and hop positive");
    const size_t bins = sh.n_fft / 2 + 1, frames = sh.max_samples / sh.hop;
    check_fits(samples, sh.max_samples, DType::kF32, "log_mel", "samples");
    check_fits(dft, 2 * bins * sh.n_fft, DType::kF32, "log_mel", "dft");
    check_fits(filters, sh.n_mels * bins, DType::kF32, "log_mel", "filters");
    check_fits(power, frames * bins, DType::kF32, "log_mel", "power");
    check_fits(out, sh.n_mels * frames, DType::kF32, "log_mel", "out");
    check_bytes(state, sizeof(MelState), "log_mel", "state");
    const MelParams p{checked_u32(sh.n_fft, "log_mel: n_fft"), checked_u32(sh.hop, "log_mel: hop"),
                      checked_u32(bins, "log_mel: n_bins"), checked_u32(sh.n_mels, "log_mel: n_mels"),
                      checked_u32(frames, "log_mel: max_frames")};
    const uint32_t group = std::min<uint32_t>(256, s.device().profile().max_workgroup_invocations);
    emit(s, "mel_power", {group}, {samples, dft, power, state}, p, grid_for(s, frames));
    emit(s, "mel_log", {group}, {power, filters, out, state}, p, grid_for(s, frames));
    emit(s, "mel_norm", {group}, {out, state}, p, grid_for(s, 1));
}

}  // namespace akunu::kernels

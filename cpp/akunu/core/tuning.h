// Tuning: every setting that changes how akunu runs, not what it computes, in one struct.
//
// A Device reads its Tuning once, when it is created: the defaults, then AKUNU_TUNE
// ("key=value,key=value"), then what the caller passes (Python: Model(..., tuning={...})).
// Each key has one polarity (1 turns a feature on) and one parser; "auto" leaves the choice to
// the device profile. docs/configuration.md is generated from kTuningKeys.
//
// This file is also the only one that reads the environment: the feature variables below and
// AKUNU_TUNE. Nothing else in the engine calls getenv.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace akunu {

// A setting that the device profile decides unless the caller does.
enum class Choice : int8_t { kAuto = -1, kOff = 0, kOn = 1 };

struct Tuning {
    // ---- kernel choices (docs/performance.md) ----
    bool coopmat = true;  // the prefill GEMM on cooperative matrices, where the device has them
    bool coopmat2 = true;  // the f16 GEMM on workgroup-scope cooperative matrices (gemm_cm2)
    bool flash_coopmat = true;  // the prefill attention on cooperative matrices (flash_cm)
    bool batch_flash = true;  // a batched step's runs of one sequence's rows attend in query tiles
    bool batch_row_attention = true;  // ... its other rows in attention_split's layout (Vulkan devices)
    bool gemm_cm2_narrow = true;  // gemm_cm2's narrow tile for chunks whose wide tiles leave units idle
    bool gemm_gated = true;  // the gate and up GEMMs with the activation in their epilogue
    bool int_dot = true;  // the integer-dot GEMV of the 32-element block formats
    bool weight_tiles = true;  // tile-major projection matrices where the device reads them
    bool float_x = false;  // tile GEMVs keep x in fp32 instead of rounding it to int16
    bool q5_tiles = true;  // the CPU backend keeps Q5_0/Q5_1 matrices tile-major
    bool int_gemm = true;  // the CPU backend's prefill GEMMs sum integer products (AVX-512 VNNI)
    bool int8_gemm = false;  // ... with x rounded to 8 bits and byte products (vpdpbusd)
    bool bf16_gemm = false;  // the CPU backend's float-tile GEMMs and encoder attention in bf16 (AVX-512 BF16)
    bool head_q8 = false;  // the CPU backend reads Whisper's head rows of text tokens from a Q8_0 copy
    bool encoder_q8 = false;  // the CPU backend keeps the matrices Whisper's encoder runs as Q8_0 tiles
    int cpu_spin_us = -1;  // CPU pool workers wait for the next job spinning this long, then sleep (-1 auto: 100)
    int cpu_inline_us = -1;  // CPU dispatches that took under N us of one thread run on the caller (-1 auto, 0 none)
    Choice gemv_handoff = Choice::kAuto;  // GEMVs hand x off through counters (auto: NVIDIA)
    bool norm_forward = true;  // a decode step's residual GEMVs hand the next pre-norm forward
    Choice spin_wait = Choice::kAuto;  // single-step submissions are waited for by polling (auto: GPUs)
    int gemm_short_rows = -1;  // chunks of up to N tokens run short GEMM tiles (-1 auto, 0 none)
    int gemm_tile_rows =
        -1;  // GEMMs of up to N rows of tile-major weights run the tile GEMV of several rows (-1 auto, 0 none)
    int prefill_dequant_rows = -1;  // chunks of N+ tokens dequantize block weights to f16 (-1 auto, 0 never)
    int split_microbatches =
        -1;  // a split model's batched step runs as 1 or 2 micro-batches (-1 auto: 2 for larger steps)
    // ---- recording ----
    bool indirect_counts = true;  // workgroup counts that follow a chunk or step are read at run time
    bool row_windows = true;  // row windows of a chunk's GEMMs share a barrier interval
    bool column_views = true;  // disjoint column views of one buffer share a barrier interval
    int weight_binding_kib = -1;  // bind weight matrices in row windows of at most N KiB (-1: the device's limit)
    int whisper_chain = -1;  // greedy Whisper decode steps per submission (-1 auto: 16, 0: one step each)
    // ---- memory ----
    bool mapped_memory = true;  // device-local buffers are mapped where the device can map them
    int staging_kib = -1;  // the staging area holds at least N KiB (-1 auto: 4096)
    // ---- profiling ----
    int profile_warm_ms = -1;  // untimed replays before a profiled step (-1 auto: 400 on GPUs)
    bool kernel_code = false;  // pipelines keep the driver's internal representations of their code
    // ---- kernel geometry, for experiments and the kernel tests ----
    std::string gemv_rows;  // gemv.comp: "invocations:rows[:units[:wide]]"
    std::string gemv_tiles;  // gemv_tiles.comp: "split:units[:slice]"
    std::string gemm_rows;  // gemm_rows.comp: "split:units[:slice[:xrows]]"
    std::string whisper_attn;  // Whisper's attention: "tile_rows:chunk_keys" (0: the per-row kernel)

    // Applies "key=value,key=value"; throws akunu::Error naming the key and the accepted values.
    void apply(const std::string& settings);
    // The defaults with AKUNU_TUNE applied, then `settings`.
    static Tuning from_environment(const std::string& settings = "");
    // "key=value,..." of every key whose value differs from the default.
    std::string describe() const;
};

// One row per key, in the order docs/configuration.md lists them.
struct TuningKey {
    const char* name;
    const char* kind;  // "bool", "choice" (auto/0/1), "int" (-1 auto) or "shape"
    const char* meaning;
};
const std::vector<TuningKey>& tuning_keys();
// The value of `key` in `t`, as AKUNU_TUNE spells it.
std::string tuning_value(const Tuning& t, const std::string& key);

// ---- feature variables -------------------------------------------------------------------------
// What the user chooses rather than tunes: read where needed, each by its own name.
enum class Feature {
    kDevice,  // AKUNU_DEVICE: the device selector (Device::create)
    kThreads,  // AKUNU_THREADS: the CPU backend's threads
    kValidation,  // AKUNU_VALIDATION: the Khronos validation layer
    kInt8,  // AKUNU_INT8: round x to 8 bits in the quantized GEMVs
    kCpuIsa,  // AKUNU_CPU_ISA: cap the CPU backend's vector tier (scalar, avx2, avx512)
    kVulkanLibrary,  // AKUNU_VULKAN_LIBRARY: the Vulkan loader to open
};
struct FeatureVariable {
    Feature feature;
    const char* name;
    const char* meaning;
};
const std::vector<FeatureVariable>& feature_variables();
// The variable's value, "" when unset.
std::string feature_value(Feature feature);
// Set to anything but "" or "0".
bool feature_on(Feature feature);

}  // namespace akunu

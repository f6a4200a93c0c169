// The Tuning table, its one parser, and the environment reads (core/tuning.h).
#include "akunu/core/tuning.h"

#include <cstdlib>
#include <variant>

#include "akunu/core/error.h"

namespace akunu {

namespace {

using Field = std::variant<bool Tuning::*, Choice Tuning::*, int Tuning::*, std::string Tuning::*>;

struct Row {
    TuningKey key;
    Field field;
};

// The keys, their kinds and what they change. Defaults are the struct's initializers.
const std::vector<Row>& rows() {
    static const std::vector<Row> kRows = {
        {{"coopmat", "bool",
          "Prefill GEMMs on cooperative matrices where the device has them (VK_NV_cooperative_matrix, 32-wide "
          "subgroups)."},
         &Tuning::coopmat},
        {{"coopmat2", "bool",
          "The f16 prefill GEMM on workgroup-scope cooperative matrices (gemm_cm2), where the device and the build "
          "have it."},
         &Tuning::coopmat2},
        {{"flash_coopmat", "bool",
          "Prefill attention on cooperative matrices (flash_cm) for an f16 cache of head size 64 or 128."},
         &Tuning::flash_coopmat},
        {{"batch_flash", "bool",
          "A batched step's runs of one sequence's rows (prompt chunks) attend in query tiles (flash_cm or "
          "flash_attention) instead of row by row (attention_rows)."},
         &Tuning::batch_flash},
        {{"batch_row_attention", "bool",
          "A batched step's rows outside the query tiles (decode rows) attend in attention_split's layout on Vulkan "
          "devices: workgroups per row, head and chunk of the row's cache, partials merged by the last (0: "
          "attention_rows, one workgroup per row and head)."},
         &Tuning::batch_row_attention},
        {{"gemm_cm2_narrow", "bool",
          "The f16 prefill GEMM on workgroup-scope cooperative matrices (gemm_cm2) takes its narrow tile (64 "
          "features) for chunks whose wide tiles (128) would occupy at most half the compute units: a 4,096-wide "
          "projection's chunks of up to 256 tokens on a GPU of about 130 (0: the wide tile for every chunk)."},
         &Tuning::gemm_cm2_narrow},
        {{"gemm_gated", "bool",
          "A chunk's gate and up GEMMs with the activation in their epilogue (gemm_cm2 devices)."},
         &Tuning::gemm_gated},
        {{"int_dot", "bool", "The integer-dot GEMV of Q8_0/Q4_0/Q4_1 where the device has integer dot products."},
         &Tuning::int_dot},
        {{"weight_tiles", "bool",
          "Tile-major projection matrices of the 32-element block formats on Vulkan devices (gemv_tiles)."},
         &Tuning::weight_tiles},
        {{"float_x", "bool",
          "Tile GEMVs keep x in fp32 instead of rounding it to int16 (exact products, slower decode)."},
         &Tuning::float_x},
        {{"q5_tiles", "bool",
          "The CPU backend keeps Q5_0/Q5_1 projection matrices tile-major (0: in the file's rows, read row by row)."},
         &Tuning::q5_tiles},
        {{"int_gemm", "bool",
          "The CPU backend's prefill GEMMs on quantized tiles round x to 16 bits and sum integer products where the "
          "processor has AVX-512 VNNI (0: fp32 products on dequantized weights)."},
         &Tuning::int_gemm},
        {{"int8_gemm", "bool",
          "With int_gemm, the CPU backend's prefill GEMMs round x to 8 bits per block of 32 (as llama.cpp's q8_0) and "
          "multiply bytes (AVX-512 VNNI vpdpbusd): about twice the products per instruction, but x only within 1/254 "
          "of its block's largest value (0: 16 bits, within 1/65534)."},
         &Tuning::int8_gemm},
        {{"bf16_gemm", "bool",
          "The CPU backend's GEMMs of more than a few rows on f32, f16 and bf16 tiles, and the encoder attention's "
          "blocks, round their operands to bf16 and sum bf16 products in fp32 where the processor has AVX-512 BF16 "
          "(twice the fp32 rate; f16 weights keep 8 of their 11 significant bits, so outputs move by a few parts in a "
          "thousand: Whisper's transcripts hold, the fp32 reference tolerances do not); 0: fp32 products."},
         &Tuning::bf16_gemm},
        {{"head_q8", "bool",
          "The CPU backend keeps a second copy of Whisper's output head (the tied token embedding) for the text "
          "tokens' rows (ids below <|endoftext|>) in Q8_0 tiles, multiplied with x rounded to 16 bits: half the bytes "
          "of a decoder step's largest product. Each weight moves by up to half a step of its block's 8-bit scale, so "
          "the text logits move by about 1e-2; the special and timestamp tokens keep the head as stored; 0: the head "
          "as stored for all."},
         &Tuning::head_q8},
        {{"encoder_q8", "bool",
          "The CPU backend keeps the matrices of Whisper's encoder (its projections, FFN and second convolution, and "
          "the decoder's cross-attention K and V projections, which run once per window on the encoder's states) as "
          "Q8_0 tiles rounded at load, so that the encoder's GEMMs sum integer products (AVX-512 VNNI; with x in 8 "
          "bits under int8_gemm): half the bytes and fewer instructions than fp32 products on f16 weights. Each "
          "weight moves by up to half a step of its block's 8-bit scale; 0: the matrices as stored."},
         &Tuning::encoder_q8},
        {{"cpu_spin_us", "int",
          "The CPU backend's pool threads wait for the next job spinning this many microseconds before they sleep: "
          "long enough to span the gaps between a step's kernels, short enough that the time between steps or calls "
          "is not spent spinning (auto: 100; 0: sleep at once)."},
         &Tuning::cpu_spin_us},
        {{"cpu_inline_us", "int",
          "The CPU backend runs a dispatch on the calling thread instead of sharing it with the pool's threads when "
          "its last run took less than this many microseconds of one thread's time: handing so little work over costs "
          "more than it saves; a dispatch's first run is shared (auto: 10, for a machine whose cores are free; on one "
          "busier than its cores, where a shared dispatch waits for a thread the OS has given to other work, about "
          "100 does better; 0: every dispatch is shared)."},
         &Tuning::cpu_inline_us},
        {{"gemv_handoff", "choice",
          "Consecutive decode GEMVs hand x off through counters instead of barriers (auto: on NVIDIA)."},
         &Tuning::gemv_handoff},
        {{"norm_forward", "bool",
          "A decode step's GEMVs that add into the residual stream hand the next pre-norm forward."},
         &Tuning::norm_forward},
        {{"spin_wait", "choice",
          "A submission that the caller waits on at once (a decode step, a prefill chunk, each part of a split "
          "model's step) is waited for by polling its fence instead of sleeping in the driver (auto: on GPUs, off on "
          "CPU-type devices, whose threads need the core)."},
         &Tuning::spin_wait},
        {{"gemm_short_rows", "int",
          "Chunks of up to this many tokens run short GEMM tiles (auto: lavapipe and cooperative-matrix devices; 0: "
          "none)."},
         &Tuning::gemm_short_rows},
        {{"gemm_tile_rows", "int",
          "GEMMs of tile-major Q8_0, Q4_0 and Q4_1 weights that see up to this many rows (a batched decode step, a "
          "short prompt) run the tile GEMV of several rows, a GEMV's rate at one row, instead of short GEMM tiles "
          "(auto: "
          "4 on Vulkan devices; 0: none)."},
         &Tuning::gemm_tile_rows},
        {{"prefill_dequant_rows", "int",
          "Chunks of at least this many tokens dequantize block-format weights to f16 for the f16 GEMM (auto: every "
          "chunk past the short tiles on cooperative-matrix-2 devices, 128 on other cooperative-matrix devices; 0: "
          "never)."},
         &Tuning::prefill_dequant_rows},
        {{"split_microbatches", "int",
          "A batched step of a model split across devices runs its rows as this many micro-batches, 1 or 2: with 2, "
          "the first device runs the second half's layers while the next device runs the first half's (auto: 2 for "
          "steps of 16 rows or more, whose halves are worth the second read of the weights)."},
         &Tuning::split_microbatches},
        {{"indirect_counts", "bool",
          "Dispatches that follow a chunk's length or a step's position read their workgroup counts at run time; 0 "
          "records the whole chunk's or context's counts."},
         &Tuning::indirect_counts},
        {{"row_windows", "bool",
          "The GEMMs of one projection in disjoint row windows share a barrier interval; 0 tracks them as plain "
          "ranges."},
         &Tuning::row_windows},
        {{"column_views", "bool",
          "Disjoint column views of one buffer (Q, K and V) share a barrier interval; 0 tracks them as plain ranges."},
         &Tuning::column_views},
        {{"weight_binding_kib", "int",
          "Weight matrices are bound in windows of whole rows of at most this many KiB (auto: the device's "
          "maxStorageBufferRange); smaller values test the windows a 128 MiB limit needs."},
         &Tuning::weight_binding_kib},
        {{"whisper_chain", "int",
          "Greedy Whisper decoding (temperature 0, one beam) records this many decoder steps per submission, with the "
          "logit rules and the argmax on the device (auto: 16; 0: one submission per step, the rules on the host)."},
         &Tuning::whisper_chain},
        {{"mapped_memory", "bool",
          "Device-local buffers are mapped where the device lets the host map them (resizable BAR, unified memory, "
          "lavapipe); 0 leaves them unmapped, so that the host's reads and writes of them go through the staging area "
          "as on a discrete GPU without resizable BAR (tests of that path; no effect on the CPU backend)."},
         &Tuning::mapped_memory},
        {{"staging_kib", "int",
          "The device's staging area, through which the host reads and writes unmapped memory in pieces of at most "
          "its size, holds at least this many KiB (auto: 4096; 0 counts as 1); a model grows it to its largest "
          "transfer of a step (a logits row), so that one piece holds it. Smaller values test transfers of many "
          "pieces."},
         &Tuning::staging_kib},
        {{"profile_warm_ms", "int",
          "Milliseconds of untimed replays before Model.profile() times a step, so that clocks are up (auto: 400 on "
          "GPUs, 0 on CPUs)."},
         &Tuning::profile_warm_ms},
        {{"kernel_code", "bool",
          "Kernels are compiled keeping the driver's internal representations of their code (its assembly, where "
          "the driver gives it: VK_KHR_pipeline_executable_properties), which Model.kernel_statistics() returns as "
          "each kernel's code; pipelines take longer to make. For finding out which instructions a kernel runs."},
         &Tuning::kernel_code},
        {{"gemv_rows", "shape",
          "gemv.comp's geometry \"invocations:rows[:units[:wide]]\" for every float or block GEMV (experiments)."},
         &Tuning::gemv_rows},
        {{"gemv_tiles", "shape",
          "gemv_tiles.comp's geometry \"split:units[:slice]\" for every tile GEMV (experiments)."},
         &Tuning::gemv_tiles},
        {{"gemm_rows", "shape",
          "gemm_rows.comp's geometry \"split:units[:slice[:xrows]]\" for every GEMM in tile GEMVs of several rows "
          "(experiments)."},
         &Tuning::gemm_rows},
        {{"whisper_attn", "shape",
          "Whisper's attention geometry \"tile_rows:chunk_keys\": query rows per workgroup of the encoder's "
          "window_attention and keys per chunk of a decoder step's cross-attention (span_split); 0 in either place "
          "runs that part on the per-row encoder_attention kernel (A/B, experiments)."},
         &Tuning::whisper_attn},
    };
    return kRows;
}

const Row& find_row(const std::string& name) {
    for (const Row& r : rows())
        if (name == r.key.name) return r;
    std::string known;
    for (const Row& r : rows()) known += std::string(known.empty() ? "" : ", ") + r.key.name;
    throw Error("unknown tuning key '" + name + "'; the keys are: " + known + " (docs/configuration.md)");
}

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

bool parse_bool(const std::string& key, const std::string& v) {
    if (v == "1" || v == "true" || v == "on") return true;
    if (v == "0" || v == "false" || v == "off") return false;
    throw Error("tuning key '" + key + "' takes 1 or 0 (true/false, on/off), not '" + v + "'");
}

int parse_int(const std::string& key, const std::string& v) {
    if (v == "auto") return -1;
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    AKUNU_CHECK(!v.empty() && *end == '\0' && n >= 0 && n <= 1 << 24,
                "tuning key '" + key + "' takes 'auto' or a whole number from 0 to 16777216, not '" + v + "'");
    return int(n);
}

void set(Tuning& t, const Row& r, const std::string& v) {
    const std::string key = r.key.name;
    std::visit(
        [&](auto member) {
            using T = std::decay_t<decltype(t.*member)>;
            if constexpr (std::is_same_v<T, bool>)
                t.*member = parse_bool(key, v);
            else if constexpr (std::is_same_v<T, Choice>)
                t.*member = v == "auto" ? Choice::kAuto : Choice(parse_bool(key, v));
            else if constexpr (std::is_same_v<T, int>)
                t.*member = parse_int(key, v);
            else
                t.*member = v;
        },
        r.field);
}

std::string get(const Tuning& t, const Row& r) {
    return std::visit(
        [&](auto member) -> std::string {
            using T = std::decay_t<decltype(t.*member)>;
            if constexpr (std::is_same_v<T, bool>)
                return t.*member ? "1" : "0";
            else if constexpr (std::is_same_v<T, Choice>)
                return t.*member == Choice::kAuto ? "auto" : t.*member == Choice::kOn ? "1" : "0";
            else if constexpr (std::is_same_v<T, int>)
                return t.*member < 0 ? "auto" : std::to_string(t.*member);
            else
                return t.*member;
        },
        r.field);
}

const char* raw_env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

}  // namespace

void Tuning::apply(const std::string& settings) {
    size_t at = 0;
    while (at <= settings.size()) {
        const size_t comma = std::min(settings.find(',', at), settings.size());
        const std::string item = trim(settings.substr(at, comma - at));
        at = comma + 1;
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        AKUNU_CHECK(eq != std::string::npos, "tuning setting '" + item + "' needs the form key=value");
        set(*this, find_row(trim(item.substr(0, eq))), trim(item.substr(eq + 1)));
    }
}

Tuning Tuning::from_environment(const std::string& settings) {
    Tuning t;
    try {
        t.apply(raw_env("AKUNU_TUNE"));
    } catch (const Error& e) {
        throw Error(std::string("AKUNU_TUNE: ") + e.what());
    }
    t.apply(settings);
    return t;
}

std::string Tuning::describe() const {
    const Tuning defaults;
    std::string out;
    for (const Row& r : rows())
        if (get(*this, r) != get(defaults, r))
            out += std::string(out.empty() ? "" : ",") + r.key.name + "=" + get(*this, r);
    return out;
}

const std::vector<TuningKey>& tuning_keys() {
    static const std::vector<TuningKey> keys = [] {
        std::vector<TuningKey> k;
        for (const Row& r : rows()) k.push_back(r.key);
        return k;
    }();
    return keys;
}

std::string tuning_value(const Tuning& t, const std::string& key) { return get(t, find_row(key)); }

const std::vector<FeatureVariable>& feature_variables() {
    static const std::vector<FeatureVariable> kVariables = {
        {Feature::kDevice, "AKUNU_DEVICE",
         "The device a model runs on when none is given: an index, part of a name, 'vulkan' or 'cpu'."},
        {Feature::kThreads, "AKUNU_THREADS", "Threads of the CPU backend (default: the CPUs this process may run on)."},
        {Feature::kValidation, "AKUNU_VALIDATION",
         "1: Vulkan instances load the Khronos validation layer and collect its messages (the tests run so)."},
        {Feature::kInt8, "AKUNU_INT8",
         "1: the quantized GEMVs round x to 8 bits per block and use integer dot products (faster, looser than the "
         "reference tolerances)."},
        {Feature::kCpuIsa, "AKUNU_CPU_ISA", "Caps the CPU backend's vector tier: scalar, avx2 or avx512."},
        {Feature::kVulkanLibrary, "AKUNU_VULKAN_LIBRARY",
         "The Vulkan loader library to open instead of libvulkan.so.1."},
    };
    return kVariables;
}

std::string feature_value(Feature feature) {
    for (const FeatureVariable& v : feature_variables())
        if (v.feature == feature) return raw_env(v.name);
    return "";
}

bool feature_on(Feature feature) {
    const std::string v = feature_value(feature);
    return !v.empty() && v != "0";
}

}  // namespace akunu

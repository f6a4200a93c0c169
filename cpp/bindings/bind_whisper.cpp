// Python view of a WhisperModel: loading, encode/decode into new NumPy arrays, sequence slots,
// and the cross-attention and K/V read-backs.
#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/whisper_model.h"
#include "akunu/tokenizer/tokenizer.h"
#include "akunu/vulkan/device.h"
#include "bindings.h"

namespace akunu::py_bindings {

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

// mel [n_mels, frames] or [B, n_mels, frames] -> [B, audio_ctx, d_model].
py::array encode(WhisperModel& m, const FloatArray& mel) {
    const ModelConfig& c = m.config();
    const bool batched = mel.ndim() == 3;
    AKUNU_CHECK(mel.ndim() == 2 || batched, "encode: mel must be [n_mels, frames] or [B, n_mels, frames], not " +
                                                std::to_string(mel.ndim()) + "-D");
    const size_t windows = batched ? size_t(mel.shape(0)) : 1;
    const size_t mels = size_t(mel.shape(batched ? 1 : 0)), frames = size_t(mel.shape(batched ? 2 : 1));
    AKUNU_CHECK(mels == size_t(c.n_mels) && frames == size_t(m.n_frames()),
                "encode: mel must have " + std::to_string(c.n_mels) + " bins and " + std::to_string(m.n_frames()) +
                    " frames (30 s, padded), found [" + std::to_string(mels) + ", " + std::to_string(frames) + "]");
    py::array_t<float> out({windows, size_t(c.audio_ctx), size_t(c.dim)});
    const float* in = mel.data();
    float* data = out.mutable_data();
    py::gil_scoped_release release;
    m.encode(in, int(windows), data);
    return out;
}

py::array decode(WhisperModel& m, const std::vector<int>& seqs, const std::vector<std::vector<int>>& tokens,
                 bool all_logits) {
    size_t rows = seqs.size();
    if (all_logits) {
        rows = 0;
        for (const auto& t : tokens) rows += t.size();
    }
    py::array_t<float> out({rows, size_t(m.config().vocab_size)});
    float* data = out.mutable_data();
    py::gil_scoped_release release;
    m.decode(seqs, tokens, all_logits, data);
    return out;
}

// One GreedyRequest per entry of the lists (whisper_chain.h); returns [(tokens, logprobs,
// no_speech_prob)] in the same order.
py::list decode_greedy(WhisperModel& m, const std::vector<int>& seqs, const std::vector<int>& tokens,
                       const std::vector<int>& max_new, const std::vector<std::vector<int>>& suppress,
                       const std::vector<std::vector<int>>& begin_suppress, const std::vector<bool>& timestamps,
                       const std::vector<int>& max_initial, const GreedySpecials& specials) {
    const size_t n = seqs.size();
    AKUNU_CHECK(tokens.size() == n && max_new.size() == n && suppress.size() == n && begin_suppress.size() == n &&
                    timestamps.size() == n && max_initial.size() == n,
                "decode_greedy: seqs, tokens, max_new, suppress, begin_suppress, timestamps and max_initial must "
                "have one entry per sequence (" +
                    std::to_string(n) + ")");
    std::vector<GreedyRequest> requests(n);
    for (size_t i = 0; i < n; ++i)
        requests[i] = {seqs[i], tokens[i], max_new[i], {suppress[i], begin_suppress[i], timestamps[i], max_initial[i]}};
    std::vector<GreedyResult> results;
    {
        py::gil_scoped_release release;
        results = m.decode_greedy(requests, specials);
    }
    py::list out;
    for (const GreedyResult& r : results) out.append(py::make_tuple(r.tokens, r.logprobs, r.no_speech_prob));
    return out;
}

// One BeamRequest per entry of the lists (whisper_chain.h); returns [(ids, logprobs)] in the
// same order.
py::list decode_top(WhisperModel& m, const std::vector<int>& seqs, const std::vector<int>& tokens,
                    const std::vector<std::vector<int>>& histories, int top_k,
                    const std::vector<std::vector<int>>& suppress, const std::vector<std::vector<int>>& begin_suppress,
                    const std::vector<bool>& timestamps, const std::vector<int>& max_initial,
                    const GreedySpecials& specials) {
    const size_t n = seqs.size();
    AKUNU_CHECK(tokens.size() == n && histories.size() == n && suppress.size() == n && begin_suppress.size() == n &&
                    timestamps.size() == n && max_initial.size() == n,
                "decode_top: seqs, tokens, histories, suppress, begin_suppress, timestamps and max_initial must "
                "have one entry per sequence (" +
                    std::to_string(n) + ")");
    std::vector<BeamRequest> requests(n);
    for (size_t i = 0; i < n; ++i)
        requests[i] = {
            seqs[i], tokens[i], histories[i], {suppress[i], begin_suppress[i], timestamps[i], max_initial[i]}};
    std::vector<TopCandidates> results;
    {
        py::gil_scoped_release release;
        results = m.decode_top(requests, top_k, specials);
    }
    py::list out;
    for (const TopCandidates& r : results) out.append(py::make_tuple(r.ids, r.logprobs));
    return out;
}

// (k, v), each [heads, length, head_dim], copies of the slot's cache.
py::tuple kv(const WhisperModel& m, int seq, int layer) {
    const ModelConfig& c = m.config();
    const size_t n = size_t(m.length(seq));
    py::array_t<float> rows({n, size_t(2), size_t(c.n_heads), size_t(c.head_dim)});
    m.read_kv(seq, layer, rows.mutable_data());
    py::object np = py::module_::import("numpy");
    auto side = [&](int i) {
        return np.attr("ascontiguousarray")(
            rows[py::make_tuple(py::slice(py::none(), py::none(), py::none()), i)].attr("transpose")(1, 0, 2));
    };
    return py::make_tuple(side(0), side(1));
}

}  // namespace

void init_whisper(py::module_& m) {
    py::class_<WhisperModel, std::shared_ptr<WhisperModel>>(m, "WhisperModel")
        .def_static(
            "load",
            [](const std::string& path, const std::string& device, const py::object& tuning, int max_sequences,
               py::object progress) {
                WhisperOptions o;
                o.device = device;
                o.tuning = tuning_text(tuning);
                o.max_sequences = max_sequences;
                // progress: a callable, or None / False for none.
                o.progress = PyCallable_Check(progress.ptr()) ? progress_callback(progress) : nullptr;
                py::gil_scoped_release release;
                return std::shared_ptr<WhisperModel>(WhisperModel::load(path, o));
            },
            py::arg("path"), py::arg("device") = "", py::arg("tuning") = py::none(), py::arg("max_sequences") = 8,
            py::arg("progress") = py::none())
        .def_property_readonly(
            "config",
            [](const WhisperModel& w) { return py::module_::import("json").attr("loads")(w.config_json().dump()); })
        .def_property_readonly("tokenizer", [](const WhisperModel& w) { return Tokenizer::from_model(w.files()); })
        .def_property_readonly("max_sequences", &WhisperModel::max_sequences)
        .def_property_readonly("decode_rows", &WhisperModel::decode_rows)
        .def_property_readonly("weight_bytes", &WhisperModel::weight_bytes)
        .def_property_readonly("device", &WhisperModel::device_ptr)
        .def_property_readonly("device_allocations",
                               [](const WhisperModel& w) { return w.device().allocations_total(); })
        .def(
            "mel",
            [](WhisperModel& w, const FloatArray& samples) {
                AKUNU_CHECK(samples.ndim() == 1, "mel: samples must be 1-D float32 [n] at 16 kHz");
                const size_t n = size_t(samples.size());
                py::array_t<float> out({size_t(w.config().n_mels), WhisperMel::frames(n)});
                {
                    py::gil_scoped_release release;
                    w.mel(samples.data(), n, out.mutable_data());
                }
                return out;
            },
            py::arg("samples"),
            "The log-mel spectrogram [n_mels, n // 160] of float32 16-kHz samples [n] (pad a clip to 30 s for "
            "encode()), on the model's device.")
        .def_property_readonly("mel_filters",
                               [](const WhisperModel& w) {
                                   const auto& f = w.mel_filters();
                                   py::array_t<float> out({f.size() / WhisperMel::kBins, WhisperMel::kBins});
                                   std::copy(f.begin(), f.end(), out.mutable_data());
                                   return out;
                               })
        .def("encode", &encode, py::arg("mel"))
        .def("set_audio", &WhisperModel::set_audio, py::arg("seq"), py::arg("window") = 0)
        .def("reset", &WhisperModel::reset, py::arg("seq"))
        .def("length", &WhisperModel::length, py::arg("seq"))
        .def("truncate", &WhisperModel::truncate, py::arg("seq"), py::arg("n"))
        .def("copy_sequence", &WhisperModel::copy_sequence, py::arg("src"), py::arg("dst"))
        .def("decode", &decode, py::arg("seqs"), py::arg("tokens"), py::arg("all_logits") = false)
        .def_property_readonly("chain_steps", &WhisperModel::chain_steps)
        .def(
            "decode_greedy",
            [](WhisperModel& w, const std::vector<int>& seqs, const std::vector<int>& tokens,
               const std::vector<int>& max_new, const std::vector<std::vector<int>>& suppress,
               const std::vector<std::vector<int>>& begin_suppress, const std::vector<bool>& timestamps,
               const std::vector<int>& max_initial, int eot, int timestamp_begin, int no_timestamps, int no_speech) {
                return decode_greedy(w, seqs, tokens, max_new, suppress, begin_suppress, timestamps, max_initial,
                                     {eot, timestamp_begin, no_timestamps, no_speech});
            },
            py::arg("seqs"), py::arg("tokens"), py::arg("max_new"), py::arg("suppress"), py::arg("begin_suppress"),
            py::arg("timestamps"), py::arg("max_initial"), py::arg("eot"), py::arg("timestamp_begin"),
            py::arg("no_timestamps"), py::arg("no_speech") = -1,
            "Greedy decoding in chains of chain_steps steps per submission, the logit rules on the device: slot "
            "seqs[i] feeds tokens[i], then picks until <|endoftext|> or max_new[i] picks. Returns [(tokens, "
            "logprobs, no_speech_prob)].")
        .def(
            "decode_top",
            [](WhisperModel& w, const std::vector<int>& seqs, const std::vector<int>& tokens,
               const std::vector<std::vector<int>>& histories, int top_k, const std::vector<std::vector<int>>& suppress,
               const std::vector<std::vector<int>>& begin_suppress, const std::vector<bool>& timestamps,
               const std::vector<int>& max_initial, int eot, int timestamp_begin, int no_timestamps) {
                return decode_top(w, seqs, tokens, histories, top_k, suppress, begin_suppress, timestamps, max_initial,
                                  {eot, timestamp_begin, no_timestamps, -1});
            },
            py::arg("seqs"), py::arg("tokens"), py::arg("histories"), py::arg("top_k"), py::arg("suppress"),
            py::arg("begin_suppress"), py::arg("timestamps"), py::arg("max_initial"), py::arg("eot"),
            py::arg("timestamp_begin"), py::arg("no_timestamps"),
            "Beam search's step, its candidates picked on the device: slot seqs[i] feeds tokens[i], and the "
            "top_k likeliest ids of its row under its rules after histories[i] come back. Returns [(ids, "
            "logprobs)], likeliest first.")
        .def(
            "cross_attention",
            [](const WhisperModel& w, int layer) {
                const ModelConfig& c = w.config();
                py::array_t<float> out({size_t(w.last_rows()), size_t(c.n_heads), size_t(c.audio_ctx)});
                w.cross_attention(layer, out.mutable_data());
                return out;
            },
            py::arg("layer"))
        .def("kv", &kv, py::arg("seq"), py::arg("layer"))
        .def(
            "profile",
            [](WhisperModel& w, const std::string& what) {
                std::vector<ProfileRow> rows;
                {
                    py::gil_scoped_release release;
                    rows = w.profile(what);
                }
                return profile_rows(rows);
            },
            py::arg("what"))
        .def(
            "dispatch_table",
            [](const WhisperModel& w, const std::string& which) {
                AKUNU_CHECK(which == "decoder" || which == "encoder",
                            "dispatch_table: which is 'decoder' or 'encoder', not '" + which + "'");
                return dispatch_rows(which == "decoder" ? w.decoder_table() : w.encoder_table());
            },
            py::arg("which") = "decoder");

    // The encoder-decoder's kernels, one dispatch each (akunu.ops wraps them).
    py::module_ k = m.attr("kernels");
    k.def(
        "span_attention",
        [](CommandList& cl, const PyBuffer& q, const PyBuffer& kv, const PyBuffer& seq, const PyBuffer& step,
           const PyBuffer& out, uint32_t n_heads, uint32_t head_dim, uint32_t rows, uint32_t q_stride,
           uint32_t kv_stride, uint32_t k_offset, uint32_t v_offset, uint32_t out_stride, float scale,
           const std::shared_ptr<PyBuffer>& weights, uint32_t weights_stride) {
            const Binding w = weights ? Binding(weights->buffer) : Binding();
            kernels::encoder_attention(
                cl, q.buffer, kv.buffer, seq.buffer, step.buffer, out.buffer,
                {n_heads, head_dim, rows, q_stride, k_offset, v_offset, out_stride, scale, kv_stride, weights_stride},
                weights ? &w : nullptr);
        },
        py::arg("cl"), py::arg("q"), py::arg("kv"), py::arg("seq"), py::arg("step"), py::arg("out"), py::arg("n_heads"),
        py::arg("head_dim"), py::arg("rows"), py::arg("q_stride"), py::arg("kv_stride"), py::arg("k_offset"),
        py::arg("v_offset"), py::arg("out_stride"), py::arg("scale"), py::arg("weights") = nullptr,
        py::arg("weights_stride") = 0);
    k.def(
        "span_attention_split",
        [](CommandList& cl, const PyBuffer& q, const PyBuffer& kv, const PyBuffer& seq, const PyBuffer& step,
           const PyBuffer& out, uint32_t n_heads, uint32_t head_dim, uint32_t rows, uint32_t q_stride,
           uint32_t kv_stride, uint32_t k_offset, uint32_t v_offset, uint32_t out_stride, float scale,
           const PyBuffer& weights, uint32_t weights_stride, const PyBuffer& partial, uint32_t chunk_keys) {
            kernels::span_attention_split(
                cl, q.buffer, kv.buffer, seq.buffer, step.buffer, out.buffer,
                {n_heads, head_dim, rows, q_stride, k_offset, v_offset, out_stride, scale, kv_stride, weights_stride},
                weights.buffer, partial.buffer, chunk_keys);
        },
        py::arg("cl"), py::arg("q"), py::arg("kv"), py::arg("seq"), py::arg("step"), py::arg("out"), py::arg("n_heads"),
        py::arg("head_dim"), py::arg("rows"), py::arg("q_stride"), py::arg("kv_stride"), py::arg("k_offset"),
        py::arg("v_offset"), py::arg("out_stride"), py::arg("scale"), py::arg("weights"), py::arg("weights_stride"),
        py::arg("partial"), py::arg("chunk_keys"));
    k.def("span_partial_floats", &kernels::span_partial_floats, py::arg("rows"), py::arg("n_heads"),
          py::arg("head_dim"));
    k.def(
        "window_attention",
        [](CommandList& cl, const PyBuffer& qkv, const PyBuffer& seq, const PyBuffer& step, const PyBuffer& out,
           uint32_t n_heads, uint32_t head_dim, uint32_t rows, uint32_t window, uint32_t tile_rows, float scale) {
            const uint32_t width = n_heads * head_dim;
            kernels::window_attention(cl, qkv.buffer, qkv.buffer, seq.buffer, step.buffer, out.buffer,
                                      {n_heads, head_dim, rows, 3 * width, width, 2 * width, width, scale}, window,
                                      tile_rows);
        },
        py::arg("cl"), py::arg("qkv"), py::arg("seq"), py::arg("step"), py::arg("out"), py::arg("n_heads"),
        py::arg("head_dim"), py::arg("rows"), py::arg("window"), py::arg("tile_rows"), py::arg("scale"));
    k.def(
        "conv_gather",
        [](CommandList& cl, const PyBuffer& x, const PyBuffer& out, const PyBuffer& step, uint32_t rows,
           uint32_t channels, uint32_t kernel, uint32_t stride, uint32_t pad, uint32_t t_in, uint32_t t_out,
           uint32_t window_stride, uint32_t c_stride, uint32_t t_stride) {
            kernels::conv_gather(cl, x.buffer, out.buffer, step.buffer,
                                 {rows, channels, kernel, stride, pad, t_in, t_out, window_stride, c_stride, t_stride});
        },
        py::arg("cl"), py::arg("x"), py::arg("out"), py::arg("step"), py::arg("rows"), py::arg("channels"),
        py::arg("kernel"), py::arg("stride"), py::arg("pad"), py::arg("t_in"), py::arg("t_out"),
        py::arg("window_stride"), py::arg("c_stride"), py::arg("t_stride"));
    k.def(
        "copy_rows",
        [](CommandList& cl, const PyBuffer& src, const PyBuffer& src_rows, const PyBuffer& dst,
           const PyBuffer& dst_rows, const PyBuffer& step, uint32_t rows, uint32_t n, uint32_t src_stride,
           uint32_t dst_stride, size_t src_extent, size_t dst_extent) {
            kernels::copy_rows(cl, src.buffer, src_rows.buffer, dst.buffer, dst_rows.buffer, step.buffer,
                               {rows, n, src_stride, dst_stride}, src_extent, dst_extent);
        },
        py::arg("cl"), py::arg("src"), py::arg("src_rows"), py::arg("dst"), py::arg("dst_rows"), py::arg("step"),
        py::arg("rows"), py::arg("n"), py::arg("src_stride"), py::arg("dst_stride"), py::arg("src_extent"),
        py::arg("dst_extent"));
    k.def(
        "whisper_pick",
        [](CommandList& cl, const PyBuffer& logits, const PyBuffer& row_slot, const PyBuffer& head_step,
           const PyBuffer& masks, const PyBuffer& state, const PyBuffer& tokens, const PyBuffer& logprobs,
           uint32_t vocab, uint32_t eot, uint32_t timestamp_begin, uint32_t no_timestamps, uint32_t no_speech,
           uint32_t mask_words, uint32_t step, uint32_t steps, uint32_t n_ctx, size_t rows, size_t slots,
           uint32_t top_k) {
            kernels::whisper_pick(
                cl, logits.buffer, row_slot.buffer, head_step.buffer, masks.buffer, state.buffer, tokens.buffer,
                logprobs.buffer,
                {vocab, eot, timestamp_begin, no_timestamps, no_speech, mask_words, step, steps, n_ctx}, rows, slots,
                top_k);
        },
        py::arg("cl"), py::arg("logits"), py::arg("row_slot"), py::arg("head_step"), py::arg("masks"), py::arg("state"),
        py::arg("tokens"), py::arg("logprobs"), py::arg("vocab"), py::arg("eot"), py::arg("timestamp_begin"),
        py::arg("no_timestamps"), py::arg("no_speech"), py::arg("mask_words"), py::arg("step"), py::arg("steps"),
        py::arg("n_ctx"), py::arg("rows"), py::arg("slots"), py::arg("top_k") = 0);
}

}  // namespace akunu::py_bindings

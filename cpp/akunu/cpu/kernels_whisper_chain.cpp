// CPU kernels of Whisper's greedy chains (engine/whisper_chain.h): whisper_chain_rows lays out a
// step's decoder rows from the slots' states, whisper_pick applies the logit rules to each row,
// takes the argmax and its log-probability and moves the slot on. Each matches its .comp file
// (shaders/) over the same workgroups: one for the rows, one per row for the picks. The sums of
// exponentials are in double: one float32 running sum over a whole vocabulary drops the many
// terms below half its last place (the shader's per-invocation partial sums do not).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "akunu/vulkan/cpu_kernel.h"
#include "params.h"

namespace akunu::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void chain_rows(const CpuArgs& a, size_t, size_t) {
    const auto& p = a.p<WhisperChainRowsParams>();
    const auto* slots = a.at<const WhisperChainSlot>(0);
    uint32_t *ids = a.at<uint32_t>(1), *pos = a.at<uint32_t>(2), *kv = a.at<uint32_t>(3);
    uint32_t *self = a.at<uint32_t>(4), *cross = a.at<uint32_t>(5), *head = a.at<uint32_t>(6);
    uint32_t* row_slot = a.at<uint32_t>(7);
    uint32_t n = 0;
    for (uint32_t s = 0; s < p.slots; ++s) {
        const WhisperChainSlot& st = slots[s];
        if ((st.flags & (AKUNU_CHAIN_ACTIVE | AKUNU_CHAIN_DONE)) != AKUNU_CHAIN_ACTIVE) continue;
        ids[n] = st.token;
        pos[n] = st.pos;
        kv[n] = s * p.n_ctx + st.pos;
        self[2 * n] = s * p.n_ctx;
        self[2 * n + 1] = st.pos + 1;
        cross[2 * n] = st.cross_base;
        cross[2 * n + 1] = p.audio_ctx;
        head[n] = n;
        row_slot[n] = s;
        ++n;
    }
    *a.at<StepState>(8) = StepState{0, 0, n, 0};
    *a.at<StepState>(9) = StepState{0, 0, n, 0};
}

// One row's logits under the rules of its slot (whisper_pick.comp's ruled()).
struct Ruled {
    const WhisperPickParams& p;
    const WhisperChainSlot& st;
    const float* logits;
    const uint32_t *suppress, *begin;
    bool last_ts = false, penultimate_ts = false;
    uint32_t ts_floor = 0;

    float raw(uint32_t i) const { return std::isfinite(logits[i]) ? logits[i] : kNegInf; }
    static bool bit(const uint32_t* mask, uint32_t i) { return (mask[i >> 5] >> (i & 31u)) & 1u; }
    float operator()(uint32_t i) const {
        float v = raw(i);
        if (bit(suppress, i) || (st.generated == 0 && bit(begin, i))) v = kNegInf;
        if (st.flags & AKUNU_CHAIN_TIMESTAMPS) {
            const uint32_t tb = p.timestamp_begin;
            if (i == p.no_timestamps) v = kNegInf;
            if (last_ts && (penultimate_ts ? i >= tb : i < p.eot)) v = kNegInf;
            if (i >= tb && i < ts_floor) v = kNegInf;
            if (st.generated == 0 && (i < tb || (st.max_initial != AKUNU_CHAIN_NONE && i > tb + st.max_initial)))
                v = kNegInf;
        }
        return v;
    }
};

// The slot's state after picking `token` at its current row.
void advance(WhisperChainSlot& st, uint32_t token, const WhisperPickParams& p) {
    st.picks += 1;
    st.pos += 1;
    if (token == p.eot) {
        st.flags |= AKUNU_CHAIN_DONE;
        return;
    }
    st.generated += 1;
    st.before_last = st.last;
    st.last = token;
    if (token >= p.timestamp_begin) st.last_stamp = token;
    st.token = token;
    if (st.generated >= st.max_new || st.pos >= p.n_ctx) st.flags |= AKUNU_CHAIN_DONE;
}

// top_k > 0: the top_k likeliest ids of [from, vocab) under the rules, likeliest first (lowest
// id on ties), with log-probabilities against `lse`, into columns [0, top_k) of the slot's row
// (whisper_pick.comp's write_top).
void write_top(const CpuArgs& a, const Ruled& x, uint32_t slot, uint32_t from, float lse, uint32_t top_k) {
    const auto& p = a.p<WhisperPickParams>();
    uint32_t* tokens = a.at<uint32_t>(5) + size_t(slot) * p.steps;
    float* logprobs = a.at<float>(6) + size_t(slot) * p.steps;
    for (uint32_t j = 0; j < top_k; ++j) {
        float v = kNegInf;
        uint32_t at = 0xFFFFFFFFu;
        for (uint32_t i = from; i < p.vocab; ++i) {
            if (std::find(tokens, tokens + j, i) != tokens + j) continue;
            const float xi = x(i);
            if (xi > v) v = xi, at = i;
        }
        tokens[j] = v == kNegInf ? 0xFFFFFFFFu : at;
        logprobs[j] = v == kNegInf ? kNegInf : v - lse;
    }
}

void pick(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<WhisperPickParams>();
    const auto& head_step = *a.at<const StepState>(2);
    auto* slots = a.at<WhisperChainSlot>(4);
    const uint32_t tb = p.timestamp_begin;
    for (size_t row = begin; row < end && row < head_step.n_tokens; ++row) {
        const uint32_t slot = a.at<const uint32_t>(1)[row];
        WhisperChainSlot& st = slots[slot];
        const uint32_t* mask = a.at<const uint32_t>(3) + size_t(slot) * 2 * p.mask_words;
        Ruled x{p, st, a.at<const float>(0) + row * p.vocab, mask, mask + p.mask_words};
        x.last_ts = st.generated >= 1 && st.last >= tb;
        x.penultimate_ts = st.generated < 2 || st.before_last >= tb;
        if (st.last_stamp != AKUNU_CHAIN_NONE)
            x.ts_floor = x.last_ts && !x.penultimate_ts ? st.last_stamp : st.last_stamp + 1;
        float text_max = kNegInf, ts_max = kNegInf, raw_max = kNegInf;
        uint32_t text_at = 0xFFFFFFFFu, ts_at = 0xFFFFFFFFu;
        for (uint32_t i = 0; i < p.vocab; ++i) {
            const float v = x(i);
            if (i < tb && v > text_max) text_max = v, text_at = i;
            if (i >= tb && v > ts_max) ts_max = v, ts_at = i;
            raw_max = std::max(raw_max, x.raw(i));
        }
        bool force = false;
        if ((st.flags & AKUNU_CHAIN_TIMESTAMPS) && ts_max > kNegInf) {
            double sum = 0.0;
            for (uint32_t i = tb; i < p.vocab; ++i) sum += std::exp(x(i) - ts_max);
            force = ts_max + float(std::log(sum)) > text_max;
        }
        const bool take_ts = force || ts_max > text_max;
        const float best = take_ts ? ts_max : text_max;
        if (a.spec[0] > 0) {
            double sum = 0.0;
            if (best > kNegInf)
                for (uint32_t i = force ? tb : 0; i < p.vocab; ++i) sum += std::exp(x(i) - best);
            write_top(a, x, slot, force ? tb : 0, best + float(std::log(sum)), a.spec[0]);
            if (best == kNegInf) {  // nothing left: <|endoftext|>, as a pick takes it
                a.at<uint32_t>(5)[size_t(slot) * p.steps] = p.eot;
                a.at<float>(6)[size_t(slot) * p.steps] = 0.0f;
            }
            continue;
        }
        uint32_t token = take_ts ? ts_at : text_at;
        float logprob = 0.0f;
        if (best == kNegInf) {
            token = p.eot;
        } else {
            double sum = 0.0;
            for (uint32_t i = force ? tb : 0; i < p.vocab; ++i) sum += std::exp(x(i) - best);
            logprob = float(-std::log(sum));
        }
        if (st.generated == 0 && p.no_speech != AKUNU_CHAIN_NONE) {
            double sum = 0.0;
            for (uint32_t i = 0; i < p.vocab; ++i) sum += std::exp(x.raw(i) - raw_max);
            st.no_speech = float(std::exp(x.raw(p.no_speech) - raw_max) / sum);
        }
        a.at<uint32_t>(5)[size_t(slot) * p.steps + p.step] = token;
        a.at<float>(6)[size_t(slot) * p.steps + p.step] = logprob;
        advance(st, token, p);
    }
}

}  // namespace

void register_whisper_chain(void (*add_row)(const KernelRow&)) {
    add_row({"whisper_chain_rows", {chain_rows, 0, 1}});
    add_row({"whisper_pick", {pick, 0, 1}});
}

}  // namespace akunu::cpu

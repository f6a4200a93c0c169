// CPU kernels of Whisper's greedy chains (engine/whisper_chain.h): whisper_chain_rows lays out a
// step's decoder rows from the slots' states, whisper_pick applies the logit rules to each row,
// takes the argmax and its log-probability and moves the slot on. Each matches its .comp file
// (shaders/) over the same workgroups: one for the rows, one per row for the picks. A pick lays
// its row out once under the rules (each rule removes a range or a mask of ids) and scans that.
// The sums of exponentials are in double: one float32 running sum over a whole vocabulary drops
// the many terms below half its last place (the shader's per-invocation partial sums do not).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "akunu/cpu/vec_math.h"
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

// The rules' state of a slot before its pick (whisper_pick.comp's ruled()).
struct SlotRules {
    bool timestamps, first, last_ts, penultimate_ts;
    uint32_t ts_floor = 0;

    SlotRules(const WhisperChainSlot& st, uint32_t tb)
        : timestamps(st.flags & AKUNU_CHAIN_TIMESTAMPS),
          first(st.generated == 0),
          last_ts(st.generated >= 1 && st.last >= tb),
          penultimate_ts(st.generated < 2 || st.before_last >= tb) {
        if (st.last_stamp != AKUNU_CHAIN_NONE)
            ts_floor = last_ts && !penultimate_ts ? st.last_stamp : st.last_stamp + 1;
    }
};

// x[i] = logits[i], -inf where it is not finite.
void finite_row(const float* logits, uint32_t vocab, float* x) {
    for (uint32_t i = 0; i < vocab; ++i) x[i] = std::isfinite(logits[i]) ? logits[i] : kNegInf;
}

// -inf over [lo, hi) of x[0, vocab).
void remove(float* x, uint32_t vocab, uint32_t lo, uint32_t hi) {
    if (lo < std::min(hi, vocab)) std::fill(x + lo, x + std::min(hi, vocab), kNegInf);
}

// -inf at every id whose bit the mask sets.
void remove_masked(float* x, uint32_t vocab, const uint32_t* mask, uint32_t words) {
    for (uint32_t w = 0; w < words; ++w)
        for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
            const uint32_t i = w * 32 + uint32_t(__builtin_ctz(bits));
            if (i < vocab) x[i] = kNegInf;
        }
}

// The rules on a finite_row: each rule removes a set of ids (rules.py LogitRules.apply).
void apply_rules(float* x, const WhisperPickParams& p, const WhisperChainSlot& st, const uint32_t* mask) {
    const SlotRules r(st, p.timestamp_begin);
    const uint32_t v = p.vocab, tb = p.timestamp_begin;
    remove_masked(x, v, mask, p.mask_words);
    if (r.first) remove_masked(x, v, mask + p.mask_words, p.mask_words);
    if (!r.timestamps) return;
    x[p.no_timestamps] = kNegInf;
    if (r.last_ts) r.penultimate_ts ? remove(x, v, tb, v) : remove(x, v, 0, p.eot);
    remove(x, v, tb, r.ts_floor);
    if (r.first) {
        remove(x, v, 0, tb);
        const uint64_t latest = uint64_t(tb) + st.max_initial;
        if (st.max_initial != AKUNU_CHAIN_NONE && latest + 1 < v) remove(x, v, uint32_t(latest + 1), v);
    }
}

// The first index of the largest of x[lo, hi) and that value; (0xFFFFFFFF, -inf) when all are -inf.
std::pair<uint32_t, float> arg_max(const float* x, uint32_t lo, uint32_t hi) {
    float lane[8] = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
    uint32_t i = lo;
    for (; i + 8 <= hi; i += 8)
        for (uint32_t l = 0; l < 8; ++l) lane[l] = std::max(lane[l], x[i + l]);
    for (; i < hi; ++i) lane[0] = std::max(lane[0], x[i]);
    const float m = *std::max_element(lane, lane + 8);
    if (m == kNegInf) return {0xFFFFFFFFu, kNegInf};
    return {uint32_t(std::find(x + lo, x + hi, m) - x), m};
}

// log sum_i exp(x[i] - top) over [lo, vocab), top the largest x[i] there (> -inf).
float log_sum_shifted(const float* x, uint32_t lo, uint32_t vocab, float top) {
    return float(std::log(vec_math().sum_exp(x + lo, vocab - lo, top)));
}

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

// The top_k likeliest ids of x[from, vocab) (-inf: none), likeliest first with the lowest id on
// ties (whisper_pick.comp's write_top): one pass, each id against the k-th so far.
uint32_t top_ids(const float* x, uint32_t from, uint32_t vocab, uint32_t top_k, uint32_t* ids, float* vals) {
    uint32_t n = 0;
    float floor = kNegInf;  // what an id must exceed to enter
    for (uint32_t i = from; i < vocab; ++i) {
        if (!(x[i] > floor)) continue;
        uint32_t at = n < top_k ? n++ : top_k - 1;
        for (; at > 0 && vals[at - 1] < x[i]; --at) ids[at] = ids[at - 1], vals[at] = vals[at - 1];
        ids[at] = i, vals[at] = x[i];
        if (n == top_k) floor = vals[top_k - 1];
    }
    return n;
}

// top_k > 0: the top_k likeliest ids of [from, vocab) under the rules, with log-probabilities
// against `lse`, into columns [0, top_k) of the slot's row; 0xFFFFFFFF and -inf past them.
void write_top(const CpuArgs& a, const float* x, uint32_t slot, uint32_t from, float lse, uint32_t top_k) {
    const auto& p = a.p<WhisperPickParams>();
    uint32_t* tokens = a.at<uint32_t>(5) + size_t(slot) * p.steps;
    float* logprobs = a.at<float>(6) + size_t(slot) * p.steps;
    float vals[16];
    const uint32_t n = top_ids(x, from, p.vocab, top_k, tokens, vals);
    for (uint32_t j = 0; j < top_k; ++j) {
        if (j >= n) tokens[j] = 0xFFFFFFFFu;
        logprobs[j] = j < n ? vals[j] - lse : kNegInf;
    }
}

// p(no_speech) of a finite_row before the rules.
float no_speech_prob(const float* raw, const WhisperPickParams& p) {
    const float m = arg_max(raw, 0, p.vocab).second;
    if (m == kNegInf) return 0.0f;
    return float(std::exp(double(raw[p.no_speech] - m)) / vec_math().sum_exp(raw, p.vocab, m));
}

void pick(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<WhisperPickParams>();
    const auto& head_step = *a.at<const StepState>(2);
    auto* slots = a.at<WhisperChainSlot>(4);
    const uint32_t tb = p.timestamp_begin;
    thread_local std::vector<float> row;
    row.resize(p.vocab);
    float* x = row.data();
    for (size_t r = begin; r < end && r < head_step.n_tokens; ++r) {
        const uint32_t slot = a.at<const uint32_t>(1)[r];
        WhisperChainSlot& st = slots[slot];
        finite_row(a.at<const float>(0) + r * p.vocab, p.vocab, x);
        const bool no_speech = a.spec[0] == 0 && st.generated == 0 && p.no_speech != AKUNU_CHAIN_NONE;
        if (no_speech) st.no_speech = no_speech_prob(x, p);
        apply_rules(x, p, st, a.at<const uint32_t>(3) + size_t(slot) * 2 * p.mask_words);
        const auto [text_at, text_max] = arg_max(x, 0, tb);
        const auto [ts_at, ts_max] = arg_max(x, tb, p.vocab);
        // The timestamp rule: all timestamps together likelier than the likeliest text token.
        const bool force = (st.flags & AKUNU_CHAIN_TIMESTAMPS) && ts_max > kNegInf &&
                           ts_max + log_sum_shifted(x, tb, p.vocab, ts_max) > text_max;
        const bool take_ts = force || ts_max > text_max;
        const float best = take_ts ? ts_max : text_max;
        const uint32_t from = force ? tb : 0;
        const float shifted = best > kNegInf ? log_sum_shifted(x, from, p.vocab, best) : kNegInf;
        if (a.spec[0] > 0) {
            write_top(a, x, slot, from, best + shifted, a.spec[0]);
            if (best == kNegInf) {  // nothing left: <|endoftext|>, as a pick takes it
                a.at<uint32_t>(5)[size_t(slot) * p.steps] = p.eot;
                a.at<float>(6)[size_t(slot) * p.steps] = 0.0f;
            }
            continue;
        }
        const uint32_t token = best == kNegInf ? p.eot : take_ts ? ts_at : text_at;
        a.at<uint32_t>(5)[size_t(slot) * p.steps + p.step] = token;
        a.at<float>(6)[size_t(slot) * p.steps + p.step] = best == kNegInf ? 0.0f : -shifted;
        advance(st, token, p);
    }
}

}  // namespace

void register_whisper_chain(void (*add_row)(const KernelRow&)) {
    add_row({"whisper_chain_rows", {chain_rows, 0, 1}});
    add_row({"whisper_pick", {pick, 0, 1}});
}

}  // namespace akunu::cpu

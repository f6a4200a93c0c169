#version 450
#extension GL_GOOGLE_include_directive : require
// whisper_pick: a greedy chain's token for each decoder row (WhisperPickParams), one workgroup
// per row, and the row's slot's next state (cpu/kernels_whisper_chain.cpp is the same on the
// CPU backend).
//
// The rules are rules.py's LogitRules.apply, as a mask over the logits: non-finite logits,
// suppressed ids, begin_suppress on the first pick, and with timestamps the grammar (no
// <|notimestamps|>; pairs; never back in time; a timestamp first, no later than max_initial).
// Then a timestamp is forced where the timestamps' log-sum-exp exceeds the largest text logit.
// The token is the argmax of what remains (lowest id on ties; <|endoftext|> when nothing does)
// and its log-probability is -log(sum(exp(x - max))) over what remains.
//
// TOP_K > 0 (beam search, WhisperModel::decode_top): no pick. The TOP_K likeliest ids of what
// remains, likeliest first (lowest id on ties), and their log-probabilities go to columns
// [0, TOP_K) of the slot's row of tokens and logprobs (0xFFFFFFFF and -inf where fewer remain;
// <|endoftext|> with 0 first where none does); the slot's state stays as it is.
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TOP_K = 0;  // 0: a chain's pick; else the likeliest TOP_K (<= 16)
layout(std430, binding = 0) readonly buffer L { float logits[]; };                // [rows, vocab]
layout(std430, binding = 1) readonly buffer RowSlot { uint row_slot[]; };         // [rows]
layout(std430, binding = 2) readonly buffer HeadStep { StepState head_step; };
layout(std430, binding = 3) readonly buffer Masks { uint masks[]; };              // [slots, 2, mask_words]
layout(std430, binding = 4) buffer State { WhisperChainSlot slots[]; };           // [slots]
layout(std430, binding = 5) writeonly buffer Tok { uint out_tokens[]; };          // [slots, steps]
layout(std430, binding = 6) writeonly buffer Lp { float out_logprobs[]; };        // [slots, steps]
layout(push_constant) uniform Push { WhisperPickParams p; };

const float NEG_INF = -1.0 / 0.0;
shared float best_score[AKUNU_MAX_SUBGROUPS];
shared uint best_index[AKUNU_MAX_SUBGROUPS];
shared uint taken[16];  // TOP_K: the ids already written

// The largest score over the workgroup and its lowest index (every invocation gets both).
void workgroup_argmax(inout float score, inout uint index) {
    const float m = subgroupMax(score);
    const uint i = subgroupMin(score == m ? index : 0xFFFFFFFFu);
    if (subgroupElect()) {
        best_score[gl_SubgroupID] = m;
        best_index[gl_SubgroupID] = i;
    }
    barrier();
    score = NEG_INF;
    index = 0xFFFFFFFFu;
    for (uint s = 0; s < gl_NumSubgroups; ++s)
        if (best_score[s] > score || (best_score[s] == score && best_index[s] < index)) {
            score = best_score[s];
            index = best_index[s];
        }
    barrier();
}

uint row_base, mask_base;
WhisperChainSlot st;
bool last_ts, penultimate_ts;
uint ts_floor;  // timestamps below this are masked (0: none)

bool masked_bit(uint word_base, uint i) { return (masks[word_base + (i >> 5)] & (1u << (i & 31u))) != 0u; }

float raw(uint i) {
    const float v = logits[row_base + i];
    return isnan(v) || isinf(v) ? NEG_INF : v;
}

// x[i] after the rules, before the forced timestamp.
float ruled(uint i) {
    float v = raw(i);
    if (masked_bit(mask_base, i) || (st.generated == 0u && masked_bit(mask_base + p.mask_words, i))) v = NEG_INF;
    if ((st.flags & AKUNU_CHAIN_TIMESTAMPS) != 0u) {
        const uint tb = p.timestamp_begin;
        if (i == p.no_timestamps) v = NEG_INF;
        if (last_ts && (penultimate_ts ? i >= tb : i < p.eot)) v = NEG_INF;
        if (i >= tb && i < ts_floor) v = NEG_INF;
        if (st.generated == 0u && (i < tb || (st.max_initial != AKUNU_CHAIN_NONE && i > tb + st.max_initial)))
            v = NEG_INF;
    }
    return v;
}

// TOP_K: the likeliest ids of [from, vocab) under the rules, each round the argmax of what the
// rounds before left, with log-probabilities against the log-sum-exp `lse` of that range.
void write_top(uint slot, uint from, float lse) {
    const uint tid = gl_LocalInvocationID.x;
    for (uint j = 0; j < TOP_K; ++j) {
        float v = NEG_INF;
        uint at = 0xFFFFFFFFu;
        for (uint i = from + tid; i < p.vocab; i += gl_WorkGroupSize.x) {
            bool seen = false;
            for (uint t = 0; t < j; ++t) seen = seen || taken[t] == i;
            const float x = seen ? NEG_INF : ruled(i);
            if (x > v) v = x, at = i;
        }
        workgroup_argmax(v, at);
        if (tid == 0u) {
            out_tokens[slot * p.steps + j] = v == NEG_INF ? 0xFFFFFFFFu : at;
            out_logprobs[slot * p.steps + j] = v == NEG_INF ? NEG_INF : v - lse;
            taken[j] = at;
        }
        barrier();
    }
}

void main() {
    const uint row = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    if (row >= head_step.n_tokens) return;  // uniform across the workgroup
    const uint slot = row_slot[row];
    st = slots[slot];
    row_base = row * p.vocab;
    mask_base = slot * 2u * p.mask_words;
    const uint tb = p.timestamp_begin;
    last_ts = st.generated >= 1u && st.last >= tb;
    penultimate_ts = st.generated < 2u || st.before_last >= tb;
    ts_floor = 0u;
    if (st.last_stamp != AKUNU_CHAIN_NONE) ts_floor = last_ts && !penultimate_ts ? st.last_stamp : st.last_stamp + 1u;
    const bool stamps = (st.flags & AKUNU_CHAIN_TIMESTAMPS) != 0u;

    // Maxima (and their lowest ids) of the text ids [0, tb) and of the timestamps [tb, vocab).
    float text_max = NEG_INF, ts_max = NEG_INF, raw_max = NEG_INF;
    uint text_at = 0xFFFFFFFFu, ts_at = 0xFFFFFFFFu;
    for (uint i = tid; i < p.vocab; i += gl_WorkGroupSize.x) {
        const float v = ruled(i);
        if (i < tb && v > text_max) text_max = v, text_at = i;
        if (i >= tb && v > ts_max) ts_max = v, ts_at = i;
        raw_max = max(raw_max, raw(i));
    }
    workgroup_argmax(text_max, text_at);
    workgroup_argmax(ts_max, ts_at);
    raw_max = workgroup_max(raw_max);
    // The timestamps' log-sum-exp against the likeliest text token.
    bool force = false;
    if (stamps && ts_max > NEG_INF) {
        float sum = 0.0;
        for (uint i = tb + tid; i < p.vocab; i += gl_WorkGroupSize.x) sum += exp(ruled(i) - ts_max);
        force = ts_max + log(workgroup_sum(sum)) > text_max;
    }
    const bool take_ts = force || ts_max > text_max;
    const float best = take_ts ? ts_max : text_max;
    if (TOP_K > 0u) {
        float sum = 0.0;
        if (best > NEG_INF)
            for (uint i = (force ? tb : 0u) + tid; i < p.vocab; i += gl_WorkGroupSize.x) sum += exp(ruled(i) - best);
        sum = workgroup_sum(sum);
        write_top(slot, force ? tb : 0u, best + log(sum));
        if (best == NEG_INF && tid == 0u) {  // nothing left: <|endoftext|>, as a pick takes it
            out_tokens[slot * p.steps] = p.eot;
            out_logprobs[slot * p.steps] = 0.0;
        }
        return;
    }
    uint token = take_ts ? ts_at : text_at;
    float logprob = 0.0;
    if (best == NEG_INF) {
        token = p.eot;  // nothing left to choose: end the text
    } else {
        float sum = 0.0;
        for (uint i = (force ? tb : 0u) + tid; i < p.vocab; i += gl_WorkGroupSize.x) sum += exp(ruled(i) - best);
        logprob = -log(workgroup_sum(sum));
    }
    // p(no_speech) of the raw logits at the first pick.
    float no_speech = st.no_speech;
    if (st.generated == 0u && p.no_speech != AKUNU_CHAIN_NONE) {
        float sum = 0.0;
        for (uint i = tid; i < p.vocab; i += gl_WorkGroupSize.x) sum += exp(raw(i) - raw_max);
        no_speech = exp(raw(p.no_speech) - raw_max) / workgroup_sum(sum);
    }
    if (tid != 0u) return;
    out_tokens[slot * p.steps + p.step] = token;
    out_logprobs[slot * p.steps + p.step] = logprob;
    st.no_speech = no_speech;
    st.picks += 1u;
    st.pos += 1u;  // the row just fed is cached
    if (token == p.eot) {
        st.flags |= AKUNU_CHAIN_DONE;
    } else {
        st.generated += 1u;
        st.before_last = st.last;
        st.last = token;
        if (token >= tb) st.last_stamp = token;
        st.token = token;
        if (st.generated >= st.max_new || st.pos >= p.n_ctx) st.flags |= AKUNU_CHAIN_DONE;
    }
    slots[slot] = st;
}

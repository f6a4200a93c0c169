// WhisperModel's greedy chains (whisper_chain.h): the chain's buffers, its recording, and
// decode_greedy, which writes the slots' states and runs chains until every slot is done.
#include "akunu/engine/whisper_chain.h"

#include <algorithm>
#include <map>

#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/whisper_model.h"
#include "akunu/vulkan/device.h"

namespace akunu {

namespace {

constexpr int kDefaultChainSteps = 16;  // tuning whisper_chain=auto
constexpr uint32_t kRunning = AKUNU_CHAIN_ACTIVE | AKUNU_CHAIN_DONE;  // flags & kRunning == ACTIVE: running

bool running(const WhisperChainSlot& st) { return (st.flags & kRunning) == AKUNU_CHAIN_ACTIVE; }

}  // namespace

int whisper_chain_steps(int tuned, int max_context) {
    return std::min(tuned < 0 ? kDefaultChainSteps : tuned, max_context);
}

std::vector<std::pair<std::string, uint64_t>> whisper_chain_layout(int vocab, int slots, int steps) {
    if (steps == 0) return {};
    const uint64_t s = uint64_t(slots), k = uint64_t(steps), mask_words = (uint64_t(vocab) + 31) / 32;
    return {{"chain_state", s * sizeof(WhisperChainSlot)},
            {"chain_masks", s * 2 * mask_words * 4},
            {"chain_tokens", s * k * 4},
            {"chain_logprobs", s * k * 4},
            {"chain_row_slot", s * 4}};
}

void WhisperModel::allocate_chain() {
    chain_.steps = whisper_chain_steps(device_->profile().tuning.whisper_chain, config_.max_context);
    if (chain_.steps == 0) return;
    const size_t s = size_t(slots_), k = size_t(chain_.steps);
    chain_.mask_words = uint32_t((config_.vocab_size + 31) / 32);
    // The host writes the states and masks and reads the picks: host memory, but for the rows'
    // slots, which only the device reads and writes.
    const std::map<std::string, std::pair<Buffer*, Residency>> named = {
        {"chain_state", {&chain_.state, Residency::kHost}},
        {"chain_masks", {&chain_.masks, Residency::kHost}},
        {"chain_tokens", {&chain_.tokens, Residency::kHost}},
        {"chain_logprobs", {&chain_.logprobs, Residency::kHost}},
        {"chain_row_slot", {&chain_.row_slot, Residency::kAuto}}};
    for (const auto& [name, bytes] : whisper_chain_layout(config_.vocab_size, slots_, chain_.steps)) {
        const auto& [buffer, residency] = named.at(name);
        *buffer = Buffer::allocate(device_, bytes, residency);
    }
    chain_.host.assign(s, WhisperChainSlot{});
    chain_.mask_bits.assign(2 * size_t(chain_.mask_words), 0);
    chain_.picked.assign(s * k, 0);
    chain_.picked_lp.assign(s * k, 0.0f);
}

// `steps` chain steps into one command list, each the rows, the decoder and the picks (with
// top_k > 0: beam candidates); the special ids are the picks' push constants.
std::unique_ptr<CommandList> WhisperModel::record_picks(const GreedySpecials& sp, int steps, uint32_t top_k) const {
    const uint32_t s = uint32_t(slots_), ctx = uint32_t(config_.max_context);
    const kernels::ChainRowsBindings rows{
        chain_.state, ids_, pos_, kv_rows_, self_seq_, cross_seq_, head_rows_, chain_.row_slot, dec_step_, head_step_};
    const WhisperChainRowsParams rows_params{s, ctx, uint32_t(config_.audio_ctx)};
    WhisperPickParams pick{uint32_t(config_.vocab_size),
                           uint32_t(sp.eot),
                           uint32_t(sp.timestamp_begin),
                           uint32_t(sp.no_timestamps),
                           sp.no_speech < 0 ? AKUNU_CHAIN_NONE : uint32_t(sp.no_speech),
                           chain_.mask_words,
                           0,
                           uint32_t(chain_.steps),
                           ctx};
    auto cl = std::make_unique<CommandList>(device_, 0);
    cl->begin();
    for (int k = 0; k < steps; ++k) {
        cl->set_label("chain." + std::to_string(k));
        kernels::whisper_chain_rows(*cl, rows, rows_params, size_t(short_rows_));
        dec_short_table_->record(*cl);
        pick.step = uint32_t(k);
        kernels::whisper_pick(*cl, logits_, chain_.row_slot, head_step_, chain_.masks, chain_.state, chain_.tokens,
                              chain_.logprobs, pick, s, s, top_k);
    }
    cl->end();
    return cl;
}

void WhisperModel::record_chain(const GreedySpecials& sp) {
    chain_.cl = record_picks(sp, chain_.steps, 0);
    chain_.recorded = sp;
}

void WhisperModel::check_greedy(const std::vector<GreedyRequest>& requests, const GreedySpecials& sp,
                                const std::string& what) const {
    AKUNU_CHECK(chain_.steps > 0, what +
                                      ": chains are off (tuning whisper_chain=0); decode() steps one "
                                      "token at a time");
    AKUNU_CHECK(!requests.empty(), what + ": no requests");
    const int vocab = config_.vocab_size;
    auto in_vocab = [&](int id) { return id >= 0 && id < vocab; };
    AKUNU_CHECK(in_vocab(sp.eot) && in_vocab(sp.no_timestamps) && in_vocab(sp.timestamp_begin) &&
                    (sp.no_speech < 0 || in_vocab(sp.no_speech)) && sp.eot < sp.timestamp_begin &&
                    sp.no_timestamps < sp.timestamp_begin,
                what + ": eot " + std::to_string(sp.eot) + ", no_timestamps " + std::to_string(sp.no_timestamps) +
                    " and timestamp_begin " + std::to_string(sp.timestamp_begin) +
                    " must be ids of the vocabulary of " + std::to_string(vocab) +
                    ", with timestamp_begin after the other two");
    std::vector<bool> seen(size_t(slots_), false);
    for (const GreedyRequest& r : requests) {
        check_slot(r.seq, what.c_str());
        const std::string seq = what + ": sequence " + std::to_string(r.seq);
        AKUNU_CHECK(!seen[size_t(r.seq)], seq + " is listed twice");
        seen[size_t(r.seq)] = true;
        AKUNU_CHECK(audio_[size_t(r.seq)] >= 0,
                    seq + " has no audio; call set_audio(seq, window) after encode() first");
        AKUNU_CHECK(lengths_[size_t(r.seq)] < config_.max_context,
                    seq + " holds all " + std::to_string(config_.max_context) + " positions (n_text_ctx)");
        AKUNU_CHECK(in_vocab(r.token), seq + ": token id " + std::to_string(r.token) +
                                           " is out of range for a vocabulary of " + std::to_string(vocab));
        AKUNU_CHECK(r.max_new >= 1, seq + ": max_new must be at least 1, not " + std::to_string(r.max_new));
        AKUNU_CHECK(r.rules.max_initial >= -1, seq + ": max_initial must be -1 (none) or at least 0");
        for (const auto* ids : {&r.rules.suppress, &r.rules.begin_suppress})
            for (int id : *ids)
                AKUNU_CHECK(in_vocab(id), seq + ": suppressed id " + std::to_string(id) +
                                              " is out of range for a vocabulary of " + std::to_string(vocab));
    }
}

// Each requested slot's state and masks; every other slot is inactive.
void WhisperModel::start_greedy(const std::vector<GreedyRequest>& requests) {
    std::fill(chain_.host.begin(), chain_.host.end(), WhisperChainSlot{});
    const size_t words = chain_.mask_words;
    for (const GreedyRequest& r : requests) {
        uint32_t audio = 0;  // the first slot with the same audio, as decode() reads it
        while (audio_[audio] != audio_[size_t(r.seq)]) ++audio;
        const GreedyRules& rules = r.rules;
        chain_.host[size_t(r.seq)] = {
            uint32_t(r.token),
            uint32_t(lengths_[size_t(r.seq)]),
            0,
            uint32_t(r.max_new),
            0,
            0,
            AKUNU_CHAIN_NONE,
            AKUNU_CHAIN_ACTIVE | (rules.timestamps ? AKUNU_CHAIN_TIMESTAMPS : 0u),
            rules.max_initial < 0 ? AKUNU_CHAIN_NONE : uint32_t(rules.max_initial),
            audio * uint32_t(config_.audio_ctx),
            0,
            0.0f,
        };
        std::fill(chain_.mask_bits.begin(), chain_.mask_bits.end(), 0u);
        for (int id : rules.suppress) chain_.mask_bits[size_t(id) / 32] |= 1u << (id % 32);
        for (int id : rules.begin_suppress) chain_.mask_bits[words + size_t(id) / 32] |= 1u << (id % 32);
        chain_.masks.write(chain_.mask_bits.data(), 2 * words * 4, size_t(r.seq) * 2 * words * 4);
    }
}

std::vector<GreedyResult> WhisperModel::decode_greedy(const std::vector<GreedyRequest>& requests,
                                                      const GreedySpecials& specials) {
    check_greedy(requests, specials);
    if (!chain_.cl || !(chain_.recorded == specials)) record_chain(specials);
    start_greedy(requests);
    std::vector<GreedyResult> out(requests.size());
    const size_t k = size_t(chain_.steps), state_bytes = chain_.host.size() * sizeof(WhisperChainSlot);
    uint32_t last_rows = 0;
    std::vector<char> live(requests.size());
    for (;;) {
        uint32_t n = 0;
        for (size_t i = 0; i < requests.size(); ++i) {
            WhisperChainSlot& st = chain_.host[size_t(requests[i].seq)];
            st.picks = 0;
            live[i] = running(st);
            n += live[i] ? 1 : 0;
        }
        if (n == 0) break;
        chain_.state.write(chain_.host.data(), state_bytes);
        dec_short_table_->set_tokens(n);
        chain_.cl->submit_and_wait();
        chain_.state.read(chain_.host.data(), state_bytes);
        chain_.tokens.read(chain_.picked.data(), chain_.picked.size() * 4);
        chain_.logprobs.read(chain_.picked_lp.data(), chain_.picked_lp.size() * 4);
        uint32_t most = 0;
        for (size_t i = 0; i < requests.size(); ++i) {
            if (!live[i]) continue;
            const size_t seq = size_t(requests[i].seq), at = seq * k;
            const uint32_t picks = chain_.host[seq].picks;
            AKUNU_CHECK(picks >= 1 && picks <= k, "decode_greedy: a chain made " + std::to_string(picks) +
                                                      " picks for sequence " + std::to_string(seq) + " in " +
                                                      std::to_string(k) + " steps; the device did not run it");
            out[i].tokens.insert(out[i].tokens.end(), chain_.picked.begin() + long(at),
                                 chain_.picked.begin() + long(at + picks));
            out[i].logprobs.insert(out[i].logprobs.end(), chain_.picked_lp.begin() + long(at),
                                   chain_.picked_lp.begin() + long(at + picks));
            most = std::max(most, picks);
        }
        // The last step that had rows held the slots that picked at every step that had any.
        last_rows = 0;
        for (size_t i = 0; i < requests.size(); ++i)
            last_rows += live[i] && chain_.host[size_t(requests[i].seq)].picks == most ? 1 : 0;
    }
    for (size_t i = 0; i < requests.size(); ++i) {
        const WhisperChainSlot& st = chain_.host[size_t(requests[i].seq)];
        out[i].no_speech_prob = specials.no_speech < 0 ? 0.0f : st.no_speech;
        lengths_[size_t(requests[i].seq)] = int(st.pos);
    }
    // profile("decoder") and cross_attention() read the last step that had rows.
    const StepState rows{0, 0, last_rows, 0};
    dec_step_.write(&rows, sizeof rows);
    head_step_.write(&rows, sizeof rows);
    last_rows_ = int(last_rows);
    last_short_ = true;
    return out;
}

}  // namespace akunu

// WhisperModel::decode_top (whisper_model.h): beam search's step with its candidates picked on
// the device. One submission runs a chain's step (whisper_chain.h) whose pick writes each slot's
// likeliest ids under its rules instead of one token (whisper_pick's top_k), so the host reads
// top_k ids and log-probabilities per beam, not its row of logits, and ranks the beams from them.
#include <algorithm>

#include "akunu/core/error.h"
#include "akunu/engine/whisper_chain.h"
#include "akunu/engine/whisper_model.h"

namespace akunu {

namespace {

// The largest top_k: whisper_pick's shared list of ids already taken.
constexpr int kMaxTopK = 16;
// A beam step picks nothing, so its state's max_new never stops it.
constexpr int kNoLimit = 1 << 30;

// What whisper_pick's rules read of a slot's state: the tokens so far, the last two and the
// latest timestamp (as decode_greedy's picks would have left them after `history`).
void set_history(WhisperChainSlot& st, const std::vector<int>& history, int timestamp_begin) {
    const size_t n = history.size();
    st.generated = uint32_t(n);
    st.last = n >= 1 ? uint32_t(history[n - 1]) : 0u;
    st.before_last = n >= 2 ? uint32_t(history[n - 2]) : 0u;
    st.last_stamp = AKUNU_CHAIN_NONE;
    for (int id : history)
        if (id >= timestamp_begin) st.last_stamp = uint32_t(id);
}

}  // namespace

std::vector<TopCandidates> WhisperModel::decode_top(const std::vector<BeamRequest>& requests, int top_k,
                                                    const GreedySpecials& specials) {
    AKUNU_CHECK(top_k >= 1 && top_k <= std::min(kMaxTopK, chain_.steps),
                "decode_top: top_k " + std::to_string(top_k) + " must be 1 to " +
                    std::to_string(std::min(kMaxTopK, chain_.steps)) +
                    " (16 at most, and at most chain_steps; tuning whisper_chain=0 turns the device's picks off)");
    std::vector<GreedyRequest> steps(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
        const BeamRequest& r = requests[i];
        steps[i] = {r.seq, r.token, kNoLimit, r.rules};
        for (int id : r.history)
            AKUNU_CHECK(id >= 0 && id < config_.vocab_size,
                        "decode_top: sequence " + std::to_string(r.seq) + ": history id " + std::to_string(id) +
                            " is out of range for a vocabulary of " + std::to_string(config_.vocab_size));
    }
    check_greedy(steps, specials, "decode_top");
    if (!chain_.top_cl || chain_.top_k != uint32_t(top_k) || !(chain_.top_recorded == specials)) {
        chain_.top_cl = record_picks(specials, 1, uint32_t(top_k));
        chain_.top_k = uint32_t(top_k);
        chain_.top_recorded = specials;
    }
    start_greedy(steps);
    for (const BeamRequest& r : requests) set_history(chain_.host[size_t(r.seq)], r.history, specials.timestamp_begin);
    chain_.state.write(chain_.host.data(), chain_.host.size() * sizeof(WhisperChainSlot));
    dec_short_table_->set_tokens(uint32_t(requests.size()));
    chain_.top_cl->submit_and_wait();
    chain_.tokens.read(chain_.picked.data(), chain_.picked.size() * 4);
    chain_.logprobs.read(chain_.picked_lp.data(), chain_.picked_lp.size() * 4);
    std::vector<TopCandidates> out(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
        const size_t seq = size_t(requests[i].seq), at = seq * size_t(chain_.steps);
        for (size_t j = 0; j < size_t(top_k) && chain_.picked[at + j] != AKUNU_CHAIN_NONE; ++j) {
            out[i].ids.push_back(int(chain_.picked[at + j]));
            out[i].logprobs.push_back(chain_.picked_lp[at + j]);
        }
        lengths_[seq] += 1;  // the fed row is cached
    }
    // profile("decoder") and cross_attention() read this step (whisper_chain_rows wrote its rows).
    last_rows_ = int(requests.size());
    last_short_ = true;
    return out;
}

}  // namespace akunu

// Greedy Whisper decoding in chains: K decoder steps recorded into one command list and run in
// one submission, with the logit rules of rules.py, the argmax and the next step's input on the
// device (WhisperModel::decode_greedy). Each step:
//   whisper_chain_rows   the rows of the slots still running, from their states
//   the decoder table    (the short one, which holds a row for every slot)
//   whisper_pick         per row: rules, argmax, log-probability; the slot's state moves on
// A slot is done once it picks <|endoftext|>, has picked max_new tokens, or its cache is full;
// later steps give it no row, so its cache and state stay as they are. The host writes the
// states before a chain and reads the picks after it; nothing is allocated per call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "akunu/vulkan/buffer.h"
#include "akunu/vulkan/command_list.h"
#include "params.h"

namespace akunu {

// One window's logit rules (python/akunu/whisper/rules.py LogitRules).
struct GreedyRules {
    std::vector<int> suppress;  // ids never picked
    std::vector<int> begin_suppress;  // ids not picked first (suppress_blank)
    bool timestamps = false;  // the timestamp grammar
    int max_initial = -1;  // the latest first timestamp, as an index after timestamp_begin; -1: none
};

// The vocabulary's special ids the rules name (python/akunu/whisper/tokens.py).
struct GreedySpecials {
    int eot = 0, timestamp_begin = 0, no_timestamps = 0;
    int no_speech = -1;  // -1: none (no_speech_prob reads 0)
    bool operator==(const GreedySpecials& o) const {
        return eot == o.eot && timestamp_begin == o.timestamp_begin && no_timestamps == o.no_timestamps &&
               no_speech == o.no_speech;
    }
};

// A slot to decode greedily: it feeds `token` (its prompt's last, not yet decoded) first.
struct GreedyRequest {
    int seq = 0;
    int token = 0;
    int max_new = 1;  // picks after which the slot stops (<|endoftext|> stops it earlier)
    GreedyRules rules;
};

struct GreedyResult {
    std::vector<int> tokens;  // the picks, <|endoftext|> last where it was picked
    std::vector<float> logprobs;  // of each pick under the ruled logits
    float no_speech_prob = 0.0f;  // p(<|nospeech|>) of the raw logits of the first pick
};

// A beam's step (WhisperModel::decode_top): slot `seq` feeds `token`; its row's candidates are
// ruled as the next token after `history`, the window's tokens so far (the fed one last).
struct BeamRequest {
    int seq = 0;
    int token = 0;
    std::vector<int> history;
    GreedyRules rules;
};

// A beam's candidates: the likeliest ids under the rules, likeliest first, and their
// log-probabilities (fewer than asked for where fewer remain).
struct TopCandidates {
    std::vector<int> ids;
    std::vector<float> logprobs;
};

// Decoder steps per chain for tuning whisper_chain `tuned` (-1 auto) and a text context of
// `max_context` positions; 0: chains are off.
int whisper_chain_steps(int tuned, int max_context);
// The chain's device buffers for `slots` slots of a model with `vocab` ids, chains of `steps`
// steps (none where steps is 0), by name: what allocate_chain allocates and akunu.plan counts.
std::vector<std::pair<std::string, uint64_t>> whisper_chain_layout(int vocab, int slots, int steps);

// The chain's buffers and its recording (WhisperModel owns one; whisper_chain.cpp).
struct WhisperChain {
    int steps = 0;  // decoder steps per submission (tuning whisper_chain)
    uint32_t mask_words = 0;  // u32 words of a vocabulary bit mask
    Buffer state;  // [slots] WhisperChainSlot, host memory
    Buffer masks;  // [slots, 2, mask_words] u32 suppress | begin_suppress bits, host memory
    Buffer tokens, logprobs;  // [slots, steps] u32, f32 picks of the last chain, host memory
    Buffer row_slot;  // [slots] u32 the slot of each decoder row of a step
    std::vector<WhisperChainSlot> host;  // [slots] staging of state
    std::vector<uint32_t> mask_bits;  // [2, mask_words] staging of one slot's masks
    std::vector<uint32_t> picked;  // [slots, steps] staging of tokens
    std::vector<float> picked_lp;  // [slots, steps] staging of logprobs
    GreedySpecials recorded;  // the ids the command list was recorded with
    std::unique_ptr<CommandList> cl;  // recorded at the first decode_greedy (the ids are its push constants)
    // decode_top's one step with candidates (whisper_beams.cpp), recorded at its first call.
    std::unique_ptr<CommandList> top_cl;
    GreedySpecials top_recorded;
    uint32_t top_k = 0;
};

}  // namespace akunu

#version 450
#extension GL_GOOGLE_include_directive : require
// whisper_chain_rows: the decoder rows of one step of a greedy chain (WhisperChainRowsParams),
// one per running slot, in slot order, so that slots that are done cost nothing and keep their
// caches. One invocation writes them all: a chain runs at most a few hundred slots.
#include "common.glsl"

layout(local_size_x = 1) in;
layout(std430, binding = 0) readonly buffer State { WhisperChainSlot slots[]; };
layout(std430, binding = 1) writeonly buffer Ids { uint ids[]; };            // [rows]
layout(std430, binding = 2) writeonly buffer Pos { uint pos[]; };            // [rows]
layout(std430, binding = 3) writeonly buffer Kv { uint kv_rows[]; };         // [rows]
layout(std430, binding = 4) writeonly buffer Self { uint self_seq[]; };      // [rows, 2]
layout(std430, binding = 5) writeonly buffer Cross { uint cross_seq[]; };    // [rows, 2]
layout(std430, binding = 6) writeonly buffer Head { uint head_rows[]; };     // [rows]
layout(std430, binding = 7) writeonly buffer RowSlot { uint row_slot[]; };   // [rows]
layout(std430, binding = 8) writeonly buffer Step { StepState step; };       // the decoder's rows
layout(std430, binding = 9) writeonly buffer HeadStep { StepState head_step; };  // rows with logits
layout(push_constant) uniform Push { WhisperChainRowsParams p; };

void main() {
    uint n = 0;
    for (uint s = 0; s < p.slots; ++s) {
        const WhisperChainSlot st = slots[s];
        if ((st.flags & (AKUNU_CHAIN_ACTIVE | AKUNU_CHAIN_DONE)) != AKUNU_CHAIN_ACTIVE) continue;
        ids[n] = st.token;
        pos[n] = st.pos;
        kv_rows[n] = s * p.n_ctx + st.pos;
        self_seq[2 * n] = s * p.n_ctx;
        self_seq[2 * n + 1] = st.pos + 1;
        cross_seq[2 * n] = st.cross_base;
        cross_seq[2 * n + 1] = p.audio_ctx;
        head_rows[n] = n;
        row_slot[n] = s;
        ++n;
    }
    step = StepState(0, 0, n, 0);
    head_step = StepState(0, 0, n, 0);
}

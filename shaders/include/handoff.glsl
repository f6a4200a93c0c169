// GEMV hand-offs (kernels::GemvHandoff, params.h): a dispatch's workgroups count into a slot of
// these counters once their output is written, and the next dispatch's workgroups, started with
// no barrier between the two, poll that slot before they read the output. Word 0 counts waits
// that timed out. Define HANDOFF_BINDING before including.
#ifndef AKUNU_HANDOFF_GLSL
#define AKUNU_HANDOFF_GLSL

// Waits poll through the volatile view: plain loads, not atomics, which would queue behind one
// another at the one address and delay the counts they wait for.
layout(std430, binding = HANDOFF_BINDING) coherent buffer Handoff { uint handoff[]; };
layout(std430, binding = HANDOFF_BINDING) volatile coherent readonly buffer HandoffPoll { uint handoff_poll[]; };

// Polls before a waiting workgroup gives up (a few seconds): a device that does not start the
// previous dispatch's workgroups first then gets wrong numbers and a raised error word, not a
// hang.
#define HANDOFF_POLLS (1u << 22)

// Once this workgroup's output is written (call in uniform control flow): each invocation's
// writes reach the device before the barrier, the count after it.
void handoff_count_in(uint slot) {
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationID.x == 0) atomicAdd(handoff[slot], 1u);
}

// One invocation polls until `slot` reaches `count`; a barrier after the call holds the others.
void handoff_await(uint slot, uint count) {
    if (gl_LocalInvocationID.x != 0) return;
    uint polls = 0;
    while (handoff_poll[slot] < count && ++polls < HANDOFF_POLLS) {
    }
    if (polls == HANDOFF_POLLS) atomicAdd(handoff[0], 1u);
}

#endif

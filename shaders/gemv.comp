#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// gemv_<wtype>: y = W x for one matrix of any weight type (include/gemv_core.glsl); float rows
// may hand the next RMSNorm forward and wait for a hand-off. Bindings: 0 W, 1 x, 2 y, 3 the
// norm weight or up (x_op); float types also 4 to 6 a norm handed forward, 7 hand-off counters.
#define GEMV_PLAIN
#include "gemv_core.glsl"

#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// gemv_gate_up_<float wtype>: y = act(W_gate x) * (W_up x) in one dispatch (include/gemv_core.glsl).
// Bindings: 0 W_gate, 1 x, 2 y, 3 the norm weight or up (x_op), 4 W_up.
#define GEMV_GATE_UP
#include "gemv_core.glsl"

#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// gemv_parts_<float wtype>: up to three matrices times one x (Q, K and V), with a decode step's
// rope_kv folded in (include/gemv_core.glsl). Bindings: 0 W0, 1 x, 2 y0, 3 the norm weight or up
// (x_op), 4 W1, 5 W2, 6 y1, 7 y2, 8 to 12 the folded rope_kv's tables, caches and step.
#define GEMV_PARTS
#include "gemv_core.glsl"

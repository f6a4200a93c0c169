// The FFN activations, shared by act.comp and the GEMVs that fold the gated activation into
// their x (GemvParams.x_op). Each is fp32 and follows its reference formula. Needs params.h.
#ifndef AKUNU_ACTIVATION_GLSL
#define AKUNU_ACTIVATION_GLSL

// Each gated activation's formula once, for the float and vec4 overloads.
#define AKUNU_SILU(x) ((x) / (1.0 + exp(-(x))))
#define AKUNU_GELU_TANH(x) (0.5 * (x) * (1.0 + tanh(0.7978845608028654 * ((x) + 0.044715 * (x) * (x) * (x)))))  // c = sqrt(2 / pi)

float silu(float x) { return AKUNU_SILU(x); }
vec4 silu(vec4 x) { return AKUNU_SILU(x); }

// GELU with erf, as BERT's; GLSL has no erf, so Abramowitz & Stegun 7.1.26 (absolute error
// below 1.5e-7).
float gelu_erf(float x) {
    const float z = abs(x) * 0.7071067811865476;
    const float t = 1.0 / (1.0 + 0.3275911 * z);
    const float poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
    const float erf_z = sign(x) * (1.0 - poly * exp(-z * z));
    return 0.5 * x * (1.0 + erf_z);
}

// GELU's tanh approximation (gemma's gelu_pytorch_tanh).
float gelu_tanh(float x) { return AKUNU_GELU_TANH(x); }
vec4 gelu_tanh(vec4 x) { return AKUNU_GELU_TANH(x); }

// x as a GEMV's products read it (GemvParams.x_op, params.h), from x and binding 3's g. An
// RMSNorm's 1/rms is not here: the GEMVs apply it to the finished sums.
vec4 gemv_x_op(uint op, vec4 x, vec4 g, float weight_offset) {
    if (op == AKUNU_GEMV_RMSNORM) return x * (g + weight_offset);
    if (op == AKUNU_GEMV_SILU_GATE) return silu(x) * g;
    if (op == AKUNU_GEMV_GELU_TANH_GATE) return gelu_tanh(x) * g;
    return x;
}
// One element: gemv_core.glsl's scalar path, for k not a multiple of 4.
float gemv_x_op(uint op, float x, float g, float weight_offset) { return gemv_x_op(op, vec4(x), vec4(g), weight_offset).x; }

#endif

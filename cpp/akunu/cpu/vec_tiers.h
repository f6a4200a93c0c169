// Loops written once and compiled twice: for baseline x86-64 and, through a target attribute,
// for x86-64-v3 (AVX2, FMA, F16C), where the compiler vectorizes them with 256-bit registers.
// A body is an always-inline function; AKUNU_VEC_TIERS makes its two callable versions,
// name_base and name_v3, and the caller picks one by use_avx2(). Nothing compiled for v3 runs
// before that check. Bodies that must give equal results in both tiers use std::fma where
// they multiply-add floats (the v3 version would contract a * b + c into an FMA, the baseline
// one would not).
#pragma once

#define AKUNU_INLINE [[gnu::always_inline]] inline
#define AKUNU_V3 [[gnu::target("arch=x86-64-v3")]]

#define AKUNU_VEC_TIERS(name, ret, params, args)        \
    ret name##_base params { return name##_body args; } \
    AKUNU_V3 ret name##_v3 params { return name##_body args; }

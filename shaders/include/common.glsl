// Shared by every akunu kernel: extensions, the parameter structs and small helpers.
#ifndef AKUNU_COMMON_GLSL
#define AKUNU_COMMON_GLSL

#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifdef KV_BLOCKS
// A KV cache in blocks is reached through device addresses (kv_rows.glsl).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#endif

#include "params.h"

// The flat index of this workgroup in a 2-D grid (see params.h).
uint linear_group_id() {
    return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}

#endif

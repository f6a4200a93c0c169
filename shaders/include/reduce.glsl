// Workgroup-wide sums and maxima that work for any subgroup size (8 on lavapipe, 32 on NVIDIA, 64 on AMD):
// subgroupAdd within each subgroup, then one pass over the per-subgroup sums in shared memory.
#ifndef AKUNU_REDUCE_GLSL
#define AKUNU_REDUCE_GLSL

// Enough for 1,024 invocations in subgroups of 8.
#define AKUNU_MAX_SUBGROUPS 128
shared float reduce_scratch[AKUNU_MAX_SUBGROUPS];

// Every invocation of the workgroup must call this; every one gets the total.
float workgroup_sum(float v) {
    v = subgroupAdd(v);
    if (subgroupElect()) reduce_scratch[gl_SubgroupID] = v;
    barrier();
    float total = 0.0;
    for (uint s = 0; s < gl_NumSubgroups; ++s) total += reduce_scratch[s];
    barrier();  // reduce_scratch may be reused by the next call
    return total;
}

// Every invocation must call this; every one gets the maximum.
float workgroup_max(float v) {
    v = subgroupMax(v);
    if (subgroupElect()) reduce_scratch[gl_SubgroupID] = v;
    barrier();
    float m = -1.0 / 0.0;
    for (uint s = 0; s < gl_NumSubgroups; ++s) m = max(m, reduce_scratch[s]);
    barrier();
    return m;
}

#endif

// The butterflies of the orthonormal Walsh-Hadamard transform of one head's row held in shared
// memory, shared by hadamard_rows.comp and attention_split's UNROTATE, so that both run the same
// steps in the same order. The including kernel defines HADAMARD_ROW, its shared float array.
#ifndef AKUNU_HADAMARD_SHARED_GLSL
#define AKUNU_HADAMARD_SHARED_GLSL

// HADAMARD_ROW[0, head_dim) times H in blocks of `block` (a power of two dividing head_dim),
// without the 1/sqrt(block) normalisation, which the caller applies as it writes the row out.
// Invocation `lane` of `lanes` takes every lanes-th pair; the whole workgroup calls it, and it
// ends behind a barrier.
void hadamard_butterflies(uint head_dim, uint block, uint lane, uint lanes) {
    for (uint h = 1; h < block; h *= 2) {
        barrier();
        // Pair i: (a, a + h) with a = (i / h) * 2h + i % h, inside one block as h < block.
        for (uint i = lane; i < head_dim / 2; i += lanes) {
            const uint a = (i / h) * 2 * h + i % h;
            const float u = HADAMARD_ROW[a], v = HADAMARD_ROW[a + h];
            HADAMARD_ROW[a] = u + v;
            HADAMARD_ROW[a + h] = u - v;
        }
    }
    barrier();
}

#endif

// Tile shapes of the prefill GEMM (shaders/gemm.comp), shared with the host, which sizes the
// dispatch grid from them.
#ifndef AKUNU_GEMM_TILES_H
#define AKUNU_GEMM_TILES_H

// The cooperative-matrix variant: a workgroup of AKUNU_GEMM_CM_SG_M x AKUNU_GEMM_CM_SG_N
// subgroups of 32, each holding AKUNU_GEMM_CM_TM x AKUNU_GEMM_CM_TN accumulator blocks of
// 16 x 16; each step along k stages AKUNU_GEMM_CM_BK columns of X and W. bench/NOTES.md has the
// shapes measured on the H200.
#define AKUNU_GEMM_CM_SG_M 4
#define AKUNU_GEMM_CM_SG_N 2
#define AKUNU_GEMM_CM_TM 2
#define AKUNU_GEMM_CM_TN 4
#define AKUNU_GEMM_CM_BK 32
#define AKUNU_GEMM_CM_BM (AKUNU_GEMM_CM_SG_M * AKUNU_GEMM_CM_TM * 16)
#define AKUNU_GEMM_CM_BN (AKUNU_GEMM_CM_SG_N * AKUNU_GEMM_CM_TN * 16)

// The scalar variant: 256 invocations, each a 4 x 4 block of Y.
#define AKUNU_GEMM_BM 64
#define AKUNU_GEMM_BN 64

#endif

// Tile shapes of the prefill GEMMs (shaders/gemm.comp, shaders/gemm_cm.comp), shared with the
// host, which sizes the dispatch grid from them.
#ifndef AKUNU_GEMM_TILES_H
#define AKUNU_GEMM_TILES_H

// The cooperative-matrix GEMM: a workgroup of AKUNU_GEMM_CM_SG_M x AKUNU_GEMM_CM_SG_N
// subgroups of 32, each holding AKUNU_GEMM_CM_TM x AKUNU_GEMM_CM_TN accumulator blocks of
// 16 x 16 (TM and TN 1, 2 or 4); each step along k stages AKUNU_GEMM_CM_BK columns of X and W.
// The default, 128 x 128 tiles of 8 subgroups with 64 x 32 each and two shared stages, was the
// fastest of the shapes measured (bench/NOTES.md, cooperative-matrix GEMM tile shapes). Each value
// can be overridden by a define, as the short form below does.
// Its short form (gemm_cm_short_<wtype>, GEMM_CM_SHORT) for chunks of up to
// AKUNU_GEMM_CM_SHORT_ROWS tokens (and batched decode steps): 16 x 16 tiles, 512 columns of k a
// step through one shared stage, each of 8 subgroups multiplying its own 64 of them; the 8
// partial blocks are added in shared memory at the end. A few rows of X cannot keep the tensor
// units busy, so what bounds such a GEMM is how much of W is in flight: many narrow tiles with
// wide steps loaded by many invocations, and converted and multiplied by 8 subgroups at once
// instead of 2 (bench/NOTES.md, short prompts in short cooperative-matrix tiles, has the shapes
// that lost, and "Batched steps: the short GEMM split along k" the measurement).
#define AKUNU_GEMM_CM_SHORT_BM 16
#define AKUNU_GEMM_CM_SHORT_BN 16
#define AKUNU_GEMM_CM_SHORT_ROWS 96
// Past AKUNU_GEMM_CM_SHORT_NARROW_ROWS rows the short form takes 32 x 32 tiles
// (gemm_cm_short_wide_<wtype>, GEMM_CM_SHORT_WIDE), so that each weight is dequantized once per
// 32 rows instead of 16; below, the 16 x 16 tiles' more workgroups keep more of W in flight
// (bench/NOTES.md, "Short tiles of 32 x 32 for steps of 17 to 96 rows"). Its 8 subgroups are 2
// along n, each holding all 32 rows (two accumulator blocks, so each B fragment serves two
// products), times 4 along k: the fewest registers of the shapes measured, and the fastest
// (bench/NOTES.md, "The short GEMM's 32 x 32 tiles as 2 x 4 subgroups of 32 x 16").
#define AKUNU_GEMM_CM_SHORT_WIDE_BM 32
#define AKUNU_GEMM_CM_SHORT_WIDE_BN 32
#define AKUNU_GEMM_CM_SHORT_NARROW_ROWS 16
#if defined(GEMM_CM_SHORT) && defined(GEMM_CM_SHORT_WIDE)
#define AKUNU_GEMM_CM_SG_M 1
#define AKUNU_GEMM_CM_SG_N 2
#define AKUNU_GEMM_CM_SG_K 4
#define AKUNU_GEMM_CM_TM 2
#define AKUNU_GEMM_CM_TN 1
#define AKUNU_GEMM_CM_BK 256
#define AKUNU_GEMM_CM_STAGES 1
#elif defined(GEMM_CM_SHORT)
#define AKUNU_GEMM_CM_SG_M 1
#define AKUNU_GEMM_CM_SG_N 1
#define AKUNU_GEMM_CM_SG_K 8
#define AKUNU_GEMM_CM_TM 1
#define AKUNU_GEMM_CM_TN 1
#define AKUNU_GEMM_CM_BK 512
#define AKUNU_GEMM_CM_STAGES 1
#endif
#ifndef AKUNU_GEMM_CM_SG_M
#define AKUNU_GEMM_CM_SG_M 2
#endif
#ifndef AKUNU_GEMM_CM_SG_N
#define AKUNU_GEMM_CM_SG_N 4
#endif
#ifndef AKUNU_GEMM_CM_SG_K
#define AKUNU_GEMM_CM_SG_K 1
#endif
#ifndef AKUNU_GEMM_CM_TM
#define AKUNU_GEMM_CM_TM 4
#endif
#ifndef AKUNU_GEMM_CM_TN
#define AKUNU_GEMM_CM_TN 2
#endif
#ifndef AKUNU_GEMM_CM_BK
#define AKUNU_GEMM_CM_BK 32
#endif
// Shared tile buffers (1 or 2): with 2, step k + 1's tiles are stored while step k's multiply.
#ifndef AKUNU_GEMM_CM_STAGES
#define AKUNU_GEMM_CM_STAGES 2
#endif
#define AKUNU_GEMM_CM_BM (AKUNU_GEMM_CM_SG_M * AKUNU_GEMM_CM_TM * 16)
#define AKUNU_GEMM_CM_BN (AKUNU_GEMM_CM_SG_N * AKUNU_GEMM_CM_TN * 16)

// The scalar variant: 256 invocations, each a 4 x 4 block of Y.
#define AKUNU_GEMM_BM 64
#define AKUNU_GEMM_BN 64
// Its short form (gemm_short_<wtype>, GEMM_SHORT) for chunks of up to AKUNU_GEMM_SHORT_ROWS
// tokens: a quarter of the workgroups for the same columns, so a 2-token prompt computes 16
// rows' products, not 64, and a 40-token one 48 (DeviceProfile::gemm_short_rows; faster than
// 64 x 64 tiles for such prompts on CPU-type devices, bench/NOTES.md).
#define AKUNU_GEMM_SHORT_BM 16
#define AKUNU_GEMM_SHORT_BN 256
#define AKUNU_GEMM_SHORT_ROWS 64

#endif

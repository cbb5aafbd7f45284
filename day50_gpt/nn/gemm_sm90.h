// day50_gpt/nn/gemm_sm90.h: our Hopper GEMM with the linear layers' epilogues fused (nn/gemm_sm90.cu).
//
// C[M][N] = epi(A[M][K] . Bt[N][K]^T), bf16 in and out, fp32 accumulation: the linear layer's forward
// layout (A = the input, Bt = the weight as stored, [out][in]). It is day10's step 15 (a persistent
// ping-pong kernel: TMA loads, wgmma, two consumer warpgroups taking turns, a TMA-store epilogue) with
// the epilogue doing the layer's elementwise work on the accumulator before it is stored:
//   kBias         C = acc + bias                                (qkv, proj, fc2 forward)
//   kBiasGeluAux  aux = acc + bias, C = gelu(aux)               (fc forward: the pre-activation kept)
//   kDGelu        C = acc * gelu'(aux), aux read                (fc2's input gradient, the GELU's backward)
//                 and, with colsum, C's column sums per 128-row tile: colsum[tile row][N] (fc's bias gradient)
// and, with the GELU's derivative kept instead of its input (--gelu-deriv on, nn/linear.cuh):
//   kBiasGeluDeriv  z = acc + bias: aux = gelu'(z), C = gelu(z)   (fc forward: tanh computed once for both)
//   kMulAux         C = acc * aux, aux read (and colsum as kDGelu) (fc2's input gradient: a multiply, no tanh)
// cuBLASLt has these epilogues too (common/cublaslt.h); at day50's thin shapes (K = 384) its kernels with
// them are slower than its plain ones. The model times cuBLASLt's epilogue, its plain matmul with a pass
// of ours, and this GEMM, and keeps the fastest (nn/linear.cuh).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace sm90 {
enum class Epi { kBias, kBiasGeluAux, kDGelu, kBiasGeluDeriv, kMulAux };
// The epilogues that read aux (a tile of it TMA-loaded beside the k-steps) and may hand back column sums.
__host__ __device__ constexpr bool reads_aux(Epi e) { return e == Epi::kDGelu || e == Epi::kMulAux; }
// The epilogues that store two outputs, aux first, then C.
__host__ __device__ constexpr bool writes_aux(Epi e) { return e == Epi::kBiasGeluAux || e == Epi::kBiasGeluDeriv; }
// Whether this GPU runs it: an sm_90 device and a build with the sm_90a kernels (elsewhere they compile
// to nothing). Asked once per device.
bool available();
// TMA reads rows in 16-byte units: K and N multiples of 8, every pointer 16-byte aligned.
bool fits(int M, int N, int K, const void* A, const void* Bt, const void* C, const void* aux);
// keep_a (--keep-a on, where K <= kKeepAMaxK): each block keeps a 128-row panel of A in shared memory for
// a whole row of C's tiles and streams only B; off (the default): A and B both streamed every tile
// (day10's loop). Keeping A halves the tiles' loads from L2, but measured no faster at day50's shapes (the
// kernel's warps wait on their own instructions, not on L2: day50's notes), and it spreads row
// blocks, not tiles, over the SMs: 128 blocks at 16,384 rows, 64 at 8,192 (a data-parallel replica's batch).
// max_blocks > 0 caps the grid (the checks use it to give each block several row blocks). pdl: a programmatic
// dependent launch (--pdl on, nn/pdl.cuh): the kernel sets up its barriers, then waits for the one before it.
constexpr int kKeepAMaxK = 384;
// store_slots (--store-slots): staging slots a consumer for the two-output epilogues (kBiasGeluAux,
// kBiasGeluDeriv) of the streamed loop: 2 (day10's, beside 6 k-stages) or 4 (beside 5), so that a box's store
// waits for the store four back to have read its slot, not two. The same results either way. The loop keeping A
// (keep_a, K <= kKeepAMaxK) has two slots whatever is asked. The default here, 2, is the one --verify compares
// against; the model passes its own (TrainOptions::store_slots, 4 unless --store-slots 2).
void gemm(Epi e, int M, int N, int K, const __nv_bfloat16* A, const __nv_bfloat16* Bt, __nv_bfloat16* C,
          const __nv_bfloat16* bias, __nv_bfloat16* aux, cudaStream_t s, float* colsum = nullptr, bool keep_a = false,
          int max_blocks = 0, bool pdl = false, int store_slots = 2);
constexpr int kColsumRows = 128;  // kDGelu's and kMulAux's colsum: one row of partial sums per this many rows of C
}  // namespace sm90

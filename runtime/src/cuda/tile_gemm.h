// lmfuse's own Hopper matrix product, for the products whose epilogue cuBLASLt cannot do:
//   C[m, n] = Σ_k A[m, k] · B[n, k]     (A [M, K], B [N, K]: row-major bf16, both contiguous along k)
// with fp32 accumulation, each finished [128, 256] tile handed to an epilogue, which writes the product in
// bf16 or, given a TileGradient, the loss gradient dx of each logit in its place; given TileStatistics, it
// also writes each row's softmax statistics per 256 columns, from the staged tile. The weight product
//   C[m, n] = Σ_k A[k, m] · B[k, n]     (A [K, M], B [K, N]: row-major bf16, contiguous along m and n)
// is grad_weight's dxᵀ·h in the backend's layout; its epilogue writes bf16, fp32, adds the tile to an fp32
// C in place, or rounds an fp32 addend plus the tile to bf16 (TileSink): the chunks of a token-chunked
// pass add into the fp32 accumulator and the last one writes grad_weight, with no conversion pass.
// Contract: needs a device of compute capability 9.0 (sm_90a code: TMA loads, wgmma) and a build whose
// LMFUSE_CUDA_ARCHITECTURES names 90 (tileGemmAvailable says whether both hold); lda, ldb, ldc are
// multiples of 8 elements and the pointers 16-byte aligned (TMA's rule); any M, N, K ≥ 0, edges masked.
// Enqueues one persistent launch on `stream`, allocates nothing, never synchronises; every element of
// C's [M, N] is written exactly once, and nothing of a row past column N rounded up to 8 (TMA stores whole
// 16-byte pieces); the result does not depend on scheduling (each tile is summed by
// one CTA in a fixed order of k).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels.h"  // defines: RowParams

namespace lmfuse::detail::cuda {

struct TileGemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

/// Whether this build and `device` can run tileGemm. The first call for a device also prepares it (the
/// kernel's shared-memory limit, its resident clusters, the driver's tensor-map entry point): make it
/// outside any stream capture.
bool tileGemmAvailable(int device);

/// The share of the [128, 256] tile slots of its waves over the resident CTAs that C [m, n]'s elements
/// fill on `device` (0 where the tile product cannot run). A narrow product (the lean plan's last
/// vocabulary slices) leaves SMs idle while each busy one runs a whole tile's k loop, and a part-filled
/// last wave does the same; cuBLASLt's smaller tiles spread such a product over every SM.
double tileGemmFill(int device, int64_t m, int64_t n);

/// The backend runs the tile product where tileGemmFill reaches this, cuBLASLt (and the slice kernel)
/// below. Measured on the lean plan's slices against cuBLASLt and the slice kernel (runtime/bench/NOTES.md,
/// v23): ahead at a fill of 0.97 (one or two full waves), even at 0.87, behind at 0.73 (1.5 waves, or a
/// tile's columns half used) and at 0.48.
constexpr double kTileGemmMinimumFill = 0.8;

/// The weight product (tileGemmWeight) runs where its fill reaches this. Measured against cuBLASLt (NOTES.md
/// v34): the lean plan's narrow grad_weight and grad_hidden products (fill 0.8–0.9) together 0.5–0.9 ms
/// slower than cuBLASLt's on an H100, the same kernel's A·B ahead at a fill of 0.97 and behind at 0.85–0.88:
/// cuBLASLt's narrower tiles fill the last wave of these products. The full-vocabulary products fill 0.99.
constexpr double kTileGemmWeightMinimumFill = 0.95;

/// The gradient epilogue: C's row r is the buffer row r of `rows` (its token, target and scale as
/// launchSliceGradient reads them; rows.rows = m, rows.columns = n, rows.ld unused), and each element is
/// written as dx of the product rounded to bf16: bitwise what the plain product followed by
/// launchSliceGradient(rows, lse) writes, without the second pass over C.
struct TileGradient {
  RowParams rows;
  const float* lse = nullptr;  // [N] by token
};

/// The row-statistics epilogue: beside storing C, for each row r < m and each block b of
/// kRowStatisticsColumns columns (kernels.h), the float2 (max, Σ exp(z − max)) over the block's columns c < n of
/// z = transform_logit(C[r, c] as stored in bf16 + bias[columnBegin + c]), at byte r·stride + 8·b of
/// `partials` (8-byte aligned). Computed from the staged tile once its store is issued, so the row
/// kernel's first pass over the logits becomes a pass over these partials (RowPartials in kernels.h).
struct TileStatistics {
  RowParams rows;  // logitScale, softcap, bias (bf16), columnBegin, columns = n, rows = m
  char* partials = nullptr;
  int64_t stride = 0;
  // Given (by token), the numerators epilogue: C[r, c] is stored as the softmax numerator
  // u = exp(logitScale·C[r, c] − shift[token of r]) (exp of kNumeratorExponentCap·ln 2 at most, a NaN kept),
  // computed from the fp32 sum, and the partials are (max u, Σ u) over the block's columns below n. Rows
  // of no token (compaction padding) take a shift of 0. Only without bias and softcap.
  const float* shift = nullptr;
};

/// The numerators epilogue caps u at 2^kNumeratorExponentCap, so a finite row's Σ u stays finite in fp32 for any
/// vocabulary below 2^30 columns; a row whose max u reaches the cap has lost its larger numerators.
constexpr float kNumeratorExponentCap = 96.0f;

/// What the weight product writes into C.
enum class TileSink {
  Bf16,           // C bf16 (round to nearest)
  Float,          // C fp32
  FloatAdd,       // C fp32 += the product: each element added once, in L2, by the copy engine's reduction
  Bf16FromFloat,  // C bf16 = round(addend + product), the addend fp32 and not C
};

/// The fp32 addend of TileSink::Bf16FromFloat: [rows, columns] = [m, n], ld a multiple of 8, 16-byte aligned;
/// read once.
struct TileAddend {
  const float* data = nullptr;
  int64_t rows = 0, columns = 0, ld = 0;
};

/// The weight product C = Aᵀ·B (A [k, m] with leading dimension lda, B [k, n] with ldb) into `sink`; the
/// contract above (alignment, edges, one write per element of C; fp32 C: ldc a multiple of 4). k = 0 writes
/// zeros (FloatAdd: nothing); Bf16FromFloat needs k > 0.
void tileGemmWeight(const TileGemmShape& shape, const void* a, const void* b, void* c, TileSink sink,
                    const TileAddend* addend, cudaStream_t stream);

/// C = A·Bᵀ in bf16 (round to nearest) from fp32 sums; with `gradient`, dx of those logits instead; with
/// `statistics` (not with `gradient`), the row statistics too, and with statistics.shift the numerators
/// in place of the logits.
void tileGemm(const TileGemmShape& shape, const void* a, const void* b, void* c, cudaStream_t stream,
              const TileGradient* gradient = nullptr, const TileStatistics* statistics = nullptr);

}  // namespace lmfuse::detail::cuda

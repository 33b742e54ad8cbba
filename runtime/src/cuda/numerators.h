// Kernels of the numerators schedule of a full-vocabulary chunk (backend.cpp): instead of the logits z and
// a row pass that turns them into dx, the tile product stores each row's softmax numerators relative to its
// target, u = exp(z − z_target), so that for a labelled row (no smoothing, softcap, z-loss or bias)
//   dx = c · u',   c = g · logitScale / Σu,   u' = u with the target's entry replaced by u_target − Σu,
// where g is the row's gradient factor. A per-row factor passes through both backward products:
// grad_hidden = c ⊙ (u'·W) and grad_weight = u'ᵀ·(c ⊙ h), so the logits buffer is read by the GEMMs only
// and no pass over it writes dx. Rows without a label get c = 0.
// A row whose numerators overflow (some z − z_target ≥ (kNumeratorExponentCap − 1)·ln 2) or are not finite is
// detected here, and the chunk is redone the usual way under a graph condition (the logits, the row pass
// writing dx, c = 1).
// Contract: as kernels.h (launchers enqueue, never synchronise, check their launch); no float atomics, fixed
// reduction orders, so results are bitwise reproducible; bf16 hidden rows and weight, dense fp32 scratch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "conditional.h"  // defines: Condition
#include "kernels.h"      // defines: RowParams, RowPartials, Scalars

namespace lmfuse::detail::cuda {

/// shift[token] = logitScale · (h_r · W[target]) in fp32 for each buffer row r whose token has a label, 0 for a
/// token without one (rows map to tokens as RowParams says; compaction padding is skipped); also clears
/// scalars->redo for the chunk. hidden: [rows, hiddenDim] bf16 rows (ld hiddenLd); weight: [V, hiddenDim]
/// bf16 (ld weightLd).
void launchTargetLogits(const void* hidden, int64_t hiddenLd, const void* weight, int64_t weightLd,
                        int64_t hiddenDim, const RowParams& rows, float* shift, Scalars* scalars,
                        cudaStream_t stream);

/// The columns [rows.columns, rows.vocab) of a split pass's buffer (plan.h: SplitPass, part B) where
/// rows.columns < rows.vocab: its own buffer of leading dimension `ld`, with its own partials.
struct NumeratorTail {
  void* buffer = nullptr;
  int64_t ld = 0;
  RowPartials partials;
};

/// From the numerators of a buffer's rows and their partials (max u, Σu) per 256 columns: lse = shift + ln Σu
/// (written over shift, which is the same array as lse), the loss ln Σu, rowScale[r] = c (by buffer row) and
/// the target's numerator replaced by 1 − Σu (u_target = 1 up to rounding); sets scalars->redo where a row's Σu
/// is not finite or a labelled row's max u reaches half the cap. Given a tail, the rows are its columns too.
void launchNumeratorRows(void* buffer, const RowParams& rows, const RowPartials& partials, float* lse,
                         float* rowScale, float* rowLoss, float* userLse, float* userLoss, Scalars* scalars,
                         cudaStream_t stream, const NumeratorTail* tail = nullptr);

/// Sets a graph `condition` to scalars->redo (an eager one reads scalars->redo itself), and counts the
/// redone chunk in scalars->redone.
void launchRedoCondition(const Condition& condition, Scalars* scalars, cudaStream_t stream);

/// rowScale[r] = 1 for r < rows (a redone chunk's dx already holds every factor).
void launchUnitScale(float* rowScale, int64_t rows, cudaStream_t stream);

/// out row t(r) = bf16(rowScale[r] · in row r) for r < rows over `columns` bf16 elements, where t(r) is the token
/// of buffer row r as `tokens` maps it (rows without one skipped), or r itself when `tokens` is null. In place
/// where out and in are the same rows. Both the c ⊙ h rows of grad_weight's product and grad_hidden = c ⊙ (u'·W)
/// (from the product rounded to bf16: two roundings, as a scaled copy).
void launchScaleRows(const void* in, int64_t inLd, const float* rowScale, const RowParams* tokens, int64_t rows,
                     int64_t columns, void* out, int64_t outLd, cudaStream_t stream);

/// As launchScaleRows, from fp32 rows (one rounding: a split pass's u'·W, summed over its two parts in fp32).
void launchScaleFloatRows(const float* in, int64_t inLd, const float* rowScale, const RowParams* tokens, int64_t rows,
                          int64_t columns, void* out, int64_t outLd, cudaStream_t stream);

}  // namespace lmfuse::detail::cuda

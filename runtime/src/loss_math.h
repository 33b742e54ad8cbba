// The per-row formulas of flce.h in one place, for the CPU reference (Real = double) and the CUDA
// kernels (Real = float): logit transform, its derivative, the row loss from the row's reductions, and
// the gradient with respect to a logit. A row is described by its lse, its target logit and the sum of
// its logits, so any kernel that streams a row once (online max/sum) can use these.
#pragma once

#include <cmath>
#include <cstdint>

#include "hd.h"
#include "lmfuse/flce.h"

namespace lmfuse::detail {

template <class Real>
struct LossParams {
  Real logit_scale;      // multiplies x before the softcap
  Real softcap;          // 0 = off
  Real label_smoothing;  // ε
  Real z_loss;
  int64_t vocab;

  static LossParams from(const Options& options, int64_t vocab) {
    return {Real(options.logit_scale), Real(options.softcap), Real(options.label_smoothing),
            Real(options.z_loss), vocab};
  }
};

/// z = softcap · tanh(logit_scale · x / softcap), or logit_scale · x without a softcap.
template <class Real>
LMFUSE_HD inline Real transform_logit(Real x, const LossParams<Real>& params) {
  Real scaled = params.logit_scale * x;
  if (params.softcap > Real(0)) return params.softcap * tanh(scaled / params.softcap);
  return scaled;
}

/// dz/dx = logit_scale · (1 − tanh²(logit_scale · x / softcap)), or logit_scale without a softcap.
template <class Real>
LMFUSE_HD inline Real transform_derivative(Real x, const LossParams<Real>& params) {
  if (params.softcap > Real(0)) {
    Real t = tanh(params.logit_scale * x / params.softcap);
    return params.logit_scale * (Real(1) - t * t);
  }
  return params.logit_scale;
}

/// The same derivative written in terms of z (tanh = z / softcap), for kernels that keep z, not x.
template <class Real>
LMFUSE_HD inline Real transform_derivative_at(Real z, const LossParams<Real>& params) {
  if (params.softcap > Real(0)) {
    Real t = z / params.softcap;
    return params.logit_scale * (Real(1) - t * t);
  }
  return params.logit_scale;
}

/// loss_i = lse − (1 − ε)·z_y − (ε / V)·Σ_j z_j + z_loss · lse². Without smoothing the Σ term is left out, not
/// multiplied by 0: a −inf logit (a masked class, a −inf bias entry) makes Σ −inf, and 0 · −inf is NaN where
/// the loss is finite (or +inf, the target masked).
template <class Real>
LMFUSE_HD inline Real row_loss(Real lse, Real target_logit, Real logit_sum,
                               const LossParams<Real>& params) {
  Real smoothing = params.label_smoothing;
  Real loss = smoothing == Real(0)
                  ? lse - target_logit
                  : lse - (Real(1) - smoothing) * target_logit - smoothing / Real(params.vocab) * logit_sum;
  return params.z_loss == Real(0) ? loss : loss + params.z_loss * lse * lse;
}

/// dloss_i/dz_j = (1 + 2·z_loss·lse)·p_j − (1 − ε)·[j = y] − ε / V, with p_j = exp(z_j − lse).
template <class Real>
LMFUSE_HD inline Real logit_gradient(Real z, bool is_target, Real lse, const LossParams<Real>& params) {
  Real smoothing = params.label_smoothing;
  Real gradient = (Real(1) + Real(2) * params.z_loss * lse) * exp(z - lse) -
                  smoothing / Real(params.vocab);
  if (is_target) gradient -= Real(1) - smoothing;
  return gradient;
}

}  // namespace lmfuse::detail

// The causal shift, recognised by meaning: whether a call on a tensor keeps all but the last position
// of the logits' sequence dimension, or all but the first position of the labels' last dimension —
// the shift the fused runtime applies with its `shift` option (labels[..., t+1] is the target of
// position t). The calls that may spell it (slice, narrow, index with Slice) and the dims they may
// name come from the pattern set; the bounds are proven here: a length is the tensor's own size
// along the same dim as written, read inline or through a local that neither it nor the tensor
// changes before the call. Site capture (logits) and the labels trace both ask this one place.
#pragma once

#include <optional>
#include <string>

#include "clang/AST/Expr.h"

#include "ast_query.h"
#include "patterns.h"

namespace lmfuse::rewriter {

enum class ShiftRole { Logits, Labels };

/// A call of one of the shift's methods on a tensor, judged for one role.
struct ShiftVerdict {
  bool Shift = false;                   ///< the call is the causal shift of Object for the role
  const clang::Expr *Object = nullptr;  ///< the tensor the call slices
  /// When it is not the shift: what the call does instead, for the refusal's detail ("the logits are
  /// sliced with `slice(1, 0, T - 2)`, which is not all but the last position ...: ...").
  std::string Why;
  /// The local a proven length was read through (`const auto T = logits.size(1);`), if any.
  const clang::VarDecl *Length = nullptr;
  /// When it is the shift: the dim it runs along, as written (`slice(-2, 0, -1)`: -2; an index's slice
  /// after an ellipsis counts from the end). The rank is known only when the model runs, so the fused
  /// call is handed this dim and checks there that it is the sequence dimension.
  int64_t Dim = 0;
};

/// Judges E when it is a call of one of the pattern set's shift methods (slice, narrow, index) on a
/// library tensor; nullopt when it is not such a call at all. Uses are the variable uses of the
/// function holding E (for the proof that a length local still holds the tensor's size).
std::optional<ShiftVerdict> matchCausalShift(const clang::Expr *E, ShiftRole Role, const PatternSet &Patterns,
                                             const AstQuery &Query, const VariableUses &Uses);

}  // namespace lmfuse::rewriter

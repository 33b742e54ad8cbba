// Effect analysis: whether anything that runs between a site's head and its loss may change what the
// fused call reads there. The original computes the logits from the head's input, weight and bias at
// the head; the rewrite reads them (and the module that holds them) at the loss, and repeats the
// guard's test at the head. So the rewrite is sound only when, on every path from the head to the loss,
// nothing may change those values or the guard's inputs.
//
// The analysis is conservative: it refuses whatever it cannot prove harmless. A torch::Tensor is a
// handle whose in-place methods are const and whose copies, views and references share storage, so
// C++ const-ness alone proves nothing. It therefore follows every value that may share storage with an
// input (taint through tensor-typed expressions, from the inputs and from every parameter, member and
// global, which may alias them, and back to what a tainted value was made from: a view's source, the
// buffer a tensor wraps; an address is followed through an integer too), and counts as a change: an assignment through such a value; a library
// call named as in-place (`_`, `_out`, the pattern set's writers) that is given one; a non-const
// method of the library (other than an accessor) called on one; a library parameter taken by non-const
// reference or pointer that receives one; any call of user code (a function, a lambda, a member of
// `this`, an operator) that can reach one; code of the program that library code may run (a callable handed
// over, the special members and operators of a class of the program a library template is instantiated
// for, an override of a library virtual function, what a code holder such as a Sequential or a future
// holds, another thread's code let run through an atomic, a mutex or a condition used between them, a
// destructor or deleter run at a block's end); and whatever clang::ExprMutationAnalyzer reports as
// mutating an input variable. Loops that hold the loss but not the head count as a whole, and a function with `goto` is
// refused.
#pragma once

#include <optional>
#include <string>

#include "clang/AST/Stmt.h"

#include "ast_query.h"
#include "patterns.h"
#include "site_capture.h"

namespace lmfuse::rewriter {

struct InputChange {
  const clang::Stmt *Statement = nullptr;  ///< the statement that may change an input
  std::string Why;                         ///< e.g. "`scale_` may change `x` (it receives it)"
};

/// The first code between the site's head and its loss that may change an input of the fused call or
/// of the repeated guard; none when the analysis proves that nothing does.
std::optional<InputChange> findInputChange(const CapturedSite &Site, const PatternSet &Patterns,
                                           const AstQuery &Query);

}  // namespace lmfuse::rewriter

// Head matching: whether an expression is a plain linear head under the pattern set (a
// torch::nn::Linear called as m(x) or m->forward(x), a functional linear, or a product with the
// transpose of a module's parameter: `torch::matmul(x, wte->weight.t())`), by the resolved
// declaration and the holder's type, never by the variable's name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"

#include "ast_query.h"
#include "patterns.h"

namespace lmfuse::rewriter {

enum class HeadKind { Module, Function };

struct HeadCall {
  HeadKind Kind = HeadKind::Module;
  const clang::Expr *Call = nullptr;    ///< the head call as spelled
  const clang::Expr *Hidden = nullptr;  ///< its input argument
  const clang::Expr *Object = nullptr;  ///< module heads: the module holder expression
  std::string Text;                     ///< "lm_head" (module) or the call text (function)
  std::string Weight;                   ///< "lm_head->weight", or the weight argument
  std::string Bias;                     ///< "lm_head->bias", the bias argument, or "" when absent
  /// What the rewrite copies into the fused call besides the input, evaluated again at the loss: the
  /// module expression, or the weight and bias arguments.
  std::vector<const clang::Expr *> Copied;
  int HiddenRank = 0;  ///< the rank the head requires of its input (`mm`: 2), 0 for any
  /// A module head called as `object->forward(h)` on a class of the program's (a subclass of the library's
  /// module class, Library): the class whose name lookup finds the members the fused call stands for (the
  /// rule's method, weight and bias, Members), each in Library by Clang's reading of the class's bases, which
  /// another compiler may read otherwise (a base chosen by `std::conditional_t`). Null for the library's class.
  const clang::CXXRecordDecl *LookedUpIn = nullptr;
  const clang::CXXRecordDecl *Library = nullptr;
  std::vector<std::string> Members;
};

/// Whether E is a head under Patterns.
std::optional<HeadCall> matchHead(const clang::Expr *E, const PatternSet &Patterns, const AstQuery &Query);
/// Why E, a call of a product head's callee (`torch::matmul(x, k.t())`), is not a head: its operand
/// is not the transpose of a module's parameter. Nullopt when E is no such call.
std::optional<std::string> whyNotProductHead(const clang::Expr *E, const PatternSet &Patterns,
                                             const AstQuery &Query);
/// Why E, a call of a module head's `forward` or of its holder (`head->forward(x)`, `head(x)`), is not a head:
/// a class of the program's between the object's class and the library's declares a member the fused call
/// would read, or an overload the call may resolve to. Nullopt when E is no such call.
std::optional<std::string> whyNotModuleHead(const clang::Expr *E, const PatternSet &Patterns, const AstQuery &Query);
/// Whether S contains a head call anywhere.
bool containsHead(const clang::Stmt *S, const PatternSet &Patterns, const AstQuery &Query);
/// Whether a module head may have a bias: false only when every construction of it visible in this
/// translation unit says `.bias(false)`.
bool moduleHasBias(const clang::Expr *Object, const AstQuery &Query);

}  // namespace lmfuse::rewriter

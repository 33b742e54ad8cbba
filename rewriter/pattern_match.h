// Small matching helpers the capture stages share: qualified names, spellings, constant argument
// lists and the null constants of the pattern set.
#pragma once

#include <cstdint>
#include <string>

#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include "ast_query.h"
#include "patterns.h"

namespace lmfuse::rewriter {

/// "torch::nn::LinearImpl" for the declaration, "" for none.
std::string qualifiedName(const clang::NamedDecl *Decl);
/// The last identifier of a spelling: "torch::kFloat" -> "kFloat".
llvm::StringRef lastIdentifier(llvm::StringRef Text);
/// Whether the arguments from the first on are the given constants and the rest are defaults.
bool argumentsAre(llvm::ArrayRef<const clang::Expr *> Args, llvm::ArrayRef<int64_t> Expected, const AstQuery &Query);
/// Whether an argument was left to its default.
bool isDefaultArgument(const clang::Expr *Arg);
/// Whether a benign reshape (patterns' `reshapes`) may change the shape: `flatten`, or any other given an
/// argument (`view(-1)`); `contiguous()` keeps it, though LibTorch declares a defaulted memory format.
bool changesShape(const CallView &Reshape);
/// Whether D is declared in one of the pattern set's library namespaces (its outermost named,
/// non-inline namespace: `torch`, `at`, `std`, ...), wherever its header lies.
bool inLibraryNamespace(const clang::Decl *D, const PatternSet &Patterns);
/// Whether D is the library's: in one of its namespaces and declared nowhere by the program itself
/// (AstQuery::declaredByProgram). A function the program adds to a library namespace (an overload of
/// `cross_entropy`, a helper in `namespace torch`) computes and writes whatever the program wrote, so no
/// rule may take it for the library's: every match of a rule's name and every trust in a library
/// call's effects goes through here.
bool isLibraryDeclaration(const clang::Decl *D, const PatternSet &Patterns, const AstQuery &Query);
/// The first part of E that may give another value when E is evaluated a second time (null when none).
/// E may hold names, members, `this`, literals, built-in `*`, `&`, `-` and `[]`, and the library's
/// accessors (`->`, `*`, `[]` and the pattern set's `accessors`, on what may itself be evaluated again);
/// anything else (a call of the program's, also one the source leaves implicit, such as a conversion
/// operator of a class of the program's; `k++`; an assignment; a volatile read) may not.
const clang::Expr *notReevaluable(const clang::Expr *E, const PatternSet &Patterns, const AstQuery &Query);
/// Whether E is `nullptr` or one of the pattern set's null constants (`c10::nullopt`, ...).
bool isNullConstant(const clang::Expr *E, const PatternSet &Patterns, const AstQuery &Query);

}  // namespace lmfuse::rewriter

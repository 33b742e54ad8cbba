// A type as code that names it from anywhere in its translation unit: `::torch::nn::Linear`,
// `::c10::optional<::at::Tensor>`. Rewritten calls pass the types their site was decided on in this form
// for the build's compiler to check (torch/include/lmfuse/analysed.h).
#pragma once

#include <optional>
#include <string>

#include "clang/AST/ASTContext.h"
#include "clang/AST/Type.h"

namespace lmfuse::rewriter {

/// T without references and cv-qualifiers (what std::decay gives a class or scalar), fully qualified from the
/// global namespace, as code in From (the site's function) may write it; nullopt where no code outside the
/// type's own scope can name it (a local class, a lambda's closure, an unnamed class, a dependent type), where
/// From may not (a class nested private or protected in a class From is not inside), where the printer cannot
/// be trusted to (a template argument of an enumeration type), or where the type is one std::decay would change
/// otherwise (arrays, functions).
std::optional<std::string> spelledDecayedType(clang::QualType T, const clang::ASTContext &Context,
                                              const clang::DeclContext *From);

}  // namespace lmfuse::rewriter

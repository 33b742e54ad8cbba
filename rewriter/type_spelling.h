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
/// global namespace; nullopt where no code outside the type's own scope can name it (a local class, a
/// lambda's closure, an unnamed class, a dependent type) or where the type is one std::decay would change
/// otherwise (arrays, functions).
std::optional<std::string> spelledDecayedType(clang::QualType T, const clang::ASTContext &Context);

}  // namespace lmfuse::rewriter

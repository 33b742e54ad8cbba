// Where a module held in a variable or member is constructed: the values it is initialised or
// assigned with in this translation unit. The bias of a Linear head and the options of a loss module
// are read from these.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"

#include "ast_query.h"

namespace lmfuse::rewriter {

struct ModuleConstructions {
  /// Initialisers (a local's, a member's in-class one, constructor initialisers) and the right-hand
  /// sides of assignments to it (in constructor bodies for a member, in the function for a local).
  std::vector<const clang::Expr *> Values;
  /// Initialised by nothing written: the holder's default constructor runs (a default module).
  bool DefaultConstructed = false;
  /// Why the constructions may be incomplete (a constructor defined in another file), "" when all are
  /// visible here.
  std::string Unseen;
};

/// The declaration a module expression names: a variable or a member, looking through the
/// holder's `operator->` (`m->forward(x)`). Null for anything else.
const clang::ValueDecl *moduleDeclaration(const clang::Expr *Module);

/// How a call of a module names the module, up to and including the accessor its members are read
/// with: "m->" for the holder (`m(x)`, `m->forward(x)`), "m." or "p->" for the module itself
/// (`m.forward(x)`, `p->forward(x)`). Nullopt when Call is not such a call.
std::optional<std::string> moduleAccess(const CallView &Call, const AstQuery &Query);

/// Every construction of the module Holder names, as far as this translation unit shows it.
ModuleConstructions constructionsOf(const clang::ValueDecl *Holder, const AstQuery &Query);

}  // namespace lmfuse::rewriter

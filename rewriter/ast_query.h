// Small questions about the AST that every analysis stage asks: the text of a node, what a call
// calls, how statements are ordered and nested, and where a local variable is read or written.
// Everything here is syntax and declarations only; no rule of the pattern set lives here.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "clang/AST/ASTContext.h"
#include "llvm/ADT/APSInt.h"
#include "clang/AST/ASTTypeTraits.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Preprocessor.h"
#include "clang/AST/Expr.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/Stmt.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"

namespace lmfuse::rewriter {

/// A call seen as "name(object?, args...)": a method call x.f(a), x->f(a), an operator call, or
/// a free function f(a). Object is null for free functions.
struct CallView {
  const clang::Expr *Call = nullptr;
  const clang::Expr *Object = nullptr;
  const clang::FunctionDecl *Callee = nullptr;
  std::string Name;  ///< unqualified callee name ("view", "tanh", "operator[]")
  std::vector<const clang::Expr *> Args;
};

class AstQuery {
public:
  /// ProgramRoot: the folder of the program's own files (canonical; "" = the main file's folder).
  /// Preprocessor: the unit's, which keeps every macro's history (macroMeaningChanged).
  AstQuery(clang::ASTContext &Context, clang::Preprocessor &PP, std::string ProgramRoot = "");

  clang::ASTContext &context() const { return Context; }
  const clang::SourceManager &sourceManager() const { return Context.getSourceManager(); }

  /// The file characters a node was written with: a macro argument maps to its spelling, a whole
  /// macro invocation to the invocation; invalid when the node is only part of an expansion.
  clang::CharSourceRange fileRange(clang::SourceRange Range) const;
  /// The source text of a node as written (empty when it is only part of a macro expansion).
  std::string text(clang::SourceRange Range) const;
  std::string text(const clang::Stmt *Node) const { return text(Node->getSourceRange()); }
  /// The text of E as spelled, as the rewrite pastes it where an argument or an initializer goes: a comma
  /// expression is parenthesised, which would otherwise split into two arguments or two declarators.
  std::string argumentText(const clang::Expr *E) const;
  /// The text of E as spelled, as the rewrite pastes it before `->` or `.`: parenthesised unless it is a
  /// name, a member, a call or a subscript (`(*hp)->` must not become `*hp->`).
  std::string objectText(const clang::Expr *E) const;
  /// The 1-based line of a location (expansion location for macros).
  unsigned line(clang::SourceLocation Location) const;
  /// The whitespace that starts the line holding Location.
  std::string indentation(clang::SourceLocation Location) const;

  /// Strips implicit nodes and parentheses: the expression as spelled.
  static const clang::Expr *spelled(const clang::Expr *E);
  /// E seen as a call, if it is one.
  static std::optional<CallView> asCall(const clang::Expr *E);
  /// The local or parameter E names, if it is just a name.
  static const clang::VarDecl *namedVariable(const clang::Expr *E);
  /// Whether E contains a call whose unqualified name is one of Names.
  static bool containsCallNamed(const clang::Stmt *S, llvm::ArrayRef<std::string> Names);
  /// Whether E mentions Variable.
  static bool mentions(const clang::Stmt *S, const clang::VarDecl *Variable);
  /// The integer value of E when it is an integral constant expression (nullopt for what Clang's folder
  /// evaluates beyond the language's rules), or the floating value of E when it is a compile-time constant.
  std::optional<int64_t> integerValue(const clang::Expr *E) const;
  std::optional<double> floatValue(const clang::Expr *E) const;
  /// Every expression whose integer value integerValue found, with that value in E's type, in the order read:
  /// what the analysis may have decided a site on, which another compiler could evaluate otherwise (a constant
  /// chosen by `sizeof(__PRETTY_FUNCTION__)`); the rewrite asserts those of its site (edit_plan.h).
  const std::vector<std::pair<const clang::Expr *, llvm::APSInt>> &integersRead() const { return IntegersRead; }

  /// Whether Location (its expansion) lies in the program's own files: the main file, or a file under the
  /// program's root. Decided by where the file lies, never by how it was included: a program header
  /// reached as a system header (-isystem, a precompiled header's `#pragma GCC system_header`) is still
  /// the program's, its code analysed and its functions never trusted as the library's.
  bool inProgramFile(clang::SourceLocation Location) const;
  /// Whether Location lies in a system header that is not one of the program's files: the library's code.
  bool inLibraryHeader(clang::SourceLocation Location) const;
  /// Whether the program being analysed declares D itself: some declaration of it lies in the program's
  /// files (inProgramFile). The library's rules may match only what the library declares
  /// (pattern_match.h: isLibraryDeclaration).
  bool declaredByProgram(const clang::Decl *D) const;
  /// Where D is declared, for a refusal's words: "model.cpp:12" ("" where it has no position).
  std::string declaredAt(const clang::Decl *D) const;

  /// Ordering and nesting by source position (expansion locations).
  bool before(clang::SourceLocation A, clang::SourceLocation B) const;
  bool within(const clang::Stmt *Inner, const clang::Stmt *Outer) const;
  bool within(clang::SourceLocation Location, const clang::Stmt *Outer) const;
  bool inMacro(const clang::Stmt *Node) const;

  /// The first parent of a node, looking through nothing.
  const clang::Stmt *parentStmt(const clang::Stmt *Node) const;
  /// The first parent that is not an implicit wrapper (casts, temporaries, cleanups, parens).
  clang::DynTypedNode spelledParent(const clang::Stmt *Node) const;
  /// The statement of the innermost compound statement that holds Node.
  const clang::Stmt *enclosingStatement(const clang::Stmt *Node) const;
  /// The function whose body holds Node (a lambda's call operator for lambda bodies).
  const clang::FunctionDecl *enclosingFunction(const clang::Stmt *Node) const;
  /// The declaration named Name that unqualified lookup at At finds in the function around it, if any: the
  /// innermost local (a variable, alias or class declared in a block, or in an `if`, `for`, `switch`, `while`
  /// or `catch`, before At; a structured binding) or parameter (the function's, an enclosing lambda's, an
  /// init-capture), or a block's `using namespace`, which may bring any name in. Null where lookup leaves the
  /// function, whose scopes are the same at every position in it.
  const clang::NamedDecl *localNamedAt(llvm::StringRef Name, const clang::Stmt *At) const;
  /// The names of E that unqualified lookup resolves: each identifier of its text that follows no `.`, `->`
  /// or `::`, and those the expansion of a macro in it reads (its references to declarations named without a
  /// qualifier, members named without `this->`).
  std::set<std::string> unqualifiedNames(const clang::Expr *E) const;
  /// A name of E that lookup at At resolves otherwise than where E is written (localNamedAt at both: null for
  /// what lies outside the function), so that E's text spelled again at At would mean another thing.
  struct Renamed {
    std::string Name;
    const clang::NamedDecl *Read = nullptr, *There = nullptr;
  };
  std::optional<Renamed> renamedAt(const clang::Expr *E, const clang::Stmt *At) const;
  /// Whether Name means something inside Function: a parameter, a declaration or a use in its body,
  /// or a name found by lookup from its scope outwards (members of the class and its bases, and what the
  /// using-directives of its body and of the namespaces around it make visible, included).
  /// A name the rewrite introduces must not be one of these.
  bool nameInUse(llvm::StringRef Name, const clang::FunctionDecl *Function) const;
  /// What the unqualified Name at the head of a qualified name written in Function's body (`lmfuse` of
  /// `lmfuse::enabled()`) finds before the global namespace of that name: a declaration of that name in the
  /// function or one enclosing it (a local class, a namespace alias), a template parameter, a member of an
  /// enclosing class or its bases, a member of an enclosing namespace (inline namespaces included), or one a
  /// using-directive of those scopes makes visible there; null when lookup reaches the global namespace (or
  /// finds an alias of it). Scopes are followed outwards both as written and as declared (a friend defined in
  /// a class, a member defined outside its namespace). A using-directive at file scope is not counted: what
  /// it makes visible meets the global namespace in one scope, which is an ambiguity the compiler reports.
  const clang::NamedDecl *nameShadowsGlobalNamespace(llvm::StringRef Name, const clang::FunctionDecl *Function) const;
  /// A declaration of the global namespace Name (one opening of it) in the program's files, outside any
  /// folder named LibraryFolder (where the library's own headers declare it: `lmfuse/torch.h`), or null.
  const clang::NamespaceDecl *programOpening(llvm::StringRef Name, llvm::StringRef LibraryFolder) const;
  /// Whether Name is a macro where Location is (its expansion), by the unit's macro history.
  bool isMacroAt(llvm::StringRef Name, clang::SourceLocation Location) const;

  /// A name in the text E is spelled with that is a macro of another meaning at `At` than where E is written
  /// (a `#define`, `#undef`, `#pragma push_macro` / `pop_macro` or `_Pragma` between them, in this file or
  /// one it includes), or "" when none is: E's text pasted at `At` would expand to other code there.
  std::string macroMeaningChanged(const clang::Expr *E, clang::SourceLocation At) const;

  /// What in Node gives another value where its text is written elsewhere or once more, or "" when nothing
  /// does: a built-in macro that expands to where it stands or to a count of its expansions (`__LINE__`,
  /// `__COUNTER__`, also through a macro of the program), a source-location builtin (`__builtin_LINE()`,
  /// `__builtin_COLUMN()`, `__builtin_FUNCTION()`, `std::source_location::current()`, also as a default
  /// argument, whose value is its caller's place) or a function-name variable (`__func__`, which in a lambda
  /// names the lambda).
  std::string positionDependence(const clang::Stmt *Node) const;
  /// A line read (`__LINE__`, `__builtin_LINE()`, `std::source_location::current()`) anywhere in Body on the
  /// lines of Edited (whole lines: the rewrite replaces text there, and the code after it on those lines is
  /// compiled lines off until the copy's next #line), with where it is, or "".
  std::string lineDependenceOn(const std::vector<clang::SourceRange> &Edited, const clang::Stmt *Body) const;
  /// A built-in macro in the program's files that expands to what the compiler compiles rather than to what is
  /// written (`__BASE_FILE__`, the unit's main file; `__TIMESTAMP__`, the file's modification time), with
  /// where it is, or "": a rewritten copy is another file, compiled from another path at another time.
  std::string compiledFileDependence() const;
  /// A `__FILE__` (or `__FILE_NAME__`) the program writes (in its files, or in a macro of its own), expanded in
  /// the file that holds Site where it names the file otherwise than by its real path, with what it gives, or "": the
  /// rewritten copy's #line directives name the file by its real path, while the original's name is the file
  /// as the unit reached it (`src/../inc/model.h`, a folder linked to another, a relative path).
  std::string fileNameDependence(clang::SourceLocation Site) const;

private:
  /// The file location of each expansion of a position or count macro (positionDependence) in the unit,
  /// with its name; read once from the source manager's record of expansions.
  const std::vector<std::pair<clang::SourceLocation, std::string>> &positionMacroExpansions() const;

  /// The first declaration named Name that Counts takes, as lookup from Function's body would meet them, scope by
  /// scope outwards, both as written and as declared: the function's own declarations and what its block-scope
  /// using-directives bring, template parameters, members of enclosing classes and their bases, members of
  /// enclosing namespaces and what their using-directives nominate in turn; the global scope and its
  /// using-directives only WithGlobalScope. The one walk behind nameInUse and nameShadowsGlobalNamespace.
  const clang::NamedDecl *declarationNamed(llvm::StringRef Name, const clang::FunctionDecl *Function,
                                           llvm::function_ref<bool(const clang::NamedDecl *)> Counts,
                                           bool WithGlobalScope) const;

  clang::ASTContext &Context;
  clang::Preprocessor &PP;  // the unit's, with every macro's history
  std::string ProgramRoot;
  mutable std::optional<std::vector<std::pair<clang::SourceLocation, std::string>>> PositionMacros;
  mutable std::vector<std::pair<const clang::Expr *, llvm::APSInt>> IntegersRead;
};

/// A write to a local: its declaration with initialiser, a (compound) assignment, or an in-place
/// method call (name ending in '_').
struct VariableWrite {
  enum class WriteKind { Declaration, Assignment, CompoundAssignment, InPlaceCall };
  WriteKind Kind;
  const clang::Stmt *Node = nullptr;   ///< the DeclStmt, assignment or call
  const clang::Expr *Value = nullptr;  ///< the initialiser or right-hand side; null for in-place calls
  std::string Method;                  ///< in-place calls: the method name
};

/// Every read and write of every local in one function body, in source order.
class VariableUses {
public:
  VariableUses(const clang::Stmt *Body, const AstQuery &Query);
  llvm::ArrayRef<VariableWrite> writes(const clang::VarDecl *Variable) const;
  /// Every mention of the variable that is not the target of a plain or compound assignment.
  llvm::ArrayRef<const clang::DeclRefExpr *> reads(const clang::VarDecl *Variable) const;

private:
  llvm::DenseMap<const clang::VarDecl *, std::vector<VariableWrite>> Writes;
  llvm::DenseMap<const clang::VarDecl *, std::vector<const clang::DeclRefExpr *>> Reads;
};

}  // namespace lmfuse::rewriter

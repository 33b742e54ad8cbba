// The macros a translation unit's analysis depended on: every macro the project's own files name (expand,
// directly or inside another expansion, or test with #ifdef, #ifndef, defined() or #if), with the definition
// the unit ended with. A build that compiles the rewritten copies under other flags (a carried mirror, a
// -DSOFTCAP the tool never saw) or with another compiler (__clang__) may define one of them differently, and
// then the code it compiles is not the code that was analysed: the build step compares each definition
// with its own compiler's (`-dM -E`) before it compiles a copy. Macros the project's files define are not
// recorded: those files' contents are checked by digest, and the macros their definitions test are named
// there. A macro a library header defines records that header and its digest: a build against another
// version of the library (another header) is not compared on it, the same header must give the same
// definition. A `__has_include` / `__has_include_next` test the project's files make is such a dependence
// too (a header present where the mirror was made may be absent where it is built): recorded with its origin
// `include-test`, the test as written for its name, its value (1 or 0) for its definition and the file that
// makes it (relative to the project root) for its header, so the build step can ask its own compiler.
// So is a test of the compiler's own features (`feature-test`), which another compiler answers otherwise: a
// call of one of Clang's built-in function-like macros (`__has_builtin(x)`, `__has_attribute(x)`,
// `__has_cpp_attribute(x)`, `__has_feature(x)`, `__has_warning("-W…")`, …: its value, which the driver
// evaluates with the unit's command, evaluateFeatureTests), `defined(X)` (or #ifdef, #ifndef) of a built-in
// macro (1: Clang has it; GCC has no `__has_warning`), and the directives `#elifdef` / `#elifndef`, which a
// compiler before C++23 may not know (1: Clang took it as one).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "clang/Lex/PPCallbacks.h"
#include "clang/Lex/Preprocessor.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace lmfuse::rewriter {

enum class MacroOrigin { Undefined, CommandLine, BuiltIn, Library, IncludeTest, FeatureTest };

struct MacroDependence {
  std::string Name;
  MacroOrigin Origin = MacroOrigin::Undefined;
  /// `NAME body` or `NAME(params) body`, as `-dM` prints it after `#define `; empty when undefined.
  std::string Definition;
  std::string Header;        ///< Library: the header that defines it (canonical); Include/FeatureTest: the file testing
  std::string HeaderSha256;  ///< Library: contentDigest() of that header
  /// The definition the unit started with (command line, compiler), where it is not `Definition` (a file
  /// redefined or #undef'd it): the end state alone would not tell a flag a file #undefs after testing it.
  std::optional<std::string> Predefined;
  /// Where a file of the project uses it before a directive of it (a redefinition, to the same text or not, or
  /// an #undef) ("file:line"), and its definition there ("" undefined after an #undef): the end state the build
  /// compares does not tell what the build's compiler made of it there.
  std::optional<std::pair<std::string, std::string>> AtUse;

  bool operator<(const MacroDependence &Other) const { return Name < Other.Name; }
  bool operator==(const MacroDependence &Other) const {
    return Name == Other.Name && Origin == Other.Origin && Definition == Other.Definition &&
           Header == Other.Header && HeaderSha256 == Other.HeaderSha256 && Predefined == Other.Predefined &&
           AtUse == Other.AtUse;
  }
};

/// Evaluates the feature tests among Macros whose value is not known yet (calls of Clang's built-in function-like
/// macros) with Evaluate, which gets the tests (`__has_builtin ( x )`) and returns their values in order
/// ("" for one it could not evaluate: the build step then reports it).
void evaluateFeatureTests(std::vector<MacroDependence> &Macros,
                          const std::function<std::vector<std::string>(const std::vector<std::string> &)> &Evaluate);

/// The names the files under ProjectRoot name, collected while the unit is preprocessed ("" : every file
/// outside the system headers).
class MacroNameRecorder : public clang::PPCallbacks {
public:
  MacroNameRecorder(clang::Preprocessor &PP, std::string ProjectRoot, std::string Directory)
      : PP(PP), ProjectRoot(std::move(ProjectRoot)), Directory(std::move(Directory)) {}

  void MacroExpands(const clang::Token &Name, const clang::MacroDefinition &, clang::SourceRange,
                    const clang::MacroArgs *) override;
  void Defined(const clang::Token &Name, const clang::MacroDefinition &, clang::SourceRange) override;
  void Ifdef(clang::SourceLocation, const clang::Token &Name, const clang::MacroDefinition &) override;
  void Ifndef(clang::SourceLocation, const clang::Token &Name, const clang::MacroDefinition &) override;
  void Elifdef(clang::SourceLocation, const clang::Token &Name, const clang::MacroDefinition &) override;
  void Elifndef(clang::SourceLocation, const clang::Token &Name, const clang::MacroDefinition &) override;
  void Elifdef(clang::SourceLocation, clang::SourceRange, clang::SourceLocation) override;
  void Elifndef(clang::SourceLocation, clang::SourceRange, clang::SourceLocation) override;
  void If(clang::SourceLocation, clang::SourceRange Condition, ConditionValueKind) override;
  void Elif(clang::SourceLocation, clang::SourceRange Condition, ConditionValueKind,
            clang::SourceLocation) override;
  void HasInclude(clang::SourceLocation Loc, llvm::StringRef FileName, bool IsAngled, clang::OptionalFileEntryRef File,
                  clang::SrcMgr::CharacteristicKind) override;

  /// The recorded names with their definitions at the end of the unit, sorted by name.
  std::vector<MacroDependence> dependences() const;

private:
  bool inProject(clang::SourceLocation Loc);
  void name(const clang::Token &Name, clang::SourceLocation Where);
  void conditionNames(clang::SourceLocation Directive);
  /// Records a feature test made at Where (a file of the project): Test as written, with Value ("" where the
  /// driver evaluates it).
  void featureTest(clang::SourceLocation Where, std::string Test, std::string Value);
  /// `defined(Name)` / #ifdef / #ifndef: a built-in macro's is a feature test.
  void tested(const clang::Token &Name);

  clang::Preprocessor &PP;
  std::string ProjectRoot;
  std::string Directory;
  std::set<std::string> Names;
  std::map<std::string, std::vector<clang::SourceLocation>> Uses;  // where the project's files use each name
  std::set<MacroDependence> IncludeTests;  // by name and file: a test made twice in one file is one record
  std::set<MacroDependence> FeatureTests;  // the same
  std::map<unsigned, bool> ProjectFiles;  // FileID hash -> under ProjectRoot
};

llvm::StringRef originName(MacroOrigin Origin);
llvm::json::Object macroToJson(const MacroDependence &Macro);
/// The inverse of macroToJson (for caches); an error names the malformed field.
llvm::Expected<MacroDependence> macroFromJson(const llvm::json::Value &Value);

}  // namespace lmfuse::rewriter

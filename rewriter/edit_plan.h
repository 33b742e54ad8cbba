// Edit planning: the replacement text of a site that may be rewritten. Minimal edits: the
// logits statement gets `skip ? skipped : <original>`, each rebinding or alias of the logits the
// same condition with its reshape run on a stand-in without values, the loss call `enabled ?
// fused(...) : <original call>` with the original's logits input as code for the fused call to check,
// and, where the head's input is not a stable variable, one hoisted local so no user code runs twice.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "clang/Tooling/Core/Replacement.h"

#include "ast_query.h"
#include "patterns.h"
#include "site_capture.h"

namespace lmfuse::rewriter {

/// The parameters of the code handed to the runtime: the logits' and the labels' stand-ins.
struct StandInNames {
  std::string Logits, Labels;
};

/// What a rewritten call asserts for the build's compiler to check (`.analysed(AnalysedTypes<Found, Expected,
/// ...>())`, torch/include/lmfuse/analysed.h): a type the analysis gave an expression the fused call reads in
/// place of the original's code (`decltype(h)` against `::at::Tensor`, type_spelling.h), or an integer
/// constant it read (`lmfuse::Holds<((kDim) == 1)>` against `lmfuse::Holds<true>`).
struct AnalysedExpression {
  std::string Found;     ///< as the build's compiler reads it
  std::string Expected;  ///< as the analysis read it
  /// The program's code Found copies to the loss (the expression read), whose names must mean there what they
  /// mean where it was read (refusals.h: findEditRefusal); null where Found names only what the rewrite spells.
  const clang::Expr *Source = nullptr;
};

/// What the rewritten call asserts: the types of the head's module (a function head's weight and bias), of
/// the head's input (through the local HiddenName when it is hoisted) and of the labels the loss starts from,
/// each where its type can be named and its expression can be an operand of decltype (no lambda in it); for a
/// module head of a subclass of the library's module class, the class that declares each member the fused call
/// stands for (`lmfuse::DeclaredIn<decltype(&::Head::forward)>` against `::torch::nn::LinearImpl`); the types
/// of option arguments whose type decided an option, and of the options object the setters are called on where
/// its type is written through an alias or a template (`Opts()`); and the value of each integer constant the
/// analysis read inside the parts of the site the rewrite edits, moves or copies (site_capture.h:
/// rewrittenParts, with the option locals) and the initialisers of the labels locals, where it is not a literal
/// and is a constant expression by the language's rules.
std::vector<AnalysedExpression> analysedExpressions(const CapturedSite &Site, const std::string &HiddenName,
                                                    const PatternSet &Patterns, const AstQuery &Query);

/// The replacements that rewrite one site. HiddenName is the local to hoist the head's input
/// into when Site.HoistHidden, StandIns the parameters of the code handed to the runtime (names that
/// mean nothing yet in the function), Analysed what the fused call asserts (analysedExpressions).
/// Respellings, when given, receives each piece of the program's code the edits spell again at another place
/// (the head's input, weight and bias at the loss, shifted labels' code, the labels test at the head, the code
/// an assertion reads) with the code it copies, for the re-parse to compare (respelling.h).
std::vector<clang::tooling::Replacement> planSiteEdits(const CapturedSite &Site, const PatternSet &Patterns,
                                                       const AstQuery &Query, const std::string &HiddenName,
                                                       const StandInNames &StandIns,
                                                       const std::vector<AnalysedExpression> &Analysed,
                                                       std::vector<Respelling> *Respellings = nullptr);

/// Every name the edits planned with these names may write that is not a copy of the program's text: the
/// replacement's names (`lmfuse`, `enabled`, the stand-ins, the hoisted local), the rule set's members the
/// head and loss are read through (`weight`, `bias`, `options`), the option table's setters with the
/// reductions' enumerators, the labels' cast method, the planner's own keywords (`auto`, `const`,
/// `decltype`) and the names in what the site asserts (Analysed: its expected types). findEditRefusal checks each for a
/// macro where it is written, whether or not the program's moved code spells the same name.
std::set<std::string> ownWords(const PatternSet &Patterns, const clang::LangOptions &Language,
                               const std::string &HiddenName, const StandInNames &StandIns,
                               const std::vector<AnalysedExpression> &Analysed);

/// The fused call's options, e.g. `lmfuse::LossOptions().ignore_index(-1).shift(true)`.
std::string lossOptionsText(const CapturedSite &Site, const PatternSet &Patterns);

/// The insertion of `#include <...>` for the replacement call, after the last #include of the file that the
/// preprocessor took (never one in a block `#if` skipped) among those least deep in `#if` blocks (a header
/// guard's included), so it lands where every unit reads it; of those, the last before the file's first edit
/// (at offset FirstEdit) where one lies before it, so the rewritten code below it sees the header (a file may
/// include a part of itself after its functions); a block of its own, a blank line between it and the program's
/// includes; none when the file already includes it.
std::optional<clang::tooling::Replacement> planIncludeEdit(clang::FileID File, unsigned FirstEdit,
                                                          const PatternSet &Patterns, const clang::SourceManager &SM);

}  // namespace lmfuse::rewriter

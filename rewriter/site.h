// A candidate site and how it ended: the record every other rewriter stage reads or writes.
// Every candidate site ends in exactly one status; a site that is not patched says why with one reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"

namespace lmfuse::rewriter {

enum class SiteStatus { Patched, AlreadyPatched, Unmatched, Failed, Suppressed };

/// Why a site was not patched. Unmatched sites carry one of the refusal kinds, failed sites one of
/// the failure kinds; patched, already-patched and suppressed sites carry None.
enum class ReasonKind {
  None,
  // refusals (status Unmatched)
  LogitsRebound,
  LogitsSoftcapped,
  HeadWrapped,
  HeadNotLinear,
  LogitsIndexed,
  LogitsUsedElsewhere,
  LabelsBranchNontrivial,
  LabelsMismatch,
  LossUnsupported,
  InMacro,
  InputsModified,
  TemplateDependent,  ///< in a template, with types only an instantiation decides
  LineDirective,      ///< the program's own #line maps the site's lines, which the copy's #line would change
  PositionDependent,  ///< code the rewrite moves or copies reads its own place (__LINE__, __func__) or a count
  NameCaptured,       ///< a name the rewritten code writes means another thing where it is written (a macro, a
                      ///< program's `lmfuse` or `torch` that lookup finds first)
  // failures (status Failed)
  ParseError,
  ReparseFailed,
  EditConflict,
  WriteFailed,
  SourceChanged,     ///< a file the analysis read changed on disk before the rewrite was written
  BuildRefused,      ///< lmfuse_rewrite's build step stopped the build after the tool patched (set by the step)
  NoCompileCommand,  ///< an input skipped: no compile command lists it
  Unreadable,        ///< an input skipped: missing, unreadable or not a regular file
};

/// The audit's spelling: "patched", "already_patched", "unmatched", "failed", "suppressed".
llvm::StringRef statusName(SiteStatus Status);
/// The audit's reason code: "logits-rebound", ..., "write-failed"; "" for None.
llvm::StringRef reasonCode(ReasonKind Reason);
/// One sentence a person understands, without the site-specific detail.
llvm::StringRef reasonDescription(ReasonKind Reason);
/// The reason whose code is Code, if any (for reading audits and test tables).
std::optional<ReasonKind> reasonFromCode(llvm::StringRef Code);

/// The effective loss options of a patched site, as passed to the runtime. loss_option_table.h
/// describes each once: how the rewritten call passes it and how the audit and the cache store it.
struct PatchedOptions {
  int64_t IgnoreIndex = -100;
  double LabelSmoothing = 0.0;
  std::string Reduction = "mean";  ///< "mean" or "sum"
  bool Shift = false;              ///< the causal-shift idiom was mapped to the runtime's shift
  /// The head has a bias. A module head counts as biased unless its construction, where visible
  /// in this translation unit, says `.bias(false)`; its `bias` member is passed either way (an
  /// undefined tensor when absent).
  bool Bias = false;
  /// Set when the value is known only at run time (a member such as `pad_id_`): the rewrite passes
  /// the expression as written, and the audit writes it as {"expr": "<text>"} instead of a value.
  std::string IgnoreIndexExpression;
  std::string LabelSmoothingExpression;
  /// The values as written in the source, which the rewritten call passes ("" = absent: the default).
  std::string IgnoreIndexText;
  std::string LabelSmoothingText;
};

/// Where a piece of text lies before the rewrite is applied: in the text of the site's edit that replaces the
/// original at EditOffset (InEdit), or in the original file (Offset is then a file offset).
struct TextPlace {
  bool InEdit = false;
  unsigned EditOffset = 0;
  unsigned Offset = 0, Length = 0;
  /// InEdit: the edit's own line breaks before Offset, each written as "\r\n" in a file whose lines end so.
  unsigned LineBreaksBefore = 0;
};

/// Code of the program a patched site's edits spell again at another place (the head's input at the loss),
/// and the code it copies, which the rewritten unit's re-parse compares (respelling.h).
struct Respelling {
  TextPlace Copy, Original;
  std::string Part;           ///< what the copy is, for the refusal: "the head's input `h`"
  ReasonKind Reason = ReasonKind::None;  ///< the refusal when the copy reads otherwise
  unsigned OriginalLine = 0;  ///< where the program wrote what it copies
};

struct SiteRecord {
  std::string File;      ///< as the compiler saw it (absolute where the compile command made it so)
  unsigned Line = 0;     ///< 1-based, of the head call when found, else of the loss call
  unsigned Column = 0;   ///< 1-based
  std::string Function;  ///< qualified name of the enclosing function
  SiteStatus Status = SiteStatus::Unmatched;
  ReasonKind Reason = ReasonKind::None;
  std::string Detail;    ///< one sentence naming the offending line
  /// Where the offending statement starts (1-based; 0 when the site has none): the note of the
  /// site's diagnostic points there.
  unsigned DetailLine = 0, DetailColumn = 0;
  std::string Head;      ///< patched: the head as written, e.g. "lm_head" or "F::linear(x, wte->weight)"
  std::string Loss;      ///< patched: the loss callee, e.g. "torch::nn::functional::cross_entropy"
  std::optional<PatchedOptions> Options;  ///< patched only
  std::vector<Respelling> Respellings;    ///< patched only; not stored in the audit or the cache
};

}  // namespace lmfuse::rewriter

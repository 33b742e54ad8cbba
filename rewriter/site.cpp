// Spellings of site statuses and reason codes: the audit's vocabulary, kept in one table so the
// code, its reverse lookup and the description can never drift apart.
#include "site.h"

namespace lmfuse::rewriter {
namespace {

struct ReasonEntry {
  ReasonKind Kind;
  llvm::StringRef Code;
  llvm::StringRef Description;
};

constexpr ReasonEntry Reasons[] = {
    {ReasonKind::None, "", ""},
    {ReasonKind::LogitsRebound, "logits-rebound",
     "the logits are changed in value between the head and the loss"},
    {ReasonKind::LogitsSoftcapped, "logits-softcapped",
     "the logits are soft-capped with tanh between the head and the loss"},
    {ReasonKind::HeadWrapped, "head-wrapped",
     "the head call is wrapped in an expression that changes its value"},
    {ReasonKind::HeadNotLinear, "head-not-linear",
     "the logits do not come from a plain torch::nn::Linear, functional linear or product with a weight's transpose"},
    {ReasonKind::LogitsIndexed, "logits-indexed",
     "the logits are sliced or indexed other than by the causal-shift idiom"},
    {ReasonKind::LogitsUsedElsewhere, "logits-used-elsewhere",
     "the logits are read by something other than the loss"},
    {ReasonKind::LabelsBranchNontrivial, "labels-branch-nontrivial",
     "the labels branch does more than compute the loss"},
    {ReasonKind::LabelsMismatch, "labels-mismatch",
     "the loss target is not derived from the guarded labels"},
    {ReasonKind::LossUnsupported, "loss-unsupported",
     "the loss uses an option the fused runtime cannot honour"},
    {ReasonKind::InMacro, "in-macro", "part of the site is inside a macro expansion"},
    {ReasonKind::InputsModified, "inputs-modified",
     "code between the head and the loss may change the head's input, weight, bias or module, or the guard's inputs"},
    {ReasonKind::TemplateDependent, "template-dependent",
     "the site is in a template and depends on its parameters' types, which only an instantiation decides"},
    {ReasonKind::LineDirective, "line-directive",
     "a #line directive of the program maps the site's lines to another file or line, which the rewritten "
     "copy's own #line directives would change"},
    {ReasonKind::PositionDependent, "position-dependent",
     "code the rewrite moves or copies reads where it is written (__LINE__, __builtin_COLUMN(), __func__) or "
     "how often it was expanded (__COUNTER__), or writes a value where the copy runs it another number of times"},
    {ReasonKind::NameCaptured, "name-captured",
     "a name the rewritten code writes (lmfuse::, torch::Tensor, an option's setter) would mean something else "
     "where it is written: a macro of the program, or a declaration of the program that lookup finds first"},
    {ReasonKind::ParseError, "parse-error", "the translation unit did not compile"},
    {ReasonKind::ReparseFailed, "reparse-failed", "the rewritten source did not compile"},
    {ReasonKind::EditConflict, "edit-conflict",
     "translation units, or the inclusions of a file in one unit, asked for different edits to the same file"},
    {ReasonKind::WriteFailed, "write-failed", "the rewritten file could not be written"},
    {ReasonKind::SourceChanged, "source-changed",
     "a file the analysis read changed on disk while lmfuse ran, so nothing was written; run it again"},
    {ReasonKind::BuildRefused, "build-refused",
     "lmfuse_rewrite's build step stopped the build (it would compile other code than was analysed), so no "
     "rewritten code is compiled"},
    {ReasonKind::NoCompileCommand, "no-compile-command", "the file was skipped: no compile command lists it"},
    {ReasonKind::Unreadable, "unreadable", "the file was skipped: it cannot be read as a source file"},
};

const ReasonEntry &entry(ReasonKind Reason) {
  for (const ReasonEntry &Entry : Reasons)
    if (Entry.Kind == Reason)
      return Entry;
  return Reasons[0];
}

}  // namespace

llvm::StringRef statusName(SiteStatus Status) {
  switch (Status) {
  case SiteStatus::Patched: return "patched";
  case SiteStatus::AlreadyPatched: return "already_patched";
  case SiteStatus::Unmatched: return "unmatched";
  case SiteStatus::Failed: return "failed";
  case SiteStatus::Suppressed: return "suppressed";
  }
  return "unmatched";
}

llvm::StringRef reasonCode(ReasonKind Reason) { return entry(Reason).Code; }

llvm::StringRef reasonDescription(ReasonKind Reason) { return entry(Reason).Description; }

std::optional<ReasonKind> reasonFromCode(llvm::StringRef Code) {
  for (const ReasonEntry &Entry : Reasons)
    if (Entry.Kind != ReasonKind::None && Entry.Code == Code)
      return Entry.Kind;
  return std::nullopt;
}

}  // namespace lmfuse::rewriter

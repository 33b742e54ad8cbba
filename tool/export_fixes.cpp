// Fixes YAML through clang's own YAML traits, so the format is exactly what clang-apply-replacements reads.
#include "export_fixes.h"

#include "safe_write.h"

#include "clang/Tooling/DiagnosticsYaml.h"
#include "llvm/Support/YAMLTraits.h"
#include "llvm/Support/raw_ostream.h"

namespace lmfuse::tool {

llvm::Error exportFixes(llvm::StringRef Path, llvm::StringRef MainSourceFile, llvm::StringRef BuildDirectory,
                        const std::vector<rewriter::FileRewrite> &Rewrites) {
  clang::tooling::TranslationUnitDiagnostics Document;
  Document.MainSourceFile = MainSourceFile.str();
  for (const rewriter::FileRewrite &Rewrite : Rewrites) {
    if (Rewrite.Edits.empty())
      continue;
    clang::tooling::DiagnosticMessage Message("lm_head + cross_entropy fused into lmfuse::linear_cross_entropy");
    Message.FilePath = Rewrite.Path;
    Message.FileOffset = Rewrite.Edits.begin()->getOffset();
    Message.Fix[Rewrite.Path] = Rewrite.Edits;
    Document.Diagnostics.emplace_back("lmfuse-fused-cross-entropy", Message,
                                      llvm::SmallVector<clang::tooling::DiagnosticMessage, 1>(),
                                      clang::tooling::Diagnostic::Warning, BuildDirectory);
  }
  std::string Text;
  {
    llvm::raw_string_ostream OS(Text);
    llvm::yaml::Output YAML(OS);
    YAML << Document;
  }
  if (llvm::Error Err = writeFileAtomically(Path, Text))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "the fixes: %s",
                                   llvm::toString(std::move(Err)).c_str());
  return llvm::Error::success();
}

}  // namespace lmfuse::tool

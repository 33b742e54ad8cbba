// Layout and colours follow clang's TextDiagnostic: bold location and message, the severity in its colour,
// the source line under a right-aligned line number and a green caret under the column (tabs expanded to
// 8 columns, as clang shows them).
#include "site_diagnostics.h"

#include <algorithm>
#include <map>

#include "driver.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

namespace lmfuse::tool {

using rewriter::ReasonKind;
using rewriter::SiteRecord;
using rewriter::SiteStatus;

namespace {

enum class SeverityKind { Warning, Note, Remark };

class Printer {
public:
  Printer(llvm::raw_ostream &OS, bool Colors)
      : OS(OS), Mode(Colors ? llvm::ColorMode::Enable : llvm::ColorMode::Disable) {}

  void diagnostic(llvm::StringRef File, unsigned Line, unsigned Column, SeverityKind Severity,
                  llvm::StringRef Message, llvm::StringRef Code) {
    llvm::WithColor(OS, llvm::raw_ostream::SAVEDCOLOR, /*Bold=*/true, /*BG=*/false, Mode)
        << File << ":" << Line << ":" << Column << ": ";
    switch (Severity) {
    case SeverityKind::Warning: llvm::WithColor(OS, llvm::HighlightColor::Warning, Mode) << "warning: "; break;
    case SeverityKind::Note: llvm::WithColor(OS, llvm::HighlightColor::Note, Mode) << "note: "; break;
    case SeverityKind::Remark: llvm::WithColor(OS, llvm::HighlightColor::Remark, Mode) << "remark: "; break;
    }
    llvm::WithColor(OS, llvm::raw_ostream::SAVEDCOLOR, /*Bold=*/true, /*BG=*/false, Mode) << Message;
    if (!Code.empty())
      llvm::WithColor(OS, llvm::raw_ostream::SAVEDCOLOR, /*Bold=*/true, /*BG=*/false, Mode) << " [" << Code << "]";
    OS << "\n";
    snippet(File, Line, Column);
  }

private:
  void snippet(llvm::StringRef File, unsigned Line, unsigned Column) {
    llvm::StringRef Text = lineOf(File, Line);
    if (Text.empty() && Column > 1)
      return;
    std::string Shown, Caret;
    for (unsigned I = 0; I < Text.size(); ++I) {
      unsigned Width = Text[I] == '\t' ? 8 - Shown.size() % 8 : 1;
      if (I + 1 < Column)
        Caret.append(Width, ' ');
      Shown.append(Width, Text[I] == '\t' ? ' ' : Text[I]);
    }
    std::string Number = std::to_string(Line);
    OS << llvm::formatv(" {0,4} | ", Number) << Shown << "\n";
    OS << llvm::formatv(" {0,4} | ", "") << Caret;
    llvm::WithColor(OS, llvm::HighlightColor::String, Mode) << "^";  // clang's caret colour is green
    OS << "\n";
  }

  llvm::StringRef lineOf(llvm::StringRef File, unsigned Line) {
    auto [It, Inserted] = Files.try_emplace(File.str());
    if (Inserted)
      if (auto Buffer = llvm::MemoryBuffer::getFile(File, /*IsText=*/false, /*RequiresNullTerminator=*/false))
        It->second = std::move(*Buffer);
    if (!It->second || Line == 0)
      return "";
    llvm::StringRef Text = It->second->getBuffer();
    for (unsigned L = 1; L < Line; ++L) {
      size_t End = Text.find('\n');
      if (End == llvm::StringRef::npos)
        return "";
      Text = Text.drop_front(End + 1);
    }
    Text = Text.take_until([](char C) { return C == '\n'; });
    return Text.rtrim("\r");
  }

  llvm::raw_ostream &OS;
  llvm::ColorMode Mode;
  std::map<std::string, std::unique_ptr<llvm::MemoryBuffer>> Files;
};

}  // namespace

void printSiteDiagnostics(llvm::raw_ostream &OS, const std::vector<SiteRecord> &Sites, const DiagnosticStyle &Style) {
  Printer Print(OS, Style.Colors);
  for (const SiteRecord &Site : Sites) {
    if (rewriter::isSkipReason(Site.Reason))
      continue;
    bool Done = Site.Status == SiteStatus::Patched || Site.Status == SiteStatus::AlreadyPatched;
    if (Done && !Style.Remarks)
      continue;
    std::string Code = "lmfuse-";
    if (Site.Reason != ReasonKind::None)
      Code += rewriter::reasonCode(Site.Reason).str();
    else
      Code += llvm::StringRef(rewriter::statusName(Site.Status)).str();
    std::replace(Code.begin(), Code.end(), '_', '-');
    std::string Message = Site.Detail.empty() ? rewriter::reasonDescription(Site.Reason).str() : Site.Detail;
    if (Message.empty())
      Message = "site " + rewriter::statusName(Site.Status).str();
    Print.diagnostic(Site.File, Site.Line, Site.Column, Done ? SeverityKind::Remark : SeverityKind::Warning,
                     Message, Code);
    if (Site.DetailLine && !Done) {
      llvm::StringRef Why = rewriter::reasonDescription(Site.Reason);
      Print.diagnostic(Site.File, Site.DetailLine, Site.DetailColumn ? Site.DetailColumn : 1, SeverityKind::Note,
                       Why.empty() ? llvm::StringRef("the offending statement") : Why, "");
    }
  }
  OS.flush();
}

}  // namespace lmfuse::tool

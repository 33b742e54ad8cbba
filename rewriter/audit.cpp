// Audit JSON through llvm/Support/JSON.h. Field names are the schema; README documents them.
#include "audit.h"

#include "loss_option_table.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

namespace lmfuse::rewriter {

namespace {
constexpr SiteStatus AllStatuses[] = {SiteStatus::Patched, SiteStatus::AlreadyPatched, SiteStatus::Unmatched,
                                      SiteStatus::Failed, SiteStatus::Suppressed};
}

std::string contentDigest(llvm::StringRef Contents) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(Contents)), /*LowerCase=*/true);
}

void sortSites(std::vector<SiteRecord> &Sites) {
  std::stable_sort(Sites.begin(), Sites.end(), [](const SiteRecord &A, const SiteRecord &B) {
    return std::tie(A.File, A.Line, A.Column) < std::tie(B.File, B.Line, B.Column);
  });
}

AuditSummary summarize(const std::vector<SiteRecord> &Sites) {
  AuditSummary Summary;
  for (const SiteRecord &Site : Sites) {
    switch (Site.Status) {
    case SiteStatus::Patched: ++Summary.Patched; break;
    case SiteStatus::AlreadyPatched: ++Summary.AlreadyPatched; break;
    case SiteStatus::Unmatched: ++Summary.Unmatched; break;
    case SiteStatus::Failed: ++Summary.Failed; break;
    case SiteStatus::Suppressed: ++Summary.Suppressed; break;
    }
  }
  return Summary;
}

std::string formatSummary(const std::vector<SiteRecord> &Sites) {
  std::string Out;
  llvm::raw_string_ostream OS(Out);
  OS << "lmfuse:";
  for (SiteStatus Status : AllStatuses) {
    std::map<std::string, unsigned> ByReason;
    unsigned Count = 0;
    for (const SiteRecord &Site : Sites)
      if (Site.Status == Status) {
        ++Count;
        if (Site.Reason != ReasonKind::None)
          ++ByReason[reasonCode(Site.Reason).str()];
      }
    OS << (Status == SiteStatus::Patched ? " " : ", ") << Count << " " << statusName(Status);
    if (!ByReason.empty()) {
      OS << " (";
      bool First = true;
      for (const auto &[Code, N] : ByReason) {
        OS << (First ? "" : ", ") << Code << ": " << N;
        First = false;
      }
      OS << ")";
    }
  }
  return Out;
}

std::optional<SiteStatus> statusFromName(llvm::StringRef Name) {
  for (SiteStatus Status : AllStatuses)
    if (statusName(Status) == Name)
      return Status;
  return std::nullopt;
}

llvm::json::Object siteToJson(const SiteRecord &Site) {
  llvm::json::Object Object{
      {"file", Site.File},
      {"line", int64_t(Site.Line)},
      {"column", int64_t(Site.Column)},
      {"function", Site.Function},
      {"status", statusName(Site.Status)},
      {"reason", reasonCode(Site.Reason)},
      {"detail", Site.Detail},
  };
  if (Site.DetailLine) {  // where the site's diagnostic note points
    Object["detail_line"] = int64_t(Site.DetailLine);
    Object["detail_column"] = int64_t(Site.DetailColumn);
  }
  if (Site.Status == SiteStatus::Patched || Site.Options) {
    Object["head"] = Site.Head;
    Object["loss"] = Site.Loss;
  }
  if (Site.Options) {
    llvm::json::Object Options;
    for (const LossOptionField &Field : lossOptionFields())
      Options[Field.Name] = Field.ToJson(*Site.Options);
    Object["options"] = std::move(Options);
  }
  return Object;
}

llvm::Expected<SiteRecord> siteFromJson(const llvm::json::Value &Value) {
  auto Malformed = [](llvm::StringRef Field) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "audit site: field \"%s\" is missing or malformed", Field.str().c_str());
  };
  const llvm::json::Object *Object = Value.getAsObject();
  if (!Object)
    return Malformed("<site>");
  SiteRecord Site;
  auto String = [&](llvm::StringRef Key, std::string &Into) {
    if (auto S = Object->getString(Key)) {
      Into = S->str();
      return true;
    }
    return false;
  };
  auto Unsigned = [&](llvm::StringRef Key, unsigned &Into) {
    if (auto I = Object->getInteger(Key)) {
      Into = unsigned(*I);
      return true;
    }
    return false;
  };
  if (!String("file", Site.File)) return Malformed("file");
  if (!Unsigned("line", Site.Line)) return Malformed("line");
  if (!Unsigned("column", Site.Column)) return Malformed("column");
  if (!String("function", Site.Function)) return Malformed("function");
  if (!String("detail", Site.Detail)) return Malformed("detail");
  std::string Status, Reason;
  if (!String("status", Status) || !statusFromName(Status)) return Malformed("status");
  Site.Status = *statusFromName(Status);
  if (!String("reason", Reason)) return Malformed("reason");
  if (Reason.empty())
    Site.Reason = ReasonKind::None;
  else if (auto Kind = reasonFromCode(Reason))
    Site.Reason = *Kind;
  else
    return Malformed("reason");
  String("head", Site.Head);
  String("loss", Site.Loss);
  Unsigned("detail_line", Site.DetailLine);
  Unsigned("detail_column", Site.DetailColumn);
  if (const llvm::json::Object *Options = Object->getObject("options")) {
    PatchedOptions Patched;
    for (const LossOptionField &Field : lossOptionFields()) {
      const llvm::json::Value *Value = Options->get(Field.Name);
      if (!Value || !Field.FromJson(*Value, Patched))
        return Malformed(std::string("options.") + Field.Name);
    }
    Site.Options = Patched;
  }
  return Site;
}

namespace {

llvm::json::Object mirrorToJson(AuditMirror Mirror) {
  std::sort(Mirror.Files.begin(), Mirror.Files.end(),
            [](const MirroredFile &A, const MirroredFile &B) { return A.Path < B.Path; });
  llvm::json::Array Files;
  for (const MirroredFile &File : Mirror.Files) {
    llvm::json::Object Entry{{"path", File.Path}, {"sha256", File.Sha256}, {"copy_sha256", File.CopySha256}};
    if (!File.SameFileAs.empty())
      Entry["same_file_as"] = File.SameFileAs;
    Files.push_back(std::move(Entry));
  }
  llvm::json::Array Units;
  for (const MirroredUnit &Unit : Mirror.Units) {
    llvm::json::Array Macros;
    for (const MacroDependence &Macro : Unit.Macros)
      Macros.push_back(macroToJson(Macro));
    llvm::json::Object Entry{{"path", Unit.Path}, {"sha256", Unit.Sha256}, {"macros", std::move(Macros)}};
    if (!Unit.LanguageFlagsDropped.empty())
      Entry["dropped_flags"] = llvm::json::Array(Unit.LanguageFlagsDropped);
    Units.push_back(std::move(Entry));
  }
  return llvm::json::Object{{"root", Mirror.Root}, {"files", std::move(Files)}, {"units", std::move(Units)}};
}

}  // namespace

llvm::json::Value auditToJson(const AuditHeader &Header, std::vector<SiteRecord> Sites,
                              std::optional<AuditMirror> Mirror) {
  sortSites(Sites);
  AuditSummary Summary = summarize(Sites);
  llvm::json::Array SiteArray;
  for (const SiteRecord &Site : Sites)
    SiteArray.push_back(siteToJson(Site));
  llvm::json::Object Document{
      {"schema", AuditSchema},
      {"tool", llvm::json::Object{{"name", "lmfuse"}, {"version", Header.ToolVersion}}},
      {"clang", llvm::json::Object{{"version", Header.ClangVersion}, {"resource_dir", Header.ResourceDir}}},
      {"patterns", llvm::json::Object{{"name", Header.PatternSetName},
                                      {"version", Header.PatternSetVersion},
                                      {"source", Header.PatternSetSource}}},
      {"summary", llvm::json::Object{{"patched", int64_t(Summary.Patched)},
                                     {"already_patched", int64_t(Summary.AlreadyPatched)},
                                     {"unmatched", int64_t(Summary.Unmatched)},
                                     {"failed", int64_t(Summary.Failed)},
                                     {"suppressed", int64_t(Summary.Suppressed)}}},
      {"sites", std::move(SiteArray)},
  };
  if (Mirror)
    Document["mirror"] = mirrorToJson(std::move(*Mirror));
  return Document;
}

}  // namespace lmfuse::rewriter

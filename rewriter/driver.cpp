// Parse, analyse, merge, verify. The order matters: edits are merged and filtered (edit root, conflicts)
// before the re-parse check, so what is verified is exactly what will be written.
#include "driver.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "audit.h"
#include "command_line.h"
#include "edit_set.h"
#include "respelling.h"
#include "rewrite.h"
#include "verify.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

namespace lmfuse::rewriter {

using clang::tooling::CompileCommand;
using clang::tooling::Replacement;

std::vector<std::string> adjustedCommandLine(const CompileCommand &Command, const DriverOptions &Options,
                                             std::vector<std::string> *Dropped) {
  CommandLineOptions Adjust{Options.ResourceDir, Options.HeaderDirs, Options.ExtraArgs, Options.ExtraArgsBefore};
  AdjustedCommand Adjusted = adjustCommand(Command, Adjust);
  if (Dropped)
    *Dropped = std::move(Adjusted.Dropped);
  return std::move(Adjusted.Arguments);
}

bool isSkipReason(ReasonKind Reason) {
  return Reason == ReasonKind::NoCompileCommand || Reason == ReasonKind::Unreadable;
}

void failPatchedSites(std::vector<SiteRecord> &Sites, llvm::StringRef File, ReasonKind Reason,
                      llvm::StringRef Detail) {
  for (SiteRecord &Site : Sites)
    if (Site.File == File && Site.Status == SiteStatus::Patched) {
      Site.Status = SiteStatus::Failed;
      Site.Reason = Reason;
      Site.Detail = Detail.str();
    }
}

void failWrite(std::vector<SiteRecord> &Sites, llvm::StringRef File, llvm::StringRef Detail) {
  failPatchedSites(Sites, File, ReasonKind::WriteFailed, Detail);
  for (const SiteRecord &Site : Sites)
    if (Site.File == File && Site.Status == SiteStatus::Failed && Site.Reason == ReasonKind::WriteFailed)
      return;
  SiteRecord Site;
  Site.File = File.str();
  Site.Line = 1;
  Site.Column = 1;
  Site.Status = SiteStatus::Failed;
  Site.Reason = ReasonKind::WriteFailed;
  Site.Detail = Detail.str();
  Sites.push_back(std::move(Site));
  sortSites(Sites);
}

namespace {

struct Job {
  std::string File;  // canonical
  CompileCommand Command;
  std::vector<std::string> CommandLine;
  std::vector<std::string> LanguageFlagsDropped;  // dropped flags that may change how its compiler reads it
  std::string CacheKey;  // frontendKey(); "" when not cached
  TranslationUnitOutcome Outcome;
  bool EditsDropped = false;  // some edit of this unit was not kept: never cache it
};

// Runs Body(I) for I in [0, Count) on Jobs threads.
template <typename Fn> void parallelFor(size_t Count, unsigned Jobs, Fn Body) {
  if (Jobs <= 1 || Count <= 1) {
    for (size_t I = 0; I < Count; ++I)
      Body(I);
    return;
  }
  llvm::DefaultThreadPool Pool(llvm::hardware_concurrency(std::min<size_t>(Jobs, Count)));
  for (size_t I = 0; I < Count; ++I)
    Pool.async([&Body, I] { Body(I); });
  Pool.wait();
}

// Clang's values of the unit's feature tests (`__has_builtin ( x )`: macro_dependence.h), under the unit's own
// command: its main file read as a probe that declares one constant per test. A test the probe cannot evaluate
// (the probe does not compile) is left "", which the build step reports.
std::vector<std::string> featureTestValues(const Job &Unit, const std::vector<std::string> &Tests) {
  std::string Probe;
  for (size_t I = 0; I < Tests.size(); ++I)
    Probe += "constexpr long long lmfuse_feature_test_" + std::to_string(I) + " = (" + Tests[I] + ");\n";
  // The main file as the command names it (through a link, say), and by its real path.
  llvm::SmallString<256> Named(Unit.Command.Filename);
  llvm::sys::fs::make_absolute(Unit.Command.Directory, Named);
  llvm::StringMap<std::string> Overlay;
  Overlay[Unit.File] = Probe;
  Overlay[Named] = Probe;
  std::vector<std::string> Values(Tests.size());
  parseTranslationUnit(Unit.CommandLine, Unit.Command.Directory, Overlay,
                       [&](clang::ASTContext &Context, clang::Preprocessor &) {
                         for (const clang::Decl *Declaration : Context.getTranslationUnitDecl()->decls()) {
                           const auto *Variable = llvm::dyn_cast<clang::VarDecl>(Declaration);
                           if (!Variable || !Variable->getIdentifier())
                             continue;
                           llvm::StringRef Name = Variable->getName();
                           unsigned Index = 0;
                           if (!Name.consume_front("lmfuse_feature_test_") || Name.getAsInteger(10, Index) ||
                               Index >= Values.size())
                             continue;
                           if (const clang::APValue *Value = Variable->evaluateValue(); Value && Value->isInt())
                             Values[Index] = llvm::toString(Value->getInt(), 10, /*Signed=*/true);
                         }
                       });
  return Values;
}

TranslationUnitOutcome analyse(const Job &Unit, const PatternSet &Patterns, const std::string &ProgramRoot,
                               std::mutex &OutputLock) {
  TranslationUnitOutcome Outcome;
  Outcome.MainFile = Unit.File;
  const std::string &Directory = Unit.Command.Directory;
  TranslationUnitResult Analysis;
  ParseOutcome Parse = parseTranslationUnit(Unit.CommandLine, Directory, {}, [&](clang::ASTContext &Context, clang::Preprocessor &Preprocessor) {
    Analysis = analyzeTranslationUnit(Context, Preprocessor, Patterns, ProgramRoot);
  }, ProgramRoot, /*RecordMacros=*/true);
  Outcome.FilesRead = std::move(Parse.FilesRead);
  Outcome.ReadDigests = std::move(Parse.ReadDigests);
  Outcome.PathsMissing = std::move(Parse.PathsMissing);
  Outcome.Aliases = std::move(Parse.Aliases);
  Outcome.Macros = std::move(Parse.Macros);
  if (!Parse.HadErrors)
    evaluateFeatureTests(Outcome.Macros, [&](const std::vector<std::string> &Tests) {
      return featureTestValues(Unit, Tests);
    });
  if (Parse.HadErrors) {
    {
      std::lock_guard<std::mutex> Lock(OutputLock);
      llvm::errs() << Parse.Diagnostics;
      llvm::errs().flush();
    }
    SiteRecord Site;
    Site.File = Unit.File;
    bool InMainFile = !Parse.FirstErrorFile.empty() &&
                      canonicalPath(Parse.FirstErrorFile, Directory) == Unit.File;
    Site.Line = InMainFile ? Parse.FirstErrorLine : 1;
    Site.Column = 1;
    Site.Status = SiteStatus::Failed;
    Site.Reason = ReasonKind::ParseError;
    Site.Detail = "the translation unit does not compile, so it was neither analysed nor edited (" +
                  Parse.FirstError + ")";
    Outcome.Sites.push_back(std::move(Site));
    Outcome.ParseFailed = true;
    return Outcome;
  }
  for (SiteRecord &Site : Analysis.Sites) {
    Site.File = canonicalPath(Site.File, Directory);
    Outcome.Sites.push_back(std::move(Site));
  }
  for (const Replacement &Edit : Analysis.Edits)
    Outcome.Edits.emplace_back(canonicalPath(Edit.getFilePath(), Directory), Edit.getOffset(),
                               Edit.getLength(), Edit.getReplacementText());
  return Outcome;
}

// Units that patch one site with the same edits may still compile an option written as a macro to other values
// (`ignore_index(IGN)` under -DIGN=-1 in one unit and -DIGN=5 in another): the copy passes the text, which each
// unit compiles to its own value, so the record keeps the text rather than one unit's value.
void keepTextOfDisagreeingValues(PatchedOptions &Kept, const PatchedOptions &Other) {
  if (Kept.IgnoreIndexExpression.empty() && Other.IgnoreIndexExpression.empty() &&
      Kept.IgnoreIndex != Other.IgnoreIndex && !Kept.IgnoreIndexText.empty())
    Kept.IgnoreIndexExpression = Kept.IgnoreIndexText;
  if (Kept.LabelSmoothingExpression.empty() && Other.LabelSmoothingExpression.empty() &&
      Kept.LabelSmoothing != Other.LabelSmoothing && !Kept.LabelSmoothingText.empty())
    Kept.LabelSmoothingExpression = Kept.LabelSmoothingText;
}

// Sites seen from several units are one site; a site whose status differs between units means the
// units would edit that file differently.
std::vector<SiteRecord> mergeSites(const std::vector<Job> &Units, std::set<std::string> &Disagreeing) {
  std::map<std::tuple<std::string, unsigned, unsigned>, SiteRecord> ByLocation;
  for (const Job &Unit : Units)
    for (const SiteRecord &Site : Unit.Outcome.Sites) {
      auto [It, Inserted] = ByLocation.try_emplace({Site.File, Site.Line, Site.Column}, Site);
      if (!Inserted && It->second.Options && Site.Options)
        keepTextOfDisagreeingValues(*It->second.Options, *Site.Options);
      if (!Inserted && It->second.Status != Site.Status &&
          (It->second.Status == SiteStatus::Patched || Site.Status == SiteStatus::Patched)) {
        Disagreeing.insert(Site.File);
        if (Site.Status == SiteStatus::Patched)
          It->second = Site;  // keep the patched record: it is failed as a conflict below
      }
    }
  std::vector<SiteRecord> Sites;
  for (auto &[Location, Site] : ByLocation)
    Sites.push_back(std::move(Site));
  return Sites;
}

// Every unit that reads a file must plan the same edits to it. A header compiled differently by two units
// (a macro, a flag) can hold a site one unit patches and another refuses, or patches for another head:
// written once, the rewrite would be wrong for one of them. Units that did not parse vote elsewhere.
void disagreeOnEdits(const std::vector<Job> &Units, const std::vector<std::string> &EditedFiles,
                     std::set<std::string> &Disagreeing) {
  for (const std::string &File : EditedFiles) {
    std::optional<std::set<std::tuple<unsigned, unsigned, std::string>>> First;
    for (const Job &Unit : Units) {
      if (Unit.Outcome.ParseFailed || !llvm::is_contained(Unit.Outcome.FilesRead, File))
        continue;
      std::set<std::tuple<unsigned, unsigned, std::string>> Planned;
      for (const Replacement &Edit : Unit.Outcome.Edits)
        if (Edit.getFilePath() == File)
          Planned.emplace(Edit.getOffset(), Edit.getLength(), Edit.getReplacementText().str());
      if (!First)
        First = std::move(Planned);
      else if (*First != Planned)
        Disagreeing.insert(File);
    }
  }
}

}  // namespace

DriverResult runDriver(const clang::tooling::CompilationDatabase &Compilations,
                       llvm::ArrayRef<std::string> Files, const PatternSet &Patterns,
                       const DriverOptions &Options) {
  DriverResult Result;
  llvm::SmallString<256> CurrentDirectory;
  llvm::sys::fs::current_path(CurrentDirectory);

  // 1. One job per input file that has a real compile command and can be read. A skipped input still
  //    gets an audit entry, so the audit names every file of the command line.
  std::vector<Job> Units;
  std::set<std::string> Seen;
  std::set<std::string> DroppedFlags(Options.DroppedFromEveryCommand.begin(), Options.DroppedFromEveryCommand.end());
  auto Skip = [&](const std::string &Input, const std::string &File, ReasonKind Reason, const std::string &Why) {
    Result.Skipped.push_back(Input + ": " + Why);
    SiteRecord Site;
    Site.File = File;
    Site.Line = 1;
    Site.Column = 1;
    Site.Status = SiteStatus::Failed;
    Site.Reason = Reason;
    Site.Detail = "skipped: " + Why;
    Result.Sites.push_back(std::move(Site));
  };
  for (const std::string &Input : Files) {
    std::string File = canonicalPath(Input, CurrentDirectory);
    if (!Seen.insert(File).second)
      continue;
    // Checked before any read: a FIFO would block the read forever, /dev/zero would never end.
    llvm::sys::fs::file_status Status;
    if (std::error_code EC = llvm::sys::fs::status(File, Status)) {
      Skip(Input, File, ReasonKind::Unreadable, "cannot read it: " + EC.message());
      continue;
    }
    if (Status.type() != llvm::sys::fs::file_type::regular_file) {
      Skip(Input, File, ReasonKind::Unreadable,
           Status.type() == llvm::sys::fs::file_type::directory_file ? "is a folder, not a source file"
                                                                      : "is not a regular file (a device, FIFO or socket)");
      continue;
    }
    if (auto Buffer = llvm::MemoryBuffer::getFile(File); !Buffer) {
      Skip(Input, File, ReasonKind::Unreadable, "cannot read it: " + Buffer.getError().message());
      continue;
    }
    // The database may spell the file through a symlink that canonicalPath() resolved.
    std::vector<CompileCommand> Commands = Compilations.getCompileCommands(Options.FilesCompiledAsGiven ? Input : File);
    if ((Commands.empty() || !Commands.front().Heuristic.empty()) && File != Input)
      if (std::vector<CompileCommand> AsGiven = Compilations.getCompileCommands(Input);
          !AsGiven.empty() && AsGiven.front().Heuristic.empty())
        Commands = std::move(AsGiven);
    if (Commands.empty()) {
      Skip(Input, File, ReasonKind::NoCompileCommand,
           "no compile command for it (give -p <build dir> with a compile_commands.json that lists it, or the "
           "flags after --)");
      continue;
    }
    if (!Commands.front().Heuristic.empty()) {
      Skip(Input, File, ReasonKind::NoCompileCommand,
           "compile_commands.json does not list it (the only command is " + Commands.front().Heuristic +
               "); lmfuse never guesses flags");
      continue;
    }
    if (llvm::any_of(Commands, [](const CompileCommand &Command) { return Command.CommandLine.empty(); })) {
      Skip(Input, File, ReasonKind::NoCompileCommand,
           "the compilation database gives it an empty compile command (no compiler, flags or file)");
      continue;
    }
    // A file the database lists under several commands (two targets, other macros) is a unit under each:
    // they must agree on its edits as units that share a header do.
    std::set<std::pair<std::string, std::vector<std::string>>> Distinct;
    for (const CompileCommand &Command : Commands) {
      if (!Distinct.insert({Command.Directory, Command.CommandLine}).second)
        continue;
      Job Unit;
      Unit.File = File;
      Unit.Command = Command;
      std::vector<std::string> Dropped;
      Unit.CommandLine = adjustedCommandLine(Unit.Command, Options, &Dropped);
      Dropped.insert(Dropped.end(), Options.DroppedFromEveryCommand.begin(), Options.DroppedFromEveryCommand.end());
      DroppedFlags.insert(Dropped.begin(), Dropped.end());
      for (const std::string &Flag : Dropped)
        if (!steersOnlyDiagnosticsOrOptimisation(Flag))
          Unit.LanguageFlagsDropped.push_back(Flag);
      Units.push_back(std::move(Unit));
    }
  }
  if (!DroppedFlags.empty())
    Result.Notes.push_back(droppedFlagsNote(std::vector<std::string>(DroppedFlags.begin(), DroppedFlags.end())));
  Result.TranslationUnits = Units.size();

  // 2. Parse and analyse (or take the cached outcome).
  std::mutex OutputLock;
  size_t Done = 0;
  parallelFor(Units.size(), Options.Jobs, [&](size_t I) {
    Job &Unit = Units[I];
    std::optional<TranslationUnitOutcome> Cached;
    if (Options.Cache)
      Unit.CacheKey = frontendKey(Unit.CommandLine, Unit.Command.Directory);
    if (!Unit.CacheKey.empty())
      Cached = Options.Cache->lookup(Unit.CacheKey);
    if (Cached) {
      Unit.Outcome = std::move(*Cached);
      Unit.Outcome.FromCache = true;
    } else {
      Unit.Outcome = analyse(Unit, Patterns, Options.EditRoot, OutputLock);
    }
    std::lock_guard<std::mutex> Lock(OutputLock);
    ++Done;
    if (Options.Progress)
      llvm::errs() << "lmfuse: [" << Done << "/" << Units.size() << "] " << Unit.File
                   << (Unit.Outcome.FromCache ? " (cached)" : "") << "\n";
  });

  // 3. Merge sites and edits.
  std::set<std::string> Disagreeing;
  std::vector<SiteRecord> SkippedSites = std::move(Result.Sites);
  Result.Sites = mergeSites(Units, Disagreeing);
  Result.Sites.insert(Result.Sites.end(), SkippedSites.begin(), SkippedSites.end());
  EditSet Edits;
  for (const Job &Unit : Units)
    for (const Replacement &Edit : Unit.Outcome.Edits)
      Edits.add(Edit);
  disagreeOnEdits(Units, Edits.files(), Disagreeing);

  std::map<std::string, std::string> Originals;
  auto DropFile = [&](const std::string &File, ReasonKind Reason, const std::string &Detail) {
    Edits.drop(File);
    failPatchedSites(Result.Sites, File, Reason, Detail);
    for (Job &Unit : Units)
      for (const Replacement &Edit : Unit.Outcome.Edits)
        if (Edit.getFilePath() == File)
          Unit.EditsDropped = true;
  };
  for (const std::string &File : Edits.files()) {
    if (!isUnder(File, Options.EditRoot)) {
      DropFile(File, ReasonKind::WriteFailed,
               "not written: " + File + " lies outside the edit root " + Options.EditRoot);
      continue;
    }
    auto Buffer = llvm::MemoryBuffer::getFile(File);
    if (!Buffer) {
      DropFile(File, ReasonKind::WriteFailed, "cannot read " + File + ": " + Buffer.getError().message());
      continue;
    }
    Originals[File] = (*Buffer)->getBuffer().str();
    Edits.fitTo(File, Originals[File]);
    std::string Conflict = Edits.conflictFor(File, Originals[File]);
    if (Conflict.empty() && Disagreeing.count(File))
      Conflict = "translation units disagree on which sites of " + File + " to patch";
    if (!Conflict.empty()) {
      DropFile(File, ReasonKind::EditConflict, Conflict + "; nothing was written to it");
      continue;
    }
    // Every unit that reaches a file votes on its sites: one that did not compile could not, and its
    // macros or flags might make a site unsafe there, so the file is left alone.
    for (const Job &Unit : Units)
      if (Unit.Outcome.ParseFailed && llvm::is_contained(Unit.Outcome.FilesRead, File)) {
        DropFile(File, ReasonKind::ParseError,
                 "not written: " + Unit.File + ", which includes it, does not compile, so its sites there were "
                 "not analysed");
        break;
      }
  }

  // A file saved while the units were parsed (an editor, a checkout) makes their analysis describe other
  // contents than the ones the edits would now apply to, or the copies would hold: no file such a unit
  // edits is written. An edited file is compared as read above, the text its edits apply to.
  std::map<std::string, std::string> NowOnDisk;
  auto Digest = [&](const std::string &File) -> const std::string & {
    auto [It, Inserted] = NowOnDisk.try_emplace(File);
    if (Inserted) {
      if (auto Held = Originals.find(File); Held != Originals.end())
        It->second = contentsHash(Held->second);
      else if (auto Buffer = llvm::MemoryBuffer::getFile(File, /*IsText=*/false, /*RequiresNullTerminator=*/false))
        It->second = contentsHash((*Buffer)->getBuffer());
    }
    return It->second;
  };
  for (Job &Unit : Units) {
    auto Changed = llvm::find_if(Unit.Outcome.ReadDigests, [&](const auto &Read) { return Digest(Read.first) != Read.second; });
    if (Changed == Unit.Outcome.ReadDigests.end())
      continue;
    Unit.EditsDropped = true;
    std::set<std::string> Edited;
    for (const Replacement &Edit : Unit.Outcome.Edits)
      Edited.insert(Edit.getFilePath().str());
    for (const std::string &File : Edited)
      if (llvm::is_contained(Edits.files(), File))
        DropFile(File, ReasonKind::SourceChanged,
                 "not written: " + Changed->first + " changed on disk while lmfuse analysed " + Unit.File +
                     ", so its edits to " + File + " were planned for other contents; run lmfuse again");
  }

  // 4. Apply in memory.
  std::map<std::string, std::string> Rewritten;
  for (const std::string &File : Edits.files()) {
    auto Text = applyEdits(File, Originals[File], Edits.editsFor(File));
    if (!Text) {
      DropFile(File, ReasonKind::ReparseFailed, llvm::toString(Text.takeError()));
      continue;
    }
    Rewritten[File] = std::move(*Text);
  }

  // 5. Re-parse every unit that reads a rewritten file. A failure drops the files that unit reads, which
  //    changes what other units see, so repeat until nothing more is dropped.
  llvm::StringRef Call = Patterns.Replacement.Call;
  const LibraryHeaders Library{llvm::StringRef(Patterns.Replacement.Include).split('/').first.str(),
                               Call.contains("::") ? Call.take_front(Call.find("::")).str() : std::string(),
                               Options.LibraryIncludes};
  std::set<size_t> ToVerify;
  for (size_t I = 0; I < Units.size(); ++I)
    if (!Units[I].Outcome.FromCache && !Units[I].Outcome.ParseFailed)
      ToVerify.insert(I);
  while (!ToVerify.empty()) {
    std::vector<size_t> Batch;
    std::vector<llvm::StringMap<std::string>> Overlays;
    // What each rewritten file spells again, as ranges of its text as verified (respelling.h).
    std::vector<std::map<std::string, std::vector<RespellingRange>>> Respellings;
    for (size_t I : ToVerify) {
      llvm::StringMap<std::string> Overlay;
      std::map<std::string, std::vector<RespellingRange>> Ranges;
      for (const std::string &File : Units[I].Outcome.FilesRead)
        if (auto It = Rewritten.find(File); It != Rewritten.end()) {
          Insertions Inserted;
          Overlay[File] = Options.LineDirectives
                              ? rewrittenWithLineDirectives(File, Originals[File], Edits.editsFor(File), &Inserted)
                              : It->second;
          Ranges[File] = respellingRanges(Result.Sites, File, Originals[File], Edits.editsFor(File), Inserted);
        }
      if (Overlay.empty())
        continue;
      Batch.push_back(I);
      Overlays.push_back(std::move(Overlay));
      Respellings.push_back(std::move(Ranges));
    }
    ToVerify.clear();
    std::vector<std::string> Errors(Batch.size());
    std::vector<std::map<std::pair<std::string, size_t>, std::string>> Changed(Batch.size());
    std::vector<std::vector<std::string>> Missing(Batch.size());
    parallelFor(Batch.size(), Options.Jobs, [&](size_t K) {
      const Job &Unit = Units[Batch[K]];
      Errors[K] = verifyRewrite(Unit.CommandLine, Unit.Command.Directory, Overlays[K], Unit.Outcome.Aliases,
                                Options.EditRoot, &Library, &Respellings[K], &Changed[K], &Missing[K]);
    });
    // The re-parse's lookups are the unit's too: a program's `lmfuse/torch.h` that appears later where the
    // rewritten include looked in vain must make a cached outcome stale, as the first parse's lookups do.
    for (size_t K = 0; K < Batch.size(); ++K) {
      std::vector<std::string> &Paths = Units[Batch[K]].Outcome.PathsMissing;
      Paths.insert(Paths.end(), Missing[K].begin(), Missing[K].end());
      llvm::sort(Paths);
      Paths.erase(std::unique(Paths.begin(), Paths.end()), Paths.end());
    }
    std::set<std::string> NewlyDropped;
    for (size_t K = 0; K < Batch.size(); ++K) {
      if (Errors[K].empty() && !Changed[K].empty()) {
        // A site whose copies read otherwise in this unit is refused; its file is not written (the other sites'
        // edits were verified with its edits in place).
        for (const auto &[File, Ranges] : Respellings[K])
          if (Rewritten.count(File) && refuseRespelled(Result.Sites, Ranges, Changed[K], File, Originals[File])) {
            Rewritten.erase(File);
            NewlyDropped.insert(File);
            DropFile(File, ReasonKind::ReparseFailed,
                     "not written: another site of " + File + " spells code again where it reads otherwise in " +
                         Units[Batch[K]].File);
          }
        continue;
      }
      if (Errors[K].empty())
        continue;
      for (const auto &Entry : Overlays[K]) {
        std::string File = Entry.getKey().str();
        if (!Rewritten.count(File))
          continue;
        Rewritten.erase(File);
        NewlyDropped.insert(File);
        DropFile(File, ReasonKind::ReparseFailed,
                 "the rewritten code does not compile in " + Units[Batch[K]].File + " (" + Errors[K] +
                     "), so nothing was written to " + File);
      }
    }
    for (size_t I = 0; I < Units.size(); ++I)
      if (!Units[I].Outcome.FromCache && !Units[I].Outcome.ParseFailed)
        for (const std::string &File : Units[I].Outcome.FilesRead)
          if (NewlyDropped.count(File)) {
            ToVerify.insert(I);
            break;
          }
  }

  // 6. Hand back, and remember the units whose edits all survived.
  for (const auto &[File, Text] : Rewritten)
    Result.Rewrites.push_back({File, Originals[File], Text, Edits.editsFor(File)});
  std::set<std::string> AllRead;
  for (Job &Unit : Units) {
    if (llvm::any_of(Unit.Outcome.FilesRead, [&](const std::string &File) { return Rewritten.count(File) > 0; }))
      Result.Units.push_back({Unit.File, Unit.Outcome.Macros, Unit.LanguageFlagsDropped});
    AllRead.insert(Unit.Outcome.FilesRead.begin(), Unit.Outcome.FilesRead.end());
    Result.ReadDigests.insert(Unit.Outcome.ReadDigests.begin(), Unit.Outcome.ReadDigests.end());
    for (const auto &[File, Names] : Unit.Outcome.Aliases)
      Result.Aliases[File].insert(Names.begin(), Names.end());
    if (Unit.Outcome.FromCache)
      ++Result.CachedTranslationUnits;
    else if (Options.Cache && !Unit.CacheKey.empty() && !Unit.EditsDropped && !Unit.Outcome.ParseFailed)
      Options.Cache->store(Unit.CacheKey, Unit.Outcome);
  }
  Result.FilesRead.assign(AllRead.begin(), AllRead.end());
  std::sort(Result.Units.begin(), Result.Units.end(),
            [](const UnitMacros &A, const UnitMacros &B) { return A.File < B.File; });
  sortSites(Result.Sites);
  return Result;
}

}  // namespace lmfuse::rewriter

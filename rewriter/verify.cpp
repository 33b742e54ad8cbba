// One parse of one translation unit, in its own file system view: the real files, the command's working
// directory, and rewritten contents layered on top in memory. Nothing here writes to disk.
#include "verify.h"

#include "edit_set.h"
#include "raw_tokens.h"

#include "clang/AST/ASTConsumer.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Lex/HeaderSearch.h"
#include "clang/Lex/Preprocessor.h"
#include "clang/Basic/DiagnosticOptions.h"
#include "clang/Basic/FileManager.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendAction.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/Frontend/Utils.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/VirtualFileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>

namespace lmfuse::rewriter {

namespace {

// The program's own files, as the analysis counts them (ast_query.h: inProgramFile): the main file and the
// files under the project root ("": the main file's folder), decided by where a file lies and never by how
// it was included. Paths are made canonical on the real file system against the command's directory: the
// in-memory overlay of a re-parse resolves no links.
class ProgramFiles {
public:
  ProgramFiles(const clang::SourceManager &Sources, llvm::StringRef Root, llvm::StringRef Directory)
      : Sources(Sources), Root(Root), Directory(Directory) {}

  /// Whether Location (its expansion) lies in one of the program's files.
  bool contains(clang::SourceLocation Location) {
    Location = Sources.getExpansionLoc(Location);
    if (Location.isInvalid())
      return false;
    clang::FileID File = Sources.getFileID(Location);
    if (File == Sources.getMainFileID())
      return true;
    auto [It, Inserted] = Known.try_emplace(File.getHashValue(), false);
    if (Inserted) {
      if (Root.empty())  // the main file is known once the parse has begun, not when this is made
        if (clang::OptionalFileEntryRef Main = Sources.getFileEntryRefForID(Sources.getMainFileID()))
          Root = llvm::sys::path::parent_path(canonicalPath(Main->getName(), Directory)).str();
      clang::OptionalFileEntryRef Entry = Sources.getFileEntryRefForID(File);
      It->second = Entry && !Root.empty() && isUnder(canonicalPath(Entry->getName(), Directory), Root);
    }
    return It->second;
  }

private:
  const clang::SourceManager &Sources;
  std::string Root;
  std::string Directory;
  std::map<unsigned, bool> Known;  // FileID hash -> a program file
};

// Passes every call through, and remembers the paths looked up (absolute): those that do not exist (the
// include search's misses, which decide as much as the files it found) and the files found, by the names
// they were looked up by (a link's name among them).
class LookupRecordingFileSystem : public llvm::vfs::ProxyFileSystem {
public:
  LookupRecordingFileSystem(llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> Underlying, std::set<std::string> &Missing,
                            std::set<std::string> &Found)
      : ProxyFileSystem(std::move(Underlying)), Missing(Missing), Found(Found) {}

  llvm::ErrorOr<llvm::vfs::Status> status(const llvm::Twine &Path) override {
    auto Result = ProxyFileSystem::status(Path);
    if (!Result && Result.getError() == std::errc::no_such_file_or_directory)
      remember(Path, Missing);
    else if (Result && Result->isRegularFile())
      remember(Path, Found);
    return Result;
  }
  llvm::ErrorOr<std::unique_ptr<llvm::vfs::File>> openFileForRead(const llvm::Twine &Path) override {
    auto Result = ProxyFileSystem::openFileForRead(Path);
    if (!Result && Result.getError() == std::errc::no_such_file_or_directory)
      remember(Path, Missing);
    else if (Result)
      remember(Path, Found);
    return Result;
  }

private:
  void remember(const llvm::Twine &Path, std::set<std::string> &Into) {
    llvm::SmallString<256> Absolute;
    Path.toVector(Absolute);
    if (makeAbsolute(Absolute))
      return;
    llvm::sys::path::remove_dots(Absolute, /*remove_dot_dot=*/false);
    Into.insert(std::string(Absolute));
  }
  std::set<std::string> &Missing, &Found;
};

// Prints every diagnostic into a string and remembers the first error, for the audit's detail.
class CapturingDiagnostics : public clang::TextDiagnosticPrinter {
public:
  CapturingDiagnostics(llvm::raw_ostream &OS, clang::DiagnosticOptions *Options, ParseOutcome &Outcome)
      : TextDiagnosticPrinter(OS, Options), Outcome(Outcome) {}

  void HandleDiagnostic(clang::DiagnosticsEngine::Level Level, const clang::Diagnostic &Info) override {
    TextDiagnosticPrinter::HandleDiagnostic(Level, Info);
    if (Level < clang::DiagnosticsEngine::Error)
      return;
    Outcome.HadErrors = true;
    if (!Outcome.FirstError.empty())
      return;
    llvm::SmallString<256> Message;
    Info.FormatDiagnostic(Message);
    std::string Where;
    if (Info.hasSourceManager() && Info.getLocation().isValid()) {
      clang::PresumedLoc Loc = Info.getSourceManager().getPresumedLoc(Info.getLocation());
      if (Loc.isValid()) {
        Outcome.FirstErrorFile = Loc.getFilename();
        Outcome.FirstErrorLine = Loc.getLine();
        Where = (llvm::Twine(Loc.getFilename()) + ":" + llvm::Twine(Loc.getLine()) + ":" +
                 llvm::Twine(Loc.getColumn()) + ": ")
                    .str();
      }
    }
    Outcome.FirstError = Where + "error: " + Message.str().str();
  }

private:
  ParseOutcome &Outcome;
};

class ParsingConsumer : public clang::ASTConsumer {
public:
  ParsingConsumer(clang::CompilerInstance &Compiler, llvm::StringRef Directory, ParseOutcome &Outcome,
                  const std::function<void(clang::ASTContext &, clang::Preprocessor &)> &OnParsed, const MacroNameRecorder *Macros,
                  llvm::StringRef ProjectRoot)
      : Compiler(Compiler), Directory(Directory), Outcome(Outcome), OnParsed(OnParsed), Macros(Macros),
        Program(Compiler.getSourceManager(), ProjectRoot, Directory) {}

  // Only reached with SkipFunctionBodies on; Sema already keeps constexpr and auto-returning bodies. A
  // program header included as a system header (-isystem, a precompiled header) keeps its bodies: the
  // analysis looks into the program's code wherever it is included from.
  bool shouldSkipFunctionBody(clang::Decl *D) override {
    const clang::SourceManager &Sources = Compiler.getSourceManager();
    clang::SourceLocation Location = Sources.getExpansionLoc(D->getLocation());
    return Sources.isInSystemHeader(Location) && !Program.contains(Location);
  }

  void HandleTranslationUnit(clang::ASTContext &Context) override {
    const clang::SourceManager &Sources = Context.getSourceManager();
    for (auto It = Sources.fileinfo_begin(); It != Sources.fileinfo_end(); ++It) {
      std::string Path = canonicalPath(It->first.getName(), Directory);
      if (std::optional<llvm::MemoryBufferRef> Contents = It->second->getBufferIfLoaded())
        Outcome.ReadDigests[Path] = contentsHash(Contents->getBuffer());
      Outcome.FilesRead.push_back(std::move(Path));
    }
    if (Macros)
      Outcome.Macros = Macros->dependences();
    if (!Context.getDiagnostics().hasErrorOccurred() && OnParsed)
      OnParsed(Context, Compiler.getPreprocessor());
  }

private:
  clang::CompilerInstance &Compiler;
  std::string Directory;
  ParseOutcome &Outcome;
  const std::function<void(clang::ASTContext &, clang::Preprocessor &)> &OnParsed;
  const MacroNameRecorder *Macros;
  ProgramFiles Program;
};

class ParsingAction : public clang::ASTFrontendAction {
public:
  ParsingAction(llvm::StringRef Directory, ParseOutcome &Outcome,
                const std::function<void(clang::ASTContext &, clang::Preprocessor &)> &OnParsed, std::string ProjectRoot, bool RecordMacros)
      : Directory(Directory), Outcome(Outcome), OnParsed(OnParsed), ProjectRoot(std::move(ProjectRoot)),
        RecordMacros(RecordMacros) {}

  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance &Compiler,
                                                        llvm::StringRef) override {
    Compiler.getFrontendOpts().SkipFunctionBodies = true;
    // "N errors generated." would go to stderr; the diagnostics themselves are captured above.
    Compiler.setVerboseOutputStream(std::make_unique<llvm::raw_null_ostream>());
    MacroNameRecorder *Macros = nullptr;
    if (RecordMacros) {
      auto Recorder = std::make_unique<MacroNameRecorder>(Compiler.getPreprocessor(), ProjectRoot, Directory);
      Macros = Recorder.get();  // owned by the preprocessor, which outlives the consumer's last call
      Compiler.getPreprocessor().addPPCallbacks(std::move(Recorder));
    }
    return std::make_unique<ParsingConsumer>(Compiler, Directory, Outcome, OnParsed, Macros, ProjectRoot);
  }

private:
  std::string Directory;
  ParseOutcome &Outcome;
  const std::function<void(clang::ASTContext &, clang::Preprocessor &)> &OnParsed;
  std::string ProjectRoot;
  bool RecordMacros;
};

}  // namespace

std::string contentsHash(llvm::StringRef Contents) { return llvm::formatv("{0:x-16}", llvm::xxh3_64bits(Contents)).str(); }

std::string frontendKey(const std::vector<std::string> &CommandLine, llvm::StringRef Directory) {
  llvm::SmallString<256> Absolute(Directory);
  if (llvm::sys::fs::make_absolute(Absolute))
    return "";
  llvm::sys::path::remove_dots(Absolute, /*remove_dot_dot=*/true);
  llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> Physical(llvm::vfs::createPhysicalFileSystem().release());
  if (Physical->setCurrentWorkingDirectory(Absolute))
    return "";
  std::vector<const char *> Arguments;
  for (const std::string &Argument : CommandLine)
    Arguments.push_back(Argument.c_str());
  auto DiagnosticOptions = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  clang::IgnoringDiagConsumer Silent;
  clang::CreateInvocationOptions Options;
  Options.Diags = clang::CompilerInstance::createDiagnostics(DiagnosticOptions.get(), &Silent, /*ShouldOwnClient=*/false);
  Options.VFS = Physical;
  std::shared_ptr<clang::CompilerInvocation> Invocation = clang::createInvocation(Arguments, Options);
  if (!Invocation)
    return "";
  std::string Key = std::string(Absolute) + '\n';
  for (const std::string &Argument : Invocation->getCC1CommandLine())
    Key += Argument + '\0';
  return Key;
}

ParseOutcome parseTranslationUnit(const std::vector<std::string> &CommandLine, llvm::StringRef Directory,
                                  const llvm::StringMap<std::string> &Overlay,
                                  const std::function<void(clang::ASTContext &, clang::Preprocessor &)> &OnParsed,
                                  const std::string &ProjectRoot, bool RecordMacros,
                                  const std::map<std::string, std::set<std::string>> &OverlayAliases) {
  ParseOutcome Outcome;
  // A file system of its own: its working directory is this command's, whatever other threads do.
  std::unique_ptr<llvm::vfs::FileSystem> Physical = llvm::vfs::createPhysicalFileSystem();
  auto Layers = llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(
      llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem>(Physical.release()));
  if (!Overlay.empty()) {
    auto InMemory = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
    for (const auto &Entry : Overlay) {
      InMemory->addFile(Entry.getKey(), 0, llvm::MemoryBuffer::getMemBufferCopy(Entry.getValue(), Entry.getKey()));
      // A link's name reads the rewritten contents as the same file (`#pragma once` knows it by either name).
      if (auto Names = OverlayAliases.find(Entry.getKey().str()); Names != OverlayAliases.end())
        for (const std::string &Name : Names->second)
          InMemory->addHardLink(Name, Entry.getKey());
    }
    Layers->pushOverlay(InMemory);
  }
  if (std::error_code EC = Layers->setCurrentWorkingDirectory(Directory)) {
    Outcome.HadErrors = true;
    Outcome.FirstError = "cannot enter the compile command's directory " + Directory.str() + ": " + EC.message();
    Outcome.Diagnostics = Outcome.FirstError + "\n";
    return Outcome;
  }
  std::set<std::string> Missing, Found;
  auto Recording = llvm::makeIntrusiveRefCnt<LookupRecordingFileSystem>(Layers, Missing, Found);
  auto Files = llvm::makeIntrusiveRefCnt<clang::FileManager>(clang::FileSystemOptions(), Recording);

  llvm::raw_string_ostream DiagnosticsOS(Outcome.Diagnostics);
  auto DiagnosticOptions = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  CapturingDiagnostics Diagnostics(DiagnosticsOS, DiagnosticOptions.get(), Outcome);
  clang::tooling::ToolInvocation Invocation(
      CommandLine, std::make_unique<ParsingAction>(Directory, Outcome, OnParsed, ProjectRoot, RecordMacros), Files.get());
  Invocation.setDiagnosticConsumer(&Diagnostics);
  bool Succeeded = Invocation.run();
  Outcome.PathsMissing.assign(Missing.begin(), Missing.end());
  std::set<std::string> Read(Outcome.FilesRead.begin(), Outcome.FilesRead.end());
  // Another name of a file read: a link to it, or a hard link (a name of the same device and inode, which the
  // file manager takes for the file already read).
  std::map<std::pair<uint64_t, uint64_t>, std::string> ReadByIdentity;
  auto Identity = [](const std::string &Path) -> std::optional<std::pair<uint64_t, uint64_t>> {
    llvm::sys::fs::UniqueID Unique;
    if (llvm::sys::fs::getUniqueID(Path, Unique))
      return std::nullopt;
    return std::make_pair(Unique.getDevice(), Unique.getFile());
  };
  for (const std::string &File : Read)
    if (auto Id = Identity(File))
      ReadByIdentity.try_emplace(*Id, File);
  for (const std::string &Name : Found) {
    std::string Canonical = canonicalPath(Name, "/");
    if (Canonical != Name && Read.count(Canonical)) {
      Outcome.Aliases[Canonical].insert(Name);
    } else if (!Read.count(Canonical)) {
      if (auto Id = Identity(Canonical); Id && ReadByIdentity.count(*Id))
        Outcome.Aliases[ReadByIdentity[*Id]].insert(Name);
    }
  }
  Outcome.Ran = Succeeded || !Outcome.FilesRead.empty();
  if (!Succeeded) {
    Outcome.HadErrors = true;
    if (Outcome.FirstError.empty())
      Outcome.FirstError = "the compiler rejected the command line";
  }
  DiagnosticsOS.flush();
  return Outcome;
}

namespace {

/// What of the program's own reaches the library's headers where the rewrite included them: a header of the
/// program's read in place of one of the library's (found first on the include path), a macro defined in a
/// program file that one of their words expands to (`#define Mean Sum` above the inserted include, a pushed
/// `TORCH_ARG`), a namespace, class or linkage block of the program around them, or a `#pragma pack` in effect
/// over their classes. Any of these makes the library's declarations other code than the library was built
/// from; so does a declaration in the library's namespace made anywhere else. "" when none does.
std::string programStateInLibrary(clang::ASTContext &Context, clang::Preprocessor &PP, const LibraryHeaders &Library,
                                  llvm::StringRef ProjectRoot, llvm::StringRef Directory) {
  const clang::SourceManager &SM = Context.getSourceManager();
  // The library's own file of a name (`lmfuse/torch.h`): the one in the library's folders where the build named
  // them, else what `#include <lmfuse/torch.h>` finds on this unit's include path (an angled include searches no
  // includer's folder; the preprocessor's own lookup reads its include stack, which is gone once the unit is
  // parsed).
  auto LibraryFile = [&](const std::string &Spelled) -> clang::OptionalFileEntryRef {
    if (Library.Directories.empty()) {
      clang::ConstSearchDirIterator Searched = nullptr;
      return PP.getHeaderSearchInfo().LookupFile(Spelled, SM.getLocForStartOfFile(SM.getMainFileID()),
                                                 /*isAngled=*/true, nullptr, &Searched, {}, nullptr, nullptr, nullptr,
                                                 nullptr, nullptr, nullptr);
    }
    for (const std::string &Folder : Library.Directories) {
      llvm::SmallString<256> Path(Folder);
      llvm::sys::path::append(Path, Spelled);
      if (clang::OptionalFileEntryRef Found = SM.getFileManager().getOptionalFileRef(Path))
        return Found;
    }
    return std::nullopt;
  };
  // A file read as `lmfuse/NAME` (a file of a folder named so, never the main file) and what the library's own
  // file of that name is.
  auto LibraryNamesake = [&](clang::FileID File) -> std::pair<clang::OptionalFileEntryRef, clang::OptionalFileEntryRef> {
    clang::OptionalFileEntryRef Entry = SM.getFileEntryRefForID(File);
    if (!Entry || File == SM.getMainFileID() ||
        llvm::sys::path::filename(llvm::sys::path::parent_path(Entry->getName())) != Library.Folder)
      return {std::nullopt, std::nullopt};
    return {Entry, LibraryFile(Library.Folder + "/" + llvm::sys::path::filename(Entry->getName()).str())};
  };
  std::map<unsigned, bool> IsLibrary;  // FileID hash -> a library header
  auto InLibrary = [&](clang::SourceLocation At) {
    clang::FileID File = SM.getFileID(SM.getExpansionLoc(At));
    auto [It, Inserted] = IsLibrary.try_emplace(File.getHashValue(), false);
    if (Inserted) {
      auto [Read, Own] = LibraryNamesake(File);
      It->second = Read && Own && &Read->getFileEntry() == &Own->getFileEntry();
    }
    return It->second;
  };
  // Where the build named the library's folders, a file of the program's read as one of the library's headers (a
  // `lmfuse/torch.h` of its own ahead of the library's on the include path, which may include the library's
  // after its own code) is compiled in its place.
  if (!Library.Directories.empty())
    for (unsigned I = 0; I < SM.local_sloc_entry_size(); ++I) {
      const clang::SrcMgr::SLocEntry &Entry = SM.getLocalSLocEntry(I);
      if (!Entry.isFile())
        continue;
      clang::SourceLocation Start = clang::SourceLocation::getFromRawEncoding(Entry.getOffset());
      if (auto [Read, Own] = LibraryNamesake(SM.getFileID(Start)); Read && Own && !InLibrary(Start))
        return "the unit reads " + Read->getName().str() + " as <" + Library.Folder + "/" +
               llvm::sys::path::filename(Read->getName()).str() + ">, which is not the library's header of that name (" +
               Own->getName().str() + "): a file of the program's found first on the include path would be "
               "compiled in the library's place";
    }
  ProgramFiles Program(SM, ProjectRoot, Directory);
  auto InProgram = [&](clang::SourceLocation At) { return !InLibrary(At) && Program.contains(At); };
  auto Place = [&](clang::SourceLocation At) {
    clang::PresumedLoc Presumed = SM.getPresumedLoc(SM.getExpansionLoc(At));
    return Presumed.isValid() ? llvm::sys::path::filename(Presumed.getFilename()).str() + ":" +
                                    std::to_string(Presumed.getLine())
                              : std::string("?");
  };
  // The macros: each word of each library file, as the preprocessor's history has it where the word stands.
  for (unsigned I = 0; I < SM.local_sloc_entry_size(); ++I) {
    const clang::SrcMgr::SLocEntry &Entry = SM.getLocalSLocEntry(I);
    if (!Entry.isFile() || !InLibrary(clang::SourceLocation::getFromRawEncoding(Entry.getOffset())))
      continue;
    clang::FileID File = SM.getFileID(clang::SourceLocation::getFromRawEncoding(Entry.getOffset()));
    std::string Found;
    forEachRawToken(SM, Context.getLangOpts(), File, 0, ~0u, [&](const clang::Token &Word) {
      if (!Word.is(clang::tok::raw_identifier))
        return true;
      clang::IdentifierInfo *Name = PP.getIdentifierInfo(Word.getRawIdentifier());
      if (!Name->hadMacroDefinition())
        return true;
      if (const clang::MacroInfo *Macro = PP.getMacroDefinitionAtLoc(Name, Word.getLocation()).getMacroInfo();
          Macro && InProgram(Macro->getDefinitionLoc()))
        Found = "the program's macro `" + Name->getName().str() + "` (" + Place(Macro->getDefinitionLoc()) +
                ") is in effect in the library header " +
                llvm::sys::path::filename(SM.getFilename(Word.getLocation())).str() + " where the rewrite includes it";
      return Found.empty();
    });
    if (!Found.empty())
      return Found;
  }
  // The scopes and the packing around the library's declarations.
  class Scopes : public clang::RecursiveASTVisitor<Scopes> {
  public:
    Scopes(std::function<bool(clang::SourceLocation)> InLibrary, llvm::StringRef LibraryNamespace,
           std::function<std::string(clang::SourceLocation)> Place)
        : InLibrary(std::move(InLibrary)), LibraryNamespace(LibraryNamespace), Place(std::move(Place)) {}
    bool VisitNamespaceDecl(clang::NamespaceDecl *Namespace) { return check(Namespace); }
    // A declaration of the program's in the library's namespace (an opening of it in any file the library does
    // not hold, or one named from outside: an explicit specialisation of a library template, a member defined
    // out of line) may be what the rewritten calls resolve to or instantiate: a better-matching overload, a
    // trait that changes which options a module loss passes.
    bool VisitDecl(clang::Decl *D) {
      if (!Found.empty() || InLibrary(D->getLocation()) || D->isImplicit() || LibraryNamespace.empty())
        return Found.empty();
      const clang::DeclContext *Context = llvm::isa<clang::NamespaceDecl>(D) ? llvm::cast<clang::DeclContext>(D)
                                                                             : D->getDeclContext();
      for (; Context && !Context->isTranslationUnit(); Context = Context->getParent())
        if (const auto *Namespace = llvm::dyn_cast<clang::NamespaceDecl>(Context);
            Namespace && Namespace->getName() == LibraryNamespace && Namespace->getParent()->getRedeclContext()->isTranslationUnit()) {
          const auto *Named = llvm::dyn_cast<clang::NamedDecl>(D);
          Found = "the program declares " + (Named ? "`" + Named->getQualifiedNameAsString() + "`" : std::string("something")) +
                  " in namespace `" + LibraryNamespace + "` (" + Place(D->getLocation()) +
                  "), whose declarations the rewritten code calls: a declaration of the program's may be what they "
                  "resolve to";
          break;
        }
      return Found.empty();
    }
    bool VisitCXXRecordDecl(clang::CXXRecordDecl *Record) {
      if (InLibrary(Record->getLocation()) && (Record->hasAttr<clang::MaxFieldAlignmentAttr>() ||
                                               Record->hasAttr<clang::AlignMac68kAttr>()))
        Found = "a `#pragma pack` of the program is in effect over `" + Record->getNameAsString() +
                "`, a class of the library header the rewrite includes";
      return Found.empty() && check(Record);
    }
    bool check(clang::Decl *D) {
      if (!InLibrary(D->getLocation()))
        return true;
      const clang::DeclContext *Around = D->getLexicalDeclContext();
      while (Around && llvm::isa<clang::LinkageSpecDecl>(Around) && InLibrary(clang::Decl::castFromDeclContext(Around)->getLocation()))
        Around = Around->getLexicalParent();
      if (Around && !Around->isTranslationUnit() && !InLibrary(clang::Decl::castFromDeclContext(Around)->getLocation()))
        Found = "the library header the rewrite includes is read inside a namespace, class or linkage block of the "
                "program";
      return Found.empty();
    }
    std::function<bool(clang::SourceLocation)> InLibrary;
    std::string LibraryNamespace;
    std::function<std::string(clang::SourceLocation)> Place;
    std::string Found;
  } Visitor(InLibrary, Library.Namespace, Place);
  Visitor.TraverseDecl(Context.getTranslationUnitDecl());
  return Visitor.Found;
}

}  // namespace

std::string verifyRewrite(const std::vector<std::string> &CommandLine, llvm::StringRef Directory,
                          const llvm::StringMap<std::string> &Overlay,
                          const std::map<std::string, std::set<std::string>> &OverlayAliases,
                          const std::string &ProjectRoot,
                          const LibraryHeaders *Library,
                          const std::map<std::string, std::vector<RespellingRange>> *Respellings,
                          std::map<std::pair<std::string, size_t>, std::string> *Changed,
                          std::vector<std::string> *PathsMissing) {
  std::string Found;
  ParseOutcome Outcome = parseTranslationUnit(
      CommandLine, Directory, Overlay,
      [&](clang::ASTContext &Context, clang::Preprocessor &PP) {
        if (Library && !Library->Folder.empty())
          Found = programStateInLibrary(Context, PP, *Library, ProjectRoot, Directory);
        if (Respellings && Changed)
          *Changed = changedRespellings(Context, Directory, *Respellings);
      },
      ProjectRoot, /*RecordMacros=*/false, OverlayAliases);
  if (PathsMissing)
    *PathsMissing = std::move(Outcome.PathsMissing);
  if (Outcome.HadErrors)
    return Outcome.FirstError;
  return Found;
}

}  // namespace lmfuse::rewriter

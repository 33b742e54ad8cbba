// Mirroring sources into --out-dir.
#include "out_tree.h"

#include <chrono>
#include <map>
#include <set>

#include "edit_set.h"
#include "safe_write.h"
#include "verify.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace lmfuse::tool {

std::string commonRoot(const std::vector<std::string> &Paths) {
  if (Paths.empty())
    return "";
  llvm::StringRef Root = llvm::sys::path::parent_path(Paths.front());
  for (const std::string &Path : Paths)
    while (!Root.empty() && mirroredPath(Path, Root, "/").empty())
      Root = llvm::sys::path::parent_path(Root);
  return Root.empty() ? "/" : Root.str();
}

std::string mirroredPath(llvm::StringRef Source, llvm::StringRef Root, llvm::StringRef OutDir) {
  llvm::StringRef Rest = Source;
  if (!Rest.consume_front(Root))
    return "";
  if (!Root.ends_with("/") && !Rest.consume_front("/"))
    return "";
  llvm::SmallString<256> Target(OutDir);
  llvm::sys::path::append(Target, Rest);
  return std::string(Target);
}

llvm::Error writeIfChanged(llvm::StringRef Path, llvm::StringRef Contents, bool &Changed,
                           std::optional<llvm::StringRef> Replacing) {
  Changed = false;
  // Before reading it: a FIFO in its place would block the read.
  if (std::string Refusal = refusalToReplace(Path); !Refusal.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "not written: %s", Refusal.c_str());
  if (auto Existing = llvm::MemoryBuffer::getFile(Path); Existing && (*Existing)->getBuffer() == Contents)
    return llvm::Error::success();
  if (std::error_code EC = llvm::sys::fs::create_directories(llvm::sys::path::parent_path(Path)))
    return llvm::createStringError(EC, "cannot create the folder of %s: %s", Path.str().c_str(),
                                   EC.message().c_str());
  if (llvm::Error Err = writeFileAtomically(Path, Contents, Replacing))
    return Err;
  Changed = true;
  return llvm::Error::success();
}

llvm::Error lockOutputTree(const std::string &CacheDir, bool Quiet) {
  llvm::SmallString<256> LockPath(CacheDir);
  llvm::sys::path::append(LockPath, "lock");
  int FD = -1;
  std::error_code EC = llvm::sys::fs::create_directories(CacheDir);
  if (!EC)
    EC = llvm::sys::fs::openFileForWrite(LockPath, FD, llvm::sys::fs::CD_OpenAlways);
  if (!EC)
    EC = llvm::sys::fs::tryLockFile(FD);
  if (EC == std::errc::no_lock_available) {
    if (!Quiet)
      llvm::errs() << "lmfuse: note: waiting for another lmfuse run that writes this output tree (" << LockPath << ")\n";
    EC = llvm::sys::fs::tryLockFile(FD, std::chrono::minutes(30));
  }
  if (EC)
    return llvm::createStringError(EC, "cannot lock the output tree through %s: %s", LockPath.c_str(),
                                   EC.message().c_str());
  return llvm::Error::success();  // FD stays open: the lock is released when the process exits
}

std::string overlapWithSources(llvm::StringRef Root, llvm::StringRef OutDir) {
  if (OutDir == Root)
    return "--out-dir " + OutDir.str() + " is the sources' folder: the copies would overwrite the sources";
  if (!mirroredPath(Root, OutDir, "/").empty())
    return "--out-dir " + OutDir.str() + " holds the sources' folder " + Root.str() +
           ": the copies would land among the sources";
  return "";
}

namespace {

// Every copy starts with a #line directive naming its original (after a byte-order mark, if the original
// has one); an existing regular file that does not was not made by lmfuse.
bool isCopy(const std::string &Path) {
  auto Existing = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!Existing)
    return false;
  llvm::StringRef Text = (*Existing)->getBuffer();
  Text.consume_front("\xEF\xBB\xBF");
  return Text.starts_with("#line 1 \"");
}
bool isForeignFile(const std::string &Path) {
  return llvm::sys::fs::is_regular_file(Path) && !isCopy(Path);  // absent is fine; others are refused on their own
}

// Target itself, or else the first folder between OutDir and Target (Target's own folder included, OutDir
// not), that is a link: a copy written through it would land outside the output tree (in a source folder,
// another mirror, say). "" if none.
std::string linkInTree(const std::string &Target, llvm::StringRef OutDir) {
  llvm::sys::fs::file_status Own;
  if (!llvm::sys::fs::status(Target, Own, /*follow=*/false) && llvm::sys::fs::is_symlink_file(Own))
    return Target;
  llvm::SmallString<256> Folder(llvm::sys::path::parent_path(Target));
  std::string Found;
  while (Folder.size() > OutDir.size() && llvm::StringRef(Folder).starts_with(OutDir)) {
    llvm::sys::fs::file_status Status;
    if (!llvm::sys::fs::status(Folder, Status, /*follow=*/false) && llvm::sys::fs::is_symlink_file(Status))
      Found = Folder.str().str();  // the outermost one wins: it is the one the user made
    Folder = llvm::sys::path::parent_path(Folder);
  }
  return Found;
}

// The copies a run wrote under OutDir, one path a line relative to it, kept in its cache folder: the next run
// removes only what this list names, so a file lmfuse did not write (a generated source that starts with
// `#line 1 "`, another run's output folder nested inside) is never taken for one of its copies.
std::string manifestPath(llvm::StringRef OutDir) {
  llvm::SmallString<256> Path(OutDir);
  llvm::sys::path::append(Path, kCacheFolder, "copies");
  return std::string(Path);
}

// Removes the copies the previous run wrote under OutDir that this run does not write (Targets): a copy of a
// header this run no longer reads would otherwise still be found by `#include "..."` beside the rewritten
// files, in place of the header the analysis saw. A listed file that a unit read (Sources), that is no longer
// a copy, or that is reached through a link is left alone. Then records this run's copies.
void removeOtherCopies(llvm::StringRef OutDir, const std::set<std::string> &Targets,
                       const std::set<std::string> &Sources, OutTreeResult &Out) {
  const std::string Manifest = manifestPath(OutDir);
  if (auto Listed = llvm::MemoryBuffer::getFile(Manifest)) {
    llvm::SmallVector<llvm::StringRef, 64> Lines;
    (*Listed)->getBuffer().split(Lines, '\n', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef Line : Lines) {
      llvm::SmallString<256> Path(OutDir);
      llvm::sys::path::append(Path, Line);
      llvm::sys::path::remove_dots(Path, /*remove_dot_dot=*/true);
      std::string Copy(Path);
      llvm::sys::fs::file_status Status;
      if (mirroredPath(Copy, OutDir, "/").empty() || Targets.count(Copy) || Sources.count(Copy) ||
          llvm::sys::fs::status(Copy, Status, /*follow=*/false) ||
          Status.type() != llvm::sys::fs::file_type::regular_file || !linkInTree(Copy, OutDir).empty() ||
          !isCopy(Copy))
        continue;
      if (std::error_code Removing = llvm::sys::fs::remove(Copy))
        Out.Failures.push_back({Copy, "cannot remove " + Copy + ", a copy an earlier run made that this run does not: " +
                                          Removing.message()});
      else
        ++Out.Removed;
    }
  }
  std::string Text;
  for (const std::string &Target : Targets)
    Text += mirroredPath(Target, OutDir, "") + "\n";
  llvm::SmallString<256> Folder(llvm::sys::path::parent_path(Manifest));
  bool Changed = false;
  if (std::error_code EC = llvm::sys::fs::create_directories(Folder))
    Out.Failures.push_back({Manifest, "cannot make " + std::string(Folder) + ": " + EC.message()});
  else if (llvm::Error Err = writeIfChanged(Manifest, Text, Changed))
    Out.Failures.push_back({Manifest, llvm::toString(std::move(Err))});
}

}  // namespace

OutTreeResult writeOutTree(const rewriter::DriverResult &Result, const std::vector<std::string> &Inputs,
                           llvm::StringRef Root, llvm::StringRef OutDir) {
  OutTreeResult Out;
  // Source -> contents of its copy. Rewritten files first; then plain copies of everything else. Each
  // digest is of the very contents its copy was made from (read once), never of a later read.
  std::map<std::string, std::string> Copies, Digests;
  for (const rewriter::FileRewrite &Rewrite : Result.Rewrites) {
    Copies[Rewrite.Path] = rewriter::rewrittenWithLineDirectives(Rewrite.Path, Rewrite.Original, Rewrite.Edits);
    Digests[Rewrite.Path] = rewriter::contentDigest(Rewrite.Original);
  }
  std::vector<std::string> Plain(Inputs);
  Plain.insert(Plain.end(), Result.FilesRead.begin(), Result.FilesRead.end());
  // A copy never replaces a file some unit read (a source or header): that would be the sources overwritten.
  std::set<std::string> Sources(Plain.begin(), Plain.end());
  for (const std::string &File : Plain) {
    if (Copies.count(File) || mirroredPath(File, Root, OutDir).empty() ||
        !mirroredPath(File, OutDir, "/").empty() || File == OutDir)
      continue;  // outside the root, or inside the output tree itself
    auto Buffer = llvm::MemoryBuffer::getFile(File);
    if (!Buffer)
      continue;  // a file the compiler read but that is gone now: the build will say so
    if (auto Parsed = Result.ReadDigests.find(File);
        Parsed != Result.ReadDigests.end() && rewriter::contentsHash((*Buffer)->getBuffer()) != Parsed->second) {
      Out.Failures.push_back({File, "not written: " + File + " changed on disk while lmfuse ran, so the rewritten "
                                    "copies beside it were made for other contents; run lmfuse again"});
      continue;
    }
    Copies[File] = rewriter::rewrittenWithLineDirectives(File, (*Buffer)->getBuffer(), {});
    Digests[File] = rewriter::contentDigest((*Buffer)->getBuffer());
  }
  // A file the parse found by another name (a link to it) is copied under that name too: the copies of the
  // files that include it by that name must find the copy, not the original beside them. That name is made a
  // hard link of the copy, so that the mirror's names are one file where the original's are (`#pragma once`
  // knows a header by its file: two copies of a linked header would be read twice where it was read once).
  // Names that are one file in the sources by a hard link (one device and inode) are one copy too, the rewritten
  // one's where one of them is rewritten.
  // Each name as the mirror resolves it: its folders are real ones there, so `..` steps back lexically; a name
  // that only spells the file's own place otherwise (`src/../model.h`) is no other name of it.
  std::map<std::string, std::set<std::string>> Aliases;
  for (const auto &[File, Names] : Result.Aliases)
    for (const std::string &Name : Names) {
      llvm::SmallString<256> Spelled(Name);
      llvm::sys::path::remove_dots(Spelled, /*remove_dot_dot=*/true);
      if (Spelled != File)
        Aliases[File].insert(std::string(Spelled));
    }
  std::set<std::string> RewrittenPaths;
  for (const rewriter::FileRewrite &Rewrite : Result.Rewrites)
    RewrittenPaths.insert(Rewrite.Path);
  std::map<std::pair<uint64_t, uint64_t>, std::string> ByIdentity;
  for (const std::string &File : std::vector<std::string>(llvm::make_first_range(Copies).begin(),
                                                          llvm::make_first_range(Copies).end())) {
    llvm::sys::fs::UniqueID Identity;
    if (llvm::sys::fs::getUniqueID(File, Identity))
      continue;
    auto [Known, Inserted] = ByIdentity.try_emplace({Identity.getDevice(), Identity.getFile()}, File);
    if (Inserted)
      continue;
    std::string Kept = Known->second, Other = File;
    if (RewrittenPaths.count(Other) && RewrittenPaths.count(Kept))
      continue;  // rewritten under both names: two copies, as the analysis made them
    if (RewrittenPaths.count(Other))
      std::swap(Kept, Other);
    Known->second = Kept;
    Copies.erase(Other);
    Aliases[Kept].insert(Other);
    if (auto Names = Aliases.find(Other); Names != Aliases.end()) {
      Aliases[Kept].insert(Names->second.begin(), Names->second.end());
      Aliases.erase(Names);
    }
  }
  std::vector<std::pair<std::string, std::string>> Placed;  // source, the name its copy takes
  for (const auto &Copy : Copies) {
    Placed.push_back({Copy.first, Copy.first});
    if (auto Names = Aliases.find(Copy.first); Names != Aliases.end())
      for (const std::string &Name : Names->second) {
        if (Copies.count(Name)) {  // `linked/../x.h` through a link, lexically another file's own name
          Out.Failures.push_back({Copy.first, "not written: " + Copy.first + " is also read as " + Name +
                                                  ", which in the mirror (whose folders are no links) names another "
                                                  "file's copy"});
          continue;
        }
        if (!mirroredPath(Name, Root, OutDir).empty() && mirroredPath(Name, OutDir, "/").empty())
          Placed.push_back({Copy.first, Name});
      }
  }
  std::set<std::string> Targets;
  std::map<std::string, std::string> CopyOf;  // source -> where its copy under its own name was written
  for (const auto &[Source, Name] : Placed) {
    const std::string &Contents = Copies[Source];
    std::string Target = mirroredPath(Name, Root, OutDir);
    if (Target.empty()) {
      Out.Failures.push_back({Source, "not written: " + Source + " lies outside the source root " + Root.str() +
                                          " that --out-dir mirrors (set --edit-root to a folder holding it)"});
      continue;
    }
    Targets.insert(Target);
    if (Sources.count(Target)) {
      Out.Failures.push_back({Source, "not written: the copy of " + Source + " would overwrite " + Target +
                                          ", a file the translation units read"});
      continue;
    }
    if (std::string Link = linkInTree(Target, OutDir); !Link.empty()) {
      Out.Failures.push_back({Source, "not written: " + Link + " is a link, and the copy of " + Source +
                                          " would be written where it points; --out-dir writes only inside its own tree"});
      continue;
    }
    if (isForeignFile(Target)) {
      Out.Failures.push_back({Source, "not written: " + Target + " exists and is not a copy lmfuse made; --out-dir "
                                                                 "never replaces other files"});
      continue;
    }
    if (Name != Source) {
      auto Copy = CopyOf.find(Source);
      if (Copy == CopyOf.end())
        continue;  // its copy was not written (a failure says why): nor is its other name
      bool Same = false;
      if (!llvm::sys::fs::equivalent(Target, Copy->second, Same) && Same) {
        ++Out.Unchanged;
      } else {
        llvm::sys::fs::remove(Target);  // an earlier run's copy (isForeignFile said so), or nothing
        std::error_code EC = llvm::sys::fs::create_directories(llvm::sys::path::parent_path(Target));
        if (!EC)
          EC = llvm::sys::fs::create_hard_link(Copy->second, Target);
        if (EC) {
          Out.Failures.push_back({Source, "not written: " + Target + " cannot be made the same file as " +
                                              Copy->second + " (" + EC.message() + "), as " + Name + " is of " +
                                              Source});
          continue;
        }
        ++Out.Written;
      }
      Out.Mirrored.push_back({mirroredPath(Name, Root, ""), Digests[Source], rewriter::contentDigest(Contents),
                              mirroredPath(Source, Root, "")});
      continue;
    }
    // Its other names' links to an earlier copy go first: the copy is replaced only where it has one name
    // (writeIfChanged refuses to break hard links), and they are linked again to what is written.
    if (auto Names = Aliases.find(Source); Names != Aliases.end())
      for (const std::string &Other : Names->second)
        if (std::string Linked = mirroredPath(Other, Root, OutDir); !Linked.empty() && !Sources.count(Linked) &&
                                                                    isCopy(Linked))
          llvm::sys::fs::remove(Linked);
    bool Changed = false;
    if (llvm::Error Err = writeIfChanged(Target, Contents, Changed)) {
      Out.Failures.push_back({Source, llvm::toString(std::move(Err))});
      continue;
    }
    ++(Changed ? Out.Written : Out.Unchanged);
    CopyOf[Source] = Target;
    // "": relative to Root.
    Out.Mirrored.push_back({mirroredPath(Name, Root, ""), Digests[Source], rewriter::contentDigest(Contents)});
  }
  removeOtherCopies(OutDir, Targets, Sources, Out);
  return Out;
}

}  // namespace lmfuse::tool

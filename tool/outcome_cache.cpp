// Cache entries are plain JSON (llvm/Support/JSON.h), so a stale or foreign file is simply a miss.
#include "outcome_cache.h"

#include "audit.h"
#include "safe_write.h"
#include "verify.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace lmfuse::tool {

using rewriter::TranslationUnitOutcome;

std::string hashText(llvm::StringRef Text) { return rewriter::contentsHash(Text); }

std::string hashFile(llvm::StringRef Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!Buffer)
    return "";
  return hashText((*Buffer)->getBuffer());
}

std::string OutcomeCache::entryPath(llvm::StringRef Key) const {
  llvm::SmallString<256> Path(Directory);
  llvm::sys::path::append(Path, hashText(Key) + ".json");
  return std::string(Path);
}

std::optional<TranslationUnitOutcome>
OutcomeCache::lookup(llvm::StringRef Key) {
  auto Buffer = llvm::MemoryBuffer::getFile(entryPath(Key));
  if (!Buffer)
    return std::nullopt;
  llvm::Expected<llvm::json::Value> Document = llvm::json::parse((*Buffer)->getBuffer());
  if (!Document) {
    llvm::consumeError(Document.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *Entry = Document->getAsObject();
  if (!Entry || Entry->getString("command") != Key ||
      Entry->getString("fingerprint") != llvm::StringRef(Fingerprint))
    return std::nullopt;
  const llvm::json::Array *Inputs = Entry->getArray("inputs");
  const llvm::json::Array *Sites = Entry->getArray("sites");
  const llvm::json::Array *Edits = Entry->getArray("edits");
  const llvm::json::Array *Macros = Entry->getArray("macros");
  auto MainFile = Entry->getString("main_file");
  if (!Inputs || !Sites || !Edits || !Macros || !MainFile)
    return std::nullopt;
  TranslationUnitOutcome Outcome;
  Outcome.MainFile = MainFile->str();
  for (const llvm::json::Value &Input : *Inputs) {
    const llvm::json::Array *Pair = Input.getAsArray();
    if (!Pair || Pair->size() != 2)
      return std::nullopt;
    auto Path = (*Pair)[0].getAsString();
    auto Hash = (*Pair)[1].getAsString();
    if (!Path || !Hash || hashFile(*Path) != *Hash)
      return std::nullopt;
    Outcome.FilesRead.push_back(Path->str());
    Outcome.ReadDigests[Path->str()] = Hash->str();
  }
  // A path the parse looked for in vain that exists now (a header added earlier on the include path)
  // could change what the unit includes.
  const llvm::json::Array *Absent = Entry->getArray("absent");
  if (!Absent)
    return std::nullopt;
  for (const llvm::json::Value &Path : *Absent) {
    auto Text = Path.getAsString();
    if (!Text || llvm::sys::fs::exists(*Text))
      return std::nullopt;
    Outcome.PathsMissing.push_back(Text->str());
  }
  const llvm::json::Array *Aliases = Entry->getArray("aliases");
  if (!Aliases)
    return std::nullopt;
  for (const llvm::json::Value &Alias : *Aliases) {
    const llvm::json::Array *Pair = Alias.getAsArray();
    if (!Pair || Pair->size() != 2 || !(*Pair)[0].getAsString() || !(*Pair)[1].getAsString())
      return std::nullopt;
    // Each other name of a file read must still be that file: a link switched to another version of a header
    // (`model.h -> model_v2.h`, a `current -> v2` folder), or replaced by a file, would have the unit read
    // another file under the same name.
    llvm::StringRef File = *(*Pair)[0].getAsString(), Name = *(*Pair)[1].getAsString();
    bool Same = false;
    if (llvm::sys::fs::equivalent(Name, File, Same) || !Same)
      return std::nullopt;
    Outcome.Aliases[File.str()].insert(Name.str());
  }
  for (const llvm::json::Value &Site : *Sites) {
    auto Record = rewriter::siteFromJson(Site);
    if (!Record) {
      llvm::consumeError(Record.takeError());
      return std::nullopt;
    }
    Outcome.Sites.push_back(std::move(*Record));
  }
  for (const llvm::json::Value &Macro : *Macros) {
    auto Record = rewriter::macroFromJson(Macro);
    if (!Record) {
      llvm::consumeError(Record.takeError());
      return std::nullopt;
    }
    Outcome.Macros.push_back(std::move(*Record));
  }
  for (const llvm::json::Value &Edit : *Edits) {
    const llvm::json::Object *Object = Edit.getAsObject();
    if (!Object)
      return std::nullopt;
    auto File = Object->getString("file");
    auto Offset = Object->getInteger("offset");
    auto Length = Object->getInteger("length");
    auto Text = Object->getString("text");
    if (!File || !Offset || !Length || !Text)
      return std::nullopt;
    Outcome.Edits.emplace_back(*File, unsigned(*Offset), unsigned(*Length), *Text);
  }
  return Outcome;
}

void OutcomeCache::store(llvm::StringRef Key, const TranslationUnitOutcome &Outcome) {
  llvm::json::Array Inputs, Absent, Aliases, Sites, Edits, Macros;
  for (const std::string &File : Outcome.FilesRead) {
    // What the parse read, not what the file holds now: an entry never pairs an outcome with contents it
    // was not computed from.
    auto Parsed = Outcome.ReadDigests.find(File);
    std::string Hash = Parsed != Outcome.ReadDigests.end() ? Parsed->second : hashFile(File);
    if (Hash.empty())
      return;  // an input vanished: an entry would never hit
    Inputs.push_back(llvm::json::Array{File, Hash});
  }
  for (const std::string &Path : Outcome.PathsMissing)
    Absent.push_back(Path);
  for (const auto &[File, Names] : Outcome.Aliases)
    for (const std::string &Name : Names)
      Aliases.push_back(llvm::json::Array{File, Name});
  for (const rewriter::SiteRecord &Site : Outcome.Sites)
    Sites.push_back(rewriter::siteToJson(Site));
  for (const rewriter::MacroDependence &Macro : Outcome.Macros)
    Macros.push_back(rewriter::macroToJson(Macro));
  for (const clang::tooling::Replacement &Edit : Outcome.Edits)
    Edits.push_back(llvm::json::Object{{"file", Edit.getFilePath()},
                                       {"offset", int64_t(Edit.getOffset())},
                                       {"length", int64_t(Edit.getLength())},
                                       {"text", Edit.getReplacementText()}});
  llvm::json::Value Entry = llvm::json::Object{{"command", Key},
                                               {"fingerprint", Fingerprint},
                                               {"main_file", Outcome.MainFile},
                                               {"inputs", std::move(Inputs)},
                                               {"absent", std::move(Absent)},
                                               {"aliases", std::move(Aliases)},
                                               {"sites", std::move(Sites)},
                                               {"edits", std::move(Edits)},
                                               {"macros", std::move(Macros)}};
  if (llvm::sys::fs::create_directories(Directory))
    return;  // no cache is slower, never wrong
  std::string Text;
  llvm::raw_string_ostream(Text) << Entry;
  // A failed write leaves no entry (and no temporary): the next run parses again.
  llvm::consumeError(writeFileAtomically(entryPath(Key), Text));
}

}  // namespace lmfuse::tool

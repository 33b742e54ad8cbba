// Files saved while lmfuse runs (an editor, a checkout, a generator): what a unit's analysis read must be
// what its edits apply to, in the driver (a unit whose reads changed since its parse has none of its edits
// written) and at the last moment of an in-place write (writeFileAtomically's Replacing). The driver runs
// in this process: a cache whose lookup for the second unit saves the first unit's file puts the save
// between the first unit's parse and the writes, deterministically.
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <thread>

#include "cli_support.h"

#include "driver.h"
#include "patterns.h"
#include "safe_write.h"
#include "verify.h"

#include "clang/Tooling/CompilationDatabase.h"

namespace {

using namespace lmfuse::rewriter;

// A cache that stores nothing and, when asked for the unit of Trigger (whose path its key holds), runs
// Save: the units are analysed one after another in input order, so Save runs after the earlier units'
// parses.
class SaveOnLookup : public TranslationUnitCache {
public:
  SaveOnLookup(std::string Trigger, std::function<void()> Save) : Trigger(std::move(Trigger)), Save(std::move(Save)) {}
  std::optional<TranslationUnitOutcome> lookup(llvm::StringRef Key) override {
    if (Key.contains(Trigger) && Save) {
      Save();
      Save = nullptr;
    }
    return std::nullopt;
  }
  void store(llvm::StringRef, const TranslationUnitOutcome &Outcome) override {
    Stored.push_back(Outcome);
  }
  std::vector<TranslationUnitOutcome> Stored;

private:
  std::string Trigger;
  std::function<void()> Save;
};

DriverResult runOver(const SourceTree &Tree, const std::vector<std::string> &Files, TranslationUnitCache &Cache) {
  std::vector<std::string> Flags = {"-std=c++17", "-I" LMFUSE_CLI_STUBS, "-I" + Tree.Root};
  clang::tooling::FixedCompilationDatabase Database(Tree.Root, Flags);
  auto Patterns = loadDefaultPatterns();
  REQUIRE(static_cast<bool>(Patterns));
  DriverOptions Options;
  Options.ResourceDir = LMFUSE_CLANG_RESOURCE_DIR;
  Options.HeaderDirs = {LMFUSE_CLI_STUBS};
  Options.EditRoot = Tree.Root;
  Options.Cache = &Cache;
  return runDriver(Database, Files, *Patterns, Options);
}

const SiteRecord *siteIn(const DriverResult &Result, llvm::StringRef File) {
  for (const SiteRecord &Site : Result.Sites)
    if (Site.File == File && Site.Line > 1)
      return &Site;
  return nullptr;
}

}  // namespace

TEST_CASE("a unit's analysis records what it read, and that is what the cache keeps", "[cli][writes]") {
  SourceTree Tree({{"model.cpp", ModelSource}, {"other.cpp", "int other() { return 1; }\n"}});
  SaveOnLookup Cache("", nullptr);
  DriverResult Result = runOver(Tree, {Tree.path("model.cpp"), Tree.path("other.cpp")}, Cache);
  REQUIRE(Result.Rewrites.size() == 1);
  REQUIRE(Cache.Stored.size() == 2);
  const TranslationUnitOutcome &Model = Cache.Stored[0].MainFile == Tree.path("model.cpp") ? Cache.Stored[0] : Cache.Stored[1];
  CHECK(Model.ReadDigests.at(Tree.path("model.cpp")) == contentsHash(ModelSource));
  CHECK(Model.ReadDigests.count(LMFUSE_CLI_STUBS "/torch/torch.h") == 1);
  CHECK(Model.ReadDigests.size() == Model.FilesRead.size());
}

TEST_CASE("a source saved after its unit was parsed is not edited: source-changed, nothing written", "[cli][writes]") {
  SourceTree Tree({{"model.cpp", ModelSource}, {"other.cpp", "int other() { return 1; }\n"}});
  // The same length and the same sites: only the head's module differs, which the planned edits would
  // silently carry over to the new contents.
  std::string Saved = ModelSource;
  size_t Head = Saved.find("lm_head->forward(x)");
  REQUIRE(Head != std::string::npos);
  Saved.replace(Head, 7, "lm_tail");
  SaveOnLookup Cache(Tree.path("other.cpp"), [&] { Tree.write("model.cpp", Saved); });
  DriverResult Result = runOver(Tree, {Tree.path("model.cpp"), Tree.path("other.cpp")}, Cache);
  CHECK(Result.Rewrites.empty());
  const SiteRecord *Site = siteIn(Result, Tree.path("model.cpp"));
  REQUIRE(Site);
  CHECK(Site->Status == SiteStatus::Failed);
  CHECK(reasonCode(Site->Reason) == "source-changed");
  CHECK(llvm::StringRef(Site->Detail).contains("changed on disk while lmfuse analysed"));
  // The stale unit is not cached; the other one is.
  REQUIRE(Cache.Stored.size() == 1);
  CHECK(Cache.Stored[0].MainFile == Tree.path("other.cpp"));
  CHECK(Tree.read("model.cpp") == Saved);
}

TEST_CASE("a header saved after the units that read it were parsed stops their edits too", "[cli][writes]") {
  SourceTree Tree({{"config.h", "#pragma once\n"}, {"other.cpp", "int other() { return 1; }\n"}});
  Tree.write("model.cpp", std::string("#include \"config.h\"\n") + ModelSource);
  SaveOnLookup Cache(Tree.path("other.cpp"), [&] { Tree.write("config.h", "#pragma once\n#define SOFTCAP 1\n"); });
  DriverResult Result = runOver(Tree, {Tree.path("model.cpp"), Tree.path("other.cpp")}, Cache);
  CHECK(Result.Rewrites.empty());
  const SiteRecord *Site = siteIn(Result, Tree.path("model.cpp"));
  REQUIRE(Site);
  CHECK(reasonCode(Site->Reason) == "source-changed");
  CHECK(llvm::StringRef(Site->Detail).contains(Tree.path("config.h")));
}

TEST_CASE("an in-place write keeps a save made after the rewrite was computed", "[cli][writes]") {
  SourceTree Tree({{"model.cpp", "before\n"}});
  Tree.write("model.cpp", "saved meanwhile\n");
  llvm::Error Err = lmfuse::tool::writeFileAtomically(Tree.path("model.cpp"), "rewritten\n", llvm::StringRef("before\n"));
  REQUIRE(static_cast<bool>(Err));
  CHECK(llvm::StringRef(llvm::toString(std::move(Err))).contains("changed on disk while lmfuse ran"));
  CHECK(Tree.read("model.cpp") == "saved meanwhile\n");
  std::error_code EC;
  for (llvm::sys::fs::directory_iterator It(Tree.Root, EC), End; It != End && !EC; It.increment(EC))
    CHECK(!llvm::StringRef(It->path()).contains(".lmfuse-tmp-"));
  // Unchanged since: written.
  REQUIRE(!lmfuse::tool::writeFileAtomically(Tree.path("model.cpp"), "rewritten\n", llvm::StringRef("saved meanwhile\n")));
  CHECK(Tree.read("model.cpp") == "rewritten\n");
}

// The last moment: an editor's save (its own temporary renamed over the file) after lmfuse read the file a last
// time, while its temporary waits to replace it (LMFUSE_TEST_HOLD_TEMPORARY_MS holds it there). A rename over
// the file would drop the save; the exchange puts it back.
TEST_CASE("an in-place write keeps a save made after its last check of the file", "[cli][writes]") {
  SourceTree Tree({{"model.cpp", "before\n"}, {"editor.tmp", "saved at the last moment\n"}});
  ::setenv("LMFUSE_TEST_HOLD_TEMPORARY_MS", "1500", 1);
  std::thread Editor([&] {
    // Waits until lmfuse's temporary exists and its content is complete, then saves.
    for (int Tries = 0; Tries < 1000; ++Tries) {
      bool Seen = false;
      std::error_code EC;
      for (llvm::sys::fs::directory_iterator It(Tree.Root, EC), End; It != End && !EC; It.increment(EC))
        Seen = Seen || llvm::StringRef(It->path()).contains(".lmfuse-tmp-");
      if (Seen)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::rename(Tree.path("editor.tmp").c_str(), Tree.path("model.cpp").c_str());
  });
  llvm::Error Err = lmfuse::tool::writeFileAtomically(Tree.path("model.cpp"), "rewritten\n", llvm::StringRef("before\n"));
  Editor.join();
  ::unsetenv("LMFUSE_TEST_HOLD_TEMPORARY_MS");
  REQUIRE(static_cast<bool>(Err));
  CHECK(llvm::StringRef(llvm::toString(std::move(Err))).contains("changed on disk while lmfuse ran"));
  CHECK(Tree.read("model.cpp") == "saved at the last moment\n");
  std::error_code EC;
  for (llvm::sys::fs::directory_iterator It(Tree.Root, EC), End; It != End && !EC; It.increment(EC))
    CHECK(!llvm::StringRef(It->path()).contains(".lmfuse-tmp-"));
}

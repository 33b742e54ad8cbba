// The JSON database is wrapped the way clang's own JSON plugin wraps it (response files expanded, target
// and driver mode inferred, commands of unlisted files interpolated and marked Heuristic), so the driver
// can tell a listed file from a guessed one. A compile_flags.txt gets its response files expanded too.
#include "compile_database.h"

#include "clang/Tooling/JSONCompilationDatabase.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/VirtualFileSystem.h"

namespace lmfuse::tool {

namespace {

llvm::Error failure(const llvm::Twine &Message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s", Message.str().c_str());
}

// The database in Dir; a null Database when Dir holds none.
llvm::Expected<LoadedDatabase> loadIn(llvm::StringRef Dir) {
  using namespace clang::tooling;
  LoadedDatabase Loaded;
  llvm::SmallString<256> Json(Dir);
  llvm::sys::path::append(Json, "compile_commands.json");
  llvm::SmallString<256> Flags(Dir);
  llvm::sys::path::append(Flags, "compile_flags.txt");
  std::string Error;
  if (llvm::sys::fs::exists(Json)) {
    Loaded.Path = std::string(Json);
    if (!llvm::sys::fs::is_regular_file(Json))
      return failure("the compilation database " + Json + " is not a regular file");
    // Clang's reader recovers from some syntax errors (a file cut short, as a configure killed half-way leaves
    // it) and goes on with the commands it could read: the file must be JSON as written.
    auto Text = llvm::MemoryBuffer::getFile(Json);
    if (!Text)
      return failure("the compilation database " + Json + " cannot be read: " + Text.getError().message());
    if (llvm::Expected<llvm::json::Value> Parsed = llvm::json::parse((*Text)->getBuffer()); !Parsed)
      return failure("the compilation database " + Json + " is malformed: " + llvm::toString(Parsed.takeError()));
    std::unique_ptr<CompilationDatabase> Database =
        JSONCompilationDatabase::loadFromFile(Json, Error, JSONCommandLineSyntax::AutoDetect);
    if (!Database)
      return failure("the compilation database " + Json + " is malformed: " + Error);
    Loaded.Database = inferTargetAndDriverMode(
        inferMissingCompileCommands(expandResponseFiles(std::move(Database), llvm::vfs::getRealFileSystem())));
    return Loaded;
  }
  if (llvm::sys::fs::exists(Flags)) {
    Loaded.Path = std::string(Flags);
    std::unique_ptr<CompilationDatabase> Database = FixedCompilationDatabase::loadFromFile(Flags, Error);
    if (!Database)
      return failure("the compile flags file " + Flags + " cannot be read: " + Error);
    // A response file among the flags is expanded as in a JSON database (relative to the file's folder).
    Loaded.Database = expandResponseFiles(std::move(Database), llvm::vfs::getRealFileSystem());
    return Loaded;
  }
  return Loaded;
}

}  // namespace

llvm::Expected<LoadedDatabase> loadDatabaseIn(llvm::StringRef BuildDir) {
  if (!llvm::sys::fs::is_directory(BuildDir))
    return failure("-p " + BuildDir + " is not a folder");
  llvm::Expected<LoadedDatabase> Loaded = loadIn(BuildDir);
  if (Loaded && !Loaded->Database)
    Loaded->NotFound = "no compile_commands.json in " + BuildDir.str() +
                       " (-p names the folder that holds it; its parent folders are not searched)";
  return Loaded;
}

llvm::Expected<LoadedDatabase> findDatabaseAbove(llvm::StringRef SourceFile) {
  llvm::SmallString<256> Absolute(SourceFile);
  llvm::sys::fs::make_absolute(Absolute);
  for (llvm::StringRef Dir = llvm::sys::path::parent_path(Absolute); !Dir.empty();
       Dir = llvm::sys::path::parent_path(Dir)) {
    llvm::Expected<LoadedDatabase> Loaded = loadIn(Dir);
    if (!Loaded || Loaded->Database)
      return Loaded;
  }
  LoadedDatabase None;
  None.NotFound = "no compile_commands.json in the folders above " + SourceFile.str();
  return None;
}

}  // namespace lmfuse::tool

// Where each file's compile flags come from when they are not given after `--`: a compile_commands.json
// (or compile_flags.txt) in the folder named by -p and nowhere else, or, without -p, the nearest one above
// the first source file. The database used is always named to the user (a parent folder's is never taken
// silently), and a database that exists but cannot be read or parsed is an error naming the file rather
// than "not found".
#pragma once

#include <memory>
#include <string>

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/Support/Error.h"

namespace lmfuse::tool {

/// Database null: none was found, and NotFound says where it was looked for. An error: one was found but
/// cannot be used (the message names it).
struct LoadedDatabase {
  std::unique_ptr<clang::tooling::CompilationDatabase> Database;
  std::string Path;  ///< the file it was read from
  std::string NotFound;
};

/// The database in BuildDir itself (compile_commands.json, else compile_flags.txt).
llvm::Expected<LoadedDatabase> loadDatabaseIn(llvm::StringRef BuildDir);
/// The database in the nearest folder above SourceFile that holds one.
llvm::Expected<LoadedDatabase> findDatabaseAbove(llvm::StringRef SourceFile);

}  // namespace lmfuse::tool

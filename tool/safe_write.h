// Every file lmfuse writes (in-place sources, --out-dir copies, the audit, the fixes YAML, cache entries)
// goes through here, so each one is either complete or not written at all:
//   - the contents go to a temporary file in the target's folder (`<name>.lmfuse-tmp-XXXXXX`); every
//     write(2), the fsync(2) and the close(2) are checked, and only then is it renamed over the target (in
//     place, swapped with it, so a save that lands meanwhile is never lost);
//   - the temporary is removed on every failure (a full disk included) and, through LLVM's signal
//     handlers, on SIGINT/SIGTERM/SIGHUP while it exists; one a run killed outright left (SIGKILL, a power
//     cut) is removed by the next write of that target: a writer holds a lock (flock) on its temporary
//     until the rename, so a temporary nobody holds is abandoned;
//   - an existing target keeps its mode, owner and group (fchmod/fchown on the temporary before the
//     rename; an owner or group the process may not set is left as the process makes it) and its extended
//     attributes (user attributes, POSIX ACLs, security labels; one that cannot be kept stops the write);
//   - a target that is not a regular file, is read-only (no owner write bit, or not writable by this
//     process), is immutable or append-only (chattr +i/+a), or has several hard links is refused before
//     anything is written: replacing it would either defeat its protection or give it a new inode that the
//     other links do not share.
// llvm::writeToOutput is not used: on a full disk its stream reports a fatal "LLVM ERROR" instead of an
// error the caller can turn into a `write-failed` entry.
#pragma once

#include <optional>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace lmfuse::tool {

/// Why Path must not be replaced ("" when it may be, or does not exist yet): one sentence naming Path.
std::string refusalToReplace(llvm::StringRef Path);

/// Writes Contents to Path as described above; the error names Path and says it was left as it was. With
/// Replacing, Path must still hold exactly that when the temporary is complete: it is read again, then the
/// temporary and Path swap names (renameat2 RENAME_EXCHANGE) and what Path held, now under the temporary's
/// name, is read once more; a save made at any point while lmfuse ran goes back to its name and the write
/// fails as changed on disk. A file system without the exchange gets the plain rename after the first check.
llvm::Error writeFileAtomically(llvm::StringRef Path, llvm::StringRef Contents,
                                std::optional<llvm::StringRef> Replacing = std::nullopt);

}  // namespace lmfuse::tool

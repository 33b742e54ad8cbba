// Temporary file + checked writes + fsync + rename, with the temporary registered for removal on signals.
// POSIX calls are used directly because every one of them must be checked (see safe_write.h).
#include "safe_write.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>  // renameat2
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Signals.h"

namespace lmfuse::tool {

namespace {

std::string modeText(mode_t Mode) {
  char Text[8];
  std::snprintf(Text, sizeof Text, "%04o", unsigned(Mode & 07777));
  return Text;
}

// Immutable or append-only files cannot be replaced by a rename (EPERM); say so before writing anything.
bool isImmutable(const std::string &Path) {
  int FD = ::open(Path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (FD < 0)
    return false;
  int Flags = 0;
  bool Immutable = ::ioctl(FD, FS_IOC_GETFLAGS, &Flags) == 0 && (Flags & (FS_IMMUTABLE_FL | FS_APPEND_FL));
  ::close(FD);
  return Immutable;
}

// SIGINT/SIGTERM between creating the temporary and registering it would leave it behind: both steps run
// with those signals blocked.
class SignalsBlocked {
public:
  SignalsBlocked() {
    sigset_t Blocked;
    sigemptyset(&Blocked);
    for (int Signal : {SIGINT, SIGTERM, SIGHUP})
      sigaddset(&Blocked, Signal);
    pthread_sigmask(SIG_BLOCK, &Blocked, &Previous);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &Previous, nullptr); }

private:
  sigset_t Previous;
};

// Tests only: hold the complete temporary this long before the rename, so a signal can be sent while it
// exists. Unset in normal use.
void holdTemporaryForTesting() {
  if (const char *Milliseconds = std::getenv("LMFUSE_TEST_HOLD_TEMPORARY_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(Milliseconds)));
}

constexpr llvm::StringLiteral kTemporaryMark = ".lmfuse-tmp-";

// Removes the temporaries beside Path that a run killed while writing it left (SIGKILL, a power cut: no
// handler runs). A writer holds a lock on its temporary from its creation to its rename, so one that
// nobody holds is abandoned; a writer that finds its new temporary removed before it got the lock makes
// another.
void removeAbandonedTemporaries(llvm::StringRef Path) {
  llvm::SmallString<256> Folder(llvm::sys::path::parent_path(Path));
  if (Folder.empty())
    Folder = ".";
  std::string Prefix = (llvm::sys::path::filename(Path) + kTemporaryMark).str();
  std::error_code EC;
  for (llvm::sys::fs::directory_iterator It(Folder, EC), End; It != End && !EC; It.increment(EC)) {
    const std::string &Candidate = It->path();
    if (!llvm::sys::path::filename(Candidate).starts_with(Prefix))
      continue;
    int FD = ::open(Candidate.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (FD < 0)
      continue;
    struct stat Held, Named;
    if (::flock(FD, LOCK_EX | LOCK_NB) == 0 && ::fstat(FD, &Held) == 0 && S_ISREG(Held.st_mode) &&
        ::lstat(Candidate.c_str(), &Named) == 0 && Held.st_ino == Named.st_ino && Held.st_dev == Named.st_dev)
      ::unlink(Candidate.c_str());
    ::close(FD);
  }
}

// Gives the file open as FD the extended attributes of the file at Path (user attributes, POSIX ACLs,
// security labels), which a rename over it would otherwise drop. "" on success, else what could not be kept.
std::string copyExtendedAttributes(const char *Path, int FD) {
  ssize_t Size = ::listxattr(Path, nullptr, 0);
  if (Size < 0)
    return errno == ENOTSUP ? "" : "cannot list the original's extended attributes: " + std::string(std::strerror(errno));
  std::string Names(size_t(Size), '\0');
  Size = ::listxattr(Path, Names.data(), Names.size());
  if (Size < 0)
    return "cannot list the original's extended attributes: " + std::string(std::strerror(errno));
  Names.resize(size_t(Size));
  for (size_t Start = 0; Start < Names.size();) {
    const char *Name = Names.c_str() + Start;
    Start += std::strlen(Name) + 1;
    ssize_t Length = ::getxattr(Path, Name, nullptr, 0);
    std::string Value(Length > 0 ? size_t(Length) : 0, '\0');
    if (Length < 0 || (Length > 0 && (Length = ::getxattr(Path, Name, Value.data(), Value.size())) < 0) ||
        ::fsetxattr(FD, Name, Value.data(), size_t(Length), 0) != 0)
      return "cannot keep the original's extended attribute " + std::string(Name) + ": " + std::strerror(errno);
  }
  return "";
}

}  // namespace

std::string refusalToReplace(llvm::StringRef PathRef) {
  std::string Path = PathRef.str();
  struct stat Status;
  if (::stat(Path.c_str(), &Status) != 0)
    return "";  // does not exist yet (other errors surface when the temporary is created)
  if (!S_ISREG(Status.st_mode))
    return Path + " is not a regular file";
  // Before the access() check, which an immutable file also fails.
  if (isImmutable(Path))
    return Path + " is immutable or append-only (chattr +i/+a)";
  if (!(Status.st_mode & S_IWUSR) || ::access(Path.c_str(), W_OK) != 0)
    return Path + " is read-only (mode " + modeText(Status.st_mode) + ")";
  if (Status.st_nlink > 1)
    return Path + " has " + std::to_string(Status.st_nlink) +
           " hard links; replacing it would break them (the others would keep the old contents)";
  return "";
}

llvm::Error writeFileAtomically(llvm::StringRef PathRef, llvm::StringRef Contents,
                                std::optional<llvm::StringRef> Replacing) {
  // A symlink is followed: the file it names is replaced, the link stays.
  llvm::SmallString<256> Path(PathRef);
  if (llvm::sys::fs::is_symlink_file(Path))
    if (llvm::SmallString<256> Real; !llvm::sys::fs::real_path(PathRef, Real))
      Path = Real;
  auto Failure = [&](const llvm::Twine &Why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "cannot write %s: %s; it was left as it was",
                                   Path.c_str(), Why.str().c_str());
  };
  if (std::string Refusal = refusalToReplace(Path); !Refusal.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "not written: %s", Refusal.c_str());
  struct stat Original;
  bool Exists = ::stat(Path.c_str(), &Original) == 0;

  removeAbandonedTemporaries(Path);
  llvm::SmallString<256> Model(Path);
  Model += kTemporaryMark;
  Model += "%%%%%%";
  llvm::SmallString<256> Temporary;
  int FD = -1, Lock = -1;  // Lock: a descriptor of its own, held until the rename (FD is closed before it)
  for (int Attempt = 0; Lock < 0; ++Attempt) {
    SignalsBlocked Blocked;
    if (std::error_code EC = llvm::sys::fs::createUniqueFile(Model, FD, Temporary, llvm::sys::fs::OF_None,
                                                             llvm::sys::fs::all_read | llvm::sys::fs::all_write))
      return Failure("cannot create a temporary file beside it: " + EC.message());
    // The lock is taken through a descriptor of its own; a step that fails says which, with its error.
    const char *FailedStep = nullptr;
    Lock = ::open(Temporary.c_str(), O_RDONLY | O_CLOEXEC);
    if (Lock < 0)
      FailedStep = "open";
    else if (::flock(Lock, LOCK_EX) != 0)
      FailedStep = "lock";
    const std::string Why = FailedStep ? std::strerror(errno) : "";
    struct stat Made;
    if (!FailedStep && ::fstat(Lock, &Made) == 0 && Made.st_nlink > 0) {
      llvm::sys::RemoveFileOnSignal(Temporary);
      break;
    }
    // Ours is removed whatever went wrong, unless another run already did (then the name may be another's).
    struct stat Ours, Named;
    if (::fstat(FD, &Ours) == 0 && Ours.st_nlink > 0 && ::lstat(Temporary.c_str(), &Named) == 0 &&
        Named.st_ino == Ours.st_ino && Named.st_dev == Ours.st_dev)
      ::unlink(Temporary.c_str());
    if (Lock >= 0)
      ::close(Lock);
    Lock = -1;
    ::close(FD);
    if (FailedStep)
      return Failure(llvm::Twine("cannot ") + FailedStep + " the temporary file it made beside it: " + Why);
    // Removed as abandoned by another run between its creation and the lock: another.
    if (Attempt == 8)
      return Failure("cannot hold a temporary file beside it: another run keeps removing them");
  }
  auto Discard = [&](const llvm::Twine &Why) {
    if (FD >= 0)
      ::close(FD);
    ::unlink(Temporary.c_str());
    ::close(Lock);
    llvm::sys::DontRemoveFileOnSignal(Temporary);
    return Failure(Why);
  };
  auto Errno = [] { return std::string(std::strerror(errno)); };

  if (Exists) {
    // Owner and group first: chown may clear set-id bits that the chmod then restores.
    if (::fchown(FD, Original.st_uid, Original.st_gid) != 0)
      (void)!::fchown(FD, uid_t(-1), Original.st_gid);  // a group the user belongs to still can be kept
    if (::fchmod(FD, Original.st_mode & 07777) != 0)
      return Discard("cannot give the temporary file the original's mode: " + Errno());
    if (std::string Lost = copyExtendedAttributes(Path.c_str(), FD); !Lost.empty())
      return Discard(Lost);
  }
  for (const char *Data = Contents.data(), *End = Data + Contents.size(); Data < End;) {
    ssize_t Written = ::write(FD, Data, size_t(End - Data));
    if (Written < 0 && errno == EINTR)
      continue;
    if (Written <= 0)
      return Discard(Written < 0 ? Errno() : std::string("write returned 0"));
    Data += Written;
  }
  if (::fsync(FD) != 0)
    return Discard(Errno());
  int Closing = FD;
  FD = -1;
  if (::close(Closing) != 0)
    return Discard(Errno());
  const char *ChangedMeanwhile = "it changed on disk while lmfuse ran (its rewrite was made from the contents it "
                                 "held before); run lmfuse again";
  auto Held = [](const llvm::Twine &File) -> std::optional<std::string> {
    auto Buffer = llvm::MemoryBuffer::getFile(File, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    return Buffer ? std::optional<std::string>((*Buffer)->getBuffer().str()) : std::nullopt;
  };
  if (Replacing && Held(Path) != Replacing->str())
    return Discard(ChangedMeanwhile);
  holdTemporaryForTesting();
  // In place, the file and the temporary swap names rather than the temporary being renamed over it: a save
  // that lands after the check above is then under the temporary's name, not lost, and is put back. Signals
  // wait meanwhile (their handler removes the temporary, which may hold that save).
  SignalsBlocked Blocked;
  int Swapped = Replacing ? ::renameat2(AT_FDCWD, Temporary.c_str(), AT_FDCWD, Path.c_str(), RENAME_EXCHANGE) : -1;
  if (Replacing && Swapped != 0 && errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    return Discard(errno == ENOENT ? std::string(ChangedMeanwhile) : Errno());  // ENOENT: it was removed
  if (Swapped == 0 && Held(Temporary) != Replacing->str()) {
    // The save goes back to its name; our rewrite, now beside it, is removed only if it is ours.
    if (::renameat2(AT_FDCWD, Temporary.c_str(), AT_FDCWD, Path.c_str(), RENAME_EXCHANGE) != 0 ||
        Held(Temporary) != Contents.str()) {
      ::close(Lock);
      llvm::sys::DontRemoveFileOnSignal(Temporary);
      return Failure("it was saved while lmfuse replaced it; what it held is kept in " + Temporary +
                     " (compare it with the file); run lmfuse again");
    }
    return Discard(ChangedMeanwhile);
  }
  if (Swapped == 0)
    ::unlink(Temporary.c_str());  // the contents the rewrite was made from
  else if (::rename(Temporary.c_str(), Path.c_str()) != 0)  // not in place, or no exchange on this file system
    return Discard(Errno());
  ::close(Lock);
  llvm::sys::DontRemoveFileOnSignal(Temporary);
  // The rename itself reaches the disk with the folder's entry.
  llvm::SmallString<256> Folder = llvm::sys::path::parent_path(Path);
  if (Folder.empty())
    Folder = ".";
  if (int Dir = ::open(Folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); Dir >= 0) {
    ::fsync(Dir);
    ::close(Dir);
  }
  return llvm::Error::success();
}

}  // namespace lmfuse::tool

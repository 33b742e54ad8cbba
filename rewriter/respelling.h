// The re-parse's check that code the rewrite spells again means what the program's code it copies means.
// The fused call at the loss repeats the head's input, weight and bias; the head repeats the labels test; the
// fused call reads shifted labels' code and asserts what the analysis read. The analysis refuses the ways of
// hiding a name it knows (refusals.h); this check decides by what the compiler resolves, whatever the way: in
// the re-parse of the rewritten unit, each copy and the code it copies must spell the same computation (node for
// node: the same declarations, operators' and literal operators' functions, literal values and types), so a
// name another declaration hides, a macro that expands otherwise, an operator another overload takes, and any
// way not listed yet, refuse the site instead of patching it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "clang/AST/ASTContext.h"
#include "clang/Tooling/Core/Replacement.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include "site.h"

namespace lmfuse::rewriter {

/// A respelling as offsets of the rewritten file: [CopyBegin, CopyEnd) and [OriginalBegin, OriginalEnd).
struct RespellingRange {
  unsigned CopyBegin = 0, CopyEnd = 0, OriginalBegin = 0, OriginalEnd = 0;
  size_t Site = 0;   ///< index of the site in the caller's list
  size_t Which = 0;  ///< index in the site's Respellings
  bool Placed = true;  ///< false: the rewritten text does not hold the copy or the code it copies where expected
};

/// Text the written file holds besides the original and the edits: `#line` directives, as (offset in the
/// written text, length), in order (edit_set.h: rewrittenWithLineDirectives).
using Insertions = std::vector<std::pair<unsigned, unsigned>>;

/// Where Place lies in the written file: Original the file's contents, Edits its edits as applied (fitted to
/// its line breaks: Crlf when they are "\r\n"), Inserted the rest. Nullopt when the written text does not hold
/// it (an original place inside an edit that does not repeat the original's text).
std::optional<std::pair<unsigned, unsigned>> placeInWritten(const TextPlace &Place, llvm::StringRef Original,
                                                            const clang::tooling::Replacements &Edits, bool Crlf,
                                                            const Insertions &Inserted);

/// The respellings of the patched sites of Sites that lie in File (Sites' File compared as given), as ranges of
/// its written text.
std::vector<RespellingRange> respellingRanges(const std::vector<SiteRecord> &Sites, llvm::StringRef File,
                                              llvm::StringRef Original, const clang::tooling::Replacements &Edits,
                                              const Insertions &Inserted);

/// The ranges (keyed by the canonical path of the file they lie in) whose copy and original do not parse in
/// Context to the same computation, or either of which is not one expression of the parse: for each, by its
/// index in the file's list, what differs, as a sentence. Directory resolves the parse's relative file names.
std::map<std::pair<std::string, size_t>, std::string>
changedRespellings(clang::ASTContext &Context, llvm::StringRef Directory,
                   const std::map<std::string, std::vector<RespellingRange>> &ByFile);

/// Refuses each patched site of Sites that has a range in Changed (as changedRespellings returns it for Path,
/// whose ranges are Ranges): unmatched, with the respelling's reason and a detail naming the part, the line of
/// the copy's edit and the line of the code it copies (lines of Original, the file's contents). Whether any was.
bool refuseRespelled(std::vector<SiteRecord> &Sites, const std::vector<RespellingRange> &Ranges,
                     const std::map<std::pair<std::string, size_t>, std::string> &Changed, const std::string &Path,
                     llvm::StringRef Original);

}  // namespace lmfuse::rewriter

// Raw lexing of a file range (raw_tokens.h).
#include "raw_tokens.h"

#include "clang/Lex/Lexer.h"
#include "llvm/ADT/StringRef.h"

namespace lmfuse::rewriter {

void forEachRawToken(const clang::SourceManager &SM, const clang::LangOptions &Language, clang::FileID File,
                     unsigned Begin, unsigned End, llvm::function_ref<bool(const clang::Token &)> Visit,
                     Comments Mode) {
  bool Invalid = false;
  llvm::StringRef Buffer = SM.getBufferData(File, &Invalid);
  if (Invalid || Begin > Buffer.size())
    return;
  clang::Lexer Raw(SM.getLocForStartOfFile(File), Language, Buffer.begin(), Buffer.begin() + Begin, Buffer.end());
  Raw.SetCommentRetentionState(Mode == Comments::Keep);
  for (clang::Token Token;;) {
    const bool Last = Raw.LexFromRawLexer(Token);  // true once the buffer is read to its end
    if (Token.is(clang::tok::eof) || SM.getFileOffset(Token.getLocation()) >= End || !Visit(Token) || Last)
      return;
  }
}

void forEachRawTokenOf(llvm::StringRef Text, const clang::LangOptions &Language,
                       llvm::function_ref<bool(const clang::Token &)> Visit) {
  const std::string Buffer = Text.str();  // the lexer reads up to a terminating NUL
  clang::Lexer Raw(clang::SourceLocation(), Language, Buffer.c_str(), Buffer.c_str(), Buffer.c_str() + Buffer.size());
  for (clang::Token Token;;) {
    const bool Last = Raw.LexFromRawLexer(Token);
    if (Token.is(clang::tok::eof) || !Visit(Token) || Last)
      return;
  }
}

}  // namespace lmfuse::rewriter

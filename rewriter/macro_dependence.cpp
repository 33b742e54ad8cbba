// Which macros the project's files name, and how the unit ended up defining them (macro_dependence.h).
#include "macro_dependence.h"

#include "audit.h"
#include "edit_set.h"
#include "raw_tokens.h"

#include "clang/Basic/SourceManager.h"
#include "clang/Lex/MacroInfo.h"
#include "llvm/Support/Path.h"

namespace lmfuse::rewriter {

bool MacroNameRecorder::inProject(clang::SourceLocation Loc) {
  const clang::SourceManager &Sources = PP.getSourceManager();
  clang::FileID File = Sources.getFileID(Sources.getExpansionLoc(Loc));
  auto [It, Inserted] = ProjectFiles.try_emplace(File.getHashValue(), false);
  if (Inserted) {
    clang::OptionalFileEntryRef Entry = Sources.getFileEntryRefForID(File);
    if (!Entry)
      It->second = false;  // the predefines buffer (<built-in>, <command line>): not the project's code
    else if (ProjectRoot.empty())
      It->second = !Sources.isInSystemHeader(Sources.getLocForStartOfFile(File));
    else
      It->second = isUnder(canonicalPath(Entry->getName(), Directory), ProjectRoot);
  }
  return It->second;
}

void MacroNameRecorder::name(const clang::Token &Name, clang::SourceLocation Where) {
  if (const clang::IdentifierInfo *Identifier = Name.getIdentifierInfo(); Identifier && inProject(Where)) {
    Names.insert(Identifier->getName().str());
    std::vector<clang::SourceLocation> &At = Uses[Identifier->getName().str()];
    if (At.size() < 64)
      At.push_back(PP.getSourceManager().getExpansionLoc(Where));
  }
}

void MacroNameRecorder::MacroExpands(const clang::Token &Name, const clang::MacroDefinition &, clang::SourceRange,
                                     const clang::MacroArgs *) {
  // Expansions inside expansions too: their expansion location is the use in the project's file.
  name(Name, Name.getLocation());
}
void MacroNameRecorder::tested(const clang::Token &Name) {
  const clang::IdentifierInfo *Identifier = Name.getIdentifierInfo();
  if (!Identifier || !inProject(Name.getLocation()))
    return;
  const clang::MacroInfo *Info = PP.getMacroInfo(Identifier);
  if (Info && Info->isBuiltinMacro())
    featureTest(Name.getLocation(), "defined(" + Identifier->getName().str() + ")", "1");
}

void MacroNameRecorder::Defined(const clang::Token &Name, const clang::MacroDefinition &, clang::SourceRange) {
  name(Name, Name.getLocation());
  tested(Name);
}
void MacroNameRecorder::Ifdef(clang::SourceLocation, const clang::Token &Name, const clang::MacroDefinition &) {
  name(Name, Name.getLocation());
  tested(Name);
}
void MacroNameRecorder::Ifndef(clang::SourceLocation, const clang::Token &Name, const clang::MacroDefinition &) {
  name(Name, Name.getLocation());
  tested(Name);
}
// #elifdef and #elifndef are C++23's (and C23's): Clang takes them in every mode, a compiler before may take
// them for unknown directives and skip them. Recorded whether the group is evaluated or skipped.
void MacroNameRecorder::Elifdef(clang::SourceLocation Loc, const clang::Token &Name, const clang::MacroDefinition &) {
  name(Name, Name.getLocation());
  tested(Name);
  featureTest(Loc, "#elifdef", "1");
}
void MacroNameRecorder::Elifndef(clang::SourceLocation Loc, const clang::Token &Name, const clang::MacroDefinition &) {
  name(Name, Name.getLocation());
  tested(Name);
  featureTest(Loc, "#elifndef", "1");
}
void MacroNameRecorder::Elifdef(clang::SourceLocation Loc, clang::SourceRange, clang::SourceLocation) {
  featureTest(Loc, "#elifdef", "1");
}
void MacroNameRecorder::Elifndef(clang::SourceLocation Loc, clang::SourceRange, clang::SourceLocation) {
  featureTest(Loc, "#elifndef", "1");
}
void MacroNameRecorder::If(clang::SourceLocation Loc, clang::SourceRange, ConditionValueKind) {
  conditionNames(Loc);
}
void MacroNameRecorder::Elif(clang::SourceLocation Loc, clang::SourceRange, ConditionValueKind,
                             clang::SourceLocation) {
  conditionNames(Loc);
}

namespace {

// <Path> relative to <Root>, which holds it (inProject said so).
std::string relativeTo(llvm::StringRef Path, llvm::StringRef Root) {
  llvm::StringRef Rest = Path;
  if (Rest.consume_front(Root))
    Rest.consume_front("/");
  return Rest.str();
}

}  // namespace

void MacroNameRecorder::HasInclude(clang::SourceLocation Loc, llvm::StringRef FileName, bool IsAngled,
                                   clang::OptionalFileEntryRef File, clang::SrcMgr::CharacteristicKind) {
  if (!inProject(Loc))
    return;
  const clang::SourceManager &Sources = PP.getSourceManager();
  clang::SourceLocation Where = Sources.getExpansionLoc(Loc);
  clang::OptionalFileEntryRef Tester = Sources.getFileEntryRefForID(Sources.getFileID(Where));
  if (!Tester)
    return;
  llvm::StringRef Written(Sources.getCharacterData(Where));
  MacroDependence Test;
  Test.Name = (Written.starts_with("__has_include_next") ? "__has_include_next(" : "__has_include(") +
              (IsAngled ? "<" + FileName.str() + ">" : "\"" + FileName.str() + "\"") + ")";
  Test.Origin = MacroOrigin::IncludeTest;
  Test.Definition = File ? "1" : "0";
  std::string Path = canonicalPath(Tester->getName(), Directory);
  Test.Header = ProjectRoot.empty() ? Path : relativeTo(Path, ProjectRoot);
  IncludeTests.insert(std::move(Test));
}

void MacroNameRecorder::featureTest(clang::SourceLocation Where, std::string Test, std::string Value) {
  if (!inProject(Where))
    return;
  const clang::SourceManager &Sources = PP.getSourceManager();
  clang::OptionalFileEntryRef Tester = Sources.getFileEntryRefForID(Sources.getFileID(Sources.getExpansionLoc(Where)));
  if (!Tester)
    return;
  MacroDependence Feature;
  Feature.Name = std::move(Test);
  Feature.Origin = MacroOrigin::FeatureTest;
  Feature.Definition = std::move(Value);
  std::string Path = canonicalPath(Tester->getName(), Directory);
  Feature.Header = ProjectRoot.empty() ? Path : relativeTo(Path, ProjectRoot);
  FeatureTests.insert(std::move(Feature));
}

// An identifier of an #if that is no macro counts as 0 and fires no callback: the condition's own text
// is lexed for them. Every identifier is taken (a macro among them is recorded twice, harmlessly).
void MacroNameRecorder::conditionNames(clang::SourceLocation Directive) {
  const clang::SourceManager &Sources = PP.getSourceManager();
  // Read from the directive's name (`if`, `elif`), which is skipped: the condition's own range starts where its
  // first token's expansion does, which for a built-in's call (`#if __has_builtin(x)`) is in no file.
  if (Directive.isInvalid() || !Directive.isFileID() || !inProject(Directive))
    return;
  auto [File, Offset] = Sources.getDecomposedLoc(Directive);
  // Inside __has_include(...): a header name, not macros (HasInclude records the test). Inside another built-in
  // function-like macro's parentheses (__has_builtin(...)): the test's operand, recorded with it as a feature test.
  int SkippedDepth = 0;
  bool SkipNext = false;
  bool First = true;
  std::optional<unsigned> FeatureBegin;  // offset of the built-in's name whose call is being read
  clang::SourceLocation FeatureAt;
  llvm::StringRef Buffer = Sources.getBufferData(File);
  forEachRawToken(Sources, PP.getLangOpts(), File, Offset, ~0u, [&](const clang::Token &Token) {
    if (!First && Token.isAtStartOfLine())
      return false;  // the directive ends at the first unescaped newline
    if (First) {
      First = false;
      return true;  // the directive's name
    }
    if (SkipNext) {
      SkipNext = false;
      if (Token.is(clang::tok::l_paren)) {
        SkippedDepth = 1;
        return true;
      }
      FeatureBegin.reset();  // a built-in's name without a call (`defined(__has_warning)`, `__LINE__`): no operand
    }
    if (SkippedDepth > 0) {
      SkippedDepth += Token.is(clang::tok::l_paren) ? 1 : Token.is(clang::tok::r_paren) ? -1 : 0;
      if (SkippedDepth == 0 && FeatureBegin) {
        unsigned End = Sources.getFileOffset(Token.getLocation()) + Token.getLength();
        std::string Test;
        for (char C : Buffer.slice(*FeatureBegin, End)) {  // one line, as the probe writes it
          if (C == '\\' || C == '\n' || C == '\r')
            C = ' ';
          Test += C;
        }
        featureTest(FeatureAt, std::move(Test), "");
        FeatureBegin.reset();
      }
      return true;
    }
    if (Token.is(clang::tok::raw_identifier)) {
      llvm::StringRef Identifier = Token.getRawIdentifier();
      const clang::MacroInfo *Info = PP.getMacroInfo(PP.getIdentifierInfo(Identifier));
      if (Identifier == "__has_include" || Identifier == "__has_include_next") {
        SkipNext = true;  // its '(' opens the skipped span
      } else if (Identifier != "defined" && Info && Info->isBuiltinMacro()) {
        SkipNext = true;  // __FILE__ and the like take no parentheses: reset at the next token
        FeatureBegin = Sources.getFileOffset(Token.getLocation());
        FeatureAt = Token.getLocation();
      } else if (Identifier != "defined") {
        Names.insert(Identifier.str());
        std::vector<clang::SourceLocation> &At = Uses[Identifier.str()];
        if (At.size() < 64)
          At.push_back(Token.getLocation());
      }
    }
    return true;
  });
}

namespace {

// `NAME body` or `NAME(params) body`, spaced as the tokens were written (`-dM` prints the same tokens).
std::string definitionText(llvm::StringRef Name, const clang::MacroInfo &Info, const clang::Preprocessor &PP) {
  std::string Text = Name.str();
  if (Info.isFunctionLike()) {
    Text += '(';
    llvm::ArrayRef<const clang::IdentifierInfo *> Params = Info.params();
    for (size_t I = 0; I < Params.size(); ++I) {
      if (I)
        Text += ',';
      if (Params[I]->getName() == "__VA_ARGS__")
        Text += "...";
      else
        Text += Params[I]->getName();
    }
    if (Info.isGNUVarargs())
      Text += "...";
    Text += ')';
  }
  for (const clang::Token &Token : Info.tokens()) {
    Text += ' ';
    Text += PP.getSpelling(Token);
  }
  return Text;
}

}  // namespace

std::vector<MacroDependence> MacroNameRecorder::dependences() const {
  const clang::SourceManager &Sources = PP.getSourceManager();
  std::vector<MacroDependence> Result;
  for (const std::string &Name : Names) {
    MacroDependence Macro;
    Macro.Name = Name;
    clang::IdentifierInfo *Identifier = PP.getIdentifierInfo(Name);
    const clang::MacroInfo *Info = PP.getMacroInfo(Identifier);
    if (Info && Info->isBuiltinMacro())
      continue;  // __FILE__, __LINE__, __has_include: the preprocessor's own, in every compiler
    // The oldest directive: a definition in the predefines buffer is what the unit started with.
    std::optional<std::string> Predefined;
    const clang::MacroDirective *Oldest = PP.getLocalMacroDirectiveHistory(Identifier);
    while (Oldest && Oldest->getPrevious())
      Oldest = Oldest->getPrevious();
    if (const auto *First = llvm::dyn_cast_or_null<clang::DefMacroDirective>(Oldest))
      if (Sources.getFileID(First->getInfo()->getDefinitionLoc()) == PP.getPredefinesFileID())
        Predefined = definitionText(Name, *First->getInfo(), PP);
    if (Info) {
      clang::PresumedLoc Where = Sources.getPresumedLoc(Info->getDefinitionLoc());
      llvm::StringRef WhereName = Where.isValid() ? llvm::StringRef(Where.getFilename()) : "";
      clang::FileID File = Sources.getFileID(Sources.getExpansionLoc(Info->getDefinitionLoc()));
      clang::OptionalFileEntryRef Entry = Sources.getFileEntryRefForID(File);
      if (WhereName == "<command line>") {
        Macro.Origin = MacroOrigin::CommandLine;
      } else if (!Entry) {
        Macro.Origin = MacroOrigin::BuiltIn;
      } else {
        std::string Header = canonicalPath(Entry->getName(), Directory);
        if (ProjectRoot.empty() ? !Sources.isInSystemHeader(Info->getDefinitionLoc()) : isUnder(Header, ProjectRoot))
          continue;  // the project's own: its file is checked by digest
        Macro.Origin = MacroOrigin::Library;
        Macro.Header = Header;
        Macro.HeaderSha256 = contentDigest(Sources.getBufferData(File));
      }
      Macro.Definition = definitionText(Name, *Info, PP);
    }
    // Its definition where the project uses it, against the end's.
    // A directive after a use (a redefinition, even to the same text, or an #undef) means the end state does not
    // tell the use's: another compiler may have taken another branch of the header that defined it there.
    const clang::MacroDirective *Latest = PP.getLocalMacroDirectiveHistory(Identifier);
    if (auto At = Uses.find(Name); At != Uses.end() && Latest)
      for (clang::SourceLocation Use : At->second) {
        if (!Sources.isBeforeInTranslationUnit(Use, Latest->getLocation()))
          continue;
        const clang::MacroInfo *There = PP.getMacroDefinitionAtLoc(Identifier, Use).getMacroInfo();
        // Undefined at the use, with no directive of it before the use in this parse (a macro a header defines
        // first after the use, such as a library's own after a project's test of it): not recorded.
        bool DirectiveBefore = false;
        for (const clang::MacroDirective *Directive = Latest; Directive; Directive = Directive->getPrevious())
          DirectiveBefore = DirectiveBefore || Sources.isBeforeInTranslationUnit(Directive->getLocation(), Use);
        if (!There && !DirectiveBefore)
          continue;
        std::string Text = There ? definitionText(Name, *There, PP) : "";
        {
          clang::PresumedLoc Where = Sources.getPresumedLoc(Use);
          Macro.AtUse = std::make_pair(
              Where.isValid() ? (llvm::sys::path::filename(Where.getFilename()) + ":" + llvm::Twine(Where.getLine())).str()
                              : std::string("?"),
              Text);
          break;
        }
      }
    bool EndIsPredefined = Macro.Origin == MacroOrigin::CommandLine || Macro.Origin == MacroOrigin::BuiltIn;
    if (Predefined && !(EndIsPredefined && *Predefined == Macro.Definition))
      Macro.Predefined = std::move(Predefined);
    Result.push_back(std::move(Macro));
  }
  Result.insert(Result.end(), IncludeTests.begin(), IncludeTests.end());
  Result.insert(Result.end(), FeatureTests.begin(), FeatureTests.end());
  return Result;
}

llvm::StringRef originName(MacroOrigin Origin) {
  switch (Origin) {
  case MacroOrigin::Undefined: return "undefined";
  case MacroOrigin::CommandLine: return "command-line";
  case MacroOrigin::BuiltIn: return "built-in";
  case MacroOrigin::Library: return "library";
  case MacroOrigin::IncludeTest: return "include-test";
  case MacroOrigin::FeatureTest: return "feature-test";
  }
  return "undefined";
}

llvm::json::Object macroToJson(const MacroDependence &Macro) {
  llvm::json::Object Object{{"name", Macro.Name}, {"origin", originName(Macro.Origin)}};
  if (Macro.Origin != MacroOrigin::Undefined)
    Object["definition"] = Macro.Definition;
  if (Macro.Origin == MacroOrigin::Library) {
    Object["header"] = Macro.Header;
    Object["header_sha256"] = Macro.HeaderSha256;
  }
  if (Macro.Origin == MacroOrigin::IncludeTest || Macro.Origin == MacroOrigin::FeatureTest)
    Object["file"] = Macro.Header;
  if (Macro.Predefined)
    Object["predefined"] = *Macro.Predefined;
  if (Macro.AtUse)
    Object["at_use"] = llvm::json::Object{{"where", Macro.AtUse->first}, {"definition", Macro.AtUse->second}};
  return Object;
}

llvm::Expected<MacroDependence> macroFromJson(const llvm::json::Value &Value) {
  auto Malformed = [](llvm::StringRef Field) {
    return llvm::createStringError("malformed macro record: '%s'", Field.str().c_str());
  };
  const llvm::json::Object *Object = Value.getAsObject();
  if (!Object)
    return Malformed("<not an object>");
  MacroDependence Macro;
  auto Name = Object->getString("name");
  auto Origin = Object->getString("origin");
  if (!Name || Name->empty())
    return Malformed("name");
  Macro.Name = Name->str();
  std::optional<MacroOrigin> Parsed;
  for (MacroOrigin Candidate :
       {MacroOrigin::Undefined, MacroOrigin::CommandLine, MacroOrigin::BuiltIn, MacroOrigin::Library,
        MacroOrigin::IncludeTest, MacroOrigin::FeatureTest})
    if (Origin && *Origin == originName(Candidate))
      Parsed = Candidate;
  if (!Parsed)
    return Malformed("origin");
  Macro.Origin = *Parsed;
  if (Macro.Origin != MacroOrigin::Undefined) {
    auto Definition = Object->getString("definition");
    if (!Definition)
      return Malformed("definition");
    Macro.Definition = Definition->str();
  }
  if (Macro.Origin == MacroOrigin::Library) {
    auto Header = Object->getString("header");
    auto Digest = Object->getString("header_sha256");
    if (!Header || !Digest)
      return Malformed("header");
    Macro.Header = Header->str();
    Macro.HeaderSha256 = Digest->str();
  }
  if (Macro.Origin == MacroOrigin::IncludeTest || Macro.Origin == MacroOrigin::FeatureTest) {
    auto File = Object->getString("file");
    if (!File)
      return Malformed("file");
    Macro.Header = File->str();
  }
  if (const llvm::json::Object *AtUse = Object->getObject("at_use")) {
    auto Where = AtUse->getString("where");
    auto Definition = AtUse->getString("definition");
    if (!Where || !Definition)
      return Malformed("at_use");
    Macro.AtUse = std::make_pair(Where->str(), Definition->str());
  }
  if (const llvm::json::Value *Predefined = Object->get("predefined")) {
    if (!Predefined->getAsString())
      return Malformed("predefined");
    Macro.Predefined = Predefined->getAsString()->str();
  }
  return Macro;
}

}  // namespace lmfuse::rewriter

namespace lmfuse::rewriter {

void evaluateFeatureTests(std::vector<MacroDependence> &Macros,
                          const std::function<std::vector<std::string>(const std::vector<std::string> &)> &Evaluate) {
  std::vector<std::string> Tests;
  for (const MacroDependence &Macro : Macros)
    if (Macro.Origin == MacroOrigin::FeatureTest && Macro.Definition.empty())
      Tests.push_back(Macro.Name);
  if (Tests.empty())
    return;
  std::vector<std::string> Values = Evaluate(Tests);
  size_t Next = 0;
  for (MacroDependence &Macro : Macros)
    if (Macro.Origin == MacroOrigin::FeatureTest && Macro.Definition.empty()) {
      Macro.Definition = Next < Values.size() && !Values[Next].empty() ? Values[Next] : "?";
      ++Next;
    }
}

}  // namespace lmfuse::rewriter

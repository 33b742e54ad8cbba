// Builds the replacement text of a rewritable site. All positions are file locations: sites that
// touch a macro expansion were refused before planning.
#include "edit_plan.h"

#include "loss_option_table.h"
#include "raw_tokens.h"
#include "type_spelling.h"

#include <array>
#include <climits>
#include <cstdint>
#include <set>

#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

/// The keywords the planner writes around the program's text: the hoisted local's declaration (`auto`,
/// `static_cast<const T &>`), the stand-in lambdas (`const T &`, `return`) and the guard repeated at the head
/// (`static_cast<bool>`, labels_guard.cpp: asTest) and the types asserted (`decltype`). ownWords lists them.
constexpr const char *PlannerKeywords[] = {"auto", "static_cast", "const", "return", "bool", "decltype"};

/// Half-open file offsets of an expression's tokens.
std::pair<unsigned, unsigned> offsets(const Stmt *Node, const AstQuery &Query) {
  const SourceManager &SM = Query.sourceManager();
  CharSourceRange Range = Query.fileRange(Node->getSourceRange());
  return {SM.getFileOffset(Range.getBegin()), SM.getFileOffset(Range.getEnd())};
}

tooling::Replacement replace(const Stmt *Node, const std::string &Text, const AstQuery &Query) {
  return tooling::Replacement(Query.sourceManager(), CharSourceRange::getTokenRange(Node->getSourceRange()), Text,
                              Query.context().getLangOpts());
}

/// A place in the text of Edit: [At, At + Length), with the edit's own line breaks before it.
TextPlace inEdit(const tooling::Replacement &Edit, size_t At, size_t Length) {
  llvm::StringRef Text = Edit.getReplacementText();
  // EditSet::fitTo writes "\r\n" for each line break the planner wrote, not for those of the copied code (a
  // file whose lines end so already has the "\r" before each of them).
  unsigned Bare = 0;
  for (size_t I = 0; I < At; ++I)
    Bare += Text[I] == '\n' && (I == 0 || Text[I - 1] != '\r');
  return TextPlace{true, Edit.getOffset(), static_cast<unsigned>(At), static_cast<unsigned>(Length), Bare};
}

/// The place of E's tokens in the original file, when they are all written there.
std::optional<TextPlace> inFile(const Expr *E, const AstQuery &Query) {
  CharSourceRange Range = Query.fileRange(E->getSourceRange());
  if (Range.isInvalid())
    return std::nullopt;
  const SourceManager &SM = Query.sourceManager();
  unsigned Begin = SM.getFileOffset(Range.getBegin()), End = SM.getFileOffset(Range.getEnd());
  return TextPlace{false, 0, Begin, End - Begin, 0};
}

/// Records that Copy, written at CopyAt in Edit's text, spells again the program's Original (or, where Original
/// is null, the text at OriginalPlace).
void respell(std::vector<Respelling> *Out, const tooling::Replacement &Edit, size_t CopyAt, size_t CopyLength,
             std::optional<TextPlace> OriginalPlace, unsigned OriginalLine, std::string Part, ReasonKind Reason) {
  if (!Out || !OriginalPlace)
    return;
  Out->push_back({inEdit(Edit, CopyAt, CopyLength), *OriginalPlace, std::move(Part), Reason, OriginalLine});
}

/// The text of an edit, written left to right. Each piece of the program's code that it spells again is appended
/// with `copy`, which answers where the piece stands: what the re-parse compares (respelling.h) is then where the
/// text was put, whatever comes before it.
class EditText {
public:
  struct Span {
    size_t At = 0, Length = 0;
    size_t end() const { return At + Length; }
  };
  EditText &operator<<(llvm::StringRef Words) {
    Text += Words;
    return *this;
  }
  Span copy(llvm::StringRef Code) {
    Span Copied{Text.size(), Code.size()};
    Text += Code;
    return Copied;
  }
  size_t size() const { return Text.size(); }
  const std::string &str() const { return Text; }

private:
  std::string Text;
};

/// The structured bindings Value reads outside Base, by name, each once.
std::vector<std::string> bindingsRead(const Expr *Value, const Expr *Base, const AstQuery &Query) {
  class Reads : public RecursiveASTVisitor<Reads> {
  public:
    bool VisitDeclRefExpr(DeclRefExpr *Ref) {
      if (isa<BindingDecl>(Ref->getDecl()))
        Found.push_back(Ref);
      return true;
    }
    std::vector<const DeclRefExpr *> Found;
  } Visitor;
  Visitor.TraverseStmt(const_cast<Expr *>(Value));
  std::vector<std::string> Names;
  for (const DeclRefExpr *Ref : Visitor.Found) {
    std::string Name = Ref->getDecl()->getNameAsString();
    if (!Query.within(Ref, Base) && !llvm::is_contained(Names, Name))
      Names.push_back(Name);
  }
  return Names;
}

/// The original's code as the fused path runs it on a stand-in (shape, strides and dtype, no values): a
/// lambda whose body is Value's text with Base, the tensor it starts from, replaced by the parameter
/// (Arrow: Value reaches Base through `->`, which the stand-in, a tensor, takes as `.`). Captures by
/// reference where it sits in a function (the code may read its locals: `{-1, C}`).
std::string asCode(const Expr *Value, const Expr *Base, const CapturedSite &Site, const PatternSet &Patterns,
                   const AstQuery &Query, const std::string &StandIn, bool Arrow = false) {
  llvm::StringRef Buffer =
      Query.sourceManager().getBufferData(Query.sourceManager().getFileID(Site.Loss->getBeginLoc()));
  auto [ValueBegin, ValueEnd] = offsets(AstQuery::spelled(Value), Query);
  auto [BaseBegin, BaseEnd] = offsets(AstQuery::spelled(Base), Query);
  llvm::StringRef After = Buffer.slice(BaseEnd, ValueEnd);
  std::string Rest = After.str();
  if (Arrow) {
    size_t At = After.find("->");
    if (At != llvm::StringRef::npos)
      Rest = After.take_front(At).str() + "." + After.drop_front(At + 2).str();
  }
  std::string Body = Buffer.slice(ValueBegin, BaseBegin).str() + StandIn + Rest;
  std::string Captures = Site.Function ? "&" : "";
  // Before C++20 a lambda may not capture a structured binding, only a reference initialised from it.
  if (!Query.context().getLangOpts().CPlusPlus20)
    for (const std::string &Binding : bindingsRead(Value, Base, Query))
      Captures += ", &" + Binding + " = " + Binding;
  return "[" + Captures + "](const " + Patterns.Replacement.TensorType + " &" + StandIn + ") { return " + Body +
         "; }";
}

/// Whether Value is Base and nothing more (no reshape, cast or shift to run).
bool isBaseAlone(const Expr *Value, const Expr *Base, const AstQuery &Query) {
  return offsets(AstQuery::spelled(Value), Query) == offsets(AstQuery::spelled(Base), Query);
}

/// A quoted "file:line" naming where Node starts.
std::string siteName(const Stmt *Node, const AstQuery &Query) {
  const SourceManager &SM = Query.sourceManager();
  SourceLocation At = SM.getExpansionLoc(Node->getBeginLoc());
  std::string Name = llvm::sys::path::filename(SM.getFilename(At)).str() + ":" +
                     std::to_string(SM.getExpansionLineNumber(At));
  std::string Quoted;
  llvm::raw_string_ostream(Quoted).write_escaped(Name);
  return "\"" + Quoted + "\"";
}

/// Writes the condition under which a statement may skip the logits: the fused path is on and, unless the
/// statement only runs when labels are present, the labels are present. Answers where the guard's test, when it is
/// repeated, stands in Text.
std::optional<EditText::Span> writeSkipCondition(EditText &Text, const Stmt *Statement, const CapturedSite &Site,
                                                 const PatternSet &Patterns, const AstQuery &Query) {
  Text << Patterns.Replacement.SkipLogits;
  if (!runsWithoutLoss(Statement, Site.Guard, Query))
    return std::nullopt;
  Text << " && ";
  EditText::Span Test = Text.copy(Site.Guard.Positive);
  if (!Site.Guard.Repeated)
    return std::nullopt;
  return EditText::Span{Test.At + Site.Guard.RepeatedAt, Query.text(Site.Guard.Repeated).size()};
}

/// Whether the loss call can take a conditional expression without parentheses.
bool standsAlone(const CallExpr *Loss, const AstQuery &Query) {
  DynTypedNode Parent = Query.spelledParent(Loss);
  if (Parent.get<VarDecl>())
    return true;
  const Stmt *Statement = Parent.get<Stmt>();
  if (!Statement || isa<ReturnStmt>(Statement) || isa<ParenExpr>(Statement) || isa<CompoundStmt>(Statement))
    return true;
  if (const auto *Binary = dyn_cast<BinaryOperator>(Statement))
    return Binary->getOpcode() == BO_Assign && Query.within(Loss, Binary->getRHS());
  if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Statement))
    return Operator->getOperator() == OO_Equal && Operator->getNumArgs() == 2 &&
           Query.within(Loss, Operator->getArg(1));
  return false;
}

}  // namespace

// Casting the fused loss would round it to the logits' dtype first (bf16: half a unit in the last place,
// about 0.03 at a loss of 10); the options setter returns the loss in the wider dtype directly.
bool carriesUpcastInOptions(const CapturedSite &Site, const PatternSet &Patterns) {
  return !Patterns.Replacement.LossDtypeSetter.empty() && !Site.UpcastType.empty();
}

std::string lossOptionsText(const CapturedSite &Site, const PatternSet &Patterns) {
  const ReplacementPattern &Replacement = Patterns.Replacement;
  // A module loss passes the options its module holds when the loss runs; the site adds the rest.
  bool FromModule = !Site.ModuleOptions.empty();
  std::string Text = FromModule ? Site.ModuleOptions : Replacement.OptionsType + "()";
  for (const LossOptionField &Field : lossOptionFields())
    if (!(FromModule && Field.FromLossCall))
      Text += Field.Setter(Site.Options.Effective, Replacement);
  if (carriesUpcastInOptions(Site, Patterns))
    Text += "." + Replacement.LossDtypeSetter + "(" + Site.UpcastType + ")";
  return Text;
}

bool containsLambda(const Stmt *S) {
  if (!S)
    return false;
  if (isa<LambdaExpr>(S))
    return true;
  for (const Stmt *Child : S->children())
    if (containsLambda(Child))
      return true;
  return false;
}

namespace {

/// Whether E is written as a literal (`1`, `-100`, `'a'`, `true`): no compiler reads it otherwise.
bool isLiteral(const Expr *E) {
  E = AstQuery::spelled(E);
  if (const auto *Unary = dyn_cast<UnaryOperator>(E);
      Unary && (Unary->getOpcode() == UO_Minus || Unary->getOpcode() == UO_Plus))
    E = AstQuery::spelled(Unary->getSubExpr());
  return isa<IntegerLiteral, CharacterLiteral, CXXBoolLiteralExpr>(E);
}

/// Whether E is a name of the library's own that no argument of the program's chooses (`torch::kSum`,
/// `at::Reduction::Mean`): a variable or enumerator of the library's namespaces or enumerations, named without
/// template arguments, whose type and value are the library headers', which the build's compiler reads with the
/// same macros (macro_dependence.h) as the analysis. A member of a class (`std::integral_constant<int, k>::value`)
/// or a variable template's specialisation (`std::is_same_v<A, B>`) holds what the program's arguments make it.
bool namesLibraryDeclaration(const Expr *E, const AstQuery &Query) {
  const auto *Name = dyn_cast<DeclRefExpr>(AstQuery::spelled(E));
  if (!Name || Query.declaredByProgram(Name->getDecl()) || Name->hasExplicitTemplateArgs() ||
      isa<VarTemplateSpecializationDecl>(Name->getDecl()))
    return false;
  for (const DeclContext *Scope = Name->getDecl()->getDeclContext(); !Scope->isTranslationUnit();
       Scope = Scope->getParent())
    if (!Scope->isNamespace() && !isa<EnumDecl>(Scope))
      return false;
  return true;
}

/// An integer as C++ source of the same value, compared with the constant without a sign-compare warning: an
/// unsigned value beyond int as unsigned long long (`18446744073709551615ULL`, not -1); the most negative
/// int64 has no literal of its own.
std::string integerText(const llvm::APSInt &Value) {
  if (Value.isSigned() && Value.isMinSignedValue() && Value.getBitWidth() == 64)
    return "(-9223372036854775807LL - 1)";
  std::string Text = llvm::toString(Value, 10);
  if (Value.isUnsigned())
    return Value.getActiveBits() > 31 ? Text + "ULL" : Text;
  int64_t Signed = Value.getExtValue();
  return Signed > INT_MAX || Signed < INT_MIN ? Text + "LL" : Text;
}

/// The expression E is written as, as a whole: E, or where E is the inside of a macro's parentheses (`#define
/// DIM (k ? 0 : 1)`), the parentheses, whose text is the invocation (`DIM`); null where E is only part of an
/// expansion.
const Expr *writtenAs(const Expr *E, const AstQuery &Query) {
  const Stmt *Node = E;
  while (Query.text(Node).empty()) {
    Node = Query.parentStmt(Node);
    if (!Node || !isa<ParenExpr, ImplicitCastExpr>(Node))
      return nullptr;
  }
  return cast<Expr>(Node);
}

/// The type E names as written: a temporary's or a cast's written type (`Opts()`, `Opts{}`), else E's type.
QualType writtenType(const Expr *E) {
  if (const auto *Temporary = dyn_cast<CXXTemporaryObjectExpr>(E))
    return Temporary->getTypeSourceInfo()->getType();
  if (const auto *Cast = dyn_cast<ExplicitCastExpr>(E))
    return Cast->getTypeAsWritten();
  return E->getType();
}

/// Whether T names its class otherwise than by the class's name or a type alias of the library's: through a
/// type alias of the program's, an alias template (`std::conditional_t<kFlag, Mine, Options>`), a member of a
/// template's specialisation, a decltype or a deduced type, any of which another compiler may resolve otherwise.
bool namedThroughProgram(QualType T, const AstQuery &Query) {
  while (true) {
    if (const auto *Elaborated = dyn_cast<ElaboratedType>(T.getTypePtr())) {
      T = Elaborated->getNamedType();
    } else if (const auto *Alias = dyn_cast<TypedefType>(T.getTypePtr())) {
      if (Query.declaredByProgram(Alias->getDecl()))
        return true;
      T = Alias->desugar();
    } else {
      return !isa<RecordType>(T.getTypePtr());
    }
  }
}

}  // namespace

std::vector<AnalysedExpression> analysedExpressions(const CapturedSite &Site, const std::string &HiddenName,
                                                    const PatternSet &Patterns, const AstQuery &Query) {
  const HeadCall &Head = *Site.Head;
  std::vector<std::pair<std::string, const Expr *>> Read;
  // A module head: its module's class decides what its call computes (one class's `forward` for another's
  // is what a compiler reading the code otherwise would run); a function head: its weight and bias.
  if (Head.Kind == HeadKind::Module) {
    // The module as written (Head.Text): not the base class a holder's operator() is called on, nor what its
    // `->` returns.
    const Expr *Module = AstQuery::spelled(Head.Object);
    if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Module); Arrow && Arrow->getOperator() == OO_Arrow)
      Module = AstQuery::spelled(Arrow->getArg(0));
    Read.emplace_back(Head.Text, Module);
  }
  else
    for (size_t I = 0; I < Head.Copied.size(); ++I)
      Read.emplace_back(I == 0 ? Head.Weight : Head.Bias, Head.Copied[I]);
  // A hoisted input is read through its local, whatever its expression holds.
  const Expr *Hidden = AstQuery::spelled(Head.Hidden);
  Read.emplace_back(Site.HoistHidden ? HiddenName : Query.argumentText(Hidden), Hidden);
  if (Site.TargetBase)
    Read.emplace_back(Query.argumentText(Site.TargetBase), Site.TargetBase);
  // The rewritten call passes the option an argument's type named (`.reduction(torch::kSum)`), not the argument.
  for (const Expr *Option : Site.Options.DecidedByType)
    if (!namesLibraryDeclaration(Option, Query))
      Read.emplace_back(Query.argumentText(Option), Option);
  // The setters read are the library's where the object they are called on is of its class.
  for (const Expr *Object : Site.Options.Objects)
    if (namedThroughProgram(writtenType(Object), Query))
      Read.emplace_back(Query.text(Object), Object);
  std::vector<AnalysedExpression> Analysed;
  for (auto [Text, E] : Read) {
    E = AstQuery::spelled(E);  // as written: not converted to the parameter's type (`b` to an optional bias)
    bool Hoisted = E == Hidden && Site.HoistHidden;
    if (!E || (containsLambda(E) && !Hoisted))
      continue;  // before C++20 a lambda may not be an operand of decltype
    if (std::optional<std::string> Type = spelledDecayedType(E->getType(), Query.context(), Site.Function))
      Analysed.push_back({"decltype(" + Text + ")", *Type, Hoisted ? nullptr : E});
  }
  // A module head's class of the program's: where name lookup in it finds the members the fused call stands for
  // (`&::Head::forward` points to a member of `::torch::nn::LinearImpl`), which the class's bases decide.
  if (Head.LookedUpIn) {
    auto Spelled = [&](const CXXRecordDecl *Class) {
      return spelledDecayedType(Query.context().getRecordType(Class), Query.context(), Site.Function);
    };
    std::optional<std::string> Class = Spelled(Head.LookedUpIn), Library = Spelled(Head.Library);
    for (const std::string &Member : Head.Members)
      if (Class && Library)
        Analysed.push_back(
            {Patterns.Replacement.AnalysedMember + "<decltype(&" + *Class + "::" + Member + ")>", *Library, nullptr});
  }

  // The integer constants read where the copy's code is: a shift's dim, an option's value. Each is pasted at the
  // loss, where the code it was read from is in scope; one a compiler cannot evaluate there fails the re-parse.
  std::vector<const Stmt *> Parts = rewrittenParts(Site, /*WithOptionLocals=*/true);
  for (const VarDecl *Local : Site.LabelLocals)
    if (Local->getInit())
      Parts.push_back(Local->getInit());
  const std::string Holds = Patterns.Replacement.AnalysedValue;
  std::set<std::string> Asserted;  // one assertion per text and value (`kTime` at the logits and at the labels)
  for (const auto &[E, Value] : Query.integersRead()) {
    bool InSite = llvm::any_of(Parts, [&](const Stmt *Part) { return Query.within(E, Part); });
    if (!InSite || isLiteral(E) || namesLibraryDeclaration(E, Query) || containsLambda(E) ||
        !E->isCXX11ConstantExpr(Query.context()))
      continue;
    const Expr *Written = writtenAs(E, Query);
    if (!Written)
      continue;  // part of a macro expansion: the macro-dependence analysis compares macros between compilers
    std::string Found = Holds + "<((" + Query.text(Written) + ") == " + integerText(Value) + ")>";
    if (Asserted.insert(Found).second)
      Analysed.push_back({Found, Holds + "<true>", Written});
  }
  return Analysed;
}

std::set<std::string> ownWords(const PatternSet &Patterns, const LangOptions &Language,
                               const std::string &HiddenName, const StandInNames &StandIns,
                               const std::vector<AnalysedExpression> &Analysed) {
  const ReplacementPattern &Replacement = Patterns.Replacement;
  std::vector<std::string> Texts = {Replacement.Call,          Replacement.OptionsType,   Replacement.Enabled,
                                    Replacement.SkipLogits,    Replacement.UndefinedTensor, Replacement.SkippedLogits,
                                    Replacement.SkippedLogitsAfter, Replacement.LogitsAsPassedSetter,
                                    Replacement.ShiftDims,     Replacement.TensorType,    Replacement.ModuleOptions,
                                    Replacement.LossDtypeSetter, Patterns.Benign.CastMethod, HiddenName,
                                    StandIns.Logits,           StandIns.Labels, Replacement.AnalysedSetter,
                                    Replacement.AnalysedTypes, Replacement.AnalysedValue,
                                    Replacement.AnalysedMember};
  for (const AnalysedExpression &Item : Analysed)
    Texts.push_back(Item.Expected);
  Texts.insert(Texts.end(), std::begin(PlannerKeywords), std::end(PlannerKeywords));
  for (const ModuleHeadPattern &Rule : Patterns.ModuleHeads) {
    Texts.push_back(Rule.Weight);
    Texts.push_back(Rule.Bias);
  }
  for (const LossPattern &Rule : Patterns.Losses) {
    Texts.push_back(Rule.OptionsMember);
    Texts.push_back(Rule.WeightMember);
  }
  // Each setter as the table writes it for options that all differ from the default, once per reduction.
  for (const auto &[Reduction, Enumerator] : Replacement.Reductions) {
    PatchedOptions Every;
    Every.IgnoreIndexText = Every.LabelSmoothingText = "0";
    Every.Reduction = Reduction;
    Every.Shift = Every.Bias = true;
    for (const LossOptionField &Field : lossOptionFields())
      Texts.push_back(Field.Setter(Every, Replacement));
  }
  std::set<std::string> Words;
  for (const std::string &Text : Texts)
    forEachRawTokenOf(Text, Language, [&](const Token &Word) {
      if (Word.is(tok::raw_identifier))
        Words.insert(Word.getRawIdentifier().str());
      return true;
    });
  return Words;
}

std::vector<tooling::Replacement> planSiteEdits(const CapturedSite &Site, const PatternSet &Patterns,
                                                const AstQuery &Query, const std::string &HiddenName,
                                                const StandInNames &StandIns,
                                                const std::vector<AnalysedExpression> &Analysed,
                                                std::vector<Respelling> *Respellings) {
  const std::string &StandIn = StandIns.Logits;
  const ReplacementPattern &Replacement = Patterns.Replacement;
  const HeadCall &Head = *Site.Head;
  std::vector<tooling::Replacement> Edits;
  llvm::StringRef Buffer = Query.sourceManager().getBufferData(
      Query.sourceManager().getFileID(Site.Loss->getBeginLoc()));
  const Expr *Hidden = AstQuery::spelled(Head.Hidden);
  std::string HiddenText = Query.argumentText(Hidden);
  // The labels test repeated at the head spells the guard's code again there.
  auto RespellGuard = [&](const tooling::Replacement &Edit, std::optional<EditText::Span> Test) {
    if (Test)
      respell(Respellings, Edit, Test->At, Test->Length, inFile(Site.Guard.Repeated, Query),
              Query.line(Site.Guard.Repeated->getBeginLoc()),
              "the labels test `" + Query.text(Site.Guard.Repeated) + "`, repeated at the head",
              ReasonKind::LabelsMismatch);
  };
  // The head's parts (input, weight, bias) where the producer's edit spells them, when there is one.
  std::optional<size_t> ProducerEdit;
  std::array<EditText::Span, 3> HeadParts{};

  if (Site.Producer) {
    // The logits statement: skip the head where the fused path will compute the loss.
    const Expr *Value = AstQuery::spelled(Site.ProducerValue);
    std::string ValueText = Query.text(Value);
    if (Site.HoistHidden) {
      auto [ValueBegin, ValueEnd] = offsets(Value, Query);
      auto [HiddenBegin, HiddenEnd] = offsets(Hidden, Query);
      ValueText = Buffer.slice(ValueBegin, HiddenBegin).str() + HiddenName + Buffer.slice(HiddenEnd, ValueEnd).str();
      const Stmt *Statement = Query.enclosingStatement(Site.Producer);
      // The head binds its input to a const reference and never moves from it: an input written as an
      // xvalue (`std::move(h)`) is copied into the local, not moved, so `h` keeps its value as it did.
      std::string Initial = Hidden->isXValue()
                                ? "static_cast<const " + Replacement.TensorType + " &>(" + HiddenText + ")"
                                : HiddenText;
      Edits.emplace_back(Query.sourceManager(), Statement->getBeginLoc(), 0,
                         "auto " + HiddenName + " = " + Initial + ";\n" +
                             Query.indentation(Statement->getBeginLoc()));
      HiddenText = HiddenName;
    }
    // The skipped head still answers shape questions (`logits.size(-1)`), and names this site when
    // anything reads its values; a head line that reshapes its output skips with the reshaped shape. It is
    // given the head's bias too, so that F::linear's checks of it throw at the head, as the original does.
    EditText Producer;
    std::optional<EditText::Span> Test = writeSkipCondition(Producer, Site.Producer, Site, Patterns, Query);
    Producer << " ? ";
    bool Reshaped = !isBaseAlone(Value, Head.Call, Query);
    if (Reshaped)
      Producer << Replacement.SkippedLogitsAfter << "(";
    Producer << Replacement.SkippedLogits << "(";
    HeadParts[0] = Producer.copy(HiddenText);
    Producer << ", ";
    HeadParts[1] = Producer.copy(Head.Weight);
    Producer << ", ";
    if (!Head.Bias.empty()) {
      HeadParts[2] = Producer.copy(Head.Bias);
      Producer << ", ";
    }
    Producer << siteName(Head.Call, Query);
    if (Head.HiddenRank)
      Producer << ", " << std::to_string(Head.HiddenRank);
    Producer << ")";
    if (Reshaped)
      Producer << ", " << asCode(Value, Head.Call, Site, Patterns, Query, StandIn) << ")";
    Producer << " : " << ValueText;
    Edits.push_back(replace(Value, Producer.str(), Query));
    ProducerEdit = Edits.size() - 1;
    RespellGuard(Edits.back(), Test);
    // Rebindings and aliases run on the skipped logits: the same condition, and their reshape on a stand-in.
    for (const ChainStep &Step : Site.Chain) {
      const Expr *StepValue = AstQuery::spelled(Step.Value);
      if (isBaseAlone(StepValue, Step.Base, Query))
        continue;  // a plain alias (`auto &flat = logits;`) computes nothing
      EditText Rebound;
      std::optional<EditText::Span> StepTest = writeSkipCondition(Rebound, Step.Statement, Site, Patterns, Query);
      Rebound << " ? " << Replacement.SkippedLogitsAfter << "(" << Query.argumentText(Step.Base) << ", "
              << asCode(StepValue, Step.Base, Site, Patterns, Query, StandIn) << ") : " << Query.text(StepValue);
      Edits.push_back(replace(StepValue, Rebound.str(), Query));
      RespellGuard(Edits.back(), StepTest);
    }
  }

  // The loss's logits input as code, for the fused call to check when it runs: it starts from a
  // variable holding the logits, or from the head call inside the loss (the fused call then knows the
  // logits' shape from hidden and weight, and the head is not evaluated).
  std::string From =
      isBaseAlone(Site.InputBase, Head.Call, Query) ? "{}" : Query.argumentText(Site.InputBase);
  // A shifted site adds the dims its shift is written on: which dimension they are depends on ranks the
  // fused call sees and the rewrite does not.
  std::string ShiftDims = Site.Options.Effective.Shift ? Replacement.ShiftDims + "{" +
                                                             std::to_string(Site.LogitsShiftDim) + ", " +
                                                             std::to_string(Site.LabelsShiftDim) + "}"
                                                       : "{}";
  // The labels argument as code over the variable it starts from: the fused call runs it on a stand-in
  // and checks what the original's loss would check (class indices as Long, one per row of the logits it
  // received), and a view the original could not take of those labels fails there too.
  std::string Labels;
  if (Site.TargetBase) {
    std::string LabelsFrom = Query.argumentText(Site.TargetBase);
    if (Site.TargetBaseArrow)
      LabelsFrom = "*" + LabelsFrom;
    Labels = ", " + LabelsFrom + ", " +
             asCode(Site.Target, Site.TargetBase, Site, Patterns, Query, StandIns.Labels, Site.TargetBaseArrow);
  }
  std::string AsPassed = "." + Replacement.LogitsAsPassedSetter + "({" + siteName(Site.Loss, Query) + ", " + From +
                         ", " + asCode(Site.Input, Site.InputBase, Site, Patterns, Query, StandIn) + ", " +
                         ShiftDims + Labels + "})";

  // The fused call and the original on lines of their own, so a diff reads as "new | old".
  std::string Continuation = "\n" + Query.indentation(Site.Loss->getBeginLoc()) + "    ";
  bool Parenthesised = !standsAlone(Site.Loss, Query);
  EditText Loss;
  if (Parenthesised)
    Loss << "(";
  Loss << Replacement.Enabled << Continuation << "? " << Replacement.Call << "(";
  std::array<EditText::Span, 3> FusedParts{};
  FusedParts[0] = Loss.copy(HiddenText);
  Loss << ", ";
  FusedParts[1] = Loss.copy(Head.Weight);
  Loss << ", ";
  if (Head.Bias.empty())
    Loss << Replacement.UndefinedTensor;
  else
    FusedParts[2] = Loss.copy(Head.Bias);
  Loss << ", ";
  EditText::Span LabelsCopy = Loss.copy(Site.LabelsText);
  Loss << ", " << lossOptionsText(Site, Patterns) << AsPassed;
  // What the site was decided on, for the build's compiler to check (it may read the code otherwise).
  std::vector<EditText::Span> Found;
  if (!Analysed.empty()) {
    Loss << "." << Replacement.AnalysedSetter << "(" << Replacement.AnalysedTypes << "<";
    for (const AnalysedExpression &Item : Analysed) {
      if (!Found.empty())
        Loss << ", ";
      Found.push_back(Loss.copy(Item.Found));
      Loss << ", " << Item.Expected;
    }
    Loss << ">())";
  }
  Loss << ")";
  if (!carriesUpcastInOptions(Site, Patterns))
    for (const std::string &Cast : Site.Casts)
      Loss << Cast;
  const size_t FusedEnd = Loss.size();
  Loss << Continuation << ": " << Query.text(Site.Loss);
  if (Parenthesised)
    Loss << ")";
  Edits.push_back(replace(Site.Loss, Loss.str(), Query));

  // What the fused call spells again at the loss, for the re-parse to compare with the program's code it copies
  // (respelling.h). The head's parts against the skipped head's, which the producer's edit spells at the head
  // (without a producer the head is inside the loss, and they are spelled where it is).
  const tooling::Replacement &LossEdit = Edits.back();
  if (ProducerEdit) {
    const tooling::Replacement &Producer = Edits[*ProducerEdit];
    unsigned HeadLine = Query.line(Head.Call->getBeginLoc());
    const std::string Parts[] = {HiddenText, Head.Weight, Head.Bias};
    const char *Names[] = {"the head's input", "the head's weight", "the head's bias"};
    for (size_t I = 0; I < 3; ++I)
      if (!Parts[I].empty())
        respell(Respellings, LossEdit, FusedParts[I].At, FusedParts[I].Length,
                inEdit(Producer, HeadParts[I].At, HeadParts[I].Length), HeadLine,
                std::string(Names[I]) + " `" + Parts[I] + "`", ReasonKind::InputsModified);
  }
  // The labels, where the fused call reads them through code written elsewhere (a shift's local).
  if (Site.LabelsTextFrom) {
    std::string From = Query.text(Site.LabelsTextFrom);
    size_t Within = From.empty() ? std::string::npos : Site.LabelsText.find(From);
    if (Within != std::string::npos)
      respell(Respellings, LossEdit, LabelsCopy.At + Within, From.size(), inFile(Site.LabelsTextFrom, Query),
              Query.line(Site.LabelsTextFrom->getBeginLoc()), "the labels `" + From + "`",
              ReasonKind::LabelsMismatch);
  }
  // The rest of the program's code the call writes as written (an upcast's dtype, the labels' cast and device, an
  // option's value), from the labels on: the first occurrence of its text standing as whole tokens in the call.
  const std::string &Written = Loss.str();
  for (const Expr *Copied : Site.CopiedToLoss) {
    std::string Text = Query.text(Copied);
    if (Text.empty())
      continue;
    auto IsWord = [](char C) { return llvm::isAlnum(C) || C == '_'; };
    size_t Within = Written.find(Text, LabelsCopy.At);
    while (Within != std::string::npos &&
           ((Within > 0 && IsWord(Written[Within - 1]) && IsWord(Text.front())) ||
            (Within + Text.size() < Written.size() && IsWord(Written[Within + Text.size()]) && IsWord(Text.back()))))
      Within = Written.find(Text, Within + 1);
    if (Within != std::string::npos && Within + Text.size() <= FusedEnd)
      respell(Respellings, LossEdit, Within, Text.size(), inFile(Copied, Query), Query.line(Copied->getBeginLoc()),
              "`" + Text + "`", ReasonKind::NameCaptured);
  }
  // What the call asserts: each item's copy of the program's code.
  for (size_t I = 0; I < Analysed.size(); ++I) {
    const AnalysedExpression &Item = Analysed[I];
    if (!Item.Source)
      continue;
    std::string Text = Query.text(Item.Source);
    // After the assertion's own words (`decltype(`, `Holds<((`), which may hold the same letters.
    size_t Within = Text.empty() ? std::string::npos : Item.Found.find(Text, Item.Found.find('('));
    if (Within != std::string::npos)
      respell(Respellings, LossEdit, Found[I].At + Within, Text.size(), inFile(Item.Source, Query),
              Query.line(Item.Source->getBeginLoc()), "`" + Text + "`, as the fused call asserts it",
              ReasonKind::NameCaptured);
  }
  return Edits;
}

std::optional<tooling::Replacement> planIncludeEdit(FileID File, unsigned FirstEdit, const PatternSet &Patterns,
                                                   const SourceManager &SM) {
  llvm::StringRef Buffer = SM.getBufferData(File);
  const std::string &Header = Patterns.Replacement.Include;
  // Where the preprocessor entered another file from this one: the offsets of the include directives it took.
  std::vector<unsigned> Taken;
  for (unsigned I = 0; I < SM.local_sloc_entry_size(); ++I) {
    const SrcMgr::SLocEntry &Entry = SM.getLocalSLocEntry(I);
    if (!Entry.isFile())
      continue;
    SourceLocation IncludedFrom = Entry.getFile().getIncludeLoc();
    if (IncludedFrom.isValid() && IncludedFrom.isFileID() && SM.getFileID(IncludedFrom) == File)
      Taken.push_back(SM.getFileOffset(IncludedFrom));
  }
  size_t InsertAt = 0;
  int Depth = 0, InsertDepth = INT_MAX;
  size_t LineStart = 0;
  while (LineStart < Buffer.size()) {
    size_t LineEnd = Buffer.find('\n', LineStart);
    size_t Next = LineEnd == llvm::StringRef::npos ? Buffer.size() : LineEnd + 1;
    llvm::StringRef Line = Buffer.slice(LineStart, Next).trim();
    if (Line.starts_with("#")) {
      llvm::StringRef Directive = Line.drop_front().ltrim();
      if (Directive.consume_front("include")) {
        llvm::StringRef Target = Directive.trim();
        if (Target == "<" + Header + ">" || Target == "\"" + Header + "\"")
          return std::nullopt;
        bool WasTaken = llvm::any_of(Taken, [&](unsigned Offset) { return Offset >= LineStart && Offset < Next; });
        // One after the first edit only where none lies before it (and then the re-parse names the failure).
        bool BeforeEdits = Next <= FirstEdit || InsertAt == 0;
        if (WasTaken && Depth <= InsertDepth && BeforeEdits) {
          InsertAt = Next;
          InsertDepth = Depth;
        }
      } else if (Directive.starts_with("if")) {
        ++Depth;
      } else if (Directive.starts_with("endif")) {
        --Depth;
      }
    }
    LineStart = Next;
  }
  // A block of its own (a blank line between it and the program's includes): an include sorter run over the
  // edits (clang-apply-replacements applying --export-fixes) sorts only the block it touches, and the order of the
  // program's own includes may matter.
  std::string Text = "#include <" + Header + ">\n";
  if (InsertAt > 0)
    Text = (Buffer[InsertAt - 1] != '\n' ? "\n\n" : "\n") + Text;
  else
    Text += "\n";
  return tooling::Replacement(SM, SM.getLocForStartOfFile(File).getLocWithOffset(InsertAt), 0, Text);
}

}  // namespace lmfuse::rewriter

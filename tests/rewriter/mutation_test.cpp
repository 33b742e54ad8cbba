// Mutation test: a deterministic random mutator over the accepted cases of the rewrite, shift and form
// tables. Each
// mutant inserts a write to an input between head and loss, a harmless statement there, wraps a piece
// of the site in a macro, renames the logits, or duplicates the site; the invariants below must hold
// for every mutant:
//   - the rewriter does not crash, and every output re-parses;
//   - a second run over the output changes nothing;
//   - an inserted write to an input never yields `patched`;
//   - a source with no patched site comes back byte-identical;
//   - a macro wrapping never changes the options a patched site passes, and a renamed or duplicated
//     site ends as the original did.
#include <catch2/catch.hpp>

#include <random>
#include <regex>

#include "rewrite_harness.h"

using namespace lmfuse::rewriter;
using namespace lmfuse::rewriter::testing;

namespace {

constexpr unsigned Seed = 20261123;
constexpr int MutantsPerCase = 10;

/// The lines of Text, with their newline.
std::vector<std::string> lines(const std::string &Text) {
  std::vector<std::string> Out;
  size_t Start = 0;
  while (Start < Text.size()) {
    size_t End = Text.find('\n', Start);
    End = End == std::string::npos ? Text.size() : End + 1;
    Out.push_back(Text.substr(Start, End - Start));
    Start = End;
  }
  return Out;
}

/// The first argument of the fused call in a rewritten source (the head's input as passed).
std::string fusedArgument(const std::string &Code, int Index) {
  size_t At = Code.find("lmfuse::linear_cross_entropy(");
  if (At == std::string::npos)
    return "";
  At += std::string("lmfuse::linear_cross_entropy(").size();
  int Depth = 0, Argument = 0;
  std::string Text;
  for (; At < Code.size(); ++At) {
    char C = Code[At];
    if (Depth == 0 && (C == ',' || C == ')')) {
      if (Argument == Index)
        return std::regex_replace(Text, std::regex("^\\s+|\\s+$"), "");
      if (C == ')')
        return "";
      ++Argument;
      Text.clear();
      continue;
    }
    if (C == '(' || C == '{' || C == '[')
      ++Depth;
    if (C == ')' || C == '}' || C == ']')
      --Depth;
    Text += C;
  }
  return "";
}

struct Mutant {
  std::string Kind;
  std::string Source;
  bool InsertsWrite = false;
  std::string Renamed;  ///< rename mutants: the original name
};

class Mutator {
public:
  Mutator(const Case &Base, const RewriteResult &Original, std::mt19937 &Random)
      : Base(Base), Original(Original), Random(Random), Before(source(Base.Before, false)) {}

  std::optional<Mutant> make() {
    switch (pick(5)) {
    case 0: return insertWrite();
    case 1: return insertHarmless();
    case 2: return wrapInMacro();
    case 3: return renameLogits();
    default: return duplicate();
    }
  }

private:
  /// The line after the head's, where inserted statements go (between head and loss).
  std::optional<size_t> headLine() const {
    unsigned Line = Original.Sites[0].Line;
    std::vector<std::string> All = lines(Before);
    if (Line == 0 || Line > All.size() || All[Line - 1].find(';') == std::string::npos)
      return std::nullopt;  // the head's statement spans lines: insertion points are not known
    if (All[Line - 1].find("cross_entropy") != std::string::npos)
      return std::nullopt;  // head inline in the loss: nothing lies between them
    return Line;
  }

  std::optional<Mutant> insertAfterHead(std::string Kind, const std::string &Statement, bool Write) {
    auto Line = headLine();
    if (!Line)
      return std::nullopt;
    std::vector<std::string> All = lines(Before);
    All.insert(All.begin() + *Line, "    " + Statement + "\n");
    std::string Text;
    for (const std::string &Each : All)
      Text += Each;
    return Mutant{std::move(Kind), Text, Write, ""};
  }

  std::optional<Mutant> insertWrite() {
    std::string Hidden = fusedArgument(Original.Code, 0);
    std::string Weight = fusedArgument(Original.Code, 1);
    std::vector<std::string> Writes;
    if (std::regex_match(Hidden, std::regex("[A-Za-z_][A-Za-z_0-9]*")) && Hidden.rfind("lmfuse_", 0) != 0) {
      Writes.push_back(Hidden + ".mul_(2.0);");
      Writes.push_back("{ auto &alias_m = " + Hidden + "; alias_m.add_(1.0); }");
      Writes.push_back("(&" + Hidden + ")->zero_();");
      Writes.push_back("{ auto view_m = " + Hidden + ".view({-1}); view_m.zero_(); }");
      Writes.push_back("[&] { " + Hidden + ".div_(3.0); }();");
      Writes.push_back(Hidden + "[0] = 1.0;");
      Writes.push_back(Hidden + " += 1.0;");
      Writes.push_back("{ torch::Tensor *p_m = &" + Hidden + "; p_m->add_(2.0); }");
    }
    if (!Weight.empty()) {
      Writes.push_back(Weight + ".mul_(0.5);");
      Writes.push_back("{ auto w_m = " + Weight + "; w_m.zero_(); }");
      Writes.push_back("torch::nn::init::normal_(" + Weight + ");");
    }
    if (Weight.rfind("lm_head->", 0) == 0) {
      Writes.push_back("lm_head = torch::nn::Linear(16, 32);");
      Writes.push_back("lm_head->to(torch::kHalf);");
    }
    if (Writes.empty())
      return std::nullopt;
    return insertAfterHead("write", Writes[pick(Writes.size())], true);
  }

  std::optional<Mutant> insertHarmless() {
    const char *Harmless[] = {
        "{ auto fresh_m = torch::zeros({1}); fresh_m.add_(1.0); }",
        "{ auto copy_m = lm_head->weight.clone(); copy_m.mul_(2.0); }",
        "{ auto rows_m = lm_head->weight.size(0); (void)rows_m; }",
        ";",
    };
    return insertAfterHead("harmless", Harmless[pick(4)], false);
  }

  std::optional<Mutant> wrapInMacro() {
    // One of the site's pieces goes through an identity macro: the callee, an argument, the options.
    const std::vector<std::pair<std::regex, std::string>> Wraps = {
        {std::regex("F::cross_entropy\\("), "ID_M(F::cross_entropy)("},
        {std::regex("F::CrossEntropyFuncOptions\\(\\)"), "ID_M(F::CrossEntropyFuncOptions())"},
        {std::regex("\\.ignore_index\\(([^()]*)\\)"), ".ignore_index(ID_M($1))"},
        {std::regex("\\.label_smoothing\\(([^()]*)\\)"), "ID_M(.label_smoothing($1))"},
        {std::regex("lm_head\\(([A-Za-z_]+)\\)"), "lm_head(ID_M($1))"},
        {std::regex("labels\\.view\\(-1\\)"), "ID_M(labels.view(-1))"},
    };
    const auto &[Pattern, Replacement] = Wraps[pick(Wraps.size())];
    std::string Members = std::regex_replace(std::string(Base.Before), Pattern, Replacement,
                                             std::regex_constants::format_first_only);
    if (Members == Base.Before)
      return std::nullopt;
    return Mutant{"macro", source(("\n#define ID_M(...) __VA_ARGS__\n" + Members).c_str(), false), false, ""};
  }

  std::optional<Mutant> renameLogits() {
    std::regex Word("\\blogits\\b");
    std::string Members = std::regex_replace(std::string(Base.Before), Word, "scores_m");
    if (Members == Base.Before)
      return std::nullopt;
    return Mutant{"rename", source(Members.c_str(), false), false, "logits"};
  }

  std::optional<Mutant> duplicate() {
    std::string Members = Base.Before;
    std::string Copy = std::regex_replace(Members, std::regex("\\b(forward|loss_of|compute|smoothed|padded)\\("),
                                          "$1_dup(");
    if (Copy == Members)
      return std::nullopt;
    // Members that are declared (not methods) would be declared twice: keep only methods' copies.
    if (std::regex_search(Members, std::regex("^\\s*(torch::|bool |int|double |static |struct |#)",
                                               std::regex_constants::multiline)))
      return std::nullopt;
    return Mutant{"duplicate", source((Members + Copy).c_str(), false), false, ""};
  }

  size_t pick(size_t N) { return std::uniform_int_distribution<size_t>(0, N - 1)(Random); }

  const Case &Base;
  const RewriteResult &Original;
  std::mt19937 &Random;
  std::string Before;
};

}  // namespace

TEST_CASE("mutants of the accepted cases keep every invariant", "[rewriter][mutation]") {
  std::mt19937 Random(Seed);
  int Made = 0, Parsed = 0, Writes = 0;
  std::map<std::string, int> ByKind;
  std::vector<Case> Bases(rewriteCases().begin(), rewriteCases().end());
  Bases.insert(Bases.end(), shiftCases().begin(), shiftCases().end());
  Bases.insert(Bases.end(), formCases().begin(), formCases().end());
  for (const Case &Base : Bases) {
    if (Base.Kind != Verb::RewritesTo)
      continue;
    RewriteResult Original = rewriteWithStubs(source(Base.Before, false));
    if (!Original.Parsed || Original.Sites.size() != 1 || Original.Sites[0].Status != SiteStatus::Patched)
      continue;
    Mutator Make(Base, Original, Random);
    for (int I = 0; I < MutantsPerCase; ++I) {
      std::optional<Mutant> Item = Make.make();
      if (!Item)
        continue;
      ++Made;
      ++ByKind[Item->Kind];
      RewriteResult Result = rewriteWithStubs(Item->Source);
      INFO("base: " << Base.Name << "\nmutant (" << Item->Kind << "):\n" << Item->Source << "\nsites:\n"
                    << describeSites(Result) << Result.Diagnostics);
      if (!Result.Parsed)
        continue;  // the mutation broke the source itself: nothing to check
      ++Parsed;
      bool AnyPatched = false;
      for (const SiteRecord &Site : Result.Sites)
        AnyPatched = AnyPatched || Site.Status == SiteStatus::Patched;
      if (Item->InsertsWrite) {
        ++Writes;
        CHECK_FALSE(AnyPatched);
      }
      if (!AnyPatched) {
        CHECK(Result.Code == Item->Source);
        continue;
      }
      RewriteResult Again = rewriteWithStubs(Result.Code);
      INFO("rewritten:\n" << Result.Code << "\nsecond run:\n" << Again.Diagnostics);
      REQUIRE(Again.Parsed);
      CHECK(Again.Code == Result.Code);
      for (const SiteRecord &Site : Again.Sites)
        CHECK(Site.Status != SiteStatus::Patched);
      if (Item->Kind == "macro") {
        for (const SiteRecord &Site : Result.Sites) {
          if (Site.Status != SiteStatus::Patched)
            continue;
          const PatchedOptions &Want = *Original.Sites[0].Options;
          const PatchedOptions &Got = *Site.Options;
          CHECK(Got.IgnoreIndex == Want.IgnoreIndex);
          CHECK(Got.IgnoreIndexExpression.empty() == Want.IgnoreIndexExpression.empty());
          CHECK(Got.LabelSmoothing == Want.LabelSmoothing);
          CHECK(Got.Reduction == Want.Reduction);
          CHECK(Got.Shift == Want.Shift);
        }
      }
      if (Item->Kind == "rename" || Item->Kind == "duplicate")
        for (const SiteRecord &Site : Result.Sites)
          CHECK(Site.Status == SiteStatus::Patched);
    }
  }
  // The table is large enough that every kind of mutant occurs, most of them parse, and the writes are
  // many: a mutator that silently produced nothing would fail here.
  INFO("mutants " << Made << ", parsed " << Parsed << ", writes " << Writes);
  CHECK(Made >= 200);
  CHECK(Parsed >= Made * 3 / 4);
  CHECK(Writes >= 40);
  for (const char *Kind : {"write", "harmless", "macro", "rename", "duplicate"}) {
    INFO(Kind << ": " << ByKind[Kind]);
    CHECK(ByKind[Kind] >= 3);
  }
}

// The rule set's loader and the audit vocabulary: the built-in default is the shipped YAML, a
// malformed file is an error naming the file, the line and the key, and every reason code
// round-trips through its spelling.
#include "edit_plan.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <string>
#include <algorithm>

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include "patterns.h"
#include "site.h"

using namespace lmfuse::rewriter;

namespace {

std::string readFile(const char *Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path);
  REQUIRE(Buffer);
  return (*Buffer)->getBuffer().str();
}

/// Writes Text to a fresh temporary .yaml file and returns its path.
std::string writeTemporary(const std::string &Text) {
  llvm::SmallString<128> Path;
  REQUIRE(!llvm::sys::fs::createTemporaryFile("lmfuse-patterns", "yaml", Path));
  std::ofstream(Path.c_str()) << Text;
  return Path.str().str();
}

std::string loadError(const std::string &Text, std::string &Path) {
  Path = writeTemporary(Text);
  auto Loaded = loadPatternFile(Path);
  llvm::sys::fs::remove(Path);
  REQUIRE(!Loaded);
  return llvm::toString(Loaded.takeError());
}

/// The shipped YAML with one line replaced (the line holding Needle), for malformed variants.
std::string withLineReplaced(const std::string &Yaml, const std::string &Needle, const std::string &Replacement) {
  size_t At = Yaml.find(Needle);
  REQUIRE(At != std::string::npos);
  size_t Start = Yaml.rfind('\n', At) + 1;
  size_t End = Yaml.find('\n', At);
  return Yaml.substr(0, Start) + Replacement + Yaml.substr(End);
}

unsigned lineOf(const std::string &Text, const std::string &Needle) {
  size_t At = Text.find(Needle);
  REQUIRE(At != std::string::npos);
  return 1 + static_cast<unsigned>(std::count(Text.begin(), Text.begin() + At, '\n'));
}

}  // namespace

TEST_CASE("the built-in patterns are the shipped YAML", "[patterns]") {
  auto Default = loadDefaultPatterns();
  REQUIRE(static_cast<bool>(Default));
  auto FromFile = loadPatternFile(LMFUSE_PATTERNS_FILE);
  REQUIRE(static_cast<bool>(FromFile));
  CHECK(defaultPatternText() == readFile(LMFUSE_PATTERNS_FILE));
  CHECK(Default->Name == "libtorch");
  CHECK(Default->Source == "<built-in>");
  CHECK(FromFile->Source == LMFUSE_PATTERNS_FILE);
  CHECK(Default->Losses.size() == FromFile->Losses.size());
  REQUIRE(!Default->ModuleHeads.empty());
  CHECK(Default->ModuleHeads[0].Impl == "torch::nn::LinearImpl");
  bool HasFunctional = false;
  for (const LossPattern &Loss : Default->Losses)
    HasFunctional = HasFunctional || (Loss.Callee == "torch::nn::functional::cross_entropy" &&
                                      Loss.Setters.at("ignore_index") == "ignore_index");
  CHECK(HasFunctional);
  CHECK(Default->Replacement.Call == "lmfuse::linear_cross_entropy");
  CHECK(Default->CausalShift.SliceMethod == "slice");
  CHECK(Default->CausalShift.LogitsDims == std::vector<int64_t>{1, -2, 0});
  CHECK(Default->CausalShift.LabelsDims == std::vector<int64_t>{1, -1, 0});
  CHECK(Default->CausalShift.SliceType == "at::indexing::Slice");
  CHECK(contains(Default->CausalShift.NoneTypes, "c10::nullopt_t"));
  CHECK(Default->Replacement.Reductions.at("sum") == "lmfuse::Reduction::Sum");
}

TEST_CASE("a malformed pattern file names the file, the line and the key", "[patterns]") {
  const std::string Yaml = readFile(LMFUSE_PATTERNS_FILE);
  std::string Path;

  SECTION("unknown key") {
    std::string Bad = withLineReplaced(Yaml, "    unsupported_setters: [weight]", "    unsuported_setters: [weight]");
    std::string Error = loadError(Bad, Path);
    INFO(Error);
    CHECK(Error.find(Path) != std::string::npos);
    CHECK(Error.find(":" + std::to_string(lineOf(Bad, "unsuported_setters")) + ":") != std::string::npos);
    CHECK(Error.find("unknown key 'unsuported_setters'") != std::string::npos);
  }
  SECTION("misspelt required key") {
    std::string Bad = withLineReplaced(Yaml, "  slice_method: slice", "  slice_methd: slice");
    std::string Error = loadError(Bad, Path);
    INFO(Error);
    CHECK(Error.find(Path + ":" + std::to_string(lineOf(Bad, "causal_shift:") + 1) + ":") != std::string::npos);
    CHECK(Error.find("missing required key 'slice_method'") != std::string::npos);
  }
  SECTION("no dim the shift may be written on") {
    std::string Bad = withLineReplaced(Yaml, "  logits_dims: [1, -2, 0]", "  logits_dims: []");
    std::string Error = loadError(Bad, Path);
    INFO(Error);
    CHECK(Error.find(Path) != std::string::npos);
    CHECK(Error.find("'logits_dims' and 'labels_dims' to name at least one dim each") != std::string::npos);
  }
  SECTION("missing required key") {
    std::string Bad = withLineReplaced(Yaml, "  call: lmfuse::linear_cross_entropy", "");
    std::string Error = loadError(Bad, Path);
    INFO(Error);
    CHECK(Error.find(Path) != std::string::npos);
    CHECK(Error.find("call") != std::string::npos);
  }
  SECTION("value of the wrong type") {
    std::string Bad = withLineReplaced(Yaml, "    input: 0", "    input: first");
    std::string Error = loadError(Bad, Path);
    INFO(Error);
    CHECK(Error.find(Path) != std::string::npos);
    CHECK(Error.find(":" + std::to_string(lineOf(Bad, "input: first")) + ":") != std::string::npos);
  }
  SECTION("value outside its vocabulary") {
    std::string Bad = withLineReplaced(Yaml, "    value: sum", "    value: total");
    std::string Error = loadError(Bad, Path);
    INFO(Error);
    CHECK(Error.find(Path) != std::string::npos);
    CHECK(Error.find("total") != std::string::npos);
  }
  SECTION("not YAML at all") {
    std::string Error = loadError("losses: [unclosed\n", Path);
    INFO(Error);
    CHECK(Error.find(Path) != std::string::npos);
    CHECK(Error.find(":1:") != std::string::npos);
  }
  SECTION("missing file") {
    auto Loaded = loadPatternFile("/nonexistent/lmfuse/patterns.yaml");
    REQUIRE(!Loaded);
    CHECK(llvm::toString(Loaded.takeError()).find("/nonexistent/lmfuse/patterns.yaml") != std::string::npos);
  }
}

TEST_CASE("a pattern file can extend the rules without recompiling", "[patterns]") {
  const std::string Yaml = readFile(LMFUSE_PATTERNS_FILE);
  std::string Extended = withLineReplaced(Yaml, "softcap: [tanh, tanh_]", "softcap: [tanh, tanh_, hardtanh]");
  std::string Path = writeTemporary(Extended);
  auto Loaded = loadPatternFile(Path);
  llvm::sys::fs::remove(Path);
  REQUIRE(static_cast<bool>(Loaded));
  CHECK(contains(Loaded->Softcap, "hardtanh"));
}

TEST_CASE("reason codes round-trip through their spelling", "[site]") {
  for (ReasonKind Reason :
       {ReasonKind::LogitsRebound, ReasonKind::LogitsSoftcapped, ReasonKind::HeadWrapped, ReasonKind::HeadNotLinear,
        ReasonKind::LogitsIndexed, ReasonKind::LogitsUsedElsewhere, ReasonKind::LabelsBranchNontrivial,
        ReasonKind::LabelsMismatch, ReasonKind::LossUnsupported, ReasonKind::InMacro, ReasonKind::ParseError,
        ReasonKind::ReparseFailed, ReasonKind::EditConflict, ReasonKind::WriteFailed, ReasonKind::SourceChanged,
        ReasonKind::BuildRefused, ReasonKind::LineDirective, ReasonKind::PositionDependent, ReasonKind::InputsModified,
        ReasonKind::TemplateDependent, ReasonKind::NameCaptured}) {
    INFO(static_cast<int>(Reason));
    CHECK(!reasonCode(Reason).empty());
    CHECK(!reasonDescription(Reason).empty());
    CHECK(reasonFromCode(reasonCode(Reason)) == Reason);
  }
  CHECK(reasonCode(ReasonKind::LogitsUsedElsewhere) == "logits-used-elsewhere");
  CHECK(reasonCode(ReasonKind::ReparseFailed) == "reparse-failed");
  CHECK(reasonCode(ReasonKind::BuildRefused) == "build-refused");  // the spelling lmfuse_rewrite's step writes
  CHECK(!reasonFromCode("no-such-reason"));
  CHECK(!reasonFromCode(""));
  CHECK(statusName(SiteStatus::AlreadyPatched) == "already_patched");
  CHECK(statusName(SiteStatus::Suppressed) == "suppressed");
}

// The names whose meaning at a site the name-captured check asks about: the first name of each qualified name
// the replacement writes, not a name written from the global namespace (`::lmfuse::enabled()`).
TEST_CASE("the replacement's leading qualifiers", "[patterns]") {
  const std::string Yaml = readFile(LMFUSE_PATTERNS_FILE);
  auto Loaded = parsePatterns(Yaml, "libtorch.yaml");
  REQUIRE(static_cast<bool>(Loaded));
  CHECK(Loaded->Replacement.leadingQualifiers() == std::set<std::string>{"lmfuse", "torch"});
  std::string Rooted = withLineReplaced(Yaml, "  undefined_tensor: torch::Tensor()", "  undefined_tensor: ::at::Tensor()");
  Rooted = withLineReplaced(Rooted, "  tensor_type: torch::Tensor", "  tensor_type: ::at::Tensor");
  auto RootedLoaded = parsePatterns(Rooted, "rooted.yaml");
  REQUIRE(static_cast<bool>(RootedLoaded));
  CHECK(RootedLoaded->Replacement.leadingQualifiers() == std::set<std::string>{"lmfuse"});
}

// Every name the planned edits may write that is not copied from the program: the check of the written text
// for the program's macros asks about each of these even where the program's moved code spells it too.
TEST_CASE("the words the rewrite writes of its own", "[patterns]") {
  auto Loaded = parsePatterns(readFile(LMFUSE_PATTERNS_FILE), "libtorch.yaml");
  REQUIRE(static_cast<bool>(Loaded));
  clang::LangOptions Language;
  Language.CPlusPlus = Language.CPlusPlus11 = Language.CPlusPlus14 = Language.CPlusPlus17 = true;
  std::set<std::string> Words = ownWords(*Loaded, Language, "lmfuse_hidden3", {"lmfuse_logits2", "lmfuse_labels"},
                                         {{"decltype(head)", "::my::Head"}, {"decltype(h)", "::std::vector<::at::Tensor>"}});
  std::string Listed;
  for (const std::string &Word : Words)
    Listed += Word + " ";
  INFO(Listed);
  CHECK(Words == std::set<std::string>{
                     // the replacement's names, and the names this site's edits take
                     "lmfuse", "linear_cross_entropy", "LossOptions", "enabled", "skip_logits", "skipped_logits",
                     "skipped_logits_after", "logits_as_passed", "ShiftDims", "torch", "Tensor",
                     "module_loss_options", "dtype", "lmfuse_hidden3", "lmfuse_logits2", "lmfuse_labels",
                     "analysed", "AnalysedTypes", "Holds", "DeclaredIn",
                     // the names in the types the site asserts
                     "my", "Head", "std", "vector", "at",
                     // the head's members and the module loss's, the labels' cast
                     "weight", "bias", "options", "to",
                     // the option table's setters and the enumerator of the reduction it writes (the mean is the default)
                     "ignore_index", "label_smoothing", "reduction", "Reduction", "Sum", "shift", "true",
                     // the planner's keywords
                     "auto", "static_cast", "const", "return", "bool", "decltype"});
}

TEST_CASE("qualified names may be written with a leading ::", "[patterns]") {
  const std::string Yaml = readFile(LMFUSE_PATTERNS_FILE);
  std::string Rooted = withLineReplaced(Yaml, "  - callee: torch::nn::functional::cross_entropy",
                                        "  - callee: ::torch::nn::functional::cross_entropy");
  auto Loaded = parsePatterns(Rooted, "rooted.yaml");
  REQUIRE(static_cast<bool>(Loaded));
  bool Found = false;
  for (const LossPattern &Loss : Loaded->Losses)
    Found = Found || Loss.Callee == "torch::nn::functional::cross_entropy";
  CHECK(Found);
}

TEST_CASE("product heads, loss modules and nll_loss rules are checked when loaded", "[patterns]") {
  const std::string Yaml = readFile(LMFUSE_PATTERNS_FILE);
  std::string Path;
  auto ErrorOf = [&](const std::string &Needle, const std::string &Replacement) {
    std::string Error = loadError(withLineReplaced(Yaml, Needle, Replacement), Path);
    INFO(Error);
    CHECK(Error.find(Path) != std::string::npos);
    return Error;
  };
  CHECK_THAT(ErrorOf("    options_member: options", ""), Catch::Contains("needs 'holder', 'options_member' and 'setters'"));
  CHECK_THAT(ErrorOf("    impl: torch::nn::CrossEntropyLossImpl",
                     "    impl: torch::nn::CrossEntropyLossImpl\n    callee: torch::nn::functional::cross_entropy"),
             Catch::Contains("exactly one of 'callee' (a function) and 'impl' (a module)"));
  CHECK_THAT(ErrorOf("parameter_owner: torch::nn::Module", ""),
             Catch::Contains("'product_heads' need 'weight_transposes' and 'parameter_owner'"));
  CHECK_THAT(ErrorOf("  module_options: lmfuse::module_loss_options", ""), Catch::Contains("needs 'module_options'"));
  CHECK_THAT(ErrorOf("  callees: [torch::nn::functional::log_softmax, at::log_softmax, at::Tensor::log_softmax]",
                     "  callees: []"),
             Catch::Contains("'log_softmax' must name its spellings"));

  auto Default = loadDefaultPatterns();
  REQUIRE(static_cast<bool>(Default));
  size_t Modules = 0, LogSoftmaxInputs = 0;
  for (const LossPattern &Loss : Default->Losses) {
    Modules += Loss.isModule();
    LogSoftmaxInputs += Loss.InputLogSoftmax;
  }
  CHECK(Modules == 2);           // CrossEntropyLoss, NLLLoss
  CHECK(LogSoftmaxInputs == 3);  // F::nll_loss, at::nll_loss, NLLLoss
  CHECK(Default->ProductHeads.size() == 4);
  CHECK(Default->ParameterOwner == "torch::nn::Module");
}

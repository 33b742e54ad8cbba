// Test support for the rewriter tables.
#include "rewrite_harness.h"

#include <catch2/catch.hpp>
#include <cctype>
#include <regex>

namespace lmfuse::rewriter::testing {

// Every case is a method (or a few) of this model; the stub headers declare LibTorch.
const char *const Prelude = R"(#include <torch/torch.h>
)";
const char *const PatchedPrelude = R"(#include <torch/torch.h>
#include <lmfuse/torch.h>
)";
const char *const ModelOpen = R"(
namespace F = torch::nn::functional;
struct Output { torch::Tensor logits; torch::Tensor loss; };
struct LMHeadImpl : torch::nn::Module { torch::Tensor forward(const torch::Tensor &x); };
TORCH_MODULE(LMHead);
namespace nn { struct Linear { torch::Tensor operator()(const torch::Tensor &x); torch::Tensor weight; }; }
namespace mine { torch::Tensor cross_entropy(const torch::Tensor &a, const torch::Tensor &b); }
struct Model : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::nn::Embedding wte{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Sequential mlp{nullptr};
  LMHead custom_head{nullptr};
  nn::Linear homemade;
  torch::Tensor last_loss, last_logits, class_weights;
  int64_t pad_id_ = 0;
)";
const char *const ModelClose = "};\n";

std::string source(const char *Members, bool Patched) {
  // A case's leading #include lines (standard headers only its code needs, kept out of the stubs that
  // every case parses) go to the top of the file.
  std::string Rest = Members, Includes;
  while (true) {
    size_t Start = Rest.find_first_not_of('\n');
    if (Start == std::string::npos || Rest.compare(Start, 8, "#include") != 0)
      break;
    size_t End = Rest.find('\n', Start);
    Includes += Rest.substr(Start, End == std::string::npos ? std::string::npos : End + 1 - Start);
    Rest = End == std::string::npos ? "" : "\n" + Rest.substr(End + 1);
  }
  // The rewrite includes lmfuse's header after the file's last #include.
  return std::string(Prelude) + Includes + (Patched ? "#include <lmfuse/torch.h>\n" : "") + ModelOpen + Rest +
         ModelClose;
}


std::string describeSites(const RewriteResult &Result) {
  std::string Text;
  for (const SiteRecord &Site : Result.Sites)
    Text += std::to_string(Site.Line) + ": " + statusName(Site.Status).str() + " " + reasonCode(Site.Reason).str() +
            " - " + Site.Detail + "\n";
  return Text;
}


void checkCase(const Case &Item) {
      const std::string Before = source(Item.Before, false);
      RewriteResult Result = rewriteWithStubs(Before);
      INFO("diagnostics:\n" << Result.Diagnostics << "sites:\n" << describeSites(Result));
      REQUIRE(Result.Parsed);
      switch (Item.Kind) {
      case Verb::RewritesTo: {
        REQUIRE(Result.Sites.size() == 1);
        CHECK(Result.Sites[0].Status == SiteStatus::Patched);
        CHECK(Result.Sites[0].Options.has_value());
        const std::string Expected = source(Item.Expected, true);
        INFO("rewritten:\n" << Result.Code);
        // The site named in lmfuse::skipped_logits(..., "model.cpp:<line>") is written N in the tables.
    std::regex SiteLine("\"model\\.cpp:[0-9]+\"");
    CHECK(normalizeWhitespace(std::regex_replace(Result.Code, SiteLine, "\"model.cpp:N\"")) ==
          normalizeWhitespace(Expected));
        // The output compiles against the agreed declarations, and a second run changes nothing.
        RewriteResult Again = rewriteWithStubs(Result.Code);
        INFO("second run diagnostics:\n" << Again.Diagnostics << "sites:\n" << describeSites(Again));
        REQUIRE(Again.Parsed);
        CHECK(Again.Code == Result.Code);
        REQUIRE(Again.Sites.size() == 1);
        CHECK(Again.Sites[0].Status == SiteStatus::AlreadyPatched);
        break;
      }
      case Verb::RefusesWith: {
        REQUIRE(Result.Sites.size() == 1);
        CHECK(Result.Sites[0].Status == SiteStatus::Unmatched);
        CHECK(reasonCode(Result.Sites[0].Reason) == Item.Expected);
        CHECK(llvm::StringRef(Result.Sites[0].Detail).starts_with("line "));
        CHECK(Result.Code == Before);
        break;
      }
      case Verb::LeavesUnchanged:
        CHECK(Result.Sites.empty());
        CHECK(Result.Code == Before);
        break;
      case Verb::Suppresses:
        REQUIRE(Result.Sites.size() == 1);
        CHECK(Result.Sites[0].Status == SiteStatus::Suppressed);
        CHECK(Result.Code == Before);
        break;
      }
}

void checkRefused(const Refused &Refusal) {
  checkCase(Refusal.Item);
  RewriteResult Result = rewriteWithStubs(source(Refusal.Item.Before, false));
  INFO(describeSites(Result));
  REQUIRE(Result.Sites.size() == 1);
  CHECK(llvm::StringRef(Result.Sites[0].Detail).contains(Refusal.Says));
}

const PatternSet &defaultPatterns() {
  static const PatternSet Patterns = [] {
    auto Loaded = loadDefaultPatterns();
    if (!Loaded)
      FAIL("the built-in patterns do not load: " << llvm::toString(Loaded.takeError()));
    return *Loaded;
  }();
  return Patterns;
}

std::vector<std::string> stubArgs() {
  return {"-std=c++17", "-isystem", LMFUSE_REWRITER_STUBS};
}

RewriteResult rewriteWithStubs(const std::string &Code) {
  return rewriteSource(Code, stubArgs(), defaultPatterns(), "model.cpp");
}

std::string normalizeWhitespace(const std::string &Code) {
  auto IsWord = [](char C) { return std::isalnum(static_cast<unsigned char>(C)) || C == '_'; };
  std::string Out;
  bool PendingSpace = false;
  for (char C : Code) {
    if (std::isspace(static_cast<unsigned char>(C))) {
      PendingSpace = true;
      continue;
    }
    if (PendingSpace && !Out.empty() && IsWord(Out.back()) && IsWord(C))
      Out += ' ';
    PendingSpace = false;
    Out += C;
  }
  return Out;
}

}  // namespace lmfuse::rewriter::testing

// Integration: the rewriter over a realistic model parsed against the real LibTorch headers
// (Debian libtorch-dev), then the rewritten source parsed again against the real headers and
// <lmfuse/torch.h>: it must compile, and a second run must find every site already patched.
// Each parse of <torch/torch.h> costs seconds, so this file holds the only such test.
#include <catch2/catch.hpp>

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include "patterns.h"
#include "rewrite.h"

using namespace lmfuse::rewriter;

namespace {

std::vector<std::string> libtorchArgs() {
  std::vector<std::string> Args = {"-std=c++17"};
  auto AddDirs = [&](llvm::StringRef List) {
    llvm::SmallVector<llvm::StringRef, 8> Dirs;
    List.split(Dirs, ';', -1, false);
    for (llvm::StringRef Dir : Dirs)
      if (Dir != "/usr/include")  // a default system folder: naming it again breaks #include_next
        Args.push_back(("-isystem" + Dir).str());
  };
  AddDirs(LMFUSE_TORCH_INCLUDE_DIRS);
  AddDirs(LMFUSE_ADAPTER_INCLUDE_DIRS);
  return Args;
}

const SiteRecord *siteIn(const RewriteResult &Result, llvm::StringRef Function) {
  for (const SiteRecord &Site : Result.Sites)
    if (Site.Function == Function)
      return &Site;
  return nullptr;
}

}  // namespace

TEST_CASE("a LibTorch model is rewritten and the result compiles against <lmfuse/torch.h>", "[libtorch]") {
  auto Patterns = loadDefaultPatterns();
  REQUIRE(static_cast<bool>(Patterns));
  auto Buffer = llvm::MemoryBuffer::getFile(LMFUSE_REWRITER_EXAMPLE);
  REQUIRE(Buffer);
  const std::string Original = (*Buffer)->getBuffer().str();

  RewriteResult First = rewriteSource(Original, libtorchArgs(), *Patterns, LMFUSE_REWRITER_EXAMPLE);
  INFO("diagnostics:\n" << First.Diagnostics);
  REQUIRE(First.Parsed);
  REQUIRE(First.Sites.size() == 6);

  const SiteRecord *Forward = siteIn(First, "GPTImpl::forward");
  REQUIRE(Forward);
  CHECK(Forward->Status == SiteStatus::Patched);
  CHECK(Forward->Head == "lm_head");
  REQUIRE(Forward->Options);
  CHECK(Forward->Options->IgnoreIndex == -1);
  CHECK_FALSE(Forward->Options->Shift);
  CHECK_FALSE(Forward->Options->Bias);  // LinearOptions(d_model, vocab).bias(false)

  const SiteRecord *Tied = siteIn(First, "GPTImpl::tied_loss");
  REQUIRE(Tied);
  CHECK(Tied->Status == SiteStatus::Patched);
  REQUIRE(Tied->Options);
  CHECK(Tied->Options->Shift);
  CHECK(Tied->Options->Reduction == "sum");
  CHECK(Tied->Options->LabelSmoothing == Approx(0.1));
  CHECK_FALSE(Tied->Options->Bias);

  const SiteRecord *Capped = siteIn(First, "GPTImpl::capped_loss");
  REQUIRE(Capped);
  CHECK(Capped->Status == SiteStatus::Unmatched);
  CHECK(Capped->Reason == ReasonKind::LogitsSoftcapped);

  const SiteRecord *Product = siteIn(First, "GPTImpl::product_loss");
  REQUIRE(Product);
  CHECK(Product->Status == SiteStatus::Patched);
  CHECK(Product->Loss == "torch::nn::CrossEntropyLossImpl");
  REQUIRE(Product->Options);
  CHECK(Product->Options->IgnoreIndex == -1);

  const SiteRecord *Nll = siteIn(First, "GPTImpl::nll_step");
  REQUIRE(Nll);
  CHECK(Nll->Status == SiteStatus::Patched);
  CHECK(Nll->Loss == "at::nll_loss");

  // c10::Device and the library's virtual is_training() as the real headers declare them.
  const SiteRecord *Moved = siteIn(First, "GPTImpl::moved_loss");
  REQUIRE(Moved);
  CHECK(Moved->Status == SiteStatus::Patched);

  INFO("rewritten:\n" << First.Code);
  CHECK(First.Code.find("lmfuse::linear_cross_entropy(hidden, wte->weight, torch::Tensor(), labels, "
                        "lmfuse::module_loss_options(criterion->options, criterion->weight).logits_as_passed({") != std::string::npos);
  CHECK(First.Code.find("lmfuse::linear_cross_entropy(hidden, lm_head->weight, torch::Tensor(), labels, "
                        "lmfuse::LossOptions().logits_as_passed({") != std::string::npos);
  CHECK(First.Code.find("#include <lmfuse/torch.h>") != std::string::npos);
  CHECK(First.Code.find("lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, *targets") !=
        std::string::npos);
  CHECK(First.Code.find("lmfuse::linear_cross_entropy(hidden, wte->weight, torch::Tensor(), "
                        "labels.to(torch::kLong), "
                        "lmfuse::LossOptions().label_smoothing(0.1).reduction(lmfuse::Reduction::Sum).shift(true)"
                        ".logits_as_passed({") != std::string::npos);
  CHECK(First.Code.find("lmfuse::skip_logits() && (labels.has_value() && is_training()) ? lmfuse::skipped_logits(") !=
        std::string::npos);
  CHECK(First.Code.find("lmfuse::linear_cross_entropy(hidden, lm_head->weight, lm_head->bias, "
                        "(*labels).to(logits.device()), ") != std::string::npos);
  // Every patched site hands the fused call its logits input as code, which compiles against the real header.
  size_t Handed = 0;
  for (size_t At = First.Code.find(".logits_as_passed({\""); At != std::string::npos;
       At = First.Code.find(".logits_as_passed({\"", At + 1))
    ++Handed;
  CHECK(Handed == 5);

  RewriteResult Second = rewriteSource(First.Code, libtorchArgs(), *Patterns, LMFUSE_REWRITER_EXAMPLE);
  INFO("second run diagnostics:\n" << Second.Diagnostics);
  REQUIRE(Second.Parsed);
  CHECK(Second.Code == First.Code);
  REQUIRE(Second.Sites.size() == 6);
  CHECK(siteIn(Second, "GPTImpl::product_loss")->Status == SiteStatus::AlreadyPatched);
  CHECK(siteIn(Second, "GPTImpl::nll_step")->Status == SiteStatus::AlreadyPatched);
  CHECK(siteIn(Second, "GPTImpl::forward")->Status == SiteStatus::AlreadyPatched);
  CHECK(siteIn(Second, "GPTImpl::tied_loss")->Status == SiteStatus::AlreadyPatched);
  CHECK(siteIn(Second, "GPTImpl::capped_loss")->Status == SiteStatus::Unmatched);
  CHECK(siteIn(Second, "GPTImpl::moved_loss")->Status == SiteStatus::AlreadyPatched);
}

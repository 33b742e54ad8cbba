// The names the rewritten code writes of its own (`lmfuse::enabled()`, `torch::Tensor`, an option's setter, a
// stand-in) must mean there what the rewrite means: a site where lookup from its function finds a program's
// `lmfuse` or `torch` before the global namespace, where the program opens the namespace of the replacement's
// functions itself, or where one of those names is a macro of the program, is refused `name-captured`; the
// same names elsewhere, an alias of the global namespace, or a macro the site's own code spells, leave it
// patched. A case body sits inside `struct Model`; the cases that need a namespace
// around the site close the model first and leave a struct open for the table's closing brace.
#include "rewrite_harness.h"

#include <catch2/catch.hpp>

using namespace lmfuse::rewriter::testing;

namespace {

const Refused Captured[] = {
    {{"a class of the model named lmfuse, whose enabled() the rewritten code would call", R"(
  struct lmfuse {
    static bool skip_logits() { return false; }
    static bool enabled() { return false; }
  };
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "name-captured"},
     "`Model::lmfuse`"},
    {{"a class named torch in the function body, which the stand-in's type would name", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    struct torch { using Tensor = at::Tensor; };
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "name-captured"},
     "`torch`"},
    {{"a namespace lmfuse of the program around the model, which brings the fused call and its own enabled()", R"(
#include <lmfuse/torch.h>
};
namespace app {
namespace lmfuse { using namespace ::lmfuse; inline bool enabled() { return false; } }
struct Small : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
};
}
struct Tail {
)", Verb::RefusesWith, "name-captured"},
     "`app::lmfuse`"},
    {{"a namespace torch that a using-directive of the enclosing namespace makes visible", R"(
};
namespace app {
namespace detail { namespace torch { using Tensor = at::Tensor; } }
using namespace detail;
struct Small : ::torch::nn::Module {
  ::torch::nn::Linear lm_head{nullptr};
  at::Tensor forward(at::Tensor h, at::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
};
}
struct Tail {
)", Verb::RefusesWith, "name-captured"},
     "`app::detail::torch`"},
    {{"a namespace lmfuse in an inline namespace around the model", R"(
#include <lmfuse/torch.h>
};
namespace app {
inline namespace v1 { namespace lmfuse { using namespace ::lmfuse; inline bool skip_logits() { return true; } } }
struct Small : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
};
}
struct Tail {
)", Verb::RefusesWith, "name-captured"},
     "`app::lmfuse`"},
    {{"a base class's member class named lmfuse", R"(
};
struct Base : torch::nn::Module { struct lmfuse { static bool enabled() { return false; } }; };
struct Small : Base {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
};
struct Tail {
)", Verb::RefusesWith, "name-captured"},
     "`Base::lmfuse`"},
    {{"a block-scope alias named torch of another namespace", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    namespace torch = ::at;
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "name-captured"},
     "`torch`"},
    {{"a function-like macro named like the rewrite's switch", R"(
#define enabled() enabled_or_not()
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "name-captured"},
     "`enabled`"},
    {{"a macro named lmfuse", R"(
#define lmfuse lmfuse
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "name-captured"},
     "`lmfuse`"},
    {{"a macro named like the stand-in the rewrite's lambdas take", R"(
#define lmfuse_logits (lmfuse_logits * 2)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "name-captured"},
     "`lmfuse_logits`"},
    {{"a macro named like the setter the rewrite writes for the causal shift", R"(
#define shift(on) shift(false)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto shift_logits = logits.index({torch::indexing::Slice(), torch::indexing::Slice(torch::indexing::None, -1), torch::indexing::Slice()}).contiguous();
    auto shift_labels = labels.index({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None)}).contiguous();
    return F::cross_entropy(shift_logits.view({-1, 32}), shift_labels.view(-1));
  }
)", Verb::RefusesWith, "name-captured"},
     "`shift`"},
    {{"an overload the program adds to namespace lmfuse, which resolution may prefer to the library's", R"(
};
namespace lmfuse { template <class... Anything> bool enabled(Anything &&...) { return false; } }
struct Small : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
};
struct Tail {
)", Verb::RefusesWith, "name-captured"},
     "declares in namespace `lmfuse` (model.cpp:"},
    {{"a macro named like the head's weight member, which the rewrite writes and the site does not", R"(
#define weight bias
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "name-captured"},
     "`weight`"},
    {{"a macro named like the head's weight member, which the loss's own code spells too", R"(
#define weight bias
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, lm_head->weight.size(0)}), labels.view(-1));
  }
)", Verb::RefusesWith, "name-captured"},
     "`weight`"},
    {{"a macro named like the shift setter, which a constant the loss's code reads is named too", R"(
#define shift(on) shift(!(on))
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    const int64_t shift = 32;
    auto logits = lm_head(h);
    auto shift_logits = logits.index({torch::indexing::Slice(), torch::indexing::Slice(torch::indexing::None, -1), torch::indexing::Slice()}).contiguous();
    auto shift_labels = labels.index({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None)}).contiguous();
    return F::cross_entropy(shift_logits.view({-1, shift}), shift_labels.view(-1));
  }
)", Verb::RefusesWith, "name-captured"},
     "`shift`"},
};

const Case Kept[] = {
    {"an alias of the global torch namespace around the model", R"(
};
namespace app {
namespace torch = ::torch;
struct Small : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
};
}
struct Tail {
)", Verb::RewritesTo, R"(
};
namespace app {
namespace torch = ::torch;
struct Small : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
};
}
struct Tail {
)"},
    {"a namespace lmfuse of the program that does not enclose the model", R"(
};
namespace tools { namespace lmfuse { inline bool enabled() { return false; } } }
struct Small : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
};
struct Tail {
)", Verb::RewritesTo, R"(
};
namespace tools { namespace lmfuse { inline bool enabled() { return false; } } }
struct Small : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
};
struct Tail {
)"},
    {"a type named like the stand-in, from a namespace the file uses, read in the loss's code: another stand-in",
     R"(
};
namespace shapes { struct lmfuse_logits { char pad[32]; }; }
using namespace shapes;
struct Small : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, int64_t(sizeof(lmfuse_logits))}), labels.view(-1));
  }
};
struct Tail {
)", Verb::RewritesTo, R"(
};
namespace shapes { struct lmfuse_logits { char pad[32]; }; }
using namespace shapes;
struct Small : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits2) { return lmfuse_logits2.view({-1, int64_t(sizeof(lmfuse_logits))}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, int64_t(sizeof(lmfuse_logits))}), labels.view(-1));
  }
};
struct Tail {
)"},
    {"a macro of the program that the site's own code spells, written where it means the same", R"(
#define VOCAB 32
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, VOCAB}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
#define VOCAB 32
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, VOCAB}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, VOCAB}), labels.view(-1));
  }
)"},
};

}  // namespace

TEST_CASE("a name the rewrite writes that means another thing at the site is refused", "[rewriter][names]") {
  for (const Refused &Item : Captured)
    DYNAMIC_SECTION(Item.Item.Name) { checkRefused(Item); }
}

TEST_CASE("the rewrite's names elsewhere, or meaning the same, leave the site patched", "[rewriter][names]") {
  for (const Case &Item : Kept)
    DYNAMIC_SECTION(Item.Name) { checkCase(Item); }
}

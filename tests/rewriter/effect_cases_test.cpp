// The effect analysis as a table: code between the head and the loss (or between the head and a guard
// that the rewrite repeats at the head) that may change what the fused call reads is refused
// `inputs-modified`; code that provably cannot is accepted. Each refused case would be a silently
// different training run if it were rewritten.
#include <catch2/catch.hpp>

#include "rewrite_harness.h"

using namespace lmfuse::rewriter;
using namespace lmfuse::rewriter::testing;

namespace {

// Shared by the refused cases: only the code between head and loss differs.
const Case Cases[] = {
    // ---- the head's input changed through aliases, pointers, views, callees, lambdas, loops --------
    {"input changed through a reference alias", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto &alias = x;
    auto logits = lm_head(x);
    alias.mul_(2.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input changed through its address", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    (&x)->add_(1.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input changed through a pointer taken before the head", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor *p = &x;
    auto logits = lm_head(x);
    p->zero_();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input changed through a view", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto flat = x.view({-1});
    auto logits = lm_head(x);
    flat.mul_(0.5);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- what the head's input was made from, changed: a view's source, a vector's element, a buffer --
    {"the head's input a view of a local changed between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor labels) {
    auto x = torch::zeros({6, 16});
    auto h = x.view({6, 16});
    auto logits = lm_head(h);
    x.mul_(3.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head's input a copy of a vector's element changed between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor labels) {
    std::vector<torch::Tensor> hs{torch::zeros({6, 16})};
    auto h = hs[0];
    auto logits = lm_head(h);
    hs[0].mul_(3.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head's input made over a local buffer written between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor labels) {
    std::vector<float> buffer(96);
    auto h = torch::from_blob(buffer.data(), {6, 16});
    auto logits = lm_head(h);
    buffer[0] = 42.0f;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head's input made over a local tensor's data changed between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor labels) {
    auto source = torch::zeros({6, 16});
    auto h = torch::from_blob(source.data_ptr(), {6, 16});
    auto logits = lm_head(h);
    source.mul_(5.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a member made a view of a local, the head's input read from the member", R"(
  torch::Tensor cache_;
  torch::Tensor forward(torch::Tensor labels) {
    auto x = torch::zeros({6, 16});
    cache_ = x.view({6, 16});
    auto logits = lm_head(cache_);
    x.mul_(3.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input changed through its address kept as an integer", R"(
#include <cstdint>
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto address = reinterpret_cast<std::uintptr_t>(h.data_ptr<float>());
    auto *p = reinterpret_cast<float *>(address + 0);
    p[1] = 42.0f;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the weight changed through what an in-place relu returned", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto act = F::relu(lm_head->weight, F::ReLUFuncOptions().inplace(true));
    auto logits = lm_head(h);
    act.mul_(3.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input changed through its raw data", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    x.data_ptr<float>()[0] = 1.0f;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input changed by an indexed assignment", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    x[0] = 0.0;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input swapped with another tensor", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor other, torch::Tensor labels) {
    auto logits = lm_head(x);
    std::swap(x, other);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input moved from", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    torch::Tensor kept = std::move(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input handed to a user function taking a non-const reference", R"(
  static void scale(torch::Tensor &t);
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    scale(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input handed by value to a user function (a copy shares the storage)", R"(
  static void normalise(torch::Tensor t);
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    normalise(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input changed by a lambda defined before the head", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto bump = [&] { x.add_(1.0); };
    auto logits = lm_head(x);
    bump();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input changed after the loss inside a loop (the next iteration's loss sees it)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    for (int step = 0; step < 2; ++step) {
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
      x.add_(1.0);
    }
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"member input changed by a member function", R"(
  torch::Tensor hidden_;
  void refresh();
  torch::Tensor forward(torch::Tensor labels) {
    auto logits = lm_head(hidden_);
    refresh();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"reference input that may name a member rebound after the head", R"(
  torch::Tensor hidden_;
  torch::Tensor forward(const torch::Tensor &x, torch::Tensor other, torch::Tensor labels) {
    auto logits = lm_head(x);
    hidden_ = other;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input held by value: a member rebound after the head is not it", R"(
  torch::Tensor hidden_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor other, torch::Tensor labels) {
    auto logits = lm_head(x);
    hidden_ = other;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor hidden_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor other, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    hidden_ = other;
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    // ---- library calls that write their tensors because of an option, not their name ------------
    {"input written by an activation given inplace(true)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto value = F::relu(x, F::ReLUFuncOptions().inplace(true));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input written by an activation whose options are constructed in place", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto value = F::relu(x, F::ReLUFuncOptions(true));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"an activation given inplace(false) writes nothing", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto value = F::relu(x, F::ReLUFuncOptions().inplace(false));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    auto value = F::relu(x, F::ReLUFuncOptions().inplace(false));
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"tied weight renormalised by an embedding with max_norm", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor ids, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto embedded = F::embedding(ids, lm_head->weight, F::EmbeddingFuncOptions().max_norm(1.0));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"an embedding given max_norm through an options parameter renormalises the tied weight", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor ids, const F::EmbeddingFuncOptions &options,
                        torch::Tensor labels) {
    auto logits = lm_head(x);
    auto embedded = F::embedding(ids, lm_head->weight, options);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"an activation given inplace through an options variable set before the head", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    F::ReLUFuncOptions options;
    options.inplace(true);
    auto logits = lm_head(x);
    auto value = F::relu(x, options);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- a container of weights written through iterators a library algorithm takes by value ------
    {"the weights reordered through iterators after a function head read one of them", R"(
  torch::Tensor forward(torch::Tensor x, std::vector<torch::Tensor> &ws, torch::Tensor other, torch::Tensor labels) {
    auto logits = F::linear(x, ws[0]);
    std::fill(ws.begin(), ws.end(), other);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- the thread's mode held in a value: an optional, a pointer, a container of a guard --------
    {"a no-grad guard held in an optional and reset between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    c10::optional<torch::NoGradGuard> frozen;
    frozen.emplace();
    auto logits = lm_head(x);
    frozen.reset();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a no-grad guard held in an optional whose block ends before the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      c10::optional<torch::NoGradGuard> frozen;
      frozen.emplace();
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a no-grad guard held in a tuple and its block ends before the loss", R"(
#include <tuple>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      std::tuple<int, torch::NoGradGuard> frozen;
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- the thread's mode held where its type is hidden: a holder that hides what it holds, a class of
    // the program holding a guard, a guard converted to a type that holds none ----------------------
    {"a no-grad guard held in a shared_ptr<void> and reset between the head and the loss", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::shared_ptr<void> frozen = std::make_shared<torch::NoGradGuard>();
    auto logits = lm_head(x);
    frozen.reset();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"no-grad guards held in a vector of shared_ptr<void> cleared between the head and the loss", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::vector<std::shared_ptr<void>> held;
    held.push_back(std::make_shared<torch::NoGradGuard>());
    auto logits = lm_head(x);
    held.clear();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a no-grad guard captured by a std::function reassigned between the head and the loss", R"(
#include <functional>
#include <memory>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::function<void()> keep = [frozen = std::make_shared<torch::NoGradGuard>()] {};
    auto logits = lm_head(x);
    keep = nullptr;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a no-grad guard held in a std::any whose block ends before the loss", R"(
#include <any>
#include <memory>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      std::any frozen = std::make_shared<torch::NoGradGuard>();
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a no-grad guard as the member of a class of the program held in an optional", R"(
  struct Frozen { torch::NoGradGuard guard; int depth = 0; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    c10::optional<Frozen> frozen;
    frozen.emplace();
    auto logits = lm_head(x);
    frozen.reset();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a no-grad guard in a class of the program held through a pointer to its base", R"(
#include <memory>
  struct Scope { virtual ~Scope() = default; };
  struct FrozenScope : Scope { torch::NoGradGuard guard; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::unique_ptr<Scope> scope = std::make_unique<FrozenScope>();
    auto logits = lm_head(x);
    scope.reset();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a no-grad guard in a class of the program handed over by the caller through its base", R"(
#include <memory>
  struct Scope { virtual ~Scope() = default; };
  struct FrozenScope : Scope { torch::NoGradGuard guard; };
  torch::Tensor forward(torch::Tensor x, std::unique_ptr<Scope> scope, torch::Tensor labels) {
    torch::Tensor logits;
    {
      std::unique_ptr<Scope> held = std::move(scope);
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a no-grad guard made with new and kept as a void pointer", R"(
  void *frozen_ = nullptr;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    frozen_ = new torch::NoGradGuard();
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- library calls that run the program's code or write what their name does not say ----------
    {"a backward of another objective between the head and the loss runs the program's hooks", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor aux, torch::Tensor labels) {
    auto logits = lm_head(x);
    aux.sum().backward();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a tensor made to share the input's storage with set_, written between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor a;
    a.set_(x);
    auto logits = lm_head(x);
    a.mul_(2);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a tensor given the head's weight as its data, written between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor a;
    a.set_data(lm_head->weight.detach());
    auto logits = lm_head(x);
    a.zero_();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the input kept in a c10::List (const methods, shared elements), written through it between head and loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    c10::List<torch::Tensor> kept;
    kept.push_back(x);
    auto logits = lm_head(x);
    kept.get(0).mul_(2);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"an ATen helper that copies into the input it takes by const reference", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    at::native::copy_ignoring_overlaps(x, x.clone());
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"an ATen helper that resizes the input it takes by const reference", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    at::native::resize_output(x, {6, 16});
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a signal raised between the head and the loss runs the program's handler", R"(
#include <csignal>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    std::raise(SIGUSR1);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a signal sent to the process itself between the head and the loss", R"(
#include <signal.h>
#include <unistd.h>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    kill(getpid(), SIGUSR1);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"torch::autograd::grad between the head and the loss runs the program's hooks", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor aux, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto grads = torch::autograd::grad({aux.sum()}, {aux});
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a conversion operator of the program called inside a brace list between the head and the loss", R"(
  struct Width { int64_t v; operator int64_t() const; };
  torch::Tensor forward(torch::Tensor x, Width w, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto z = torch::zeros({w});
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a comparator of the program given to a library algorithm between the head and the loss", R"(
#include <algorithm>
  struct Before { bool operator()(int a, int b) const; };
  torch::Tensor forward(torch::Tensor x, const std::vector<int> &order, torch::Tensor labels) {
    auto logits = lm_head(x);
    bool sorted = std::is_sorted(order.begin(), order.end(), Before{});
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a map whose comparator is the program's, looked up between the head and the loss", R"(
#include <map>
  struct Before { bool operator()(int a, int b) const; };
  std::map<int, int, Before> slots_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto found = slots_.count(2);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a class of the program with a copy constructor, copied by a vector's push_back between the head and the loss", R"(
  struct Config { Config(const Config &other); int v; };
  torch::Tensor forward(torch::Tensor x, const Config &c, torch::Tensor labels) {
    std::vector<Config> kept;
    auto logits = lm_head(x);
    kept.push_back(c);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a vector of a class of the program with a copy assignment, assigned between the head and the loss", R"(
  struct Config { Config &operator=(const Config &other); int v; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::vector<Config> kept, from;
    auto logits = lm_head(x);
    kept = from;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"std::sort over a class of the program whose operator< is a friend, between the head and the loss", R"(
#include <algorithm>
  struct Score { int v; friend bool operator<(const Score &a, const Score &b); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    Score scores[4] = {};
    auto logits = lm_head(x);
    std::sort(scores, scores + 4);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a vector of a class with a destructor of the program ends its block before the loss", R"(
  struct Tracker { ~Tracker(); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      std::vector<Tracker> trackers(2);
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a module handed over as the library's base, whose class of the program overrides train, put in eval mode", R"(
  struct Frozen : torch::nn::Module { void train(bool on) override; };
  torch::Tensor forward(torch::Tensor x, torch::nn::Module &m, torch::Tensor labels) {
    auto logits = lm_head(x);
    m.eval();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the vmap nesting level raised between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    at::impl::VmapMode::increment_nesting();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"an assignment operator of the program's class, called between the head and the loss", R"(
  struct Acc { Acc &operator=(const Acc &other); int v; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    Acc a, b;
    auto logits = lm_head(x);
    a = b;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a compound assignment operator of the program (a friend), called between the head and the loss", R"(
  struct Acc { int v; friend Acc &operator+=(Acc &a, int b); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    Acc a{0};
    auto logits = lm_head(x);
    a += 1;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a class whose member has a copy constructor of the program, copied between the head and the loss", R"(
  struct Timer { Timer(); Timer(const Timer &other); };
  struct Record { Timer t; int step; };
  torch::Tensor forward(torch::Tensor x, const Record &last, torch::Tensor labels) {
    auto logits = lm_head(x);
    Record copy = last;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head's input written through an optional's operator* (a reference, not a fresh result)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    c10::optional<torch::Tensor> cache = x;
    auto logits = lm_head(x);
    (*cache).mul_(0.5);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"normalize given options made before the head whose out is the head's input", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto options = F::NormalizeFuncOptions().dim(-1).out(x);
    auto logits = lm_head(x);
    auto unit = F::normalize(x, options);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a Sequential, which runs the modules it holds (the program's, perhaps), called between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor other, torch::Tensor labels) {
    torch::nn::Sequential stack;
    auto logits = lm_head(x);
    auto y = stack->forward(torch::zeros({2, 4}));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a deferred std::async's function, run by its future's get() between the head and the loss", R"(
#include <future>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto later = std::async(std::launch::deferred, [&] { x.mul_(2.0); return 0; });
    auto logits = lm_head(x);
    int done = later.get();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the bias written as a running mean by batch_norm_update_stats between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto stats = at::batch_norm_update_stats(x, lm_head->bias, torch::Tensor(), 0.1);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"denormals flushed between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    at::globalContext().setFlushDenormal(true);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the thread's autograd state assigned between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    c10::AutogradState::get_tls_state() = c10::AutogradState(false, false, false);
    auto logits = lm_head(x);
    c10::AutogradState::get_tls_state() = c10::AutogradState(true, false, false);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the thread's autograd state swapped between the head and the loss", R"(
#include <utility>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    c10::AutogradState saved(false, false, false);
    std::swap(c10::AutogradState::get_tls_state(), saved);
    auto logits = lm_head(x);
    std::swap(c10::AutogradState::get_tls_state(), saved);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the thread's autograd state written through a pointer taken before the head", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    c10::AutogradState *state = &c10::AutogradState::get_tls_state();
    auto logits = lm_head(x);
    *state = c10::AutogradState(true, false, false);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the dispatch keys' thread-local set swapped between the head and the loss", R"(
#include <utility>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    c10::impl::PODLocalDispatchKeySet below;
    auto logits = lm_head(x);
    std::swap(c10::impl::raw_local_dispatch_key_set, below);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- control entering between the head and the loss again -------------------------------------
    {"a setjmp between the head and the loss, which a longjmp enters again", R"(
#include <csetjmp>
  std::jmp_buf retry_point;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    setjmp(retry_point);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- a reference or pointer the fused call reads again, bound to a local rebound in between -------
    {"the weight through a const reference to a local re-bound between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor other, torch::Tensor labels) {
    torch::Tensor weight = lm_head->weight;
    const auto &w = weight;
    auto logits = F::linear(x, w);
    weight = other;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the weight through a pointer to a local swapped between the head and the loss", R"(
#include <utility>
  torch::Tensor forward(torch::Tensor x, torch::Tensor other, torch::Tensor labels) {
    torch::Tensor weight = lm_head->weight;
    torch::Tensor *wp = &weight;
    auto logits = F::linear(x, *wp);
    std::swap(weight, other);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head's module through a reference to a local handle re-bound between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::nn::Linear other, torch::Tensor labels) {
    torch::nn::Linear head = lm_head;
    auto &module = head;
    auto logits = module(x);
    head = other;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the logits through a const reference, the logits re-bound before the loss reads it", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor other, torch::Tensor labels) {
    auto logits = lm_head(x);
    const auto &flat = logits;
    logits = other;
    return F::cross_entropy(flat.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "head-not-linear"},
    // ---- what the head's parts are spelled with, changed between the head and the loss -------------
    {"a macro defined between the head and the loss over the head's input's name", R"(
  torch::Tensor other_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
#define x other_
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
#undef x
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a macro over the input's name restored by a pragma between the head and the loss", R"(
  torch::Tensor other_;
#define x other_
#pragma push_macro("x")
#undef x
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
#pragma pop_macro("x")
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a macro over the input's name restored by _Pragma between the head and the loss", R"case(
  torch::Tensor other_;
#define x other_
#pragma push_macro("x")
#undef x
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    _Pragma("pop_macro(\"x\")")
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)case", Verb::RefusesWith, "inputs-modified"},
    {"a macro over the input's name restored by a macro that expands to _Pragma", R"case(
  torch::Tensor other_;
#define RESTORE _Pragma("pop_macro(\"x\")")
#define x other_
#pragma push_macro("x")
#undef x
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    RESTORE
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)case", Verb::RefusesWith, "inputs-modified"},
    {"a macro over the head's module defined with the %: digraph between the head and the loss", R"(
  torch::nn::Linear other_{nullptr};
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
%:define lm_head other_
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
%:undef lm_head
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a macro over the input's name defined through a line splice between the head and the loss", R"(
  torch::Tensor other_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
#\
define x other_
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
#undef x
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a macro the head's parts do not name, and a directive in a comment, between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
#define VOCAB 32
    // #define x other_ (commented out)
    return F::cross_entropy(logits.view({-1, VOCAB}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
#define VOCAB 32
    // #define x other_ (commented out)
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, VOCAB}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, VOCAB}), labels.view(-1));
  }
)"},
    {"an #include between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
#include <nothing.h>
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"an #include after a null directive between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
#
#include <nothing.h>
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a using-declaration between the head and the loss hiding the global the head's input names", R"(
#include <globals.h>
  torch::Tensor forward(torch::Tensor labels) {
    auto logits = lm_head(hidden_in);
    using alt::hidden_in;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- another thread of the program let run between the head and the loss ----------------------
    {"a worker released and awaited through atomics between the head and the loss", R"(
#include <atomic>
#include <thread>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::atomic<bool> go{false}, done{false};
    std::thread worker([&] { while (!go.load()) {} x.mul_(2.0); done.store(true); });
    auto logits = lm_head(x);
    go.store(true);
    while (!done) {}
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    worker.join();
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"an atomic counter's inherited operators and loads between the head and the loss", R"(
#include <atomic>
#include <thread>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::atomic<int> stage{0};
    std::thread worker([&] { while (stage.load() < 1) {} x.mul_(2.0); stage.fetch_add(1); });
    auto logits = lm_head(x);
    ++stage;
    while (stage.load() < 2) {}
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    worker.join();
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a worker's condition waited for under a lock taken between the head and the loss", R"(
#include <condition_variable>
#include <mutex>
#include <thread>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::mutex m;
    std::condition_variable changed;
    bool ready = false;
    std::thread worker([&] { x.mul_(2.0); { std::lock_guard<std::mutex> hold(m); ready = true; } changed.notify_one(); });
    auto logits = lm_head(x);
    {
      std::unique_lock<std::mutex> lock(m);
      while (!ready)
        changed.wait(lock);
    }
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    worker.join();
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a conversion operator of the program run by a library template between the head and the loss", R"(
  struct Meter { operator float() const; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::vector<Meter> meters(2);
    auto logits = lm_head(x);
    std::vector<float> values(meters.begin(), meters.end());
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"an allocator of the program whose allocate a vector calls between the head and the loss", R"(
  template <class T> struct Arena {
    using value_type = T;
    T *allocate(std::size_t n);
    void deallocate(T *p, std::size_t n);
  };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::vector<float, Arena<float>> kept;
    auto logits = lm_head(x);
    kept.push_back(1.0f);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"std::sort over a class template of the program whose operator< is a function template (found through its argument)", R"(
#include <algorithm>
  template <class T> struct Key { int v; };
  struct Tag { template <class T> friend bool operator<(const Key<T> &a, const Key<T> &b); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    Key<Tag> keys[2] = {};
    auto logits = lm_head(x);
    std::sort(keys, keys + 2);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a tuple holding a class with a copy constructor of the program (in the tuple's pack), copied between the head and the loss", R"(
#include <tuple>
  struct Box { Box(); Box(const Box &other); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::tuple<int, Box> kept;
    auto logits = lm_head(x);
    auto copy = kept;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a batch norm in training updates the running statistics it is given: the head's bias", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor other, torch::Tensor var, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto normed = torch::batch_norm(other, {}, {}, lm_head->bias, var, true, 0.1, 1e-5, false);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a scope guard whose deleter writes the head's input ends its block before the loss", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      auto restore = [&](double *p) { x.mul_(2.0); delete p; };
      std::unique_ptr<double, decltype(restore)> guard(new double(0.5), restore);
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a shared_ptr given a deleter of the program ends its block before the loss", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      std::shared_ptr<double> guard(new double(0.5), [&](double *p) { x.mul_(2.0); delete p; });
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the thread's dispatch keys forced by a guard around the head only", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      c10::impl::ForceDispatchKeyGuard below(c10::impl::tls_local_dispatch_key_set());
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- the thread's mode: the head runs under the mode at the head, the fused call at the loss ----
    {"the head under a no-grad guard whose block ends before the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      torch::NoGradGuard frozen;
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a no-grad guard made between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    at::AutoGradMode off(false);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"grad mode switched off around the head", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    at::GradMode::set_enabled(false);
    auto logits = lm_head(x);
    at::GradMode::set_enabled(true);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the thread's dispatch keys forced back between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto saved = c10::impl::tls_local_dispatch_key_set();
    auto logits = lm_head(x);
    c10::impl::_force_tls_local_dispatch_key_set(saved);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"autocast switched between the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    at::autocast::set_cpu_enabled(true);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a no-grad guard over both the head and the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::NoGradGuard frozen;
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::NoGradGuard frozen;
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"a shared_ptr<void> holding a no-grad guard over both the head and the loss", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::shared_ptr<void> frozen = std::make_shared<torch::NoGradGuard>();
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::shared_ptr<void> frozen = std::make_shared<torch::NoGradGuard>();
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"a vector of a plain struct of the program (no code of its own) pushed into between the head and the loss", R"(
  struct Plain { int v; float w; };
  torch::Tensor forward(torch::Tensor x, const Plain &p, torch::Tensor labels) {
    std::vector<Plain> kept;
    auto logits = lm_head(x);
    kept.push_back(p);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  struct Plain { int v; float w; };
  torch::Tensor forward(torch::Tensor x, const Plain &p, torch::Tensor labels) {
    std::vector<Plain> kept;
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    kept.push_back(p);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"an atomic counter stepped before the head and after the loss only", R"(
#include <atomic>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels, std::atomic<int> &steps) {
    steps.fetch_add(1);
    auto logits = lm_head(x);
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    steps.fetch_add(1);
    return loss;
  }
)", Verb::RewritesTo, R"(
#include <atomic>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels, std::atomic<int> &steps) {
    steps.fetch_add(1);
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    auto loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    steps.fetch_add(1);
    return loss;
  }
)"},
    {"a module handed over as the library's base, where no class of the program overrides the library's virtual functions", R"(
  struct Plain : torch::nn::Module { Plain(); };
  torch::Tensor forward(torch::Tensor x, torch::nn::Module &m, torch::Tensor labels) {
    auto logits = lm_head(x);
    m.eval();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  struct Plain : torch::nn::Module { Plain(); };
  torch::Tensor forward(torch::Tensor x, torch::nn::Module &m, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    m.eval();
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"a vector of a class whose constructor is empty, resized between the head and the loss", R"(
  struct Cfg { Cfg() {} int n = 0; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::vector<Cfg> cs;
    auto logits = lm_head(x);
    cs.resize(2);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  struct Cfg { Cfg() {} int n = 0; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::vector<Cfg> cs;
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    cs.resize(2);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"the training flag read between the head and the loss where a class of the program overrides a library virtual", R"(
  struct Frozen : torch::nn::Module { void train(bool on) override; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    bool training = is_training();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  struct Frozen : torch::nn::Module { void train(bool on) override; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    bool training = is_training();
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"a model with a std::function member: its members used between the head and the loss", R"(
#include <functional>
  std::function<torch::Tensor(const torch::Tensor &)> activation_;
  torch::Tensor hidden_;
  torch::Tensor forward(torch::Tensor other, torch::Tensor labels) {
    auto logits = lm_head(hidden_);
    hidden_ = other;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
#include <functional>
  std::function<torch::Tensor(const torch::Tensor &)> activation_;
  torch::Tensor hidden_;
  torch::Tensor forward(torch::Tensor other, torch::Tensor labels) {
    auto lmfuse_hidden = hidden_;
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(lmfuse_hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden);
    hidden_ = other;
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(lmfuse_hidden, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"member input rebound after the head: read once at the head", R"(
  torch::Tensor hidden_;
  torch::Tensor forward(torch::Tensor other, torch::Tensor labels) {
    auto logits = lm_head(hidden_);
    hidden_ = other;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor hidden_;
  torch::Tensor forward(torch::Tensor other, torch::Tensor labels) {
    auto lmfuse_hidden = hidden_;
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(lmfuse_hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden);
    hidden_ = other;
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(lmfuse_hidden, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"an input written as std::move(h): the hoisted local copies it, as the head's const reference did", R"(
  std::pair<torch::Tensor, torch::Tensor> forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(std::move(h));
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {loss, h};
  }
)", Verb::RewritesTo, R"(
  std::pair<torch::Tensor, torch::Tensor> forward(torch::Tensor h, torch::Tensor labels) {
    auto lmfuse_hidden = static_cast<const torch::Tensor &>(std::move(h));
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(lmfuse_hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden);
    auto loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(lmfuse_hidden, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {loss, h};
  }
)"},
    {"head weight scaled in place", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    lm_head->weight.mul_(0.5);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"head bias changed in place", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head->forward(x);
    lm_head->bias.add_(1.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"head module replaced", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    lm_head = torch::nn::Linear(16, 32);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"head module converted by a non-const method", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    lm_head->to(torch::kHalf);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"head weight re-initialised by a library in-place function", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    torch::nn::init::normal_(lm_head->weight);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"tied weight changed through the embedding", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = F::linear(x, wte->weight);
    wte->weight.div_(2.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"weight argument of a functional head changed through another parameter (may alias)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor other, torch::Tensor labels) {
    auto logits = F::linear(x, w);
    other.zero_();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input changed with a compound assignment through an alias", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor same = x;
    auto logits = lm_head(x);
    same += 1.0;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"input changed inside the loss's own arguments", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1),
                            F::CrossEntropyFuncOptions().ignore_index((x.zero_(), -1)));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a goto can run anything between head and loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    int pass = 0;
  again:
    loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    x.add_(1.0);
    if (pass++ == 0) goto again;
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},

    // ---- the guard's inputs changed between the head and the `if` (the rewrite repeats the test) --
    {"labels reset between head and guard", R"(
  Output forward(torch::Tensor x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(x);
    targets = c10::nullopt;
    torch::Tensor loss;
    if (targets.has_value())
      loss = F::cross_entropy(logits.view({-1, 32}), targets->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"labels reset through a reference", R"(
  Output forward(torch::Tensor x, c10::optional<torch::Tensor> targets) {
    auto &same = targets;
    auto logits = lm_head(x);
    same.reset();
    torch::Tensor loss;
    if (targets.has_value())
      loss = F::cross_entropy(logits.view({-1, 32}), targets->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"guard flag flipped through a pointer", R"(
  Output forward(torch::Tensor x, torch::Tensor targets, bool training) {
    bool *flag = &training;
    auto logits = lm_head(x);
    *flag = false;
    torch::Tensor loss;
    if (training)
      loss = F::cross_entropy(logits.view({-1, 32}), targets.view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"member guard flag changed by a member function", R"(
  bool training_ = true;
  void stop();
  Output forward(torch::Tensor x, torch::Tensor targets) {
    auto logits = lm_head(x);
    stop();
    torch::Tensor loss;
    if (training_)
      loss = F::cross_entropy(logits.view({-1, 32}), targets.view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"labels cleared by a user function", R"(
  static void clear(c10::optional<torch::Tensor> &labels);
  Output forward(torch::Tensor x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(x);
    clear(targets);
    torch::Tensor loss;
    if (targets)
      loss = F::cross_entropy(logits.view({-1, 32}), targets->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "inputs-modified"},

    // ---- accepted: nothing between head and loss can change an input ---------------------------------
    {"the loss in the branch of ?: taken with labels, the logits handed out: the head repeats the test", R"(
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss = labels.defined() ? F::cross_entropy(logits.view({-1, 32}), labels.view(-1)) : torch::Tensor();
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss = labels.defined() ? (lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1))) : torch::Tensor();
    return {logits, loss};
  }
)"},
    {"the loss in the second branch of ?: under a negated labels test", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    auto loss = !labels ? torch::Tensor() : F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && static_cast<bool>(labels) ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    auto loss = !labels ? torch::Tensor() : (lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
        : F::cross_entropy(logits.view({-1, 32}), labels->view(-1)));
    return {logits, loss};
  }
)"},
    {"a labels test joined with is_training(), the logits handed out: the head repeats the whole condition", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value() && is_training()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && (labels.has_value() && is_training()) ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.has_value() && is_training()) loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
        : F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)"},
    {"a labels test through the optional's -> and *, the logits handed out: the head repeats the whole condition", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value() && labels->defined() && (*labels).defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && (labels.has_value() && labels->defined() && (*labels).defined()) ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.has_value() && labels->defined() && (*labels).defined()) loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
        : F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)"},
    {"a labels test through a program wrapper's ->, the logits handed out", R"(
  struct Held {
    torch::Tensor t;
    mutable int reads = 0;
    bool has_value() const { return t.defined(); }
    const torch::Tensor *operator->() const { ++reads; return &t; }
  };
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels, const Held &held) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value() && held->defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a labels test through the optional's value(), which throws on an empty one, the logits handed out", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value() && labels.value().defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a labels test multiplied through the library's binary operator*, the logits handed out", R"(
  Output forward(torch::Tensor h, torch::Tensor labels, torch::Tensor scale) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined() && (scale * 2.0).defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a flag and a labels test as the condition of ?:, the logits handed out", R"(
  bool training_ = true;
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto loss = training_ && labels.defined() ? F::cross_entropy(logits.view({-1, 32}), labels.view(-1)) : torch::zeros({});
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  bool training_ = true;
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && (training_ && labels.defined()) ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    auto loss = training_ && labels.defined() ? (lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1))) : torch::zeros({});
    return {logits, loss};
  }
)"},
    {"a labels test beside built-in casts, subscripts and ?: over members: the head repeats them", R"(
  bool flags_[2] = {true, false};
  int mode_ = 0;
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined() && static_cast<bool>(flags_[mode_ == 1 ? 1 : 0]) && !(int)mode_) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  bool flags_[2] = {true, false};
  int mode_ = 0;
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && (labels.defined() && static_cast<bool>(flags_[mode_ == 1 ? 1 : 0]) && !(int)mode_) ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined() && static_cast<bool>(flags_[mode_ == 1 ? 1 : 0]) && !(int)mode_) loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {logits, loss};
  }
)"},
    {"a fresh tensor written between head and loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto count = torch::zeros({1});
    count.add_(1.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    auto count = torch::zeros({1});
    count.add_(1.0);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"a clone of the input written between head and loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto noisy = x.clone();
    noisy.mul_(2.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    auto noisy = x.clone();
    noisy.mul_(2.0);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"labels rebound (they are read at the loss by both versions)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto y = labels.view(-1);
    y = y.to(torch::kLong);
    return F::cross_entropy(logits.view({-1, 32}), y);
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    auto y = labels.view(-1);
    y = y.to(torch::kLong);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, y, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels; }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(y), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), y);
  }
)"},
    {"shape reads and a member store that is not an input", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    const auto batch = x.size(0);
    pad_id_ = batch;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    const auto batch = x.size(0);
    pad_id_ = batch;
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    // ---- what the fused call evaluates again at the loss must give what it gave at the head --------
    {"a weight argument with a side effect", R"(
  torch::Tensor weights_[4];
  int i_ = 0;
  torch::Tensor pop_weight() { return weights_[i_++]; }
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, pop_weight());
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a weight picked by an index that converts through the program's operator: the conversion runs again at the loss", R"(
  struct Pick { int n = 0; operator int() { return n++ % 2; } };
  Pick pick_;
  torch::Tensor weights_[2];
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, weights_[pick_]);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a module expression with a side effect", R"(
  torch::nn::Linear heads_[2] = {nullptr, nullptr};
  int k_ = 0;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = heads_[k_++](h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a weight named by a block's reference that hides the member of its name: the loss, after the block, reads the member", R"(
  torch::Tensor W, W_task;
  Output forward(torch::Tensor x, c10::optional<torch::Tensor> y, bool task) {
    torch::Tensor logits;
    {
      const auto &W = task ? W_task : this->W;
      logits = F::linear(x, W);
    }
    torch::Tensor loss;
    if (y) loss = F::cross_entropy(logits.view({-1, 32}), y->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a module named by a block-local copy that hides the member of its name", R"(
  torch::nn::Linear task_head{nullptr};
  torch::Tensor forward(torch::Tensor x, torch::Tensor y) {
    torch::Tensor logits;
    {
      auto lm_head = task_head;
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), y.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the labels test repeated at the head, where a block-local of its name hides the labels", R"(
  c10::optional<torch::Tensor> aux_targets_;
  Output forward(torch::Tensor x, c10::optional<torch::Tensor> targets) {
    torch::Tensor logits;
    {
      auto targets = aux_targets_;
      logits = lm_head(x);
    }
    torch::Tensor loss;
    if (targets) loss = F::cross_entropy(logits.view({-1, 32}), targets->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"the head's input hidden at the loss by an if statement's own declaration", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (torch::Tensor h = torch::zeros({2, 5, 16}); labels.has_value())
      loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head's input hidden at the loss by a for statement's declaration", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    for (torch::Tensor h = torch::zeros({2}); !loss.defined();)
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head module, a member, hidden at the loss by a local of a block", R"(
  torch::nn::Linear other{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    {
      torch::nn::Linear lm_head = other;
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head's weight local hidden at the loss by a structured binding", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    torch::Tensor W = lm_head->weight;
    auto logits = F::linear(h, W);
    struct Other { torch::Tensor w; int n; };
    {
      auto [W, n] = Other{torch::zeros({32, 16}), 1};
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the labels a local shifted, hidden at the loss by a local of its block", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor targets, torch::Tensor others) {
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(1, 0, -1);
    auto shift_targets = targets.slice(1, 1);
    {
      torch::Tensor targets = others;
      return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
    }
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"the labels a local shifted, hidden at the loss by an if's declaration", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor targets, torch::Tensor others) {
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(1, 0, -1);
    auto shift_targets = targets.slice(1, 1);
    if (torch::Tensor targets = others; true)
      return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
    return {};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"the labels a local shifted, named by a macro defined between the shift and the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor targets, torch::Tensor others) {
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(1, 0, -1);
    auto shift_targets = targets.slice(1, 1);
#define targets others
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
#undef targets
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a type alias in the loss's block hiding the class the head's weight is read through", R"(
  struct Params { static torch::Tensor weight; };
  struct Other { static torch::Tensor weight; };
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, Params::weight);
    {
      using Params = Other;
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a using-directive in the loss's block, which may bring in another declaration of the input's name", R"(
#include <globals.h>
  torch::Tensor forward(torch::Tensor labels) {
    auto logits = lm_head(hidden_in);
    {
      using namespace alt;
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a local of the loss's block named like a member the head's parts name after `->` changes nothing", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    {
      int weight = 3;
      (void)weight;
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    {
      int weight = 3;
      (void)weight;
      return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
  }
)"},
    {"a declaration of the input's name in a block that ends before the loss hides nothing there", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    { auto h = logits.size(0); (void)h; }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    { auto h = logits.size(0); (void)h; }
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    // ---- code the analysis does not look into, between the head and the loss ---------------------------
    {"a function of the program between head and loss (it may switch the autograd mode)", R"(
  static void freeze_head();
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    freeze_head();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a destructor of the program's runs between head and loss", R"(
  struct ScaleOnExit { torch::Tensor w; ~ScaleOnExit() { w.mul_(0.5); } };
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    torch::Tensor logits;
    { ScaleOnExit s{lm_head->weight}; logits = lm_head(h); }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a block between head and loss whose local has a destructor of the program's", R"(
  struct ScaleOnExit { torch::Tensor w; ~ScaleOnExit() { w.mul_(0.5); } };
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    { ScaleOnExit s{lm_head->weight}; }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a temporary between head and loss with a destructor of the program's", R"(
  struct ScaleOnExit { torch::Tensor w; ~ScaleOnExit() { w.mul_(0.5); } };
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    ScaleOnExit{lm_head->weight};
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a user-written mode guard whose block ends between head and loss", R"(
  struct NoGradScope { NoGradScope(); ~NoGradScope(); };
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    torch::Tensor logits;
    { NoGradScope frozen; logits = lm_head(h); }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a site in a lambda whose enclosing function made an alias of the input", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto &alias = h;
    auto step = [&] {
      auto logits = lm_head(h);
      alias.mul_(2.0);
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    };
    return step();
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a site in a lambda that calls a lambda of the enclosing function", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto bump = [&] { h.mul_(2.0); };
    auto step = [&] {
      auto logits = lm_head(h);
      bump();
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    };
    return step();
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a switch case label between head and loss", R"(
  torch::Tensor cached_logits;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, int mode) {
    torch::Tensor logits = cached_logits;
    torch::Tensor loss;
    switch (mode) {
    case 0:;
      logits = lm_head(h);
    case 1:
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- options and labels the fused call would read at the loss, not where the original read them --
    {"an options local changed by a setter after it is made", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto opts = F::CrossEntropyFuncOptions();
    opts.ignore_index(0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), opts);
  }
)", Verb::RefusesWith, "loss-unsupported"},
    {"an options local changed through a reference", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto opts = F::CrossEntropyFuncOptions();
    auto &o = opts;
    o.label_smoothing(0.1);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), opts);
  }
)", Verb::RefusesWith, "loss-unsupported"},
    {"an options local reading a run-time value that changes before the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, int64_t pad) {
    auto logits = lm_head(h);
    auto opts = F::CrossEntropyFuncOptions().ignore_index(pad);
    pad = 0;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), opts);
  }
)", Verb::RefusesWith, "loss-unsupported"},
    {"an options local reading a run-time value that a later declaration shadows", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, int64_t pad) {
    auto logits = lm_head(h);
    auto opts = F::CrossEntropyFuncOptions().ignore_index(pad);
    {
      int64_t pad = -1;
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), opts);
    }
  }
)", Verb::RefusesWith, "loss-unsupported"},
    {"shifted labels whose unshifted root is re-bound before the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, torch::Tensor other) {
    auto logits = lm_head(h);
    auto shift_labels = labels.slice(1, 1);
    labels = other;
    return F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), shift_labels.reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
    // ---- found by running original and rewritten programs side by side (each was patched, and changed
    // the loss or the gradients) -----------------------------------------------------------------------
    {"the hoisted input reads a name another declarator of its statement declares", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto t = x;
    {
      auto t = x * 2.0, logits = lm_head(ln_f(t) + t);
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
  }
)", Verb::RefusesWith, "head-wrapped"},
    {"the hoisted input would run before an earlier declarator of its statement", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto noise = x.tanh(), logits = lm_head(x + x.tanh());
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1)) + noise.mean();
  }
)", Verb::RefusesWith, "head-wrapped"},
    {"the hoisted input ends the life of a temporary whose destructor writes the input", R"(
  struct Borrow {
    torch::Tensor t;
    ~Borrow() { t.zero_(); }
    torch::Tensor get() const { return t; }
  };
  torch::Tensor forward(torch::Tensor buffer, torch::Tensor labels) {
    auto logits = lm_head(Borrow{buffer}.get().view({-1, 16}));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "head-wrapped"},
    {"the hoisted input ends the life of a temporary mode guard that keeps the head out of the graph", R"(
  static const torch::Tensor &under(const torch::Tensor &t, const torch::NoGradGuard &) { return t; }
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(under(x, torch::NoGradGuard()).view({-1, 16}));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "head-wrapped"},
    {"the logits assigned a new value after the loss, in the loop that computes it again", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    torch::Tensor loss = torch::zeros({1});
    for (int i = 0; i < 2; ++i) {
      loss = loss + F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
      logits = torch::zeros({2, 5, 32});
    }
    return loss;
  }
)", Verb::RefusesWith, "logits-rebound"},
    {"an alias of the logits assigned after the loss, in the loop that computes it again", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto flat = logits.view({-1, 32});
    torch::Tensor loss = torch::zeros({1});
    for (int i = 0; i < 2; ++i) {
      loss = loss + F::cross_entropy(flat, labels.view(-1));
      flat = torch::zeros({10, 32});
    }
    return loss;
  }
)", Verb::RefusesWith, "logits-rebound"},
    {"the input written by an operand after the loss in its own expression (unsequenced)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1)) + x.mul_(0.0).mean();
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the weight written by a program function called after the loss in its own expression", R"(
  torch::Tensor decay() { lm_head->weight.mul_(0.5); return torch::zeros({1}); }
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1)) + decay();
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head's input made a tensor by the program's conversion operator", R"(
  struct Hidden {
    torch::Tensor t;
    operator torch::Tensor() const { return t.tanh(); }
  };
  torch::Tensor forward(Hidden hs, torch::Tensor labels) {
    auto logits = F::linear(hs, lm_head->weight);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head's weight made a tensor by the program's conversion operator", R"(
  struct Weight {
    torch::Tensor w;
    operator torch::Tensor() const { return w * 2.0; }
  };
  torch::Tensor forward(torch::Tensor x, Weight wn, torch::Tensor labels) {
    auto logits = F::linear(x, wn);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the labels narrowed by an inner cast the rewrite would drop", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1).to(torch::kInt).to(torch::kLong));
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"the loss under a test inside the labels test, the logits handed out", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels, bool train) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) {
      if (train) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    }
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"the loss in a branch of ?: whose condition calls the program's function, the logits handed out", R"(
  bool wants_loss();
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss = wants_loss() ? F::cross_entropy(logits.view({-1, 32}), labels.view(-1)) : torch::Tensor();
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"the loss in a branch of ?: inside the labels test, the logits handed out", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels, bool train) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) loss = train ? F::cross_entropy(logits.view({-1, 32}), labels->view(-1)) : torch::Tensor();
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a labels test and a call of the program's function, the logits handed out", R"(
  bool wants_loss();
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value() && wants_loss()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a labels test and a function of the program's marked pure, which may read what changes before the loss", R"(
  bool wants_loss() const __attribute__((pure));
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value() && wants_loss()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a labels test and a flag read through the program's conversion operator, the logits handed out", R"(
  struct Flag { int asked = 0; operator bool() { return ++asked > 1; } };
  Flag train_;
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value() && train_) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    // ---- a tensor's non-const method (reset) on what the fused call or the repeated test reads --------
    {"the head's input reset through a reference alias between head and loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto &alias = h;
    auto logits = lm_head(h);
    alias.reset();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the head's bias reset through the module between head and loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    lm_head->bias.reset();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the labels reset through the optional's -> before the test the head repeats, the logits handed out", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    labels->reset();
    torch::Tensor loss;
    if (labels.has_value() && labels->defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- a holder of references made before the head, assigned between head and loss: a write through them ---
    {"a std::tie of the head's input assigned between head and loss", R"(
#include <tuple>
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto tied = std::tie(h);
    auto logits = lm_head(h);
    tied = std::make_tuple(h * 2.0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a tuple of a reference to the head's weight, assigned between head and loss", R"(
#include <tuple>
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    std::tuple<torch::Tensor &> held{lm_head->weight};
    auto logits = lm_head(h);
    held = std::make_tuple(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a std::forward_as_tuple of the labels assigned before the test the head repeats, the logits handed out", R"(
#include <tuple>
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto tied = std::forward_as_tuple(labels);
    auto logits = lm_head(h);
    tied = std::make_tuple(c10::optional<torch::Tensor>());
    torch::Tensor loss;
    if (labels.has_value()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "inputs-modified"},
    // ---- another thread let run between head and loss through a C library's synchronisation ----------
    {"a POSIX semaphore waited for between head and loss", R"(
#include <semaphore.h>
  sem_t *ready_ = nullptr;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    sem_wait(ready_);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a thread joined between head and loss", R"(
#include <pthread.h>
  pthread_t worker_{};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    pthread_join(worker_, nullptr);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"a labels test and is_training(), which a class of the unit overrides, the logits handed out", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value() && is_training()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
};
struct Counting : Model {
  mutable int asked = 0;
  bool is_training() const noexcept override { return ++asked > 0; }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a labels test and a shape read, which throws on undefined labels, the logits handed out", R"(
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined() && labels.size(0) > 0) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"the condition of ?: flipped between head and loss", R"(
  bool training_ = true;
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    training_ = false;
    torch::Tensor loss = training_ ? F::cross_entropy(logits.view({-1, 32}), labels.view(-1)) : torch::Tensor();
    return {logits, loss};
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"labels reset between head and a labels test joined with is_training()", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    labels.reset();
    torch::Tensor loss;
    if (labels.has_value() && is_training()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "inputs-modified"},
    {"the loss in a loop that may run no time, the logits handed out", R"(
  Output forward(torch::Tensor h, torch::Tensor labels, int steps) {
    auto logits = lm_head(h);
    torch::Tensor loss = torch::zeros({1});
    for (int i = 0; i < steps; ++i)
      loss = loss + F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a break before the loss in a do-while, the logits handed out", R"(
  Output forward(torch::Tensor h, torch::Tensor labels, bool train) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    do {
      if (!train) break;
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    } while (false);
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"the head and a continue before the loss in a loop, the logits handed out", R"(
  Output forward(torch::Tensor h, torch::Tensor labels, bool train) {
    torch::Tensor logits, loss;
    for (int i = 0; i < 1; ++i) {
      logits = lm_head(h);
      if (!train) continue;
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a try around the loss, the logits handed out after its handler", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    try {
      if (labels.has_value()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    } catch (...) {
    }
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a try around the head and the loss, the logits handed out after its handler", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    torch::Tensor logits, loss;
    try {
      logits = lm_head(h);
      if (labels.has_value()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
      return {logits, loss};
    } catch (...) {
    }
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"a try around the head and the loss, the logits handed out only after the loss inside it", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    try {
      auto logits = lm_head(h);
      torch::Tensor loss;
      if (labels.has_value()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
      return {logits, loss};
    } catch (...) {
    }
    return {};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    try {
      auto logits = lmfuse::skip_logits() && labels.has_value() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
      torch::Tensor loss;
      if (labels.has_value()) loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
          : F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
      return {logits, loss};
    } catch (...) {
    }
    return {};
  }
)"},
    {"the loss in a loop, the logits used by nothing else", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, int steps) {
    auto logits = lm_head(h);
    torch::Tensor loss = torch::zeros({1});
    for (int i = 0; i < steps; ++i)
      loss = loss + F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, int steps) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss = torch::zeros({1});
    for (int i = 0; i < steps; ++i)
      loss = loss + (lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, 32}), labels.view(-1)));
    return loss;
  }
)"},
    {"the input written before the head only", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    x.mul_(2.0);
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    x.mul_(2.0);
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
};

}  // namespace

TEST_CASE("effect analysis cases", "[rewriter][effects]") {
  for (const Case &Item : Cases)
    DYNAMIC_SECTION(Item.Name) { checkCase(Item); }
}

TEST_CASE("the refusal names the statement that may change an input", "[rewriter][effects]") {
  RewriteResult Result = rewriteWithStubs(source(R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    lm_head->weight.mul_(0.5);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", false));
  REQUIRE(Result.Sites.size() == 1);
  const SiteRecord &Site = Result.Sites[0];
  CHECK(Site.Reason == ReasonKind::InputsModified);
  CHECK(Site.DetailLine == Site.Line + 1);
  CHECK(llvm::StringRef(Site.Detail).contains("lm_head->weight.mul_(0.5)"));
  CHECK(llvm::StringRef(Site.Detail).contains("`mul_`"));
}

// Functions the program itself adds to the library's namespaces are the program's: a rule's name never
// matches them, and their effects are never taken for the library's. Each case, read as the library's,
// was rewritten (or its change missed) while the program computes something else. Declared in the main
// file, or in a header of the program's folder (its root when no edit root is given); the same names
// declared by the library (the stubs, system headers) keep every case of the tables above.
TEST_CASE("the program's own functions in the library's namespaces are not the library's", "[rewriter][effects]") {
  struct ProgramCase {
    const char *Name;
    const char *Declarations;  // at namespace scope, before the model
    const char *Members;
    const char *Reason;
    const char *Says;  // in the detail
  };
  const ProgramCase Cases[] = {
      {"an overload of the loss", R"(
namespace torch { namespace nn { namespace functional {
// Chosen over the library's for non-const lvalues (the better reference binding).
inline Tensor cross_entropy(Tensor &input, Tensor &target) { return input * 2.0; }
}}}
)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits, labels);
  }
)", "loss-unsupported", "declared by this program"},
      {"an overload of a function head", R"(
namespace torch {
inline Tensor linear(const Tensor &input, const Tensor &weight, const Tensor &bias, double scale) { return input; }
}
)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = torch::linear(h, lm_head->weight, lm_head->bias, 0.5);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "head-not-linear", ""},
      {"a helper in namespace torch that writes the head's input through a handle", R"(
namespace torch {
inline void rescale(Tensor t) { t.mul_(2.0); }
}
)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::rescale(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "inputs-modified", "rescale"},
      {"an overload of log_softmax before nll_loss", R"(
namespace torch { namespace nn { namespace functional {
inline Tensor log_softmax(const Tensor &input, int64_t dim, double temperature) { return input; }
}}}
)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::nll_loss(F::log_softmax(logits.view({-1, 32}), -1, 0.5), labels.view(-1));
  }
)", "head-not-linear", "log_softmax"},
  };
  for (const ProgramCase &Item : Cases) {
    DYNAMIC_SECTION(Item.Name) {
      const std::string Model = std::string(ModelOpen) + Item.Members + ModelClose;
      for (bool InHeader : {false, true}) {
        INFO((InHeader ? "declared in a header of the program's folder" : "declared in the main file"));
        std::map<std::string, std::string> Headers;
        std::string Main;
        if (InHeader) {
          Headers["/program/ops.h"] = std::string("#pragma once\n#include <torch/torch.h>\n") + Item.Declarations;
          Main = std::string(Prelude) + "#include \"ops.h\"\n" + Model;
        } else {
          Main = std::string(Prelude) + Item.Declarations + Model;
        }
        std::vector<std::string> Args = stubArgs();
        Args.push_back("-I/program");
        RewriteResult Result = rewriteSource(Main, Args, defaultPatterns(), "/program/model.cpp", Headers);
        INFO(Result.Diagnostics << describeSites(Result));
        REQUIRE(Result.Parsed);
        REQUIRE(Result.Sites.size() == 1);
        CHECK(Result.Sites[0].Status == SiteStatus::Unmatched);
        CHECK(reasonCode(Result.Sites[0].Reason) == Item.Reason);
        CHECK(llvm::StringRef(Result.Sites[0].Detail).contains(Item.Says));
        CHECK(Result.Code == Main);
      }
    }
  }
}

// One site, refused inputs-modified with Says in its detail and the code untouched; or patched where Says is "".
static void checkInputsModifiedOrPatched(const RewriteResult &Result, const std::string &Main, const char *Says) {
  INFO(Result.Diagnostics << describeSites(Result));
  REQUIRE(Result.Parsed);
  REQUIRE(Result.Sites.size() == 1);
  if (*Says == '\0') {
    CHECK(Result.Sites[0].Status == SiteStatus::Patched);
    return;
  }
  CHECK(Result.Sites[0].Status == SiteStatus::Unmatched);
  CHECK(reasonCode(Result.Sites[0].Reason) == "inputs-modified");
  CHECK(llvm::StringRef(Result.Sites[0].Detail).contains(Says));
  CHECK(Result.Code == Main);
}

TEST_CASE("code that runs between the head and the loss without a call written there", "[rewriter][effects]") {
  // Each runs code of the program (or writes) where no call or assignment of the program's is spelled: a
  // release, a member's default initialiser, a temporary's destructor, an allocation function, a cleanup
  // function, an asm statement, an atomic builtin. Says: in the detail; "" expects the site patched.
  struct RunsCase {
    const char *Name;
    const char *Members;
    const char *Says;
  };
  const RunsCase Cases[] = {
      {"a shared_ptr member assigned nullptr", R"(
#include <memory>
  std::shared_ptr<int> ticket_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    ticket_ = nullptr;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "releases the value it held"},
      {"a shared_ptr parameter assigned another", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, std::shared_ptr<int> ticket, torch::Tensor labels) {
    auto logits = lm_head(x);
    ticket = std::make_shared<int>(0);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "releases the value it held"},
      {"a vector of shared_ptr assigned an empty list", R"(
#include <memory>
  std::vector<std::shared_ptr<int>> pending_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    pending_ = {};
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "releases the value it held"},
      {"a local shared_ptr given a function of the program as deleter, reset", R"(
#include <memory>
  static void drop(int *p);
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::shared_ptr<int> ticket(new int(0), drop);
    auto logits = lm_head(x);
    ticket.reset();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`reset` is called on `ticket`"},
      {"two shared_ptr swapped", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, std::shared_ptr<int> a, std::shared_ptr<int> b, torch::Tensor labels) {
    auto logits = lm_head(x);
    std::swap(a, b);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "by non-const reference"},
      {"a shared_ptr parameter copied into a block that ends between them", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, std::shared_ptr<int> ticket, torch::Tensor labels) {
    torch::Tensor logits;
    {
      auto kept = std::move(ticket);
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the block of `kept` ends"},
      {"an aggregate whose member's default initialiser calls the program", R"(
  static int bump();
  struct Tok { int id = bump(); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    Tok t{};
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the default initialiser of `Model::Tok::id`, run where the object is made: it calls `bump`"},
      {"a class default-constructed whose member's default initialiser calls the program", R"(
  static int bump();
  struct Tok { int id = bump(); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    Tok t;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "default initialiser of `Model::Tok::id`"},
      {"make_unique of a class whose member's default initialiser calls the program", R"(
#include <memory>
  static int bump();
  struct Tok { int id = bump(); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto t = std::make_unique<Tok>();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "default initialiser of `Model::Tok::id`"},
      {"a member's default initialiser in the loss's own logits code", R"(
  static int64_t vocab();
  struct Dims { int64_t v = vocab(); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, Dims{}.v}), labels.view(-1));
  }
)", "the default initialiser of `Model::Dims::v`, run where the object is made: it calls `vocab`"},
      {"a temporary with a destructor of the program bound to a const reference in a block", R"(
  struct Tracker { ~Tracker(); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      const Tracker &t = Tracker();
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the destructor of the temporary"},
      {"a temporary with a destructor of the program bound to a forwarding reference in a block", R"(
  struct Tracker { ~Tracker(); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      auto &&t = Tracker();
      logits = lm_head(x);
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the destructor of the temporary"},
      {"a class's own operator new", R"(
  struct Buf { static void *operator new(std::size_t size); int n; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    Buf *b = new Buf;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the program's `operator new`"},
      {"a class's own operator delete", R"(
  struct Buf { static void operator delete(void *p); int n; };
  torch::Tensor forward(torch::Tensor x, Buf *b, torch::Tensor labels) {
    auto logits = lm_head(x);
    delete b;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the program's `operator delete`"},
      {"an object with a destructor of the program deleted", R"(
  struct Tracker { ~Tracker(); };
  torch::Tensor forward(torch::Tensor x, Tracker *t, torch::Tensor labels) {
    auto logits = lm_head(x);
    delete t;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "it deletes a"},
      {"a cleanup function of the program at the end of a block", R"(
  static void halve(int *);
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    {
      __attribute__((cleanup(halve))) int token = 0;
    }
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "cleanup function `halve`"},
      {"an asm statement", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    asm volatile("" ::: "memory");
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`asm` statement"},
      {"an atomic builtin on the head's input's data", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    __atomic_store_n(static_cast<int *>(x.data_ptr()), 0, __ATOMIC_RELAXED);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "atomic builtin"},
      {"a module of the program's with a destructor, held as the library's base in a unique_ptr, released", R"(
#include <memory>
  struct Side : torch::nn::Module { ~Side() override; };
  std::unique_ptr<torch::nn::Module> side_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    side_ = nullptr;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "(a `Module` destroyed may be a"},
      {"an object deleted through a base whose virtual destructor a class of the program overrides", R"(
  struct Base { virtual ~Base() = default; };
  struct Leaf : Base { ~Leaf() override; };
  torch::Tensor forward(torch::Tensor x, Base *b, torch::Tensor labels) {
    auto logits = lm_head(x);
    delete b;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`Leaf`'s destructor (a `Base` destroyed may be a `Leaf`)"},
      {"a shared_ptr moved into a temporary by a cast", R"(
#include <memory>
  std::shared_ptr<int> ticket_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    std::shared_ptr<int>(static_cast<std::shared_ptr<int> &&>(ticket_));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "is moved from"},
      {"a weak_ptr released", R"(
#include <memory>
  std::weak_ptr<int> seen_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    seen_ = {};
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "releases the value it held"},
      {"array elements a list leaves out, made by a default initialiser that calls the program", R"(
  static int bump();
  struct Tok { int id = bump(); };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    Tok ts[3]{};
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "it calls `bump`"},
      // Still patched: nothing of the program's runs.
      {"a vector of shared_ptr read through its iterators", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    std::vector<std::shared_ptr<int>> counts{std::make_shared<int>(1)};
    auto logits = lm_head(x);
    int total = 0;
    for (auto &p : counts)
      total += *p;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", ""},
      {"a shared_ptr made before the head and read between", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto scale = std::make_shared<double>(0.5);
    auto logits = lm_head(x);
    double s = *scale;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", ""},
      {"an aggregate with literal default initialisers made between", R"(
  struct Out { double scale = 1.0; int steps = 0; };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    Out o{};
    Out p;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", ""},
      {"an int allocated and deleted between", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    int *n = new int(3);
    delete n;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", ""},
  };
  for (const RunsCase &Item : Cases) {
    DYNAMIC_SECTION(Item.Name) {
      const std::string Main = source(Item.Members, false);
      RewriteResult Result = rewriteWithStubs(Main);
      checkInputsModifiedOrPatched(Result, Main, Item.Says);
    }
  }
}

TEST_CASE("code the analysis does not read hands over values and the language runs code by name", "[rewriter][effects]") {
  // Each changes an input the fused call reads at the loss, or runs code of the program between the head and
  // the loss, where the statement between them names no input: a handle a function of the program handed out,
  // a reference or pointer member the fused call reads the weight through, the head's own assignment through
  // a reference, a structured binding's get<i>, a thread_local's first use, a C++20 parenthesised array's
  // filler, a coroutine's suspension, a constexpr function that writes, the floating-point environment, a
  // library call that runs loaded code. Says: in the detail; "" expects the site patched.
  struct HandedCase {
    const char *Name;
    const char *Declarations;  // at namespace scope, before the model (after <torch/torch.h>)
    const char *Members;
    const char *Says;
    bool Cxx20 = false;
  };
  const HandedCase Cases[] = {
      {"a handle a function of the program hands out before the head, written between", R"(
torch::Tensor hidden_view();
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto flat = hidden_view();
    auto logits = lm_head(x);
    flat.mul_(0.5);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`flat`"},
      {"a handle a function of the program stores into an argument before the head, written between", R"(
void lookup_hidden(torch::Tensor &out);
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor alias;
    lookup_hidden(alias);
    auto logits = lm_head(x);
    alias.zero_();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`alias`"},
      {"the weight read through a reference member whose referent is re-bound between", "", R"(
  torch::Tensor emb_ = torch::zeros({32, 16});
  torch::Tensor &out_w_ = emb_;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, out_w_);
    emb_ = emb_ * 0.5;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`out_w_` is a reference that may name it"},
      {"the weight read through a pointer member whose pointee is re-bound between", "", R"(
  torch::Tensor emb_ = torch::zeros({32, 16});
  torch::Tensor *out_w_ = &emb_;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, *out_w_);
    emb_ = emb_ * 0.5;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`out_w_` is a reference that may name it"},
      {"the head's output assigned through a reference to its own input", "", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor &out = x;
    out = lm_head(x);
    return F::cross_entropy(out.view({-1, 32}), labels.view(-1));
  }
)", "assigned to `out`, which names `x`"},
      {"a structured binding whose get<i> is the program's", R"(
#include <utility>
#include <tuple>
int bump();
struct Pair {
  int a = 0, b = 0;
  template <std::size_t I> int get() const { return bump(); }
};
namespace std {
template <> struct tuple_size<Pair> : integral_constant<size_t, 2> {};
template <size_t I> struct tuple_element<I, Pair> { using type = int; };
}
)", R"(
  Pair pair_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto &[first, second] = pair_;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "it calls `get`"},
      {"a thread_local first used between them, whose initialiser calls the program", R"(
int bump();
thread_local int steps_seen = bump();
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    ++steps_seen;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the initialiser of the thread_local `steps_seen`"},
      {"a parenthesised array whose elements left out are made by a default initialiser of the program", R"(
int bump();
struct Tok { int id = bump(); };
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    Tok toks[2](Tok{5});
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "runs the default initialiser of `Tok::id`", true},
      {"a coroutine suspended between them", R"(
#include <coroutine>
struct Task {
  struct promise_type {
    Task get_return_object() { return {}; }
    std::suspend_never initial_suspend() { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() {}
  };
};
torch::Tensor g_hidden, g_labels, g_loss;
torch::nn::Linear g_head{nullptr};
)", R"(
  Task step() {
    auto logits = g_head(g_hidden);
    co_await std::suspend_always{};
    g_loss = F::cross_entropy(logits.view({-1, 32}), g_labels.view(-1));
  }
)", "suspension point", true},
      {"a vector made between them of a class whose default initialiser calls a constexpr function that writes", R"(
#include <utility>
bool g_training = true;
struct Step { bool was_training = std::exchange(g_training, false); };
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    std::vector<Step> steps(1);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "was_training", true},
      {"the rounding mode switched between them", R"(
#include <cfenv>
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    std::fesetround(FE_TOWARDZERO);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`fesetround` between the head and the loss changes the mode"},
      {"a shared object loaded between them", R"(
#include <dlfcn.h>
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    void *plugin = dlopen("libmetrics.so", RTLD_NOW);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "dlopen"},
      {"an exception_ptr member released between them", R"(
#include <exception>
)", R"(
  std::exception_ptr pending_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    pending_ = nullptr;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "releases the value it held"},
      {"the weight read through a local pointer a function of the program gave, its pointee re-bound between", R"(
torch::Tensor *tied_weight();
)", R"(
  torch::Tensor emb_;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    torch::Tensor *w = tied_weight();
    auto logits = F::linear(h, *w);
    emb_ = emb_ * 0.5;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the input `w` is a reference that may name it"},
      {"the weight read through an array of pointers, its pointee re-bound between", "", R"(
  torch::Tensor emb_;
  torch::Tensor *heads_[1] = {&emb_};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, *heads_[0]);
    emb_ = emb_ * 0.5;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the input `heads_` is a reference that may name it"},
      {"the weight read through a reference_wrapper member, its referent re-bound between", R"(
#include <functional>
)", R"(
  torch::Tensor emb_;
  std::reference_wrapper<torch::Tensor> out_w_{emb_};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, out_w_.get());
    emb_ = emb_ * 0.5;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the input `out_w_` is a reference that may name it"},
      {"the head's output assigned through a reference bound through a pointer to its input", "", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor *p = &x;
    torch::Tensor &out = *p;
    out = lm_head(x);
    return F::cross_entropy(out.view({-1, 32}), labels.view(-1));
  }
)", "which names `x`"},
      {"a handle a constructor of the program makes before the head, written between", R"(
struct FlatView { FlatView(); torch::Tensor t; };
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    FlatView v;
    auto logits = lm_head(x);
    v.t.mul_(0.5);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`v`"},
      {"a handle a constructor of the program stores into its argument before the head, written between", R"(
struct Grab { explicit Grab(torch::Tensor &out); };
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor alias;
    Grab grab(alias);
    auto logits = lm_head(x);
    alias.zero_();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`alias`"},
      {"a handle a range-for over a function of the program's result hands out before the head, written between", R"(
std::vector<torch::Tensor> hidden_parts();
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor last;
    for (auto part : hidden_parts())
      last = part;
    auto logits = lm_head(x);
    last.zero_();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "`last`"},
      {"a static thread_local member used through an object between them", R"(
int bump();
struct Stats { static thread_local int steps; };
thread_local int Stats::steps = bump();
)", R"(
  Stats stats_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    int seen = stats_.steps;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the initialiser of the thread_local `steps`"},
      {"a thread_local first used between them, whose first use runs another's initialiser of the unit", R"(
int bump();
thread_local int t_seen = bump();
thread_local std::vector<int> t_counts;
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto counted = t_counts.size();
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "the initialiser of the thread_local `t_seen`, run on the first use of `t_counts`"},
      {"a vector made between them of a class whose default initialiser fills through iterators taken by value", R"(
#include <algorithm>
#include <span>
bool g_flags[1] = {true};
struct Step { bool cleared = (std::fill(std::span<bool>(g_flags).begin(), std::span<bool>(g_flags).end(), false), true); };
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    std::vector<Step> steps(1);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "cleared", true},
      // Still patched: what the program hands over is not written, or nothing of the program's runs.
      {"a tensor a function of the program returned, read between", "", R"(
  torch::Tensor scale_of();
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto scale = scale_of();
    auto logits = lm_head(x);
    auto doubled = scale * 2.0;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", ""},
      {"a thread_local with a constant initialiser used between them", R"(
thread_local int steps_seen = 0;
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    ++steps_seen;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", ""},
      {"a structured binding of an aggregate", R"(
struct Dims { long rows = 0, cols = 0; };
)", R"(
  Dims dims_;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto [rows, cols] = dims_;
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", ""},
      {"a vector made between them of a class whose default initialiser calls a constexpr function of the library that writes nothing", R"(
#include <algorithm>
struct Step { int width = std::max(1, 2); };
)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    std::vector<Step> steps(1);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", ""},
  };
  for (const HandedCase &Item : Cases) {
    DYNAMIC_SECTION(Item.Name) {
      const std::string Main =
          std::string("#include <torch/torch.h>\n") + Item.Declarations + ModelOpen + Item.Members + ModelClose;
      std::vector<std::string> Args = stubArgs();
      if (Item.Cxx20)
        Args[0] = "-std=c++20";
      RewriteResult Result = rewriteSource(Main, Args, defaultPatterns(), "model.cpp");
      checkInputsModifiedOrPatched(Result, Main, Item.Says);
    }
  }
}

// The rule set as data: which LibTorch calls are heads and losses, how loss options map onto the
// runtime's, which wrappers are benign, which guards test for labels, and what the rewrite emits.
// Loaded from YAML (patterns/libtorch.yaml); the built-in default is that same file embedded at
// build time, so users can extend the rules without recompiling.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace lmfuse::rewriter {

/// A module whose call is a plain linear head: Holder<Impl> called as m(x) or m->Method(x).
struct ModuleHeadPattern {
  std::string Holder;  ///< class template of the holder, e.g. torch::nn::ModuleHolder
  std::string Impl;    ///< the module implementation class, e.g. torch::nn::LinearImpl
  std::string Method = "forward";
  std::string Weight = "weight";  ///< member holding the [V, D] weight
  std::string Bias = "bias";      ///< member holding the [V] bias (undefined when absent)
};

/// A function that is a plain linear head: Callee(input, weight[, bias]).
struct FunctionHeadPattern {
  std::string Callee;
  unsigned Input = 0;
  unsigned Weight = 1;
  unsigned Bias = 2;
};

/// A head spelled as a product with the transpose of a weight: Callee(input, Wᵀ) for a function, or
/// input.Callee(Wᵀ) for a method (Input is then -1: the object is the input). No bias.
struct ProductHeadPattern {
  std::string Callee;  ///< qualified function or method name, e.g. at::matmul, at::Tensor::mm
  int Input = -1;
  unsigned Operand = 1;  ///< the argument that must be the weight's transpose
  /// The rank the product requires of its input (`mm`: 2), 0 for any: the skipped head checks it as the
  /// product would, since the fused call itself takes any rank.
  int HiddenRank = 0;
};

/// One spelling of a 2-D weight's transpose: Method(Arguments...) on the weight.
struct TransposePattern {
  std::string Method;
  std::vector<int64_t> Arguments;
};

/// A cross-entropy and how its options are spelled. A function (Callee) takes fluent setters on an
/// options argument, or positional arguments (unset positions are -1). A module (Impl: a
/// Holder<Impl> called as m(x, y) or m->Method(x, y)) takes its options from its construction, read
/// with the same setters, and holds them in OptionsMember at run time. InputLogSoftmax: the loss
/// takes log-probabilities (nll_loss), so its input must be log_softmax of the logits over the
/// class dimension.
struct LossPattern {
  std::string Callee;  ///< a function loss's qualified name; for a module loss, Impl's
  std::string Holder;  ///< module losses only
  std::string Impl;
  std::string Method = "forward";
  std::string OptionsMember;
  /// The module's member its forward applies as class weights (CrossEntropyLossImpl::weight, filled from
  /// options.weight() when constructed and assignable after): passed to the rewritten call, which refuses
  /// it when defined. Weights given through options alone would be missed.
  std::string WeightMember;
  unsigned Input = 0;
  unsigned Target = 1;
  int OptionsArgument = -1;
  std::map<std::string, std::string> Setters;  ///< runtime option -> setter name
  std::vector<std::string> UnsupportedSetters;
  std::map<std::string, int> Positional;       ///< runtime option (or "weight") -> argument index
  bool InputLogSoftmax = false;
  bool isModule() const { return !Impl.empty(); }
};

/// The spellings of log_softmax over the class dimension, which an nll_loss input must be.
struct LogSoftmaxPattern {
  std::vector<std::string> Callees;  ///< functions (input first) and Tensor methods
  std::vector<int64_t> Dims;         ///< the class dimension as it may be written
  std::string DtypeSetter;           ///< the options setter of an upcast (`.dtype(torch::kFloat)`)
};

struct ReductionPattern {
  std::string Type;     ///< type of the enumerator value, e.g. torch::enumtype::kSum
  int64_t Integer = 0;  ///< the at::Reduction integer
  std::string Value;    ///< "mean", "sum" or "none"
};

struct BenignPatterns {
  std::vector<std::string> Reshapes;
  std::vector<std::string> UpcastMethods;
  std::string CastMethod = "to";
  std::vector<std::string> UpcastTypes;
  std::vector<std::string> LabelCastTypes;
  /// Argument types of the cast method that move the labels to a device (`c10::Device`): the values stay.
  std::vector<std::string> LabelDeviceTypes;
  /// Methods that read only a tensor's shape, dtype or device: the skipped logits answer them.
  std::vector<std::string> ShapeReads;
};

/// The spellings of the causal shift (logits without their last position along the sequence
/// dimension, labels without their first): the calls that may write it, the dimensions it may be
/// written on, and the index types of `x.index({...})`. Which bounds make a call the shift is
/// decided in C++ (causal_shift.h), where the arithmetic is proven.
struct CausalShiftPatterns {
  std::string SliceMethod = "slice";    ///< x.slice(dim, start, end[, step])
  std::string NarrowMethod = "narrow";  ///< x.narrow(dim, start, length)
  std::string IndexMethod = "index";    ///< x.index({index, ...})
  std::string SizeMethod = "size";      ///< x.size(dim)
  std::string SizesMethod = "sizes";    ///< x.sizes()[dim]
  std::vector<int64_t> LogitsDims;      ///< dims the logits' shift may be written on, as written
  std::vector<int64_t> LabelsDims;      ///< dims the labels' shift may be written on, as written
  std::string IndexType;                ///< the element type of index lists (at::indexing::TensorIndex)
  std::string SliceType;                ///< at::indexing::Slice
  std::vector<std::string> EllipsisTypes;  ///< at::indexing::EllipsisIndexType
  std::string EllipsisLiteral = "...";  ///< the string an index list may spell the ellipsis with
  std::vector<std::string> NoneTypes;   ///< the type of at::indexing::None (c10::nullopt_t, ...)
};

struct GuardPatterns {
  std::vector<std::string> Methods;
  std::vector<std::string> NullConstants;
  /// Library methods that neither change nor throw, which a condition the rewrite repeats at the head
  /// may call besides Methods: `is_training()`.
  std::vector<std::string> PureMethods;
  /// Library operators of a labels wrapper that hand out what it holds (`operator->`, `operator*` of an
  /// optional), which such a condition may go through: `labels.has_value() && labels->defined()`.
  std::vector<std::string> Accessors;
};

/// What the effect analysis knows of library calls (effects.h): everything not listed is assumed
/// to be able to change what it is given.
struct EffectPatterns {
  /// Namespaces whose functions are the library's (their effects are known from their names and
  /// parameter types); calls to anything else are treated as able to change every tensor they reach.
  std::vector<std::string> LibraryNamespaces;
  /// Library calls that write the storage of a tensor they are given, besides every name ending in
  /// '_' (LibTorch's in-place convention) or "_out".
  std::vector<std::string> Writers;
  /// Options that make a library call write the tensors it is given (`F::relu(h, F::ReLUFuncOptions()
  /// .inplace(true))`, `F::embedding(ids, w, ....max_norm(1.0))`): set by a method of that name or a
  /// constructor parameter of that name, to anything but a literal `false`, anywhere in its arguments.
  std::vector<std::string> WritingOptions;
  /// Library calls that run code of the program (a backward's hooks, a custom autograd Function's forward,
  /// an operator whose kernel the program registered), by qualified name, a class template's methods by
  /// the template's: between the head and the loss, each counts as a call of the program's code.
  std::vector<std::string> ProgramCodeCalls;
  /// Library classes that hold code of the program without naming it in their type and run it
  /// (`SequentialImpl` and `AnyModule` run the modules they hold, `std::future` of a deferred `std::async`
  /// runs its function in `get()`, `std::thread` is joined): a value of one used, handed over or destroyed
  /// between the head and the loss counts as a call of the program's code.
  std::vector<std::string> CodeHolders;
  /// Library classes through which threads synchronise (`std::atomic`, `std::mutex`, a lock, a
  /// `std::condition_variable`): a value of one used, handed over or destroyed between the head and the
  /// loss lets code of the program on another thread run in between (a worker released by `go.store(true)`
  /// and awaited by spinning on another atomic), so it counts as a call of the program's code.
  std::vector<std::string> ThreadSynchronisers;
  /// Functions threads synchronise through (`sem_wait`, `pthread_join`): as a call on a thread synchroniser.
  std::vector<std::string> ThreadSynchronisingFunctions;
  /// Non-const methods that only hand out access to what an object holds (`operator->`, `value`).
  std::vector<std::string> Accessors;
  /// Library calls whose result never shares storage with their tensor arguments.
  std::vector<std::string> FreshResults;
  /// Library classes whose objects change the thread's autograd or autocast mode while they live
  /// (`NoGradGuard`), and library calls that change it (`set_enabled`): the head runs under the mode at
  /// the head, the fused call under the mode at the loss, so either between them refuses the site.
  std::vector<std::string> ModeGuards;
  std::vector<std::string> ModeSwitches;
  /// Library classes whose objects are the thread's modes (`AutogradState`, the dispatch keys' TLS): a
  /// write to one switches the mode as a mode switch does, so any non-const use of one between the head and
  /// the loss refuses the site.
  std::vector<std::string> ModeStates;
  /// Library classes that hide the type of what they hold (`any`, `function`): a value of one may hold a
  /// mode guard. A library class template given `void` (`std::shared_ptr<void>`) hides it too.
  std::vector<std::string> TypeHidingHolders;
  /// Library classes whose release (reset, reassigned, cleared, destroyed) may run code they were made with
  /// that their type does not name (`std::shared_ptr`'s deleter): between the head and the loss, releasing a
  /// value of one, or of a holder of one, counts as a call of the program's code, as does releasing a type
  /// hiding holder (whose held object's destructor may be the program's).
  std::vector<std::string> DeleterHolders;
  /// The code the rewrite runs again (the labels test at the head, the loss's logits code on a stand-in and
  /// again for the original's loss) may not write: a standard-library call that may write what it is given
  /// (a member that is not const, a parameter that refers to something not const) refuses the site, but for
  /// these members, which hand out what their object holds (`operator->`, `value`, `begin`), and these
  /// functions, which hand back what they are given (`move`, `as_const`).
  std::vector<std::string> StandardAccessors;
  std::vector<std::string> StandardPassThrough;
  /// Nor draw from a random generator: a function of these namespaces of a name one of whose overloads takes
  /// a parameter of class GeneratorType (or an optional of one): each run advances the generator.
  std::vector<std::string> RandomNamespaces;
  std::string GeneratorType;
};

/// A library call that differentiates with a graph of the gradient (double backward) unless its
/// create_graph argument is `false`: Callee(..., create_graph, ...), or object.Callee(...) for a method
/// (whose object is not counted).
struct SecondOrderPattern {
  std::string Callee;        ///< qualified function or method name, e.g. torch::autograd::grad
  unsigned CreateGraph = 0;  ///< the index of the create_graph argument
};

struct ReplacementPattern {
  std::string Include;
  std::string Call;
  std::string OptionsType;
  std::string Enabled;
  std::string SkipLogits;
  std::string UndefinedTensor;
  /// Called as SkippedLogits(hidden, weight, "file:line") where the head is skipped: a tensor with the
  /// logits' shape whose values cannot be used (the error names the site and the ways out).
  std::string SkippedLogits;
  /// Called as SkippedLogitsAfter(skipped, <code>) where a reshape of skipped logits runs on the fused
  /// path: the reshape run on a stand-in without values, giving skipped logits of the reshaped shape.
  std::string SkippedLogitsAfter;
  /// Options setter taking {"file:line", <variable or {}>, <code>, <ShiftDims{<logits dim>, <labels dim>} or {}>,
  /// <labels variable>, <labels code>}: the loss's logits input as the original computes it, for a shifted
  /// site the dims its shift is written on, and the loss's labels argument as the original computes it from
  /// the variable it starts from, checked by the fused call when it runs.
  std::string LogitsAsPassedSetter;
  std::string ShiftDims;
  /// Options setter taking AnalysedTypes<decltype(<expression>), <its type>, ...>(): the types the site was
  /// decided on, for the build's compiler to check (torch/include/lmfuse/analysed.h).
  std::string AnalysedSetter;
  std::string AnalysedTypes;
  /// The class template of a condition's value, `Holds<bool>`: an integer constant the site was decided on is
  /// asserted as `Holds<((<expression>) == <value>)>` against `Holds<true>`.
  std::string AnalysedValue;
  /// The alias template of the class that declares a member a pointer to member points to,
  /// `DeclaredIn<decltype(&::Head::forward)>`: which class name lookup in a module head's class found it in.
  std::string AnalysedMember;
  /// Code is a lambda `[&](const TensorType &StandIn) { return <the original's text>; }`.
  std::string TensorType;
  std::string StandIn = "lmfuse_logits";
  std::string LabelsStandIn = "lmfuse_labels";  ///< the parameter of the labels' code
  std::map<std::string, std::string> Reductions;  ///< "mean"/"sum" -> runtime enumerator
  std::string HoistedHidden = "lmfuse_hidden";
  /// Called as ModuleOptions(<module>->options) for a module loss: the loss options the module holds
  /// when the loss runs.
  std::string ModuleOptions;
  /// Options setter taking the dtype of an upcast of the logits (`.to(torch::kFloat)`), so the fused
  /// loss is returned in that dtype without first being rounded to the logits' dtype. Empty: the cast
  /// is appended to the fused result instead.
  std::string LossDtypeSetter;

  /// The names these write unqualified at the head of a qualified name (`lmfuse` of `lmfuse::enabled()`,
  /// `torch` of `torch::Tensor`): what they mean where the rewritten code stands decides what it calls.
  std::set<std::string> leadingQualifiers() const;
};

struct PatternSet {
  std::string Name;
  int64_t Version = 0;
  std::string Source;  ///< the file it came from, or "<built-in>"
  std::vector<ModuleHeadPattern> ModuleHeads;
  std::vector<FunctionHeadPattern> FunctionHeads;
  std::vector<ProductHeadPattern> ProductHeads;
  std::vector<TransposePattern> WeightTransposes;
  /// A product head's weight must be a member of a class derived from this (a parameter).
  std::string ParameterOwner;
  LogSoftmaxPattern LogSoftmax;
  std::vector<LossPattern> Losses;
  std::vector<ReductionPattern> Reductions;
  BenignPatterns Benign;
  CausalShiftPatterns CausalShift;
  std::vector<std::string> Softcap;
  std::vector<std::string> Indexing;
  std::vector<std::string> Normalizers;
  GuardPatterns Guards;
  EffectPatterns Effects;
  /// Calls that differentiate the fused loss's gradients again: the site's function making one is refused.
  std::vector<SecondOrderPattern> SecondOrder;
  ReplacementPattern Replacement;
};

/// Parses a pattern set from YAML text; BufferName names it in errors ("file:line:col: ... key").
llvm::Expected<PatternSet> parsePatterns(llvm::StringRef Yaml, llvm::StringRef BufferName);
/// Reads and parses a pattern file; a malformed file is an error naming the file, line and key.
llvm::Expected<PatternSet> loadPatternFile(llvm::StringRef Path);
/// The built-in rule set: patterns/libtorch.yaml embedded at build time.
llvm::Expected<PatternSet> loadDefaultPatterns();
/// The embedded YAML text itself (for --dump-patterns style uses and tests).
llvm::StringRef defaultPatternText();

/// Small lookups used by the analysis.
bool contains(llvm::ArrayRef<std::string> Names, llvm::StringRef Name);

}  // namespace lmfuse::rewriter

// Loads the rule set from YAML with LLVM's YAML I/O. Unknown and missing keys are errors that
// name the file, the line and the key, so a typo in a pattern file never silently drops a rule.
#include "patterns.h"

#include "loss_option_table.h"

#include <algorithm>
#include <string>

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"
#include "llvm/Support/YAMLTraits.h"
#include "llvm/Support/raw_ostream.h"

using namespace lmfuse::rewriter;

LLVM_YAML_IS_SEQUENCE_VECTOR(lmfuse::rewriter::ModuleHeadPattern)
LLVM_YAML_IS_SEQUENCE_VECTOR(lmfuse::rewriter::FunctionHeadPattern)
LLVM_YAML_IS_SEQUENCE_VECTOR(lmfuse::rewriter::LossPattern)
LLVM_YAML_IS_SEQUENCE_VECTOR(lmfuse::rewriter::ProductHeadPattern)
LLVM_YAML_IS_SEQUENCE_VECTOR(lmfuse::rewriter::TransposePattern)
LLVM_YAML_IS_SEQUENCE_VECTOR(lmfuse::rewriter::ReductionPattern)
LLVM_YAML_IS_SEQUENCE_VECTOR(lmfuse::rewriter::SecondOrderPattern)

namespace llvm::yaml {

// Validation runs even after a key failed to parse; the first error is the one to show, and the half-read
// pattern would only add misleading ones ("names no head").
bool failedAlready(IO &Io) { return !Io.outputting() && static_cast<Input &>(Io).error(); }

template <typename Value> struct CustomMappingTraits<std::map<std::string, Value>> {
  static void inputOne(IO &Io, StringRef Key, std::map<std::string, Value> &Map) {
    Io.mapRequired(Key.str().c_str(), Map[Key.str()]);
  }
  static void output(IO &Io, std::map<std::string, Value> &Map) {
    for (auto &[Key, Item] : Map)
      Io.mapRequired(Key.c_str(), Item);
  }
};

template <> struct MappingTraits<ModuleHeadPattern> {
  static void mapping(IO &Io, ModuleHeadPattern &P) {
    Io.mapRequired("holder", P.Holder);
    Io.mapRequired("impl", P.Impl);
    Io.mapOptional("method", P.Method, std::string("forward"));
    Io.mapOptional("weight", P.Weight, std::string("weight"));
    Io.mapOptional("bias", P.Bias, std::string("bias"));
  }
};

template <> struct MappingTraits<FunctionHeadPattern> {
  static void mapping(IO &Io, FunctionHeadPattern &P) {
    Io.mapRequired("callee", P.Callee);
    Io.mapRequired("input", P.Input);
    Io.mapRequired("weight", P.Weight);
    Io.mapRequired("bias", P.Bias);
  }
  static std::string validate(IO &Io, FunctionHeadPattern &P) {
    if (failedAlready(Io))
      return "";
    if (P.Input == P.Weight || P.Input == P.Bias || P.Weight == P.Bias)
      return "head '" + P.Callee + "': 'input', 'weight' and 'bias' must name three different arguments";
    return "";
  }
};

template <> struct MappingTraits<SecondOrderPattern> {
  static void mapping(IO &Io, SecondOrderPattern &P) {
    Io.mapRequired("callee", P.Callee);
    Io.mapRequired("create_graph", P.CreateGraph);
  }
};

template <> struct MappingTraits<ProductHeadPattern> {
  static void mapping(IO &Io, ProductHeadPattern &P) {
    Io.mapRequired("callee", P.Callee);
    Io.mapOptional("input", P.Input, -1);
    Io.mapRequired("operand", P.Operand);
    Io.mapOptional("hidden_rank", P.HiddenRank, 0);
  }
  static std::string validate(IO &Io, ProductHeadPattern &P) {
    if (failedAlready(Io))
      return "";
    if (P.Input >= 0 && unsigned(P.Input) == P.Operand)
      return "product head '" + P.Callee + "': 'input' and 'operand' name the same argument";
    return "";
  }
};

template <> struct MappingTraits<TransposePattern> {
  static void mapping(IO &Io, TransposePattern &P) {
    Io.mapRequired("method", P.Method);
    Io.mapOptional("arguments", P.Arguments);
  }
};

template <> struct MappingTraits<LogSoftmaxPattern> {
  static void mapping(IO &Io, LogSoftmaxPattern &P) {
    Io.mapRequired("callees", P.Callees);
    Io.mapRequired("dims", P.Dims);
    Io.mapOptional("dtype_setter", P.DtypeSetter, std::string("dtype"));
  }
};

template <> struct MappingTraits<LossPattern> {
  static void mapping(IO &Io, LossPattern &P) {
    Io.mapOptional("callee", P.Callee, std::string());
    Io.mapOptional("holder", P.Holder, std::string());
    Io.mapOptional("impl", P.Impl, std::string());
    Io.mapOptional("method", P.Method, std::string("forward"));
    Io.mapOptional("options_member", P.OptionsMember, std::string());
    Io.mapOptional("weight_member", P.WeightMember, std::string());
    Io.mapRequired("input", P.Input);
    Io.mapRequired("target", P.Target);
    Io.mapOptional("options_argument", P.OptionsArgument, -1);
    Io.mapOptional("setters", P.Setters);
    Io.mapOptional("unsupported_setters", P.UnsupportedSetters);
    Io.mapOptional("positional", P.Positional);
    Io.mapOptional("input_log_softmax", P.InputLogSoftmax, false);
  }
  static std::string validate(IO &Io, LossPattern &P) {
    if (failedAlready(Io))
      return "";  // the first error is the one to show; the half-read pattern proves nothing more
    if (P.Callee.empty() == P.Impl.empty())
      return "a loss needs exactly one of 'callee' (a function) and 'impl' (a module)";
    if (P.isModule()) {
      if (P.Holder.empty() || P.OptionsMember.empty() || P.Setters.empty())
        return "module loss '" + P.Impl + "' needs 'holder', 'options_member' and 'setters'";
      if (P.OptionsArgument >= 0 || !P.Positional.empty())
        return "module loss '" + P.Impl + "' takes its options from its construction: no 'options_argument' "
               "or 'positional'";
      P.Callee = P.Impl;
    }
    if (P.Input == P.Target)
      return "loss '" + P.Callee + "': 'input' and 'target' name the same argument";
    if (P.OptionsArgument >= 0 &&
        (unsigned(P.OptionsArgument) == P.Input || unsigned(P.OptionsArgument) == P.Target))
      return "loss '" + P.Callee + "': 'options_argument' names the input or target argument";
    for (const auto &[Option, Index] : P.Positional)
      if (Index < 0 || unsigned(Index) == P.Input || unsigned(Index) == P.Target)
        return "loss '" + P.Callee + "': 'positional' option '" + Option +
               "' names a negative index or the input or target argument";
    if (!P.isModule() && P.OptionsArgument < 0 && P.Positional.empty())
      return "loss '" + P.Callee + "' needs 'options_argument' with 'setters', or 'positional'";
    // The options the rewrite carries over to the runtime (loss_options.cpp); a positional pattern may
    // also name the class weight, which the rewrite accepts only when it is empty.
    auto isRuntimeOption = [](const std::string &Option) {
      const LossOptionField *Field = lossOptionField(Option);
      return Field && Field->FromLossCall;
    };
    for (const auto &[Option, Unused] : P.Setters)
      if (!isRuntimeOption(Option))
        return "loss '" + P.Callee + "': unknown runtime option '" + Option + "' in 'setters'";
    for (const auto &[Option, Unused] : P.Positional)
      if (!isRuntimeOption(Option) && Option != "weight")
        return "loss '" + P.Callee + "': unknown option '" + Option + "' in 'positional'";
    return "";
  }
};

template <> struct MappingTraits<ReductionPattern> {
  static void mapping(IO &Io, ReductionPattern &P) {
    Io.mapRequired("type", P.Type);
    Io.mapRequired("integer", P.Integer);
    Io.mapRequired("value", P.Value);
  }
  static std::string validate(IO &Io, ReductionPattern &P) {
    if (failedAlready(Io))
      return "";
    if (P.Value != "mean" && P.Value != "sum" && P.Value != "none")
      return "reduction value '" + P.Value + "' is not one of mean, sum, none";
    return "";
  }
};

template <> struct MappingTraits<BenignPatterns> {
  static void mapping(IO &Io, BenignPatterns &P) {
    Io.mapRequired("reshapes", P.Reshapes);
    Io.mapRequired("upcast_methods", P.UpcastMethods);
    Io.mapRequired("cast_method", P.CastMethod);
    Io.mapRequired("upcast_types", P.UpcastTypes);
    Io.mapRequired("label_cast_types", P.LabelCastTypes);
    Io.mapOptional("label_device_types", P.LabelDeviceTypes);
    Io.mapOptional("shape_reads", P.ShapeReads);
  }
};

template <> struct MappingTraits<CausalShiftPatterns> {
  static void mapping(IO &Io, CausalShiftPatterns &P) {
    Io.mapRequired("slice_method", P.SliceMethod);
    Io.mapRequired("narrow_method", P.NarrowMethod);
    Io.mapRequired("index_method", P.IndexMethod);
    Io.mapRequired("size_method", P.SizeMethod);
    Io.mapRequired("sizes_method", P.SizesMethod);
    Io.mapRequired("logits_dims", P.LogitsDims);
    Io.mapRequired("labels_dims", P.LabelsDims);
    Io.mapRequired("index_type", P.IndexType);
    Io.mapRequired("slice_type", P.SliceType);
    Io.mapRequired("ellipsis_types", P.EllipsisTypes);
    Io.mapOptional("ellipsis_literal", P.EllipsisLiteral, std::string("..."));
    Io.mapRequired("none_types", P.NoneTypes);
  }
  static std::string validate(IO &Io, CausalShiftPatterns &P) {
    if (failedAlready(Io))
      return "";
    if (P.LogitsDims.empty() || P.LabelsDims.empty())
      return "causal_shift needs 'logits_dims' and 'labels_dims' to name at least one dim each";
    return "";
  }
};

template <> struct MappingTraits<GuardPatterns> {
  static void mapping(IO &Io, GuardPatterns &P) {
    Io.mapRequired("methods", P.Methods);
    Io.mapRequired("null_constants", P.NullConstants);
    Io.mapOptional("pure_methods", P.PureMethods);
    Io.mapOptional("accessors", P.Accessors);
  }
};

template <> struct MappingTraits<EffectPatterns> {
  static void mapping(IO &Io, EffectPatterns &P) {
    Io.mapRequired("library_namespaces", P.LibraryNamespaces);
    Io.mapOptional("writers", P.Writers);
    Io.mapOptional("program_code_calls", P.ProgramCodeCalls);
    Io.mapOptional("code_holders", P.CodeHolders);
    Io.mapOptional("thread_synchronisers", P.ThreadSynchronisers);
    Io.mapOptional("thread_synchronising_functions", P.ThreadSynchronisingFunctions);
    Io.mapOptional("writing_options", P.WritingOptions);
    Io.mapOptional("accessors", P.Accessors);
    Io.mapOptional("fresh_results", P.FreshResults);
    Io.mapOptional("mode_guards", P.ModeGuards);
    Io.mapOptional("mode_switches", P.ModeSwitches);
    Io.mapOptional("mode_states", P.ModeStates);
    Io.mapOptional("type_hiding_holders", P.TypeHidingHolders);
    Io.mapOptional("deleter_holders", P.DeleterHolders);
    Io.mapOptional("standard_accessors", P.StandardAccessors);
    Io.mapOptional("standard_pass_through", P.StandardPassThrough);
    Io.mapOptional("random_namespaces", P.RandomNamespaces);
    Io.mapOptional("generator_type", P.GeneratorType);
  }
};

template <> struct MappingTraits<ReplacementPattern> {
  static void mapping(IO &Io, ReplacementPattern &P) {
    Io.mapRequired("include", P.Include);
    Io.mapRequired("call", P.Call);
    Io.mapRequired("options_type", P.OptionsType);
    Io.mapRequired("enabled", P.Enabled);
    Io.mapRequired("skip_logits", P.SkipLogits);
    Io.mapRequired("undefined_tensor", P.UndefinedTensor);
    Io.mapRequired("skipped_logits", P.SkippedLogits);
    Io.mapRequired("skipped_logits_after", P.SkippedLogitsAfter);
    Io.mapRequired("logits_as_passed", P.LogitsAsPassedSetter);
    Io.mapRequired("shift_dims", P.ShiftDims);
    Io.mapRequired("analysed", P.AnalysedSetter);
    Io.mapRequired("analysed_types", P.AnalysedTypes);
    Io.mapRequired("analysed_value", P.AnalysedValue);
    Io.mapRequired("analysed_member", P.AnalysedMember);
    Io.mapRequired("tensor_type", P.TensorType);
    Io.mapOptional("stand_in", P.StandIn, std::string("lmfuse_logits"));
    Io.mapOptional("labels_stand_in", P.LabelsStandIn, std::string("lmfuse_labels"));
    Io.mapRequired("reductions", P.Reductions);
    Io.mapOptional("hoisted_hidden", P.HoistedHidden, std::string("lmfuse_hidden"));
    Io.mapOptional("module_options", P.ModuleOptions, std::string());
    Io.mapOptional("loss_dtype_setter", P.LossDtypeSetter, std::string());
  }
  static std::string validate(IO &Io, ReplacementPattern &P) {
    if (failedAlready(Io))
      return "";
    if (!P.Reductions.count("mean") || !P.Reductions.count("sum"))
      return "replacement 'reductions' needs both 'mean' and 'sum'";
    return "";
  }
};

template <> struct MappingTraits<PatternSet> {
  static void mapping(IO &Io, PatternSet &P) {
    Io.mapRequired("name", P.Name);
    Io.mapRequired("version", P.Version);
    Io.mapOptional("module_heads", P.ModuleHeads);
    Io.mapOptional("function_heads", P.FunctionHeads);
    Io.mapOptional("product_heads", P.ProductHeads);
    Io.mapOptional("weight_transposes", P.WeightTransposes);
    Io.mapOptional("parameter_owner", P.ParameterOwner, std::string());
    Io.mapOptional("log_softmax", P.LogSoftmax);
    Io.mapRequired("losses", P.Losses);
    Io.mapRequired("reductions", P.Reductions);
    Io.mapRequired("benign", P.Benign);
    Io.mapRequired("causal_shift", P.CausalShift);
    Io.mapRequired("softcap", P.Softcap);
    Io.mapRequired("indexing", P.Indexing);
    Io.mapRequired("normalizers", P.Normalizers);
    Io.mapRequired("guards", P.Guards);
    Io.mapRequired("effects", P.Effects);
    Io.mapOptional("second_order", P.SecondOrder);
    Io.mapRequired("replacement", P.Replacement);
  }
  static std::string validate(IO &Io, PatternSet &P) {
    if (failedAlready(Io))
      return "";
    if (P.ModuleHeads.empty() && P.FunctionHeads.empty() && P.ProductHeads.empty())
      return "the pattern set names no head ('module_heads', 'function_heads' and 'product_heads' are empty)";
    if (!P.ProductHeads.empty() && (P.WeightTransposes.empty() || P.ParameterOwner.empty()))
      return "'product_heads' need 'weight_transposes' and 'parameter_owner'";
    for (const LossPattern &Loss : P.Losses) {
      if (Loss.isModule() && P.Replacement.ModuleOptions.empty())
        return "module loss '" + Loss.Impl + "' needs 'module_options' in 'replacement'";
      if (Loss.InputLogSoftmax && P.LogSoftmax.Callees.empty())
        return "loss '" + Loss.Callee + "' takes log_softmax input: 'log_softmax' must name its spellings";
    }
    if (P.Losses.empty())
      return "the pattern set names no loss ('losses' is empty)";
    return "";
  }
};

}  // namespace llvm::yaml

namespace {

const char EmbeddedPatterns[] =
#include "libtorch_patterns.inc"
    ;

}  // namespace

llvm::Expected<PatternSet> lmfuse::rewriter::parsePatterns(llvm::StringRef Yaml,
                                                          llvm::StringRef BufferName) {
  // YAML I/O reports through a SourceMgr handler; collecting the messages keeps the file name,
  // line, column and the offending key together in the error the caller shows.
  std::string Messages;
  auto Collect = [](const llvm::SMDiagnostic &Diagnostic, void *Context) {
    llvm::raw_string_ostream Stream(*static_cast<std::string *>(Context));
    Diagnostic.print(nullptr, Stream, /*ShowColors=*/false);
  };
  // YAML I/O reads an empty stream (nothing, only comments, only `---`) as no document and leaves every
  // field empty without an error; such a file is refused here, before anything reads the empty set.
  {
    llvm::SourceMgr Sources;
    llvm::yaml::Stream Documents(llvm::MemoryBufferRef(Yaml, BufferName), Sources);
    Sources.setDiagHandler([](const llvm::SMDiagnostic &, void *) {});
    llvm::yaml::document_iterator First = Documents.begin();
    if (First == Documents.end() || !First->getRoot() || llvm::isa<llvm::yaml::NullNode>(First->getRoot()))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "%s:1:1: error: the pattern file holds no rule set (it is empty, only "
                                     "comments or only '---'); expected a mapping with 'name', 'version', "
                                     "'losses', ...",
                                     BufferName.str().c_str());
  }
  PatternSet Patterns;
  llvm::yaml::Input Input(llvm::MemoryBufferRef(Yaml, BufferName), nullptr, Collect, &Messages);
  Input >> Patterns;
  if (Input.error()) {
    if (Messages.empty())
      Messages = (BufferName + ": malformed pattern file\n").str();
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s",
                                   llvm::StringRef(Messages).rtrim().str().c_str());
  }
  // Names are matched as fully qualified; a leading "::" in the file is accepted and dropped.
  auto Unqualify = [](std::string &Name) {
    if (llvm::StringRef(Name).starts_with("::"))
      Name.erase(0, 2);
  };
  for (ModuleHeadPattern &Head : Patterns.ModuleHeads)
    Unqualify(Head.Holder), Unqualify(Head.Impl);
  for (FunctionHeadPattern &Head : Patterns.FunctionHeads)
    Unqualify(Head.Callee);
  for (ProductHeadPattern &Head : Patterns.ProductHeads)
    Unqualify(Head.Callee);
  for (LossPattern &Loss : Patterns.Losses)
    Unqualify(Loss.Callee), Unqualify(Loss.Holder), Unqualify(Loss.Impl);
  for (std::string &Callee : Patterns.LogSoftmax.Callees)
    Unqualify(Callee);
  for (SecondOrderPattern &Call : Patterns.SecondOrder)
    Unqualify(Call.Callee);
  Unqualify(Patterns.ParameterOwner);
  for (ReductionPattern &Reduction : Patterns.Reductions)
    Unqualify(Reduction.Type);
  Unqualify(Patterns.CausalShift.IndexType);
  Unqualify(Patterns.CausalShift.SliceType);
  for (std::string &Type : Patterns.CausalShift.EllipsisTypes)
    Unqualify(Type);
  for (std::string &Type : Patterns.CausalShift.NoneTypes)
    Unqualify(Type);
  Unqualify(Patterns.Replacement.Call);
  Patterns.Source = BufferName.str();
  return Patterns;
}

std::set<std::string> lmfuse::rewriter::ReplacementPattern::leadingQualifiers() const {
  std::vector<llvm::StringRef> Written = {Call,         OptionsType,        Enabled,   SkipLogits, UndefinedTensor,
                                          SkippedLogits, SkippedLogitsAfter, ShiftDims, TensorType, ModuleOptions};
  for (const auto &[Reduction, Enumerator] : Reductions)
    Written.push_back(Enumerator);
  std::set<std::string> Heads;
  auto IsWord = [](char C) { return llvm::isAlnum(C) || C == '_'; };
  for (llvm::StringRef Text : Written)
    for (size_t At = 0; At < Text.size();) {
      if (!IsWord(Text[At]) || llvm::isDigit(Text[At])) {
        ++At;
        continue;
      }
      size_t End = At;
      while (End < Text.size() && IsWord(Text[End]))
        ++End;
      if (Text.substr(End).starts_with("::") && !Text.substr(0, At).ends_with("::"))
        Heads.insert(Text.slice(At, End).str());
      At = End;
    }
  return Heads;
}

llvm::Expected<PatternSet> lmfuse::rewriter::loadPatternFile(llvm::StringRef Path) {
  // Checked before reading: a FIFO would block the read, /dev/zero would never end.
  llvm::sys::fs::file_status Status;
  if (!llvm::sys::fs::status(Path, Status) && Status.type() != llvm::sys::fs::file_type::regular_file)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "cannot read pattern file %s: not a regular file",
                                   Path.str().c_str());
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!Buffer)
    return llvm::createStringError(Buffer.getError(), "cannot read pattern file %s: %s",
                                   Path.str().c_str(), Buffer.getError().message().c_str());
  return parsePatterns((*Buffer)->getBuffer(), Path);
}

llvm::StringRef lmfuse::rewriter::defaultPatternText() { return EmbeddedPatterns; }

llvm::Expected<PatternSet> lmfuse::rewriter::loadDefaultPatterns() {
  auto Patterns = parsePatterns(defaultPatternText(), "<built-in>/libtorch.yaml");
  if (Patterns)
    Patterns->Source = "<built-in>";
  return Patterns;
}

bool lmfuse::rewriter::contains(llvm::ArrayRef<std::string> Names, llvm::StringRef Name) {
  return std::find(Names.begin(), Names.end(), Name) != Names.end();
}

// The loss option table (see loss_option_table.h).
#include "loss_option_table.h"

namespace lmfuse::rewriter {
namespace {

using llvm::json::Value;

/// A run-time option is written as the expression the rewritten call passes.
Value constantOrExpression(Value Constant, const std::string &Expression) {
  if (!Expression.empty())
    return llvm::json::Object{{"expr", Expression}};
  return Constant;
}
bool readExpression(const Value &From, std::string &Expression) {
  if (const llvm::json::Object *Object = From.getAsObject())
    if (auto Text = Object->getString("expr")) {
      Expression = Text->str();
      return !Expression.empty();
    }
  return false;
}

const LossOptionField Fields[] = {
    {"ignore_index", true,
     [](const PatchedOptions &O, const ReplacementPattern &) {
       return O.IgnoreIndexText.empty() ? std::string() : ".ignore_index(" + O.IgnoreIndexText + ")";
     },
     [](const PatchedOptions &O) { return constantOrExpression(O.IgnoreIndex, O.IgnoreIndexExpression); },
     [](const Value &V, PatchedOptions &O) {
       if (readExpression(V, O.IgnoreIndexExpression)) {
         O.IgnoreIndexText = O.IgnoreIndexExpression;
         return true;
       }
       auto Integer = V.getAsInteger();
       if (Integer)
         O.IgnoreIndex = *Integer;
       return Integer.has_value();
     }},
    {"label_smoothing", true,
     [](const PatchedOptions &O, const ReplacementPattern &) {
       return O.LabelSmoothingText.empty() ? std::string() : ".label_smoothing(" + O.LabelSmoothingText + ")";
     },
     [](const PatchedOptions &O) { return constantOrExpression(O.LabelSmoothing, O.LabelSmoothingExpression); },
     [](const Value &V, PatchedOptions &O) {
       if (readExpression(V, O.LabelSmoothingExpression)) {
         O.LabelSmoothingText = O.LabelSmoothingExpression;
         return true;
       }
       auto Number = V.getAsNumber();
       if (Number)
         O.LabelSmoothing = *Number;
       return Number.has_value();
     }},
    {"reduction", true,
     [](const PatchedOptions &O, const ReplacementPattern &R) {
       return O.Reduction == "mean" ? std::string() : ".reduction(" + R.Reductions.at(O.Reduction) + ")";
     },
     [](const PatchedOptions &O) { return Value(O.Reduction); },
     [](const Value &V, PatchedOptions &O) {
       auto Text = V.getAsString();
       if (Text)
         O.Reduction = Text->str();
       return Text && (O.Reduction == "mean" || O.Reduction == "sum");
     }},
    {"shift", false,
     [](const PatchedOptions &O, const ReplacementPattern &) { return O.Shift ? std::string(".shift(true)") : ""; },
     [](const PatchedOptions &O) { return Value(O.Shift); },
     [](const Value &V, PatchedOptions &O) {
       auto Flag = V.getAsBoolean();
       if (Flag)
         O.Shift = *Flag;
       return Flag.has_value();
     }},
    // The bias is an argument of the fused call, not an option: no setter.
    {"bias", false, [](const PatchedOptions &, const ReplacementPattern &) { return std::string(); },
     [](const PatchedOptions &O) { return Value(O.Bias); },
     [](const Value &V, PatchedOptions &O) {
       auto Flag = V.getAsBoolean();
       if (Flag)
         O.Bias = *Flag;
       return Flag.has_value();
     }},
};

}  // namespace

llvm::ArrayRef<LossOptionField> lossOptionFields() { return Fields; }

const LossOptionField *lossOptionField(llvm::StringRef Name) {
  for (const LossOptionField &Field : Fields)
    if (Name == Field.Name)
      return &Field;
  return nullptr;
}

}  // namespace lmfuse::rewriter

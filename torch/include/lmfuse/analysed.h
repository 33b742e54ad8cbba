// The types a rewritten site was decided on, checked by the compiler that builds the rewritten copy.
//
// lmfuse-rewrite decides each site on Clang's reading of the program; the build may compile the copy with
// another compiler, which can read the same code otherwise where the language leaves room (GCC and Clang
// spell __PRETTY_FUNCTION__ differently, for one, and a type chosen from it differs). A rewritten loss call
// therefore passes, in its options, `AnalysedTypes<decltype(<expression>), <the type Clang gave it>, ...>()`
// for what the fused call reads in place of the original (the head's module or weight and bias, its input,
// the labels the loss starts from). Constructing that object instantiates one static_assert per pair, so a
// compiler that gives any of them another type fails the build at the site (the error's "required from"
// line names it) instead of running the fused call on a head nobody analysed. Nothing happens at run time.
//
// The same list carries the types of option arguments whose type decided an option (`.reduction(torch::kSum)`),
// of an options object written through a type alias, for a head of a class of the program's the class each
// member the fused call stands for is found in (`DeclaredIn<decltype(&::Head::forward)>`, which the class's
// bases decide), and, as `Holds<((<expression>) == <value>)>` against `Holds<true>`, each integer constant the site was
// decided on where it is not a literal (a shift's dim, an ignore_index read through a constant): a compiler
// that evaluates one otherwise fails the same way.
#pragma once

#include <type_traits>

namespace lmfuse {

/// The value of a condition as a type: `Holds<((k) == 1)>` is `Holds<true>` exactly where k is 1.
template <bool Value>
struct Holds {};

/// The class that declares the member a pointer to member points to: `DeclaredIn<decltype(&Head::forward)>` is
/// the class that name lookup in `Head` found `forward` in, which Head's bases decide.
template <class MemberPointer>
struct DeclaringClass;
template <class Member, class Class>
struct DeclaringClass<Member Class::*> {
  using type = Class;
};
template <class MemberPointer>
using DeclaredIn = typename DeclaringClass<MemberPointer>::type;

/// What LossOptions::analysed takes; only AnalysedTypes derives from it.
struct AnalysedTypesTag {};

template <class... FoundAndAnalysed>
struct AnalysedTypes;

template <>
struct AnalysedTypes<> : AnalysedTypesTag {};

/// Found: decltype of the expression as this compiler reads it; Analysed: the type lmfuse-rewrite gave it.
template <class Found, class Analysed, class... Rest>
struct AnalysedTypes<Found, Analysed, Rest...> : AnalysedTypes<Rest...> {
  static_assert(std::is_same<typename std::decay<Found>::type, Analysed>::value,
                "lmfuse: this compiler reads an expression of a rewritten site otherwise than lmfuse-rewrite did "
                "when it decided the site (the first template argument is what this compiler gives: another "
                "type, or Holds<false> for a constant of another value; the second what the site was decided "
                "on), so the fused call could compute another loss than the original: build this target without "
                "lmfuse_rewrite, or mark the site `// NOLINT(lmfuse)`");
};

}  // namespace lmfuse

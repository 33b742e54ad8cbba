#include "type_spelling.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/QualTypeNames.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

bool nameable(QualType T);

/// A class or enumeration code can name by qualified name: named, and declared in namespaces and named
/// classes only (an anonymous namespace is looked through by qualified lookup; a function body is not).
bool nameable(const TagDecl *Tag) {
  if (const auto *Record = dyn_cast<CXXRecordDecl>(Tag); Record && Record->isLambda())
    return false;
  if (!Tag->getIdentifier() && !Tag->getTypedefNameForAnonDecl())
    return false;
  for (const DeclContext *Scope = Tag->getDeclContext(); !Scope->isTranslationUnit(); Scope = Scope->getParent()) {
    if (Scope->isFunctionOrMethod())
      return false;
    if (const auto *Enclosing = dyn_cast<TagDecl>(Scope); Enclosing && !nameable(Enclosing))
      return false;
  }
  if (const auto *Specialization = dyn_cast<ClassTemplateSpecializationDecl>(Tag))
    for (const TemplateArgument &Argument : Specialization->getTemplateArgs().asArray()) {
      switch (Argument.getKind()) {
      case TemplateArgument::Type:
        if (!nameable(Argument.getAsType()))
          return false;
        break;
      case TemplateArgument::Integral:
        break;
      case TemplateArgument::Pack:
        for (const TemplateArgument &Element : Argument.pack_elements())
          if (Element.getKind() != TemplateArgument::Integral &&
              (Element.getKind() != TemplateArgument::Type || !nameable(Element.getAsType())))
            return false;
        break;
      default:  // declarations, null pointers, templates, expressions: not worth the printer's corner cases
        return false;
      }
    }
  return true;
}

bool nameable(QualType T) {
  T = T.getCanonicalType();
  if (T->isDependentType())
    return false;
  while (T->isPointerType() || T->isReferenceType())
    T = T->getPointeeType().getCanonicalType();
  if (T->isBuiltinType())
    return true;
  if (const auto *Tag = T->getAsTagDecl())
    return nameable(Tag);
  return false;
}

}  // namespace

std::optional<std::string> spelledDecayedType(QualType T, const ASTContext &Context) {
  T = T.getNonReferenceType().getCanonicalType().getUnqualifiedType();
  if (T->isArrayType() || T->isFunctionType() || !nameable(T))
    return std::nullopt;
  PrintingPolicy Policy = Context.getPrintingPolicy();
  Policy.SuppressUnwrittenScope = true;  // anonymous and inline namespaces: qualified lookup looks through them
  Policy.SuppressTagKeyword = true;
  return TypeName::getFullyQualifiedName(T, Context, Policy, /*WithGlobalNsPrefix=*/true);
}

}  // namespace lmfuse::rewriter

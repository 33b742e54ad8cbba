#include "type_spelling.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/QualTypeNames.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

bool nameable(QualType T, const DeclContext *From);

/// Whether From lies in Record (a member function of it, or of a class nested in it).
bool inside(const DeclContext *From, const DeclContext *Record) {
  for (; From; From = From->getParent())
    if (From->Equals(Record))
      return true;
  return false;
}

/// A class or enumeration code in From can name by qualified name: named, declared in namespaces and named
/// classes only (an anonymous namespace is looked through by qualified lookup; a function body is not), each
/// nested one public or named from inside the class that declares it, and any enumeration or integer
/// template arguments of it integers (an enumeration's value prints as an enumerator that may not be reachable
/// by that name, or as a number, which is no template argument of an enumeration type).
bool nameable(const TagDecl *Tag, const DeclContext *From) {
  if (const auto *Record = dyn_cast<CXXRecordDecl>(Tag); Record && Record->isLambda())
    return false;
  if (!Tag->getIdentifier() && !Tag->getTypedefNameForAnonDecl())
    return false;
  const Decl *Member = Tag;
  for (const DeclContext *Scope = Tag->getDeclContext(); !Scope->isTranslationUnit(); Scope = Scope->getParent()) {
    if (Scope->isFunctionOrMethod())
      return false;
    if (const auto *Enclosing = dyn_cast<TagDecl>(Scope)) {
      if (!nameable(Enclosing, From))
        return false;
      if (Member->getAccess() != AS_public && Member->getAccess() != AS_none && !inside(From, Enclosing))
        return false;
      Member = Enclosing;
    }
  }
  if (const auto *Specialization = dyn_cast<ClassTemplateSpecializationDecl>(Tag))
    for (const TemplateArgument &Argument : Specialization->getTemplateArgs().asArray()) {
      switch (Argument.getKind()) {
      case TemplateArgument::Type:
        if (!nameable(Argument.getAsType(), From))
          return false;
        break;
      case TemplateArgument::Integral:
        if (Argument.getIntegralType()->isEnumeralType())
          return false;
        break;
      case TemplateArgument::Pack:
        for (const TemplateArgument &Element : Argument.pack_elements())
          if (Element.getKind() == TemplateArgument::Integral ? Element.getIntegralType()->isEnumeralType()
                                                               : Element.getKind() != TemplateArgument::Type ||
                                                                     !nameable(Element.getAsType(), From))
            return false;
        break;
      default:  // declarations, null pointers, templates, expressions: not worth the printer's corner cases
        return false;
      }
    }
  return true;
}

bool nameable(QualType T, const DeclContext *From) {
  T = T.getCanonicalType();
  if (T->isDependentType())
    return false;
  while (T->isPointerType() || T->isReferenceType())
    T = T->getPointeeType().getCanonicalType();
  if (T->isBuiltinType())
    return true;
  if (const auto *Tag = T->getAsTagDecl())
    return nameable(Tag, From);
  return false;
}

}  // namespace

std::optional<std::string> spelledDecayedType(QualType T, const ASTContext &Context, const DeclContext *From) {
  T = T.getNonReferenceType().getCanonicalType().getUnqualifiedType();
  if (T->isArrayType() || T->isFunctionType() || !nameable(T, From))
    return std::nullopt;
  PrintingPolicy Policy = Context.getPrintingPolicy();
  Policy.SuppressUnwrittenScope = true;  // anonymous and inline namespaces: qualified lookup looks through them
  Policy.SuppressTagKeyword = true;
  return TypeName::getFullyQualifiedName(T, Context, Policy, /*WithGlobalNsPrefix=*/true);
}

}  // namespace lmfuse::rewriter

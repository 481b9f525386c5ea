// Jinja syntax tree. One node struct per family (expressions, statements) with a kind tag keeps
// the parser and renderer short; each kind documents which fields it uses.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace syv::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,  // literal
  kName,     // name
  kGetAttr,  // args[0].name
  kGetItem,  // args[0][args[1]]
  kSlice,    // args[0][args[1]:args[2]:args[3]] (null = omitted)
  kCall,     // args[0](args[1..], kwargs)
  kFilter,   // args[0] | name(args[1..], kwargs)
  kTest,     // args[0] is [not: negated] name(args[1..], kwargs)
  kUnary,    // name in {"-", "+", "not"}; args[0]
  kBinary,   // args[0] name args[1]; name in {+,-,*,/,//,%,**,~,and,or}
  kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ...; ops in {==,!=,<,<=,>,>=,in,notin}
  kCond,     // args[0] if args[1] else args[2] (args[2] null: undefined)
  kList,     // [args...]
  kTuple,    // (args...)
  kDict,     // {args[0]: args[1], args[2]: args[3], ...}
};

struct Expr {
  ExprKind kind;
  Pos pos;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // branches (cond, body)...; else_body
  kFor,       // for targets in expr [if cond]: body; else_body
  kSet,       // targets = expr; or targets[0].attr = expr when attr is set
  kSetBlock,  // {% set name %}body{% endset %}
  kMacro,     // name(params) body
  kBreak,
  kContinue,
  kScope,  // body rendered in place ({% generation %}, kept transparent like transformers)
};

struct Stmt {
  StmtKind kind;
  Pos pos;
  std::string text;
  std::string name;
  std::string attr;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters, default may be null
};

struct Template {
  Body body;
};

}  // namespace syv::jinja

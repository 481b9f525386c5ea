#include "tokenizer/jinja/parser.h"

#include <algorithm>

#include "tokenizer/jinja/lexer.h"

namespace syv::jinja {
namespace {

constexpr int kMaxDepth = 200;

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kData:
      return "template text";
    case Tok::kBlockBegin:
      return "'{%'";
    case Tok::kBlockEnd:
      return "'%}'";
    case Tok::kVarBegin:
      return "'{{'";
    case Tok::kVarEnd:
      return "'}}'";
    case Tok::kName:
      return "name '" + t.text + "'";
    case Tok::kString:
      return "string literal";
    case Tok::kInt:
    case Tok::kFloat:
      return "number " + t.text;
    case Tok::kOp:
      return "'" + t.text + "'";
    case Tok::kEnd:
      return "end of template";
  }
  return "token";
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Template run() {
    Template tpl;
    std::string end;
    tpl.body = parse_body({}, &end);
    return tpl;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p(p) {
      if (++p.depth_ > kMaxDepth) throw Error("template nested too deeply", p.cur().pos);
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::kName && cur().text == n; }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(what + ", found " + describe(cur()), cur().pos);
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "'");
    next();
  }
  void expect_name(const char* n) {
    if (!is_name(n)) fail(std::string("expected '") + n + "'");
    next();
  }
  std::string take_name(const char* what) {
    if (cur().type != Tok::kName) fail(std::string("expected ") + what);
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Tok::kBlockEnd) fail("expected '%}'");
    next();
  }

  ExprPtr node(ExprKind k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = p;
    return e;
  }

  // ---- statements ----------------------------------------------------------------------------

  Body parse_body(const std::vector<std::string>& ends, std::string* which) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::kEnd) {
        if (!ends.empty())
          throw Error("unexpected end of template, expected '" + *ends.begin() + "'", t.pos);
        return body;
      }
      if (t.type == Tok::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->pos = t.pos;
        next();
        s->expr = parse_tuple(true);
        if (cur().type != Tok::kVarEnd) fail("expected '}}'");
        next();
        body.push_back(std::move(s));
      } else if (t.type == Tok::kBlockBegin) {
        const Token& tag = peek();
        if (tag.type != Tok::kName) {
          next();
          fail("expected a tag name");
        }
        if (std::find(ends.begin(), ends.end(), tag.text) != ends.end()) {
          next();
          next();
          *which = tag.text;
          return body;
        }
        next();
        body.push_back(parse_statement());
      } else {
        fail("unexpected token");
      }
    }
  }

  StmtPtr parse_statement() {
    Pos p = cur().pos;
    std::string tag = cur().text;
    auto s = std::make_unique<Stmt>();
    s->pos = p;
    next();
    std::string end;
    if (tag == "for") {
      s->kind = StmtKind::kFor;
      bool paren = is_op("(");
      if (paren) next();
      s->targets.push_back(take_name("a loop variable name"));
      while (is_op(",")) {
        next();
        s->targets.push_back(take_name("a loop variable name"));
      }
      if (paren) expect_op(")");
      expect_name("in");
      s->expr = parse_tuple(false);
      if (is_name("if")) {
        next();
        s->cond = parse_expression(true);
      }
      if (is_name("recursive")) fail("recursive loops are not supported");
      expect_block_end();
      ++loop_depth_;
      s->body = parse_body({"endfor", "else"}, &end);
      --loop_depth_;
      if (end == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, &end);
      }
      expect_block_end();
    } else if (tag == "if") {
      s->kind = StmtKind::kIf;
      ExprPtr cond = parse_tuple(true);
      expect_block_end();
      while (true) {
        Body body = parse_body({"endif", "elif", "else"}, &end);
        s->branches.emplace_back(std::move(cond), std::move(body));
        if (end == "elif") {
          cond = parse_tuple(true);
          expect_block_end();
          continue;
        }
        if (end == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"}, &end);
        }
        expect_block_end();
        break;
      }
    } else if (tag == "set") {
      std::string first = take_name("a variable name");
      if (is_op(".")) {
        next();
        s->attr = take_name("an attribute name");
      }
      s->targets.push_back(first);
      while (s->attr.empty() && is_op(",")) {
        next();
        s->targets.push_back(take_name("a variable name"));
      }
      if (is_op("=")) {
        next();
        s->kind = StmtKind::kSet;
        s->expr = parse_tuple(true);
        expect_block_end();
      } else {
        if (s->targets.size() != 1 || !s->attr.empty()) fail("expected '='");
        if (is_op("|")) fail("filtered block set is not supported");
        s->kind = StmtKind::kSetBlock;
        s->name = first;
        expect_block_end();
        s->body = parse_body({"endset"}, &end);
        expect_block_end();
      }
    } else if (tag == "macro") {
      s->kind = StmtKind::kMacro;
      s->name = take_name("a macro name");
      expect_op("(");
      while (!is_op(")")) {
        std::string param = take_name("a parameter name");
        ExprPtr def;
        if (is_op("=")) {
          next();
          def = parse_expression(true);
        }
        s->params.emplace_back(param, std::move(def));
        if (!is_op(")")) expect_op(",");
      }
      next();
      expect_block_end();
      int saved_loops = loop_depth_;
      loop_depth_ = 0;  // a macro body is its own frame: no break/continue to an outer loop
      s->body = parse_body({"endmacro"}, &end);
      loop_depth_ = saved_loops;
      if (cur().type == Tok::kName) next();  // {% endmacro name %}
      expect_block_end();
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) throw Error("'" + tag + "' outside of a for loop", p);
      s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      expect_block_end();
    } else if (tag == "generation") {
      s->kind = StmtKind::kScope;
      expect_block_end();
      s->body = parse_body({"endgeneration"}, &end);
      expect_block_end();
    } else if (tag == "elif" || tag == "else" || tag.rfind("end", 0) == 0) {
      throw Error("unexpected '" + tag + "' (no open block it could close)", p);
    } else {
      throw Error("unknown or unsupported tag '" + tag + "'", p);
    }
    return s;
  }

  // ---- expressions ---------------------------------------------------------------------------

  ExprPtr parse_tuple(bool with_condexpr) {
    Pos p = cur().pos;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = node(ExprKind::kTuple, p);
    t->args.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (cur().type == Tok::kBlockEnd || cur().type == Tok::kVarEnd || is_op(")") || is_name("if"))
        break;
      t->args.push_back(parse_expression(with_condexpr));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      Pos p = cur().pos;
      next();
      auto c = node(ExprKind::kCond, p);
      c->args.push_back(std::move(e));
      c->args.push_back(parse_or());
      if (is_name("else")) {
        next();
        DepthGuard guard(*this);
        c->args.push_back(parse_condexpr());
      } else {
        c->args.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, Pos p) {
    auto b = node(ExprKind::kBinary, p);
    b->name = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      Pos p = cur().pos;
      next();
      l = binary("or", std::move(l), parse_and(), p);
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      Pos p = cur().pos;
      next();
      l = binary("and", std::move(l), parse_not(), p);
    }
    return l;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto u = node(ExprKind::kUnary, cur().pos);
      next();
      u->name = "not";
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    Pos p = cur().pos;
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      if (cur().type == Tok::kOp &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        ops.push_back(cur().text);
        next();
      } else if (is_name("in")) {
        ops.push_back("in");
        next();
      } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
        ops.push_back("notin");
        next();
        next();
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto c = node(ExprKind::kCompare, p);
    c->args.push_back(std::move(first));
    for (auto& o : operands) c->args.push_back(std::move(o));
    c->ops = std::move(ops);
    return c;
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      Pos p = cur().pos;
      next();
      l = binary(op, std::move(l), parse_concat(), p);
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      Pos p = cur().pos;
      next();
      l = binary("~", std::move(l), parse_math2(), p);
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      Pos p = cur().pos;
      next();
      l = binary(op, std::move(l), parse_pow(), p);
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      Pos p = cur().pos;
      next();
      l = binary("**", std::move(l), parse_unary(true), p);
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      auto u = node(ExprKind::kUnary, cur().pos);
      u->name = cur().text;
      next();
      u->args.push_back(parse_unary(false));
      e = std::move(u);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    Pos p = t.pos;
    if (t.type == Tok::kName) {
      auto e = node(ExprKind::kLiteral, p);
      if (t.text == "true" || t.text == "True") {
        e->literal = Value::boolean(true);
      } else if (t.text == "false" || t.text == "False") {
        e->literal = Value::boolean(false);
      } else if (t.text == "none" || t.text == "None") {
        e->literal = Value::none();
      } else {
        e->kind = ExprKind::kName;
        e->name = t.text;
      }
      next();
      return e;
    }
    if (t.type == Tok::kString) {
      std::string s;
      while (cur().type == Tok::kString) {
        s += cur().text;
        next();
      }
      auto e = node(ExprKind::kLiteral, p);
      e->literal = Value::string(std::move(s));
      return e;
    }
    if (t.type == Tok::kInt || t.type == Tok::kFloat) {
      auto e = node(ExprKind::kLiteral, p);
      e->literal = t.type == Tok::kInt ? Value::integer(t.ival) : Value::number(t.fval);
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      if (is_op(")")) {
        next();
        return node(ExprKind::kTuple, p);
      }
      ExprPtr first = parse_expression(true);
      if (is_op(")")) {
        next();
        return first;
      }
      auto tup = node(ExprKind::kTuple, p);
      tup->args.push_back(std::move(first));
      while (is_op(",")) {
        next();
        if (is_op(")")) break;
        tup->args.push_back(parse_expression(true));
      }
      expect_op(")");
      return tup;
    }
    if (is_op("[")) {
      next();
      auto l = node(ExprKind::kList, p);
      while (!is_op("]")) {
        l->args.push_back(parse_expression(true));
        if (!is_op("]")) expect_op(",");
      }
      next();
      return l;
    }
    if (is_op("{")) {
      next();
      auto d = node(ExprKind::kDict, p);
      while (!is_op("}")) {
        d->args.push_back(parse_expression(true));
        expect_op(":");
        d->args.push_back(parse_expression(true));
        if (!is_op("}")) expect_op(",");
      }
      next();
      return d;
    }
    fail("expected an expression");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        Pos p = cur().pos;
        next();
        if (cur().type == Tok::kName) {
          auto g = node(ExprKind::kGetAttr, p);
          g->name = cur().text;
          g->args.push_back(std::move(e));
          next();
          e = std::move(g);
        } else if (cur().type == Tok::kInt) {
          auto g = node(ExprKind::kGetItem, p);
          g->args.push_back(std::move(e));
          auto k = node(ExprKind::kLiteral, cur().pos);
          k->literal = Value::integer(cur().ival);
          g->args.push_back(std::move(k));
          next();
          e = std::move(g);
        } else {
          fail("expected an attribute name after '.'");
        }
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr e) {
    DepthGuard guard(*this);
    Pos p = cur().pos;
    next();            // [
    if (is_op("]")) {  // x[] is x[()]: an empty tuple key (always undefined)
      next();
      auto g = node(ExprKind::kGetItem, p);
      g->args.push_back(std::move(e));
      g->args.push_back(node(ExprKind::kTuple, p));
      return g;
    }
    ExprPtr parts[3];
    bool is_slice = false;
    int idx = 0;
    if (!is_op(":")) parts[0] = parse_expression(true);
    while (is_op(":")) {
      is_slice = true;
      next();
      if (++idx > 2) fail("expected ']'");
      if (!is_op(":") && !is_op("]")) parts[idx] = parse_expression(true);
    }
    expect_op("]");
    if (!is_slice) {
      auto g = node(ExprKind::kGetItem, p);
      g->args.push_back(std::move(e));
      g->args.push_back(std::move(parts[0]));
      return g;
    }
    auto s = node(ExprKind::kSlice, p);
    s->args.push_back(std::move(e));
    for (auto& part : parts) s->args.push_back(std::move(part));
    return s;
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        call.kwargs.emplace_back(key, parse_expression(true));
      } else {
        if (!call.kwargs.empty()) fail("positional argument after keyword argument");
        call.args.push_back(parse_expression(true));
      }
      if (!is_op(")")) expect_op(",");
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    DepthGuard guard(*this);
    auto c = node(ExprKind::kCall, callee->pos);  // errors point at the start of the call
    c->args.push_back(std::move(callee));
    parse_call_args(*c);
    return c;
  }

  std::string dotted_name() {
    std::string n = take_name("a filter or test name");
    while (is_op(".") && peek().type == Tok::kName) {
      next();
      n += "." + cur().text;
      next();
    }
    return n;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        DepthGuard guard(*this);
        auto f = node(ExprKind::kFilter, cur().pos);
        next();
        f->name = dotted_name();
        f->args.push_back(std::move(e));
        if (is_op("(")) parse_call_args(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        DepthGuard guard(*this);
        auto t = node(ExprKind::kTest, cur().pos);
        next();
        if (is_name("not")) {
          t->negated = true;
          next();
        }
        t->name = dotted_name();
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          parse_call_args(*t);
        } else if ((cur().type == Tok::kName || cur().type == Tok::kString ||
                    cur().type == Tok::kInt || cur().type == Tok::kFloat || is_op("(") ||
                    is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail("cannot chain multiple tests with 'is'");
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Template parse_template(const std::string& source) {
  return Parser(lex(source)).run();
}

}  // namespace syv::jinja

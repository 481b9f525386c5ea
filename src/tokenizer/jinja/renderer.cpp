#include "tokenizer/jinja/renderer.h"

#include "tokenizer/jinja/builtins.h"

namespace syv::jinja {

std::tm Clock::local_now() const {
  if (fixed_local_time) return *fixed_local_time;
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return local;
}

std::string Renderer::render(const Dict& context) {
  for (const auto& [k, v] : context.items) root_.vars[k] = v;
  std::string out;
  out_ = &out;
  exec_body(tpl_.body);
  return out;
}

void Renderer::step(Pos p) {
  if (++steps_ > limits_.max_steps)
    throw Error("render step limit reached (" + std::to_string(limits_.max_steps) + " steps)", p);
}

void Renderer::write(const std::string& text) {
  check_string_size(out_->size() + text.size(), limits_);
  *out_ += text;
}

Renderer::Flow Renderer::exec_body(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec(*s);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec(const Stmt& s) {
  step(s.pos);
  DepthGuard guard(*this, s.pos);
  switch (s.kind) {
    case StmtKind::kText:
      write(s.text);
      return Flow::kNormal;
    case StmtKind::kOutput:
      write(to_str(eval(*s.expr)));
      return Flow::kNormal;
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        if (eval(*cond).truthy()) return exec_body(body);
      }
      return exec_body(s.else_body);
    case StmtKind::kFor:
      exec_for(s);
      return Flow::kNormal;
    case StmtKind::kSet: {
      Value v = eval(*s.expr);
      if (!s.attr.empty()) {
        Value target = lookup(s.targets[0]);
        if (target.kind != Value::Kind::kNamespace)
          throw Error("cannot assign attribute '" + s.attr + "' on '" + s.targets[0] +
                          "': only namespace() objects accept attribute assignment",
                      s.pos);
        if (v.has_ns) throw Error("a namespace cannot hold another namespace", s.pos);
        target.ns->set(s.attr, std::move(v));
      } else {
        assign(s.targets, v, s.pos);
      }
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      std::string captured;
      std::string* saved = out_;
      out_ = &captured;
      try {
        exec_body(s.body);
      } catch (...) {
        out_ = saved;
        throw;
      }
      out_ = saved;
      scope_->vars[s.name] = Value::string(std::move(captured));
      return Flow::kNormal;
    }
    case StmtKind::kMacro:
      scope_->vars[s.name] = make_macro(s);
      return Flow::kNormal;
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
    case StmtKind::kScope:
      return exec_body(s.body);
  }
  return Flow::kNormal;
}

void Renderer::assign(const std::vector<std::string>& targets, const Value& v, Pos p) {
  if (targets.size() == 1) {
    scope_->vars[targets[0]] = v;
    return;
  }
  std::vector<Value> items;
  try {
    items = iterate(v);
  } catch (const Error& e) {
    throw Error(std::string("cannot unpack: ") + e.what(), p);
  }
  if (items.size() != targets.size())
    throw Error("cannot unpack " + std::to_string(items.size()) + " values into " +
                    std::to_string(targets.size()) + " names",
                p);
  for (size_t k = 0; k < targets.size(); ++k) scope_->vars[targets[k]] = items[k];
}

void Renderer::exec_for(const Stmt& s) {
  Value seq = eval(*s.expr);
  std::vector<Value> items;
  try {
    items = iterate(seq);
  } catch (const Error& e) {
    throw Error(e.what(), s.expr->pos);
  }
  if (s.cond) {  // `for x in xs if cond`: filter first; loop.* describes the filtered sequence
    std::vector<Value> kept;
    for (const auto& item : items) {
      Scope scope{{}, scope_};
      scope_ = &scope;
      bool keep = false;
      try {
        assign(s.targets, item, s.pos);
        keep = eval(*s.cond).truthy();
      } catch (...) {
        scope_ = scope.parent;
        throw;
      }
      scope_ = scope.parent;
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_body(s.else_body);
    return;
  }
  const size_t n = items.size();
  for (size_t k = 0; k < n; ++k) {
    step(s.pos);
    Scope scope{{}, scope_};
    scope_ = &scope;
    Flow flow = Flow::kNormal;
    try {
      Dict loop;
      loop.items.reserve(12);
      loop.set("index0", Value::integer(static_cast<int64_t>(k)));
      loop.set("index", Value::integer(static_cast<int64_t>(k + 1)));
      loop.set("revindex0", Value::integer(static_cast<int64_t>(n - k - 1)));
      loop.set("revindex", Value::integer(static_cast<int64_t>(n - k)));
      loop.set("first", Value::boolean(k == 0));
      loop.set("last", Value::boolean(k + 1 == n));
      loop.set("length", Value::integer(static_cast<int64_t>(n)));
      loop.set("depth", Value::integer(1));
      loop.set("depth0", Value::integer(0));
      if (k > 0) loop.set("previtem", items[k - 1]);
      if (k + 1 < n) loop.set("nextitem", items[k + 1]);
      Callable cycle;
      cycle.name = "loop.cycle";
      cycle.fn = [k](Renderer&, CallArgs& a) -> Value {
        if (a.positional.empty()) throw Error("loop.cycle() needs at least one argument");
        return a.positional[k % a.positional.size()];
      };
      loop.set("cycle", Value::from_callable(std::move(cycle)));
      scope.vars["loop"] = Value::from_dict(std::move(loop));
      assign(s.targets, items[k], s.pos);
      flow = exec_body(s.body);
    } catch (...) {
      scope_ = scope.parent;
      throw;
    }
    scope_ = scope.parent;
    if (flow == Flow::kBreak) break;
  }
}

Value Renderer::lookup(const std::string& name) {
  for (Scope* s = scope_; s; s = s->parent) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  Value g = lookup_global(name);
  if (!g.is_undefined()) return g;
  return Value::undefined("'" + name + "' is undefined");
}

Value Renderer::eval(const Expr& e) {
  step(e.pos);
  DepthGuard guard(*this, e.pos);
  try {
    return eval_inner(e);
  } catch (Error& err) {
    if (!err.pos.known()) err.pos = e.pos;
    throw;
  }
}

CallArgs Renderer::eval_args(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t k = first; k < e.args.size(); ++k) args.positional.push_back(eval(*e.args[k]));
  for (const auto& [key, expr] : e.kwargs) args.keyword.emplace_back(key, eval(*expr));
  return args;
}

Value Renderer::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) undefined_error(callee);
  if (callee.kind != Value::Kind::kCallable)
    throw Error("'" + callee.type_name() + "' object is not callable");
  return callee.callable->fn(*this, args);
}

Value Renderer::eval_call(const Expr& e) {
  const Expr& callee = *e.args[0];
  if (callee.kind == ExprKind::kGetAttr) {  // obj.method(...): methods win over items, as in Python
    Value obj = eval(*callee.args[0]);
    if (has_method(obj, callee.name)) {
      CallArgs args = eval_args(e, 1);
      return call_method(*this, obj, callee.name, args);
    }
    Value fn = get_attr(obj, callee.name);
    CallArgs args = eval_args(e, 1);
    return call(fn, args);
  }
  Value fn = eval(callee);
  CallArgs args = eval_args(e, 1);
  return call(fn, args);
}

Value Renderer::eval_inner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName:
      return lookup(e.name);
    case ExprKind::kGetAttr: {
      Value obj = eval(*e.args[0]);
      Value v = get_attr(obj, e.name);
      if (v.is_undefined() &&
          has_method(obj, e.name)) {  // a bound method, e.g. `d.items is defined`
        Callable c;
        c.name = e.name;
        std::string name = e.name;
        c.fn = [obj, name](Renderer& r, CallArgs& args) -> Value {
          return call_method(r, obj, name, args);
        };
        return Value::from_callable(std::move(c));
      }
      return v;
    }
    case ExprKind::kGetItem:
      return get_item(eval(*e.args[0]), eval(*e.args[1]));
    case ExprKind::kSlice: {
      Value obj = eval(*e.args[0]);
      Value parts[3];
      const Value* ptr[3] = {nullptr, nullptr, nullptr};
      for (int k = 0; k < 3; ++k) {
        if (e.args[static_cast<size_t>(k) + 1]) {
          parts[k] = eval(*e.args[static_cast<size_t>(k) + 1]);
          ptr[k] = &parts[k];
        }
      }
      return get_slice(obj, ptr[0], ptr[1], ptr[2]);
    }
    case ExprKind::kCall:
      return eval_call(e);
    case ExprKind::kFilter: {
      Value input = eval(*e.args[0]);
      CallArgs args = eval_args(e, 1);
      return apply_filter(*this, e.name, input, args);
    }
    case ExprKind::kTest: {
      Value input = eval(*e.args[0]);
      CallArgs args = eval_args(e, 1);
      bool r = apply_test(*this, e.name, input, args);
      return Value::boolean(e.negated ? !r : r);
    }
    case ExprKind::kUnary: {
      Value v = eval(*e.args[0]);
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number())
        throw Error("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return v.kind == Value::Kind::kBool ? Value::integer(v.as_int()) : v;
      if (v.kind == Value::Kind::kFloat) return Value::number(-v.f);
      if (v.as_int() == INT64_MIN) throw Error("integer overflow");
      return Value::integer(-v.as_int());
    }
    case ExprKind::kBinary: {
      if (e.name == "and") {
        Value l = eval(*e.args[0]);
        return l.truthy() ? eval(*e.args[1]) : l;
      }
      if (e.name == "or") {
        Value l = eval(*e.args[0]);
        return l.truthy() ? l : eval(*e.args[1]);
      }
      Value l = eval(*e.args[0]);
      Value r = eval(*e.args[1]);
      return binary_op(e.name, l, r, limits_);
    }
    case ExprKind::kCompare: {
      Value left = eval(*e.args[0]);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.args[k + 1]);
        if (!compare_op(e.ops[k], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::kCond:
      if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the inline if-expression evaluated to false and had no else");
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value::from_list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k]);
        if (!key.is_string())
          throw Error("dict keys must be strings in chat templates, found " + key.type_name(),
                      e.args[k]->pos);
        d.set(key.s, eval(*e.args[k + 1]));
      }
      return Value::from_dict(std::move(d));
    }
  }
  return Value::undefined();
}

Value Renderer::make_macro(const Stmt& s) {
  Callable c;
  c.name = s.name;
  const Stmt* m = &s;
  c.fn = [m](Renderer& r, CallArgs& args) -> Value { return r.call_macro(*m, args); };
  return Value::from_callable(std::move(c));
}

Value Renderer::call_macro(const Stmt& m, CallArgs& args) {
  if (args.positional.size() > m.params.size())
    throw Error("macro '" + m.name + "' takes not more than " + std::to_string(m.params.size()) +
                " argument(s)");
  Scope scope{{}, &root_};
  Scope* saved_scope = scope_;
  std::string* saved_out = out_;
  std::string captured;
  scope_ = &scope;
  out_ = &captured;
  try {
    for (const auto& [key, value] : args.keyword) {
      bool known = false;
      for (const auto& p : m.params) known = known || p.first == key;
      if (!known) throw Error("macro '" + m.name + "' takes no keyword argument '" + key + "'");
    }
    for (size_t k = 0; k < m.params.size(); ++k) {
      const auto& [pname, pdefault] = m.params[k];
      Value v;
      bool found = false;
      if (k < args.positional.size()) {
        v = args.positional[k];
        found = true;
      }
      for (const auto& [key, value] : args.keyword) {
        if (key == pname) {
          if (found)
            throw Error("macro '" + m.name + "' got multiple values for argument '" + pname + "'");
          v = value;
          found = true;
        }
      }
      if (!found)
        v = pdefault ? eval(*pdefault)
                     : Value::undefined("parameter '" + pname + "' was not provided");
      scope.vars[pname] = std::move(v);
    }
    exec_body(m.body);
  } catch (...) {
    scope_ = saved_scope;
    out_ = saved_out;
    throw;
  }
  scope_ = saved_scope;
  out_ = saved_out;
  return Value::string(std::move(captured));
}

}  // namespace syv::jinja

// Jinja renderer: walks the Template with a context of variables and writes the output.
// Scoping follows jinja2: `set` inside a for-loop body lives for one iteration, macros see the
// template's top-level variables at call time, `if` opens no scope, namespace() attributes are the
// way to carry state out of a loop.
//
// Every evaluation step is counted and nesting is bounded, so a hostile template ends with an
// Error ("render step limit reached", "nesting too deep") instead of hanging or overflowing the
// stack. A Renderer renders once; it is not thread-safe (make one per render).
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <unordered_map>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/ops.h"

namespace syv::jinja {

struct RenderLimits : SizeLimits {
  uint64_t max_steps = 5'000'000;  // expression/statement evaluations
  int max_depth = 400;             // nested evaluation (expressions, blocks, macro calls)
};

// The wall clock strftime_now() reads: the local time at the call, or a fixed local time when
// one is set (golden fixtures and tests render with one, so their output does not depend on the
// day, the hour or the time zone they run in).
struct Clock {
  std::optional<std::tm> fixed_local_time;
  std::tm local_now() const;
};

class Renderer {
 public:
  Renderer(const Template& tpl, RenderLimits limits, Clock clock = {})
      : tpl_(tpl), limits_(limits), clock_(clock) {}

  // Renders with `context` as the top-level variables. Throws Error (with a position).
  std::string render(const Dict& context);

  // For built-ins.
  const RenderLimits& limits() const { return limits_; }
  const Clock& clock() const { return clock_; }
  Value call(const Value& callee, CallArgs& args);

 private:
  struct Scope {
    std::unordered_map<std::string, Value> vars;
    Scope* parent = nullptr;
  };
  enum class Flow { kNormal, kBreak, kContinue };

  struct DepthGuard {
    DepthGuard(Renderer& r, Pos p) : r(r) {
      if (++r.depth_ > r.limits_.max_depth) throw Error("nesting too deep while rendering", p);
    }
    ~DepthGuard() { --r.depth_; }
    Renderer& r;
  };

  void step(Pos p);
  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  void exec_for(const Stmt& s);
  void assign(const std::vector<std::string>& targets, const Value& v, Pos p);
  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Value eval_call(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first);
  Value lookup(const std::string& name);
  Value make_macro(const Stmt& s);
  Value call_macro(const Stmt& m, CallArgs& args);
  void write(const std::string& text);

  const Template& tpl_;
  RenderLimits limits_;
  Clock clock_;
  Scope root_;
  Scope* scope_ = &root_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace syv::jinja

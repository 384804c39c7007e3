// The simplifier's rewrite(lhs, rhs, predicate) tables (Halide's Simplify_*.cpp style).
//
// Each rule is an identity under the floor-division semantics of ir/expr.h. Termination: every
// rule either shrinks the expression or moves it into a form that no rule maps back (noted where
// it is not obvious).
#include "ir/simplify_internal.h"

namespace tilesearch::ir::simplify_internal::rules {
namespace {

using namespace simplify_internal::pattern;  // NOLINT: the tables read as math

const Pattern x = Wild(0), y = Wild(1), z = Wild(2);
const Pattern c0 = ConstWild(0), c1 = ConstWild(1), c2 = ConstWild(2);

bool IntOperands(const Match& m) { return IsInt(m.wild[0].type()); }

}  // namespace

// int64 min, applied after the bounds checks and with operands ordered (a constant last).
const std::vector<Rule>& MinRules() {
  static const auto* r = new std::vector<Rule>{
      // Each shrinks the expression.
      {min(min(x, c0), c1), min(x, min(c0, c1))},
      {min(x, max(x, y)), x},
      {min(x, max(y, x)), x},
      {min(max(x, y), x), x},
      {min(max(y, x), x), x},
      {min(x, min(x, y)), min(x, y)},
      {min(x, min(y, x)), min(y, x)},
      {min(min(x, y), x), min(x, y)},
      {min(min(y, x), x), min(y, x)},
      // Into the linear part: an atom times or plus a constant; no rule rebuilds the lhs.
      {min(x + c0, y + c0), min(x, y) + c0},
      {min(x * c0, y * c0), min(x, y) * c0, [](const Match& m) { return m.c(0) > 0; }},
      {min(x * c0, y * c0), max(x, y) * c0, [](const Match& m) { return m.c(0) < 0; }},
  };
  return *r;
}

const std::vector<Rule>& MaxRules() {
  static const auto* r = new std::vector<Rule>{
      {max(max(x, c0), c1), max(x, max(c0, c1))},
      {max(x, min(x, y)), x},
      {max(x, min(y, x)), x},
      {max(min(x, y), x), x},
      {max(min(y, x), x), x},
      {max(x, max(x, y)), max(x, y)},
      {max(x, max(y, x)), max(y, x)},
      {max(max(x, y), x), max(x, y)},
      {max(max(y, x), x), max(y, x)},
      {max(x + c0, y + c0), max(x, y) + c0},
      {max(x * c0, y * c0), max(x, y) * c0, [](const Match& m) { return m.c(0) > 0; }},
      {max(x * c0, y * c0), min(x, y) * c0, [](const Match& m) { return m.c(0) < 0; }},
  };
  return *r;
}

// int64 division by a constant, tried before the linear decomposition.
const std::vector<Rule>& DivRules() {
  static const auto* r = new std::vector<Rule>{
      // floor(floor(x/a)/b) = floor(x/(a*b)) for a, b > 0.
      {(x / c0) / c1, x / (c0 * c1),
       [](const Match& m) { return m.c(0) > 0 && m.c(1) > 0 && CheckedMul(m.c(0), m.c(1)); }},
      // floor((floor(x/a) + k)/b) = floor(floor((x + k*a)/a)/b) = floor((x + k*a)/(a*b)).
      {(x / c0 + c2) / c1, (x + c2 * c0) / (c0 * c1),
       [](const Match& m) {
         return m.c(0) > 0 && m.c(1) > 0 && CheckedMul(m.c(0), m.c(1)) &&
                CheckedMul(m.c(2), m.c(0));
       }},
      // x % (a*b) = x - a*b*q, so floor(that / b) = floor(x/b) - a*q = (x/b) % a. Div of Mod
      // becomes Mod of Div, which no rule turns back.
      {(x % c0) / c1, (x / c1) % (c0 / c1),
       [](const Match& m) { return m.c(0) > 0 && m.c(1) > 0 && m.c(0) % m.c(1) == 0; }},
  };
  return *r;
}

const std::vector<Rule>& ModRules() {
  static const auto* r = new std::vector<Rule>{
      // x % (k*c) differs from x by a multiple of c.
      {(x % c0) % c1, x % c1,
       [](const Match& m) {
         return m.c(0) != 0 && m.c(1) != 0 && m.c(1) != -1 && m.c(0) % m.c(1) == 0;
       }},
  };
  return *r;
}

const std::vector<Rule>& SelectRules() {
  static const auto* r = new std::vector<Rule>{
      {select(z, x, x), x},
      {select(!z, x, y), select(z, y, x)},
      {select(x != y, z, Wild(3)), select(x == y, Wild(3), z)},
      {select(z, True(), False()), z},
      {select(z, False(), True()), !z},
  };
  return *r;
}

const std::vector<Rule>& AndRules() {
  static const auto* r = new std::vector<Rule>{
      {True() && x, x},
      {x && True(), x},
      {False() && x, False()},
      {x && False(), False()},
      {x && x, x},
      {x && !x, False()},
      {!x && x, False()},
      // Canonical comparisons negate to each other (integers or floats: both cannot hold).
      {(x < y) && (y <= x), False()},
      {(y <= x) && (x < y), False()},
  };
  return *r;
}

const std::vector<Rule>& OrRules() {
  static const auto* r = new std::vector<Rule>{
      {True() || x, True()},
      {x || True(), True()},
      {False() || x, x},
      {x || False(), x},
      {x || x, x},
      {x || !x, True()},
      {!x || x, True()},
      {(x < y) || (y <= x), True(), IntOperands},
      {(y <= x) || (x < y), True(), IntOperands},
  };
  return *r;
}

const std::vector<Rule>& NotRules() {
  static const auto* r = new std::vector<Rule>{
      {!True(), False()},
      {!False(), True()},
      {!!x, x},
      {!(x == y), x != y},
      {!(x != y), x == y},
      // Integers only: with a float NaN both sides of < are false.
      {!(x < y), y <= x, IntOperands},
      {!(x <= y), y < x, IntOperands},
  };
  return *r;
}

}  // namespace tilesearch::ir::simplify_internal::rules

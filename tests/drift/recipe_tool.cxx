// tests/drift/recipe_tool.cxx — helper of tests/drift/recipe_numpy.sh: prints what
// each stage of a precision recipe does to sampled binary64 values, for comparison with
// NumPy's float16/float32/float64 conversions and arithmetic.
//
//   recipe_tool RECIPE < pairs     (each input line: two binary64 numbers x y)
//
// Output per input line: for each stage (storage, scores, softmax, output, result) the four
// values round(x), round(x) + round(y), round(x) * round(y), round(x) / round(y), all in the
// stage's number type; then x carried through every stage conversion in order.  Every value
// is printed with 17 significant digits (binary64 round trip).
#include <cstdio>
#include <iostream>
#include <string>

#include "attncert/drift/recipe.hpp"

using namespace attncert;

namespace {
template <class T>
void stage(double x, double y) {
  const T a = round_to<T>(x), b = round_to<T>(y);
  for (const T& v : {a, T(a + b), T(a * b), T(a / b)}) std::printf("%.17g ", number_traits<T>::to_double(v));
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: recipe_tool RECIPE < pairs\n");
    return 2;
  }
  try {
    const recipe r = parse_recipe(argv[1]);
    if (r.type == recipe::kind::mpfr) throw input_error("mpfrN has no NumPy counterpart");
    double x = 0, y = 0;
    while (std::cin >> x >> y) {
      with_recipe(r, [&]<class In, class Acc, class Sm, class OAcc, class Out>() {
        stage<In>(x, y);
        stage<Acc>(x, y);
        stage<Sm>(x, y);
        stage<OAcc>(x, y);
        stage<Out>(x, y);
        const Out chain = round_to<Out>(round_to<OAcc>(round_to<Sm>(round_to<Acc>(round_to<In>(x)))));
        std::printf("%.17g\n", number_traits<Out>::to_double(chain));
      });
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recipe_tool: %s\n", e.what());
    return 2;
  }
  return 0;
}

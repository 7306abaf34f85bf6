#include "model/core/cholesky.h"

#include <algorithm>
#include <cmath>

namespace tgraph {

void CholeskyFactor(std::vector<double>* a, size_t n, double floor) {
  std::vector<double>& m = *a;
  for (size_t j = 0; j < n; ++j) {
    double d = m[j * n + j];
    for (size_t k = 0; k < j; ++k) d -= m[j * n + k] * m[j * n + k];
    m[j * n + j] = std::sqrt(std::max(d, floor));
    for (size_t i = j + 1; i < n; ++i) {
      double s = m[i * n + j];
      for (size_t k = 0; k < j; ++k) s -= m[i * n + k] * m[j * n + k];
      m[i * n + j] = s / m[j * n + j];
    }
  }
}

void ForwardSolve(const std::vector<double>& l, size_t n, std::vector<double>* b) {
  std::vector<double>& w = *b;
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < i; ++k) w[i] -= l[i * n + k] * w[k];
    w[i] /= l[i * n + i];
  }
}

void CholeskySolve(const std::vector<double>& l, size_t n, std::vector<double>* b) {
  ForwardSolve(l, n, b);
  std::vector<double>& w = *b;
  for (size_t i = n; i-- > 0;) {  // L^T x = z
    for (size_t k = i + 1; k < n; ++k) w[i] -= l[k * n + i] * w[k];
    w[i] /= l[i * n + i];
  }
}

}  // namespace tgraph

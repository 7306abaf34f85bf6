// Dense Cholesky factorisation and solves for the small symmetric positive definite
// systems of kernel ridge regression (a Gaussian process's posterior mean): the layout
// search's measured correction (model/search/measured_correction.h) and the tile prior's
// (model/tile/tile_correction.h). n is at most a few hundred there, so plain loops do.
//
// Torch-free; pure functions of their arguments, any thread.
#pragma once

#include <cstddef>
#include <vector>

namespace tgraph {

// Factors the n x n row-major `a` (its lower triangle is read, the upper one ignored) in
// place into L, lower, with a = L L^T. A diagonal that rounding drives below `floor` (>
// 0) is held at `floor`, so that a kernel plus a ridge of `floor` never fails.
void CholeskyFactor(std::vector<double>* a, size_t n, double floor);

// Solves L z = b in place (L: CholeskyFactor's result).
void ForwardSolve(const std::vector<double>& l, size_t n, std::vector<double>* b);

// Solves L L^T x = b in place.
void CholeskySolve(const std::vector<double>& l, size_t n, std::vector<double>* b);

}  // namespace tgraph

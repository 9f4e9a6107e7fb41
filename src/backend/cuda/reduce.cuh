// Deterministic reductions: whole-tensor sums and column sums (the LayerNorm and bias
// gradients), both as partial sums in scratch that a second pass adds in a fixed order.
#pragma once

#include <initializer_list>

#include "common.cuh"
#include "trident/backend/backend.hpp"

namespace trident::gpu {

// acc[0] += sum(x^2) over n elements of x (fp32 or bf16).
void sum_squares(float* acc, const float* x, size_t n, Scratch& scratch, cudaStream_t stream);
void sum_squares(float* acc, const bf16* x, size_t n, Scratch& scratch, cudaStream_t stream);
// acc[0] += sum(x).
void sum(float* acc, const float* x, size_t n, Scratch& scratch, cudaStream_t stream);

// Rows whose column sums one block of a column reduction accumulates into one partial row.
constexpr int kRowsPerPartial = 64;

// Chunks of kRowsPerPartial rows covering N rows (fatal() past the grid's y limit).
int column_chunks(int N, const char* op);

// dst (C) += sum over chunks k of partials (n_chunks, C), in an order fixed by the shape.
void add_column_partials(float* dst, const float* partials, int n_chunks, int C, cudaStream_t stream);
// The same for up to three arrays of partials stored one after another in `partials` (array a at
// a * n_chunks * C) into dsts[a], in one launch.
void add_column_partials(std::initializer_list<float*> dsts, const float* partials, int n_chunks, int C,
                         cudaStream_t stream);

// dst (C) += column sums of x (N, C), through partials in scratch (the bias gradient).
void add_column_sums(float* dst, const bf16* x, int N, int C, Scratch& scratch, cudaStream_t stream);

// acc (1) += sum of squares of x over `count` pieces (device table; see Backend's MultiTensorEntry):
// one partial per piece, added in piece order.
void sum_squares_multi(float* acc, const float* x, const MultiTensorEntry* pieces, int count, Scratch& scratch,
                       cudaStream_t stream);

}  // namespace trident::gpu

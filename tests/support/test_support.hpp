// Shared helpers for tests: random tensors, relative errors, and the parallel groups of a config.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/config/run_config.hpp"
#include "trident/parallel/groups.hpp"

namespace trident {
struct GatheredParams;   // trident/train/gather.hpp
struct Completion;       // trident/model/generator.hpp
}

namespace trident::test {

// Deterministic pseudo-random values in [-scale, scale).
std::vector<float> random_vector(size_t n, uint64_t seed, float scale = 1.0f);

// ||a - b|| / max(||b||, tiny), L2 over all elements.
double rel_l2(const std::vector<float>& a, const std::vector<float>& b);
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);
// The largest rel_l2 of got's tensors against want's of the same name; `which` names that tensor.
double worst_tensor(const GatheredParams& got, const GatheredParams& want, std::string& which);

// A small GPT for tests on CPU ranks: L 2, NH 4, C 64, V 100, T 16; micro-batch 2, global batch
// 8; lr 1e-2 after 2 warm-up steps; collectives time out after 120 s. Each test changes on its
// copy what it exercises (deeper models for pipeline layouts, its layout, its steps).
RunConfig tiny_config();
// The fine-tuning tests' model for `task` (sft, dpo, reward): tiny_config as a 4-layer Llama (4
// divides every pp up to 4; 2 key/value heads) or GPT-2 over 101 ids, B 2, G 8, Adam eps 1e-5 (as
// test_equivalence: keeps rounding-floor gradients from taking full steps), min_lr 1e-3.
RunConfig finetune_config(const std::string& task, const std::string& arch = "llama");
// The generation tests' model (test_generation, test_pipeline_generation): tiny_config at C 32,
// V 60, T 32 (a Llama: 2 key/value heads, FFN 64), micro-batches of one sequence, global batch 4,
// 30 steps after 1 warm-up step, layout tp x pp, collectives time out after 60 s.
RunConfig generation_config(bool llama, int tp, int pp = 1);
// Prompts of lengths 1 to 7 over generation_config's 60 ids (more than a batch: slots are reused).
std::vector<std::vector<int32_t>> ragged_prompts();
// Completions equal to want's: the same tokens and stops, log-probabilities equal (logprob_tol 0)
// or within logprob_tol.
void expect_same_completions(const std::vector<Completion>& got, const std::vector<Completion>& want,
                             float logprob_tol);

// Validates cfg for the ranks of comm (resolving parallel.dp) and returns its topology.
Topology validated_topology(RunConfig& cfg, MPI_Comm comm);
// The same, then the MPI groups of that layout over comm (timeout: parallel.timeout_s).
ParallelGroups mpi_groups(RunConfig& cfg, MPI_Comm comm);

// This rank's parameters (layout().total() fp32) of cfg's model in g's layout, initialised from
// `seed`: a task dpo reference model other than the policy's initialisation. Needs a backend that
// computes in fp32 (the CPU backend).
std::vector<float> initial_params(const RunConfig& cfg, const ParallelGroups& g, Backend& be, uint64_t seed);

}  // namespace trident::test

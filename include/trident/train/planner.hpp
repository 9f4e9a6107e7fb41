// Planner: per-GPU memory and step-time estimates of a (dp, tp, pp, zero, micro-batch, schedule)
// layout, and every valid layout of a GPU count ranked by estimated throughput (`trident plan`,
// parallel.auto). Pure functions of the config and the hardware description: no MPI, no backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trident/config/run_config.hpp"

namespace trident {

class ParamLayout;

// What the planner assumes about the machine. Bandwidths are bus bandwidths in GB/s (1e9 bytes),
// the unit nccl-tests and `trident doctor` report.
struct Hardware {
  int gpus = 1;
  int gpus_per_node = 8;
  double memory_gib = 80;       // per GPU
  double gemm_tflops = 400;     // sustained dense GEMM rate of one GPU in the compute dtype
  double nvlink_gbps = 300;     // inside a node
  double ib_gbps = 40;          // per GPU between nodes
  int act_bytes = 2;            // parameters and activations: 2 (bf16, CUDA) or 4 (fp32, CPU)
  // GPU memory outside trident's arenas, what cudaMemGetInfo counts beyond Backend::peak_bytes()
  // (docs/OPERATIONS.md states where each figure comes from). device = false plans CPU ranks:
  // none of it.
  bool device = true;
  // One process's device memory beside its arenas and the GEMM workspace: the CUDA context with the
  // kernels it has loaded (lazily: trident's, cuBLASLt's), device stacks and heap, and the op scratch.
  // Measured: 2.24 GiB on H200 (CUDA 13.0, driver 580; docs/PERFORMANCE.md "Planner and checkpoints").
  double cuda_context_gib = 2.2;
  int nccl_channels = 32;         // channels NCCL opens per communicator and per point-to-point peer
  // parallel.offload_optimizer's time: the gradient and parameter copies over PCIe (pinned host
  // memory, each direction, per GPU) and the host memory traffic of the host AdamWs of a node's
  // ranks together (they share it). Measured: one rank's 16 threads updated 1.24B parameters (30
  // bytes each) in about 0.36 s on an H200 node, ~100 GB/s (docs/PERFORMANCE.md, offload).
  double pcie_gbps = 50;
  double host_adamw_gbps = 100;
  // Device memory rate of the passes over the parameters' state and gradients (parameter_pass_seconds):
  // what a memory-bound kernel moves, reads and writes counted. Measured: AdamW at 3,957 GB/s on an
  // H200 (docs/PERFORMANCE.md, "What did not help"); an H100 SXM's 3.35 TB/s memory gives less.
  double hbm_gbps = 3000;
};

// NCCL's buffers for one channel of one peer: a receive connection's LL (512 KiB), LL128 (4.6875
// MiB) and SIMPLE (NCCL_BUFFSIZE, 4 MiB) FIFOs and the send connection's state, each allocation
// rounded to the 2 MiB granularity of cuMem memory: 10 + 2 MiB (6 + 6 MiB where SIMPLE is read
// by the peer). NCCL's defaults in src/init.cc; buffers are allocated on a channel's first use.
constexpr double kNcclChannelPeerBytes = 12.0 * (1 << 20);

// Bytes held by one rank of the busiest pipeline stage, term by term as GptStage, Optimizer and
// Trainer allocate them.
struct MemoryEstimate {
  int stage = 0;               // the pipeline stage these numbers belong to
  int in_flight = 1;           // micro-batches whose activations that stage holds at once
  int stashed = 0;             // zero_bubble: weight-gradient stashes (PipelineExecutor::stashes_needed)
  double params = 0;           // compute dtype, this rank's shard (with alignment padding); ZeRO-2: and the shard AdamW writes
  double grads = 0;            // fp32 (ZeRO-2: the shards and the staging buffers)
  double optimizer = 0;        // fp32 master + exp_avg + exp_avg_sq (a 1/dp share under ZeRO)
  double activations = 0;      // in_flight slots of the stage's layers (zero_bubble: and the stashed output gradients)
  double scratch = 0;          // backward scratch, final LayerNorm and the logits chunk
  double trainer = 0;          // the step's token batch, loss/norm scalars, optimizer piece tables
  // Outside trident's arenas (Hardware::device): the CUDA context, the cuBLASLt workspace and the
  // NCCL buffers of the communicators the layout uses (nccl_buffer_bytes).
  double cuda_context = 0, gemm_workspace = 0, nccl_buffers = 0;
  double reference = 0;        // task dpo, grpo with a KL penalty: the frozen reference's parameters, slots, scratch, NLLs
  // Online RL: the generator's KV cache and rows (Generator::device_bytes); a reward model
  // (rl.reward = model) is not counted: its shape is its checkpoint's.
  double generation = 0;
  // Task ppo: the value model (Trainer::Mode::Value), a second trained model of the policy's layout
  // with a score head: its parameters, gradients, optimizer state, slots, scratch and batch.
  double value_model = 0;
  // Host memory, not in total(): with parallel.offload_optimizer the master weights and moments
  // (what `optimizer` would hold), the gradient copy they are updated from and the updated
  // parameters staged for upload (compute dtype).
  double host = 0;
  double outside_arenas() const { return cuda_context + gemm_workspace + nccl_buffers; }
  // What Backend::peak_bytes() reaches: everything trident allocates itself.
  double arenas() const {
    return params + grads + optimizer + activations + scratch + trainer + reference + generation + value_model;
  }
  // What the GPU reports in use at the step's peak (cudaMemGetInfo's total - free).
  double total() const { return arenas() + outside_arenas(); }
};

// Seconds of one optimizer step on the slowest stage: step_s is the sum of the six terms.
struct TimeEstimate {
  double compute_s = 0;        // GEMM FLOPs of the step at Hardware::gemm_tflops
  double tp_s = 0;             // tensor-parallel all-reduces (blocking, on the compute stream)
  double pp_s = 0;             // stage-boundary sends/receives and the tied-embedding sum
  double dp_s = 0;             // gradient reduction not hidden behind the last backward, ZeRO gather
  double bubble_s = 0;         // pipeline fill and drain: pp-1 micro-batch slots
  double offload_s = 0;        // parallel.offload_optimizer: host AdamW and the copies it waits for
  double memory_s = 0;         // parameter_pass_seconds of the busiest stage
  double bubble = 0;           // pipeline idle fraction (pp-1)/(n_micro+pp-1)
  double step_s = 0;
  double tokens_per_s = 0;
};

struct Layout {
  int dp = 1, tp = 1, pp = 1, zero = 0, micro_batch_size = 1;
  std::string schedule = "1f1b";
};

struct Candidate {
  Layout layout;
  MemoryEstimate memory;
  TimeEstimate time;
  bool fits = false;           // memory.total() <= Hardware::memory_gib
};

// Parameters of the model counted from the global shapes of its logical tensors (what a
// checkpoint holds; the vocabulary unpadded, the tied embedding once).
int64_t logical_param_count(const ModelConfig& m);
// Parameter elements one rank of (tp rank 0, every stage) stores, padding included, summed over
// the stages: the memory-side count (vocabulary padded to 128*tp).
int64_t stored_param_count(const ModelConfig& m, int tp);

// Training FLOPs per token: 6N + 12*L*C*T, N the parameters that take part in GEMMs.
double flops_per_token(const ModelConfig& m);

// The idle share of a step under 1F1B or GPipe, (pp - 1) / (n_micro + pp - 1); with v virtual
// stages (interleaved) the fill and drain take (pp - 1) chunk slots, 1/v of a micro-batch's each.
double pipeline_bubble(int pp, int n_micro, int virtual_stages = 1);

// Bytes of activations one block keeps for the backward per micro-batch of B sequences on one TP
// rank (act_bytes per element; `full`: a fully recomputed block), what GptStage's slots hold. In
// the terms of Korthikanti et al. 2022 (s = T, b = B, h = C, t = tp, 2-byte elements), GPT-2:
//   none          sbh (8 + 24/t)    selective  sbh (4 + 24/t)    full  2 sbh
//   with SP       sbh 32/t                     sbh 28/t                2 sbh/t
// plus the fp32 statistics (norm mean and rstd per token and norm, logsumexp per token and head).
// The paper's sbh (10 + 24/t + 5as/(ht)) and sbh 34/t also count two dropout masks (trident has
// no dropout) and the attention probabilities (never stored: flash attention); its selective
// recompute is exactly that attention core, and trident's also drops the norm outputs (4 sbh,
// or 4 sbh/t under SP) and a Llama's SwiGLU product (GPT-2 keeps its GELU output, computed in
// the fc GEMM's epilogue).
double block_activation_bytes(const ModelConfig& m, int tp, int micro_batch, int act_bytes, bool sequence_parallel,
                              bool selective, bool full);

// Bytes NCCL allocates on one rank of pipeline stage `stage` for the communicators trident uses
// there: per channel one peer on a ring for each collective communicator of two or more ranks
// (world, tp, dp, and the tied embedding's pair of the first and last stages), and per channel
// each neighbouring stage on the pp communicator's sends and receives. Hardware::nccl_channels
// each, a collective's capped by parallel.tp_comm_ctas / dp_comm_ctas where set. 0 for CPU ranks.
double nccl_buffer_bytes(const RunConfig& cfg, const Hardware& hw, int stage);

// Seconds parallel.offload_optimizer adds to a step, as Optimizer does the offloaded update: each
// bucket's fp32 gradients (`state` elements in all, 4 bytes each) are copied to the host as the
// last micro-batch's backward finishes the bucket, hidden behind that backward (2/3 of
// `micro_compute_s`) except the last bucket's (`last_bucket` elements: the bucket the forward reads
// first, final when the backward ends), which is always waited for. The host AdamW starts only
// after the backward and the gradient norm (its clipping factor): bucket after bucket, reading
// gradient, master and both moments and writing the three and the parameter (28 + act_bytes bytes
// an element, as STREAM counts bytes) at the host memory bandwidth its node's `ranks_per_host`
// ranks share (they update at the same time), each bucket's parameters uploaded (act_bytes each)
// beside the next bucket's update: the longer of the two.
double offload_seconds(double state, double last_bucket, double micro_compute_s, int ranks_per_host,
                       const Hardware& hw);

// Seconds of a step's memory-bound passes over one stage's parameters at Hardware::hbm_gbps, the
// bytes each kernel reads and writes per element: the device AdamW (none when offloaded) over the
// `updated` elements, 28 + act_bytes; the gradient norm's read, 4; zeroing the fp32 gradients once
// a step, 4 (ZeRO-0/1), or under ZeRO-2/3 with dp > 1 (ZeroShards) each staged bucket per
// micro-batch, zeroed (4) and reduce-scattered, the first reduction of a step into the shard and
// each later one's share added to it (3 x 4 / dp); the buckets ZeroShards reduces once a step
// (head, embedding) once.
double parameter_pass_seconds(const ParamLayout& layout, const ParallelConfig& p, int n_micro, const Hardware& hw);

// cfg must be validated (parallel.dp resolved).
MemoryEstimate estimate_memory(const RunConfig& cfg, const Hardware& hw);
TimeEstimate estimate_time(const RunConfig& cfg, const Hardware& hw);

// Writes the layout into the parallel and train sections of cfg.
void apply_layout(RunConfig& cfg, const Layout& l);

// Every layout of hw.gpus ranks (dp, tp, pp; ZeRO 0-3; gpipe, 1f1b or zero_bubble where pp > 1;
// micro-batch size) that validate_run_config accepts for `base` (model, batch, options), with
// estimates, best first: fitting before not fitting, then by tokens/s, then the
// larger micro-batch (better GEMM efficiency than the model credits), then less memory.
std::vector<Candidate> rank_layouts(const RunConfig& base, const Hardware& hw);

// For an empty rank_layouts(): throws InputError with the reason validate_run_config gives for
// the simplest layout (data parallelism over all GPUs, micro-batch 1), else a generic one.
[[noreturn]] void explain_no_valid_layout(const RunConfig& base, int gpus);

}  // namespace trident

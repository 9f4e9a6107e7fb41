// `trident plan`: every valid layout of a GPU count for a model and batch, with the planner's
// memory per GPU and throughput estimates, best first. Runs on one process; needs no GPU.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>

#include "commands.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/train/planner.hpp"

namespace po = boost::program_options;

namespace trident {

namespace {

constexpr double kGiB = double(1 << 30);

std::string row(int index, const Candidate& c) {
  const Layout& l = c.layout;
  const MemoryEstimate& m = c.memory;
  const TimeEstimate& t = c.time;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%3d | %4d %3d %3d %4d %-11s %4d | %7.2f = %6.2f %6.2f %6.2f %7.2f %6.2f | "
                "%8.1f = %8.1f %7.1f %7.1f %7.1f %7.1f %7.1f (%4.1f%%) | %10.0f",
                index, l.dp, l.tp, l.pp, l.zero, l.pp == 1 ? "-" : l.schedule.c_str(), l.micro_batch_size,
                m.total() / kGiB, m.params / kGiB, m.grads / kGiB, m.optimizer / kGiB, m.activations / kGiB,
                (m.scratch + m.trainer + m.outside_arenas() + m.reference + m.generation + m.value_model) / kGiB,
                1e3 * t.step_s, 1e3 * t.compute_s, 1e3 * t.tp_s,
                1e3 * t.pp_s, 1e3 * t.dp_s, 1e3 * t.memory_s, 1e3 * t.bubble_s, 100 * t.bubble, t.tokens_per_s);
  return buf;
}

}  // namespace

int cmd_plan(const Args& args) {
  Hardware hw;
  hw.gpus = 0;
  hw.gpus_per_node = 0;
  int top = 15;
  po::options_description extra("Plan");
  extra.add_options()
      ("gpus", po::value<int>(&hw.gpus), "number of GPUs (ranks) to plan for")
      ("gpu-memory-gib", po::value<double>(&hw.memory_gib)->default_value(hw.memory_gib), "memory of one GPU, GiB")
      ("gpus-per-node", po::value<int>(&hw.gpus_per_node),
       "GPUs per node (default: the config's parallel.gpus_per_node, else min(8, gpus))")
      ("gemm-tflops", po::value<double>(&hw.gemm_tflops)->default_value(hw.gemm_tflops),
       "sustained GEMM rate of one GPU, TFLOP/s")
      ("nvlink-gbps", po::value<double>(&hw.nvlink_gbps)->default_value(hw.nvlink_gbps),
       "all-reduce bus bandwidth inside a node, GB/s (as nccl-tests and trident doctor report)")
      ("ib-gbps", po::value<double>(&hw.ib_gbps)->default_value(hw.ib_gbps),
       "bus bandwidth per GPU between nodes, GB/s")
      ("cuda-context-gib", po::value<double>(&hw.cuda_context_gib)->default_value(hw.cuda_context_gib),
       "GPU memory of one process's CUDA context, GiB (measure: a run's GPU-reported peak minus its planned total)")
      ("nccl-channels", po::value<int>(&hw.nccl_channels)->default_value(hw.nccl_channels),
       "channels NCCL opens per communicator and per point-to-point peer (NCCL_DEBUG=INFO prints them)")
      ("pcie-gbps", po::value<double>(&hw.pcie_gbps)->default_value(hw.pcie_gbps),
       "parallel.offload_optimizer: host <-> GPU copy rate of pinned memory, each direction, GB/s")
      ("host-adamw-gbps", po::value<double>(&hw.host_adamw_gbps)->default_value(hw.host_adamw_gbps),
       "parallel.offload_optimizer: host memory bandwidth of one node, shared by the host AdamWs of its ranks, GB/s")
      ("hbm-gbps", po::value<double>(&hw.hbm_gbps)->default_value(hw.hbm_gbps),
       "device memory rate of the passes over parameters and gradients (AdamW, zeroing, ZeRO-2's staging), GB/s "
       "(about 4,000 on an H200)")
      ("top", po::value<int>(&top)->default_value(top), "print the best N layouts that fit");
  ParsedArgs parsed = parse_args(args, &extra);
  if (parsed.help) {
    log_info("usage: trident plan --config MODEL.cfg --gpus N [--gpu-memory-gib G] [...]\n\n" +
             run_options_help(&extra, {"backend", "model.", "parallel.tp_overlap", "parallel.tp_fused_sum",
                                       "parallel.recompute", "parallel.recompute_layers",
                                       "parallel.sequence_parallel", "parallel.offload_optimizer",
                                       "parallel.tp_comm_ctas", "parallel.dp_comm_ctas", "parallel.gpus_per_node",
                                       "train.global_batch_size"}));
    return 0;
  }
  if (hw.gpus < 1) throw InputError("--gpus is required: the number of GPUs (ranks) to plan for");
  if (hw.gpus_per_node == 0) hw.gpus_per_node = parsed.cfg.parallel.gpus_per_node;
  if (hw.gpus_per_node == 0) hw.gpus_per_node = std::min(8, hw.gpus);
  if (hw.gpus_per_node < 1)
    throw InputError(str("--gpus-per-node (or parallel.gpus_per_node) = ", hw.gpus_per_node, ": must be at least 1"));
  if (hw.memory_gib <= 0 || hw.gemm_tflops <= 0 || hw.nvlink_gbps <= 0 || hw.ib_gbps <= 0 || hw.pcie_gbps <= 0 ||
      hw.host_adamw_gbps <= 0 || hw.hbm_gbps <= 0 || hw.cuda_context_gib < 0 || hw.nccl_channels < 1)
    throw InputError("--gpu-memory-gib, --gemm-tflops, --nvlink-gbps, --ib-gbps, --pcie-gbps, --host-adamw-gbps and "
                     "--hbm-gbps must be > 0, --cuda-context-gib >= 0, --nccl-channels >= 1");
  const RunConfig& cfg = parsed.cfg;
  if (cfg.backend == "cpu") {   // plan CPU ranks: fp32 everywhere, no CUDA context or NCCL
    hw.act_bytes = 4;
    hw.device = false;
  }

  const ModelConfig& m = cfg.model;
  const double tokens = double(cfg.train.global_batch_size) * m.seq_len;
  log_info(str("trident plan: ", logical_param_count(m), " parameters (L ", m.n_layer, ", NH ", m.n_head, ", C ",
               m.n_embd, ", V ", m.vocab_size, ", T ", m.seq_len, "); global batch ", cfg.train.global_batch_size,
               " x ", m.seq_len, " = ", static_cast<long>(tokens), " tokens per step"));
  log_info(str("hardware: ", hw.gpus, hw.gpus == 1 ? " GPU, " : " GPUs, ", hw.gpus_per_node, " per node, ",
               hw.memory_gib, " GiB each; GEMM ", hw.gemm_tflops, " TFLOP/s, memory ", hw.hbm_gbps, " GB/s, NVLink ",
               hw.nvlink_gbps, " GB/s, IB ", hw.ib_gbps, " GB/s; ",
               hw.act_bytes == 2 ? "bf16" : "fp32", " parameters and activations"));
  log_info(str("FLOPs per token 6N + 12LCT = ", flops_per_token(m) / 1e9, " GFLOP; memory is that of the busiest "
               "pipeline stage as the GPU reports it; 'other' = scratch + trainer buffers + ",
               hw.device ? str("CUDA context (", hw.cuda_context_gib, " GiB) + cuBLASLt workspace + NCCL buffers (",
                               hw.nccl_channels, " channels)")
                         : std::string("nothing outside trident's allocations (CPU ranks)"),
               "; step ms includes parallel.offload_optimizer's host update"));

  const std::vector<Candidate> ranked = rank_layouts(cfg, hw);
  int fitting = 0;
  for (const Candidate& c : ranked) fitting += c.fits;
  if (ranked.empty()) explain_no_valid_layout(cfg, hw.gpus);
  log_info(str("\n  # |   dp  tp  pp zero sched         mb | GiB/GPU = params  grads  optim     act  other |  "
               "step ms = "
               " compute      tp      pp      dp     mem  bubble          |   tokens/s"));
  for (int i = 0; i < std::min(top, fitting); ++i) log_info(row(i + 1, ranked[i]));
  if (fitting == 0) {
    double least = ranked.front().memory.total();
    for (const Candidate& c : ranked) least = std::min(least, c.memory.total());
    log_info(str("\nnone of the ", ranked.size(), " valid layouts fits in ", hw.memory_gib,
                 " GiB per GPU; the smallest needs ", least / kGiB, " GiB. Use more GPUs or a smaller batch."));
    return 1;
  }
  if (fitting < static_cast<int>(ranked.size()))
    log_info(str("(", ranked.size() - fitting, " more valid layouts do not fit in ", hw.memory_gib, " GiB)"));
  const Candidate& best = ranked.front();
  log_info(str("\nbest: --parallel.tp ", best.layout.tp, " --parallel.pp ", best.layout.pp, " --parallel.zero ",
               best.layout.zero, " --parallel.schedule ", best.layout.schedule, " --train.micro_batch_size ",
               best.layout.micro_batch_size));
  if (cfg.parallel.offload_optimizer)
    log_info(str("parallel.offload_optimizer: the optimizer state is in host memory, ", best.memory.host / kGiB,
                 " GiB per rank of the best layout (master weights, moments, gradient copy, parameters for upload); "
                 "its host update and copies add ", 1e3 * best.time.offload_s, " ms to each step (PCIe ", hw.pcie_gbps,
                 " GB/s, host memory ", hw.host_adamw_gbps, " GB/s per node)"));
  return 0;
}

}  // namespace trident

// The planner's memory estimate against what a real step allocates: CPU ranks (fp32, no CUDA
// workspace) train one step in several layouts, and the largest Backend::peak_bytes() over the
// ranks must match the estimate of the busiest stage.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/config/parse.hpp"
#include "trident/io/random_tokens.hpp"
#include "trident/train/planner.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

RunConfig planned_config() {
  RunConfig c = test::tiny_config();
  c.model.n_layer = 4;
  c.model.vocab_size = 257;
  c.model.seq_len = 32;
  c.train.global_batch_size = 16;
  c.parallel.bucket_mb = 0.05;   // several buckets, so ZeRO shards and bucket padding are exercised
  return c;
}

double peak_over_ranks(RunConfig cfg) {
  cfg.parallel.timeout_s = 120;
  ParallelGroups g = test::mpi_groups(cfg, MPI_COMM_WORLD);
  std::unique_ptr<Backend> be = make_cpu_backend();
  RandomTokens data(cfg.model.seq_len, cfg.model.vocab_size, 7);
  {
    Trainer trainer(cfg, g, *be, data);
    trainer.train_step(0);
  }
  double mine = static_cast<double>(be->peak_bytes()), peak = 0;
  MPI_Allreduce(&mine, &peak, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return peak;
}

TEST(PlannerMemory, EstimateMatchesPeakBytesOfOneStep) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  Hardware cpu;
  cpu.act_bytes = 4;
  cpu.device = false;
  const Layout layouts[] = {
      {world, 1, 1, 0, 2, "1f1b"}, {world, 1, 1, 1, 1, "1f1b"}, {world / 2, 2, 1, 1, 2, "1f1b"},
      {world / 2, 1, 2, 0, 1, "1f1b"}, {world / 2, 1, 2, 1, 2, "gpipe"}, {1, 2, world / 2, 0, 2, "1f1b"},
  };
  auto check = [&](const Layout& l, int virtual_stages) {
    RunConfig cfg = planned_config();
    apply_layout(cfg, l);
    cfg.parallel.virtual_stages = virtual_stages;
    const double peak = peak_over_ranks(cfg);
    validate_run_config(cfg, world);
    const double planned = estimate_memory(cfg, cpu).total();
    std::printf("dp=%d tp=%d pp=%d zero=%d %s: peak %.0f B, planned %.0f B\n", l.dp, l.tp, l.pp, l.zero,
                l.schedule.c_str(), peak, planned);
    EXPECT_NEAR(peak, planned, 0.5)
        << "dp=" << l.dp << " tp=" << l.tp << " pp=" << l.pp << " zero=" << l.zero << " " << l.schedule
        << " B=" << l.micro_batch_size;
  };
  for (const Layout& l : layouts) check(l, 1);
  // Interleaved, two model chunks of one layer per rank: slots of one chunk each.
  check({world / 2, 1, 2, 0, 2, "interleaved"}, 2);
}

}  // namespace
}  // namespace trident

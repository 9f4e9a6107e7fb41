// trident entry point: MPI start-up, dispatch to a subcommand, uniform handling of bad input.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <map>

#include "commands.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/parallel/mpi_comm.hpp"

#if TRIDENT_TEST_HOOKS
// Only in the trident_test binary (tests/support/fault_injection.cpp); trident has no fault hooks.
namespace trident { void install_test_fault_handler(); }
#endif

namespace {

struct Command {
  int (*fn)(const trident::Args&);
  const char* help;
};

const std::map<std::string, Command>& commands() {
  static const std::map<std::string, Command> table = {
      {"train", {trident::cmd_train, "train a model (see trident train --help)"}},
      {"tokenize", {trident::cmd_tokenize, "turn raw text into a Megatron indexed dataset"}},
      {"inspect", {trident::cmd_inspect, "summarise a checkpoint: step, config, layout, tensors"}},
      {"bench", {trident::cmd_bench, "throughput table on random tokens, or --bench.kernels"}},
      {"eval", {trident::cmd_eval, "validation loss and perplexity of a checkpoint"}},
      {"generate", {trident::cmd_generate, "sample text from a checkpoint (KV cache; tp >= 1, pp = 1)"}},
      {"doctor", {trident::cmd_doctor, "check ranks, GPUs, communicators and checkpoint I/O (run under mpirun)"}},
      {"plan", {trident::cmd_plan, "estimate memory and speed of every layout for a GPU count"}},
  };
  return table;
}

void usage() {
  std::printf("usage: trident <command> [--config FILE]... [--section.key VALUE]...\n\ncommands:\n");
  for (const auto& [name, c] : commands()) std::printf("  %-10s %s\n", name.c_str(), c.help);
}

}  // namespace

int main(int argc, char** argv) {
#if TRIDENT_TEST_HOOKS
  trident::install_test_fault_handler();
#endif
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  trident::set_log_rank(rank == 0);
  trident::set_error_context(trident::str("[rank ", rank, "]"), trident::mpi_abort);

  int status = 0;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    if (rank == 0) usage();
    status = argc < 2 ? 2 : 0;
  } else if (auto it = commands().find(argv[1]); it == commands().end()) {
    if (rank == 0) std::fprintf(stderr, "trident: unknown command '%s'; run 'trident --help'\n", argv[1]);
    status = 2;
  } else {
    try {
      status = it->second.fn(trident::Args(argv + 2, argv + argc));
    } catch (const trident::InputError& e) {
      // Every rank sees the same bad input; rank 0 reports it once.
      if (rank == 0) std::fprintf(stderr, "trident %s: error: %s\n", argv[1], e.what());
      status = 2;
    }
  }
  MPI_Finalize();
  return status;
}

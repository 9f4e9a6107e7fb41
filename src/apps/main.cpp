// trident entry point: MPI start-up, dispatch to a subcommand, uniform handling of bad input.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <map>

#include "commands.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/parallel/host_collectives.hpp"
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
      {"generate", {trident::cmd_generate, "sample text from a checkpoint (KV cache; any tp and pp)"}},
      {"doctor", {trident::cmd_doctor, "check ranks, GPUs, communicators and checkpoint I/O (run under mpirun)"}},
      {"convert", {trident::cmd_convert, "Hugging Face models to trident checkpoints and back (--from-hf, --to-hf)"}},
      {"plan", {trident::cmd_plan, "estimate memory and speed of every layout for a GPU count"}},
  };
  return table;
}

// An unexpected exception may be thrown on one rank only, while the others wait in a collective:
// this rank reports it (one line, with its context) and ends the whole job.
int fail_on_this_rank(const char* command, const std::string& what) {
  std::fprintf(stderr, "trident %s: error %s: %s\n", command, trident::error_context().c_str(), what.c_str());
  std::fflush(stderr);
  if (trident::comm_size(MPI_COMM_WORLD) > 1) trident::mpi_abort(1);
  return 1;
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
  const trident::MpiSession mpi(argc, argv);   // MPI_Finalize when main returns
  const int rank = trident::comm_rank(MPI_COMM_WORLD);
  trident::set_log_rank(rank == 0);
  trident::set_error_context(trident::str("[rank ", rank, "]"), trident::mpi_abort);

  int status = 0;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    if (rank == 0) usage();
    status = argc < 2 ? 2 : 0;
  } else if (auto it = commands().find(argv[1]); it == commands().end()) {
    if (rank == 0)
      std::fprintf(stderr, "trident: unknown command %s; run 'trident --help'\n",
                   trident::quoted_text(argv[1]).c_str());
    status = 2;
  } else {
    try {
      status = it->second.fn(trident::Args(argv + 2, argv + argc));
    } catch (const trident::InputError& e) {
      // Every rank sees the same bad input; rank 0 reports it once.
      if (rank == 0) std::fprintf(stderr, "trident %s: error: %s\n", argv[1], trident::printable(e.what()).c_str());
      status = 2;
    } catch (const std::bad_alloc&) {
      status = fail_on_this_rank(argv[1], "out of memory (std::bad_alloc); a size in the configuration or an "
                                          "input file is larger than this machine can hold");
    } catch (const std::exception& e) {
      status = fail_on_this_rank(argv[1], trident::printable(e.what()));
    } catch (...) {
      status = fail_on_this_rank(argv[1], "unknown exception");
    }
  }
  return status;
}

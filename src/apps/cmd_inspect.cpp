// `trident inspect CHECKPOINT`: step, configuration, saved layout, tensors with shapes and norms.
#include <mpi.h>

#include <boost/program_options.hpp>
#include <sstream>

#include "commands.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/parallel/host_collectives.hpp"

namespace po = boost::program_options;

namespace trident {

int cmd_inspect(const Args& args) {
  std::string checkpoint;
  po::options_description d("Inspect");
  d.add_options()("help,h", "print this help")(
      "checkpoint", po::value(&checkpoint), "checkpoint file (.h5) to summarise; may also be given as the only argument");
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(d).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError(str(e.what(), " (usage: trident inspect CHECKPOINT.h5; see trident inspect --help)"));
  }
  if (vm.count("help")) {
    std::ostringstream help;
    help << "usage: trident inspect CHECKPOINT.h5\n  prints step, configuration, the layout it was saved with, and "
            "every tensor's shape and L2 norm\n\n"
         << d;
    log_info(help.str());
    return 0;
  }
  if (checkpoint.empty()) throw InputError("usage: trident inspect CHECKPOINT.h5");
  if (comm_rank(MPI_COMM_WORLD) == 0) log_info(describe_checkpoint(checkpoint));
  return 0;
}

}  // namespace trident

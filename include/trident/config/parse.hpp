// Command-line and INI parsing (Boost.ProgramOptions) and validation of RunConfig.
#pragma once

#include <string>
#include <vector>

#include "trident/config/run_config.hpp"

namespace boost { namespace program_options { class options_description; } }

namespace trident {

// Registers every RunConfig option, grouped by section, writing into `cfg` on notify.
void add_run_options(boost::program_options::options_description& all, RunConfig& cfg);

struct ParsedArgs {
  RunConfig cfg;
  bool help = false;
};

// Parses `--config FILE`... (later files win), then `--section.key value` flags (which win over
// files). `extra` adds command-specific options. Throws InputError naming the option or file:line,
// or the first argument that is not an option.
ParsedArgs parse_args(const std::vector<std::string>& args,
                      boost::program_options::options_description* extra = nullptr);

// A configuration from INI text (e.g. the one stored in a checkpoint); `origin` names it in errors.
RunConfig parse_config_text(const std::string& ini, const std::string& origin);

// Help text for the run options, grouped by section, with defaults. `only` names the options a
// command uses, so that its help lists no other: full names ("train.seed") or whole sections
// ("data."); empty = every option (what train uses). Parsing accepts every option regardless, so
// one config file serves train, eval and the rest.
std::string run_options_help(const boost::program_options::options_description* extra = nullptr,
                             const std::vector<std::string>& only = {});

// Checks every value and combination; resolves parallel.dp from world_size. Throws InputError
// with one line naming the option, the value and the fix. Never allocates or communicates.
void validate_run_config(RunConfig& cfg, int world_size);

// The resolved configuration as an INI text (printed at start, stored in checkpoints).
std::string to_ini(const RunConfig& cfg);

}  // namespace trident

// Fuzz target: INI text through the config parser and validation (what --config files go through).
// Bad input must end in InputError; anything else (a crash, another exception) is a finding.
#include <cstdint>
#include <string>

#include "fuzz_input.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trident::fuzz::Input in(data, size);
  const int world = 1 + in.take<uint8_t>() % 16;
  try {
    trident::RunConfig cfg = trident::parse_config_text(in.rest(), "fuzz.cfg");
    trident::validate_run_config(cfg, world);
    trident::parse_config_text(trident::to_ini(cfg), "round trip");
  } catch (const trident::InputError& e) {
    trident::printable(e.what());
  }
  return 0;
}

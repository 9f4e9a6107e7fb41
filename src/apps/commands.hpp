// The trident subcommands. Each takes the arguments after its name and returns the exit status;
// expected errors are thrown as InputError and turned into one line + exit 2 by main().
#pragma once

#include <string>
#include <vector>

namespace trident {

using Args = std::vector<std::string>;

int cmd_train(const Args& args);
int cmd_tokenize(const Args& args);
int cmd_inspect(const Args& args);
int cmd_generate(const Args& args);
int cmd_eval(const Args& args);
int cmd_bench(const Args& args);
int cmd_doctor(const Args& args);
int cmd_plan(const Args& args);
int cmd_convert(const Args& args);

}  // namespace trident

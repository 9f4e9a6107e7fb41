// Boost.ProgramOptions parsing of INI files and flags into RunConfig; validation; INI output.
#include "trident/config/parse.hpp"

#include <boost/program_options.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "ini.hpp"
#include "options.hpp"
#include "trident/core/error.hpp"

namespace po = boost::program_options;

namespace trident {
namespace {

std::string show(const std::string& v) { return v; }
std::string show(int v) { return std::to_string(v); }
std::string show(uint64_t v) { return std::to_string(v); }
std::string show(bool v) { return v ? "true" : "false"; }
std::string show(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// Whether option `name` is among `only`: full names, or whole sections written "section.";
// an empty list takes every option.
bool listed(const std::string& name, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  for (const std::string& o : only)
    if (name == o || (!o.empty() && o.back() == '.' && name.compare(0, o.size(), o) == 0)) return true;
  return false;
}

// Registers each option (of `only`, when given) into one options_description per section.
struct Registrar {
  std::vector<po::options_description>* groups;
  const std::vector<std::string>* only = nullptr;
  void section(const char*, const char* caption) { groups->emplace_back(caption); }
  template <class T>
  void operator()(const char* name, T& field, const char* help) {
    if (only && !listed(name, *only)) return;
    groups->back().add_options()(name, po::value<T>(&field)->default_value(field, show(field)), help);
  }
};

// Writes "key = value" lines under [section] headers.
struct IniWriter {
  std::ostringstream os;
  void section(const char* name, const char*) {
    if (*name) os << "\n[" << name << "]\n";
  }
  template <class T>
  void operator()(const char* name, T& field, const char*) {
    std::string key = name;
    size_t dot = key.find('.');
    os << (dot == std::string::npos ? key : key.substr(dot + 1)) << " = " << show(field) << "\n";
  }
};

po::options_description general_options() {
  po::options_description d("Command");
  d.add_options()("help,h", "print this help")(
      "config", po::value<std::vector<std::string>>()->composing(),
      "INI config file; may be repeated, later files override earlier ones, flags override files");
  return d;
}

po::options_description all_options(RunConfig& cfg, po::options_description* extra) {
  po::options_description all;
  all.add(general_options());
  if (extra) all.add(*extra);
  add_run_options(all, cfg);
  return all;
}

// Options renamed since a release, still read under their old names from INI files (the
// configs stored in older checkpoints among them).
std::string current_name(const std::string& key) { return key == "model.ln_eps" ? "model.norm_eps" : key; }

// Options removed since a release, with the reason: a config that sets one stops with the reason
// and the fix rather than "unknown option"; a config stored in an older checkpoint (which lists
// every option) is read without it.
const char* removal_reason(const std::string& key) {
  if (key == "parallel.dp_copy_engine")
    return "was removed (NCCL's reduce-scatter measured as fast, docs/PERFORMANCE.md)";
  return nullptr;
}

// Stores one option value; the first value stored for a key wins, so callers store the
// highest-priority source first.
void store_one(const po::options_description& desc, po::variables_map& vm, const std::string& old_key,
               const std::string& value, const std::string& where) {
  const std::string key = current_name(old_key);
  if (const char* why = removal_reason(key)) throw InputError(str(where, ": ", key, " ", why, ": delete the line"));
  if (!desc.find_nothrow(key, false))
    throw InputError(str(where, ": unknown option ", quoted_text(key), " (see 'trident train --help' for the list)"));
  po::parsed_options parsed(&desc);
  po::option opt;
  opt.string_key = key;
  opt.value.push_back(value);
  opt.original_tokens = {key, value};
  parsed.options.push_back(opt);
  try {
    po::store(parsed, vm);
  } catch (const po::error& e) {
    throw InputError(str(where, ": invalid value ", quoted_text(value), " for option '", key, "'"));
  }
}

// The value given to `option` ("--name") on a command line: the next word, or what follows '='.
std::string value_of(const std::vector<std::string>& args, const std::string& option) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == option && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(option + "=", 0) == 0) return args[i].substr(option.size() + 1);
  }
  return "";
}

}  // namespace

void add_run_options(po::options_description& all, RunConfig& cfg) {
  std::vector<po::options_description> groups;
  visit_run_options(cfg, Registrar{&groups});
  for (auto& g : groups) all.add(g);
}

ParsedArgs parse_args(const std::vector<std::string>& args, po::options_description* extra) {
  ParsedArgs out;
  po::options_description desc = all_options(out.cfg, extra);
  po::options_description with_positional = desc;
  with_positional.add_options()("positional", po::value<std::vector<std::string>>(), "");
  po::positional_options_description pos;
  pos.add("positional", -1);

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(with_positional).positional(pos).run(), vm);
  } catch (const po::unknown_option& e) {
    // The name as written: "--key" or "--key=value".
    const std::string name = e.get_option_name();
    const size_t begin = std::min(name.find_first_not_of('-'), name.size());
    const std::string key = name.substr(begin, name.find('=') - begin);
    if (const char* why = removal_reason(key)) throw InputError(str(key, " ", why, ": drop --", key));
    throw InputError(str("unknown option ", quoted_text(name), " (see --help for the list)"));
  } catch (const po::validation_error& e) {
    // Boost's message holds the raw value; name it the way store_one does, quoted and cut.
    throw InputError(str("command line: invalid value ", quoted_text(value_of(args, e.get_option_name())),
                         " for option '", e.get_option_name(), "' (see --help)"));
  } catch (const po::error& e) {
    throw InputError(str("command line: ", e.what(), " (see --help)"));
  }
  out.help = vm.count("help") > 0;
  // Every input is an option: a stray word is a mistake (a missing "--" or a value without its
  // option), not something to ignore.
  if (vm.count("positional"))
    throw InputError(str("unexpected argument ", quoted_text(vm["positional"].as<std::vector<std::string>>()[0]),
                         " (options are --name value or --section.key value)"));
  if (vm.count("config")) out.cfg.config_files = vm["config"].as<std::vector<std::string>>();

  // Later files win: store them last-to-first, each file's later lines first.
  for (auto f = out.cfg.config_files.rbegin(); f != out.cfg.config_files.rend(); ++f) {
    std::vector<IniEntry> entries = read_ini(*f);
    for (auto e = entries.rbegin(); e != entries.rend(); ++e) {
      if (e->key == "config" || e->key == "help")
        throw InputError(str(e->where, ": '", e->key, "' is not allowed inside a config file"));
      store_one(desc, vm, e->key, e->value, e->where);
    }
  }
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError(str("configuration: ", e.what()));
  }
  return out;
}

RunConfig parse_config_text(const std::string& ini, const std::string& origin) {
  RunConfig cfg;
  po::options_description desc = all_options(cfg, nullptr);
  po::variables_map vm;
  std::istringstream in(ini);
  std::vector<IniEntry> entries = read_ini_stream(in, origin);
  for (auto e = entries.rbegin(); e != entries.rend(); ++e)
    if (!removal_reason(current_name(e->key))) store_one(desc, vm, e->key, e->value, e->where);
  po::notify(vm);
  cfg.model.score_head = cfg.task == "reward";   // a stored reward model's [model] has its score head
  return cfg;
}

std::string run_options_help(const po::options_description* extra, const std::vector<std::string>& only) {
  RunConfig defaults;
  po::options_description all;
  all.add(general_options());
  if (extra) all.add(*extra);
  std::vector<po::options_description> groups;
  visit_run_options(defaults, Registrar{&groups, &only});
  for (auto& g : groups)
    if (!g.options().empty()) all.add(g);
  std::ostringstream os;
  os << all;
  return os.str();
}

std::string to_ini(const RunConfig& cfg) {
  RunConfig copy = cfg;
  IniWriter w;
  visit_run_options(copy, w);
  return w.os.str();
}

}  // namespace trident

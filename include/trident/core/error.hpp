// Error handling: InputError for expected bad input (caught in main, exit 2) and
// fatal() for broken invariants (rank-prefixed message, then the registered abort hook).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace trident {

// Bad config, missing file, corrupt checkpoint: one clear line, exit status 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything streamable: str("n_head=", 12, " ...").
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// User-supplied text for an error message: in single quotes, bytes outside printable ASCII as
// \xNN, cut after `max_bytes` with the full size noted, so a binary file or a 100 KB value
// still gives one short line.
std::string quoted_text(const std::string& text, size_t max_bytes = 120);
// The same without the quotes, for a whole message (main prints every error through it).
std::string printable(const std::string& text, size_t max_bytes = 2000);

// The parallel layer registers "[rank r host tp/pp/dp]" and MPI_Abort here, so core stays MPI-free.
using AbortFn = void (*)(int code);
void set_error_context(const std::string& prefix, AbortFn abort_fn);
const std::string& error_context();

// The optimizer step in progress, named by timeout and abort messages.
void set_current_step(long step);
long current_step();

[[noreturn]] void fatal(const char* file, int line, const char* stmt, const std::string& msg);

}  // namespace trident

#define TRIDENT_CHECK(cond, msg)                                 \
  do {                                                           \
    if (!(cond)) ::trident::fatal(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)

#define TRIDENT_FATAL(msg) ::trident::fatal(__FILE__, __LINE__, "", (msg))

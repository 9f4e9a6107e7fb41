// Logging: info lines from the log rank only (rank 0), warnings from any rank with its context.
#pragma once

#include <string>

namespace trident {

void set_log_rank(bool is_log_rank);
bool is_log_rank();

void log_info(const std::string& line);   // printed by the log rank only
void log_warn(const std::string& line);   // printed by every rank that calls it, with its context

}  // namespace trident

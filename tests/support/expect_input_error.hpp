// expect_input_error: the call throws InputError, and its message holds every given fragment.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "trident/core/error.hpp"

namespace trident::test {

inline void expect_input_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace trident::test

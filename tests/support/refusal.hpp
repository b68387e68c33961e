#pragma once
// For tests: what a call says when it refuses (the message of the hyrun::Error of kind E it
// throws), or "" when it does not throw.
#include <functional>
#include <string>

#include "hyrun/common/error.hpp"

namespace hyrun::test_support {

template <class E = Error>
std::string refusal(const std::function<void()>& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace hyrun::test_support

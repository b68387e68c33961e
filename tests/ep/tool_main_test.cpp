// The EP tools' shared main(): one line on stderr and the documented exit code for every
// way a tool can fail, the tool's own code when it does not.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "hyrun/common/error.hpp"
#include "tool_main.hpp"

namespace hyrun::ep::tools {
namespace {

struct Ran {
  int code;
  std::string stderr_text;
};

Ran run(const std::function<int()>& body) {
  testing::internal::CaptureStderr();
  const int code = run_tool("ep-tool", body);
  return {code, testing::internal::GetCapturedStderr()};
}

TEST(ToolMain, TheToolsOwnExitCodePassesThrough) {
  const Ran r = run([] { return 3; });
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.stderr_text, "");
}

TEST(ToolMain, AnErrorGivesOneLineAndItsExitCode) {
  const Ran usage = run([]() -> int { throw UsageError("--tokens 0 is not a token count"); });
  EXPECT_EQ(usage.code, exit_code::kUsage);
  EXPECT_EQ(usage.stderr_text, "ep-tool: --tokens 0 is not a token count\n");
  const Ran timeout = run([]() -> int { throw TimeoutError("rank 2 sent nothing within 30000 ms"); });
  EXPECT_EQ(timeout.code, exit_code::kTimeout);
  EXPECT_EQ(timeout.stderr_text, "ep-tool: rank 2 sent nothing within 30000 ms\n");
}

TEST(ToolMain, AnyOtherExceptionIsAnInternalErrorNotACrash) {
  const Ran r = run([]() -> int { throw std::out_of_range("vector::at"); });
  EXPECT_EQ(r.code, exit_code::kLauncherError);
  EXPECT_EQ(r.stderr_text, "ep-tool: internal error: vector::at\n");
  const Ran odd = run([]() -> int { throw 42; });
  EXPECT_EQ(odd.code, exit_code::kLauncherError);
  EXPECT_EQ(odd.stderr_text, "ep-tool: internal error: an exception that is not a std::exception\n");
}

}  // namespace
}  // namespace hyrun::ep::tools

#include "launcher/cli_options.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

std::optional<int> parse(CommandLine& cl, std::vector<std::string> args) {
  args.insert(args.begin(), "hyrun");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return cl.parse(static_cast<int>(argv.size()), argv.data());
}

TEST(CommandLine, ParsesOptionsAndKeepsProgramArguments) {
  CommandLine cl;
  ASSERT_FALSE(parse(cl, {"-n", "4", "--label", "--bootstrap-timeout", "2.5", "--grace-period", "1", "-x", "A=1",
                          "-x", "B", "--", "prog", "-n", "9", "--label"}));
  const auto& o = cl.options();
  EXPECT_EQ(o.ranks, 4);
  EXPECT_TRUE(o.label);
  EXPECT_EQ(o.bootstrap_timeout.count(), 2500);
  EXPECT_EQ(o.grace_period.count(), 1000);
  EXPECT_EQ(o.exported, (std::vector<std::string>{"A=1", "B"}));
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "-n", "9", "--label"}));
  EXPECT_EQ(o.bootstrap, BootstrapMode::kUcx);
}

TEST(CommandLine, ProgramWithoutDoubleDash) {
  CommandLine cl;
  ASSERT_FALSE(parse(cl, {"-n", "2", "--bootstrap=none", "prog", "--flag"}));
  EXPECT_EQ(cl.options().command, (std::vector<std::string>{"prog", "--flag"}));
  EXPECT_EQ(cl.options().bootstrap, BootstrapMode::kNone);
}

TEST(CommandLine, UsageErrorsGiveExitCode2) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--", "prog"}, {"-n", "2"}, {"-n", "0", "prog"}, {"-n", "2", "--bootstrap", "tcp", "prog"},
           {"-n", "2", "--bootstrap-timeout", "-1", "prog"}, {"-n", "two", "prog"}}) {
    CommandLine cl;
    testing::internal::CaptureStderr();
    EXPECT_EQ(parse(cl, args), 2);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.rfind("hyrun: ", 0), 0u) << err;
  }
}

TEST(ResolveExports, ValuesFromArgumentOrEnvironment) {
  setenv("HYRUN_TEST_EXPORT", "from-env", 1);
  EXPECT_EQ(resolve_exports({"A=1", "HYRUN_TEST_EXPORT", "B="}),
            (std::vector<std::string>{"A=1", "HYRUN_TEST_EXPORT=from-env", "B="}));
  unsetenv("HYRUN_TEST_EXPORT");
  EXPECT_THROW(resolve_exports({"HYRUN_TEST_EXPORT"}), UsageError);
  EXPECT_THROW(resolve_exports({"1BAD=x"}), UsageError);
  EXPECT_THROW(resolve_exports({"=x"}), UsageError);
}

}  // namespace
}  // namespace hyrun

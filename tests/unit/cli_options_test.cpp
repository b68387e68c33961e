#include "hyrun/launcher/cli_options.hpp"
#include "hyrun/launcher/exported_variables.hpp"

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
  ASSERT_FALSE(parse(cl, {"-n", "4", "--label", "--bootstrap-timeout", "2.5", "--grace-period", "1", "-x", "A=1", "-x",
                          "B", "--", "prog", "-n", "9", "--label"}));
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
  for (const auto& args : std::vector<std::vector<std::string>>{{"--", "prog"},
                                                                {"-n", "2"},
                                                                {"-n", "0", "prog"},
                                                                {"-n", "2", "--bootstrap", "tcp", "prog"},
                                                                {"-n", "2", "--bootstrap-timeout", "-1", "prog"},
                                                                {"-n", "two", "prog"}}) {
    CommandLine cl;
    testing::internal::CaptureStderr();
    EXPECT_EQ(parse(cl, args), 2);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.rfind("hyrun: ", 0), 0u) << err;
  }
}

// Exit code and stderr of one parse.
std::pair<std::optional<int>, std::string> parse_capturing(std::vector<std::string> args) {
  CommandLine cl;
  testing::internal::CaptureStderr();
  const auto code = parse(cl, std::move(args));
  return {code, testing::internal::GetCapturedStderr()};
}

TEST(CommandLine, UnknownOptionBeforeTheProgramIsAUsageErrorNamingIt) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"-n", "2", "--timestamp-outptu", "--", "prog"},
                                                                {"-n", "2", "--no-such", "prog"},
                                                                {"-n", "2", "-q", "prog"},
                                                                {"--no-such=3", "-n", "2", "prog"}}) {
    const auto [code, err] = parse_capturing(args);
    EXPECT_EQ(code, 2) << args[2];
    const std::string& unknown = args[0] == "-n" ? args[2] : args[0];
    EXPECT_NE(err.find(unknown.substr(0, unknown.find('='))), std::string::npos) << err;
    EXPECT_NE(err.find("unknown option"), std::string::npos) << err;
  }
  // After "--" a dash-word is the program, as given.
  CommandLine cl;
  ASSERT_FALSE(parse(cl, {"-n", "2", "--", "-odd-program-name", "-x"}));
  EXPECT_EQ(cl.options().command, (std::vector<std::string>{"-odd-program-name", "-x"}));
}

TEST(CommandLine, TimesOutsideTheirRangeAreUsageErrors) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"-n", "2", "--bootstrap-timeout", "2200000", "prog"},
                                                                {"-n", "2", "--bootstrap-timeout", "1e300", "prog"},
                                                                {"-n", "2", "--bootstrap-timeout", "nan", "prog"},
                                                                {"-n", "2", "--bootstrap-timeout", "inf", "prog"},
                                                                {"-n", "2", "--bootstrap-timeout", "0", "prog"},
                                                                {"-n", "2", "--grace-period", "1e10", "prog"},
                                                                {"-n", "2", "--grace-period", "nan", "prog"},
                                                                {"-n", "2", "--grace-period", "-1", "prog"}}) {
    const auto [code, err] = parse_capturing(args);
    EXPECT_EQ(code, 2) << args[2] << " " << args[3];
    EXPECT_NE(err.find(args[2]), std::string::npos) << err;
  }
  CommandLine cl;
  ASSERT_FALSE(parse(cl, {"-n", "2", "--bootstrap-timeout", "86400", "--grace-period", "0", "prog"}));
  EXPECT_EQ(cl.options().bootstrap_timeout.count(), 86400000);
  EXPECT_EQ(cl.options().grace_period.count(), 0);
}

TEST(CommandLine, SrunAndMpirunSpellings) {
  CommandLine cl;
  ASSERT_FALSE(parse(cl, {"-np", "3", "-l", "--", "prog", "-np", "-l"}));
  EXPECT_EQ(cl.options().ranks, 3);
  EXPECT_TRUE(cl.options().label);
  EXPECT_EQ(cl.options().command, (std::vector<std::string>{"prog", "-np", "-l"}));
  // -np after the program belongs to the program.
  CommandLine cl2;
  ASSERT_FALSE(parse(cl2, {"-n", "2", "prog", "-np", "5"}));
  EXPECT_EQ(cl2.options().ranks, 2);
  EXPECT_EQ(cl2.options().command, (std::vector<std::string>{"prog", "-np", "5"}));
  // Options with values before -np are stepped over.
  CommandLine cl3;
  ASSERT_FALSE(parse(cl3, {"--log-level", "info", "-x", "-np", "-np", "4", "prog"}));
  EXPECT_EQ(cl3.options().exported, (std::vector<std::string>{"-np"}));
  EXPECT_EQ(cl3.options().ranks, 4);
}

TEST(CommandLine, ExportIsSplitAtCommasAsSrunDoes) {
  CommandLine cl;
  ASSERT_FALSE(parse(cl, {"-n", "2", "--export=A=1,B=2", "--export", "ALL,C", "-x", "D=3,4", "prog"}));
  EXPECT_EQ(cl.options().exported, (std::vector<std::string>{"A=1", "B=2", "C", "D=3,4"}));
  for (const auto& bad : {"--export=NONE", "--export=A=1,2", "--export=,"}) {
    const auto [code, err] = parse_capturing({"-n", "2", bad, "prog"});
    EXPECT_EQ(code, 2) << bad;
    EXPECT_NE(err.find("--export"), std::string::npos) << err;
  }
}

TEST(CommandLine, MaxRestartsDefaultsAndRange) {
  CommandLine cl;
  ASSERT_FALSE(parse(cl, {"-n", "2", "prog"}));
  EXPECT_EQ(cl.options().max_restarts, 32);
  CommandLine cl2;
  ASSERT_FALSE(parse(cl2, {"-n", "2", "--max-restarts", "0", "prog"}));
  EXPECT_EQ(cl2.options().max_restarts, 0);
  EXPECT_EQ(parse_capturing({"-n", "2", "--max-restarts", "-1", "prog"}).first, 2);
}

TEST(CommandLine, HelpShowsTheProgramAndNoParserNoise) {
  CommandLine cl;
  testing::internal::CaptureStdout();
  EXPECT_EQ(parse(cl, {"--help"}), 0);
  const std::string help = testing::internal::GetCapturedStdout();
  EXPECT_NE(help.find("-- program [args...]"), std::string::npos) << help;
  for (const char* noise : {"ENUM", "->", "{core", "TEXT:", "INT:", "FLOAT:"})
    EXPECT_EQ(help.find(noise), std::string::npos) << noise << " in\n" << help;
  EXPECT_NE(help.find("-l,"), std::string::npos) << help;
  EXPECT_NE(help.find("-np"), std::string::npos) << help;
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

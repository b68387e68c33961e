#include "hyrun/binding/binding_options.hpp"

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include <algorithm>

using namespace hyrun::binding;

namespace {
void parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
  app.parse(args);
}
}  // namespace

TEST(BindingOptions, Defaults) {
  CLI::App app;
  BindingOptions o;
  add_binding_options(app, o);
  parse(app, {});
  EXPECT_EQ(o.bind_to, BindTo::kPartition);
  EXPECT_TRUE(o.mem_bind);
  EXPECT_EQ(o.gpus_per_rank, 1);
  EXPECT_EQ(o.report, ReportFormat::kNone);
  EXPECT_FALSE(o.oversubscribe);
  EXPECT_FALSE(o.bind_warn_only);
}

TEST(BindingOptions, ParsesEveryOption) {
  CLI::App app;
  BindingOptions o;
  add_binding_options(app, o);
  parse(app, {"--topology", "dgx.xml", "--gpus", "0,1", "--gpus-per-rank", "2", "--oversubscribe", "--nics", "mlx5_0",
              "--bind-to", "numa", "--cpu-map", "0-3:4-7", "--mem-bind", "off", "--bind-warn-only", "--cpus-allowed",
              "0-7", "--report-bindings=json"});
  EXPECT_EQ(o.topology, "dgx.xml");
  EXPECT_EQ(o.gpus, "0,1");
  EXPECT_EQ(o.gpus_per_rank, 2);
  EXPECT_TRUE(o.oversubscribe);
  EXPECT_EQ(o.nics, "mlx5_0");
  EXPECT_EQ(o.bind_to, BindTo::kNuma);
  EXPECT_EQ(o.cpu_map, "0-3:4-7");
  EXPECT_FALSE(o.mem_bind);
  EXPECT_TRUE(o.bind_warn_only);
  EXPECT_EQ(o.cpus_allowed, "0-7");
  EXPECT_EQ(o.report, ReportFormat::kJson);
}

TEST(BindingOptions, BareReportBindingsIsATableAndTakesNoWord) {
  CLI::App app;
  BindingOptions o;
  add_binding_options(app, o);
  app.allow_extras();
  parse(app, {"--report-bindings", "prog"});
  EXPECT_EQ(o.report, ReportFormat::kTable);
  EXPECT_EQ(app.remaining_size(), 1u);
}

TEST(BindingOptions, RejectsBadValues) {
  for (std::vector<std::string> bad : {std::vector<std::string>{"--bind-to", "socket"},
                                       {"--mem-bind", "maybe"},
                                       {"--report-bindings=xml"},
                                       {"--gpus-per-rank", "-1"}}) {
    CLI::App app;
    BindingOptions o;
    add_binding_options(app, o);
    EXPECT_THROW(parse(app, bad), CLI::ParseError) << bad[0];
  }
}

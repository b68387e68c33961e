#pragma once
// hyrun's --help layout: a usage line that shows where the program goes, and for each
// option its placeholder (Option::option_text, else "VALUE") and default, without CLI11's
// type and validator names ("ENUM:value in {core->2,...}", "FLOAT:POSITIVE").
#include <CLI/CLI.hpp>
#include <string>

namespace hyrun {

class HelpFormatter : public CLI::Formatter {
 public:
  /// `usage`: the whole usage text after "Usage: ", e.g. "hyrun -n N [options] -- program [args...]".
  explicit HelpFormatter(std::string usage) : usage_(std::move(usage)) {}
  std::string make_usage(const CLI::App* app, std::string name) const override;
  std::string make_option_name(const CLI::Option* opt, bool positional) const override;
  std::string make_option_opts(const CLI::Option* opt) const override;

 private:
  std::string usage_;
};

}  // namespace hyrun

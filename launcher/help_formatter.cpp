#include "hyrun/launcher/help_formatter.hpp"

namespace hyrun {

std::string HelpFormatter::make_usage(const CLI::App*, std::string) const { return "Usage: " + usage_ + "\n"; }

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool positional) const {
  // A flag with an optional value is registered as "--name{default}": show "--name[=VALUE]".
  std::string name = CLI::Formatter::make_option_name(opt, positional);
  for (auto open = name.find('{'); open != std::string::npos; open = name.find('{')) {
    const auto close = name.find('}', open);
    if (close == std::string::npos) break;
    name.replace(open, close - open + 1, "[=VALUE]");
  }
  return name;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  if (opt->get_expected_max() == 0) return opt->get_option_text().empty() ? "" : " " + opt->get_option_text();
  std::string out = " " + (opt->get_option_text().empty() ? std::string("VALUE") : opt->get_option_text());
  if (!opt->get_default_str().empty()) out += " (default " + opt->get_default_str() + ")";
  return out;
}

}  // namespace hyrun

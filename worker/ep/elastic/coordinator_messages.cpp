#include "coordinator_messages.hpp"

#include <fmt/format.h>

#include <climits>
#include <limits>

#include "hyrun/common/error.hpp"

namespace hyrun::ep::elastic::msg {
namespace {

using nlohmann::json;

/// Reads the fields of one JSON object of message `type`, naming each in its errors.
class Fields {
 public:
  Fields(const json& j, const char* type, std::string prefix = "") : j_(j), type_(type), prefix_(std::move(prefix)) {
    if (!j_.is_object()) fail_whole("an object");
  }

  bool has(const char* name) const { return j_.contains(name); }

  int integer(const char* name) const {
    const json& v = at(name, "an integer");
    if (!v.is_number_integer()) fail(name, v, "an integer");
    if (v.is_number_unsigned() ? v.get<uint64_t>() > INT_MAX : v.get<int64_t>() < INT_MIN || v.get<int64_t>() > INT_MAX)
      fail(name, v, "an integer that fits an int");
    return v.get<int>();
  }

  int rank(const char* name) const {
    const int r = integer(name);
    if (r < 0) fail(name, at(name, ""), "a rank (0 or more)");
    return r;
  }

  uint64_t unsigned_integer(const char* name) const {
    const json& v = at(name, "an unsigned integer");
    if (!v.is_number_unsigned()) fail(name, v, "an unsigned integer");
    return v.get<uint64_t>();
  }

  double number(const char* name) const {
    const json& v = at(name, "a number");
    if (!v.is_number()) fail(name, v, "a number");
    return v.get<double>();
  }

  std::string string(const char* name) const {
    const json& v = at(name, "a string");
    if (!v.is_string()) fail(name, v, "a string");
    return v.get<std::string>();
  }

  std::vector<int> ranks(const char* name) const {
    const json& v = at(name, "a list of ranks");
    if (!v.is_array()) fail(name, v, "a list of ranks");
    std::vector<int> out;
    for (const auto& e : v) {
      if (!e.is_number_integer() ||
          (e.is_number_unsigned() ? e.get<uint64_t>() > INT_MAX : e.get<int64_t>() < 0 || e.get<int64_t>() > INT_MAX))
        fail(name, v, "a list of ranks (integers, 0 or more)");
      out.push_back(e.get<int>());
    }
    return out;
  }

  /// The field `name`, an object, read with its own Fields.
  Fields object(const char* name) const { return Fields(at(name, "an object"), type_, path(name) + "."); }

  /// The elements of array field `name`, each an object.
  std::vector<Fields> objects(const char* name) const {
    const json& v = at(name, "a list of objects");
    if (!v.is_array()) fail(name, v, "a list of objects");
    std::vector<Fields> out;
    for (std::size_t i = 0; i < v.size(); ++i) out.emplace_back(v[i], type_, fmt::format("{}[{}].", path(name), i));
    return out;
  }

 private:
  std::string path(const char* name) const { return prefix_ + name; }

  const json& at(const char* name, const char* expected) const {
    const auto it = j_.find(name);
    if (it == j_.end())
      throw Error(fmt::format("'{}' message: field '{}' is missing; expected {}", type_, path(name), expected));
    return *it;
  }

  [[noreturn]] void fail(const char* name, const json& value, const char* expected) const {
    std::string text = value.dump();
    if (text.size() > 60) text = text.substr(0, 57) + "...";
    throw Error(fmt::format("'{}' message: field '{}' is {}; expected {}", type_, path(name), text, expected));
  }

  [[noreturn]] void fail_whole(const char* expected) const {
    std::string text = j_.dump();
    if (text.size() > 60) text = text.substr(0, 57) + "...";
    if (prefix_.empty()) throw Error(fmt::format("'{}' message is {}; expected {}", type_, text, expected));
    throw Error(fmt::format("'{}' message: field '{}' is {}; expected {}", type_, prefix_.substr(0, prefix_.size() - 1),
                            text, expected));
  }

  const json& j_;
  const char* type_;
  std::string prefix_;
};

}  // namespace

void to_json(json& j, const Register& m) { j = {{"incarnation", m.incarnation}, {"descriptor", m.descriptor}}; }

void from_json(const json& j, Register& m) {
  const Fields f(j, Register::kType);
  m.incarnation = f.integer("incarnation");
  m.descriptor = f.string("descriptor");
}

void to_json(json& j, const Phase& m) {
  json peers = json::array();
  for (const auto& p : m.peers)
    peers.push_back({{"rank", p.rank},
                     {"incarnation", p.incarnation},
                     {"address", p.address},
                     {"world_node", p.world_node},
                     {"descriptor", p.descriptor},
                     {"process", p.process}});
  j = {{"global_phase", m.global_phase}, {"peers", std::move(peers)}};
}

void from_json(const json& j, Phase& m) {
  const Fields f(j, Phase::kType);
  m.global_phase = f.unsigned_integer("global_phase");
  m.peers.clear();
  for (const Fields& p : f.objects("peers"))
    m.peers.push_back({p.rank("rank"), p.integer("incarnation"), p.string("address"), p.integer("world_node"),
                       p.string("descriptor"), p.string("process")});
}

void to_json(json& j, const Failed& m) {
  j = {{"ranks", m.ranks}, {"detect_ms", m.detect_ms}, {"iteration", m.iteration}};
}

void from_json(const json& j, Failed& m) {
  const Fields f(j, Failed::kType);
  m.ranks = f.ranks("ranks");
  m.detect_ms = f.number("detect_ms");
  m.iteration = f.integer("iteration");
}

void to_json(json& j, const Resume& m) { j = {{"ranks", m.ranks}, {"epoch", m.epoch}, {"iteration", m.iteration}}; }

void from_json(const json& j, Resume& m) {
  const Fields f(j, Resume::kType);
  m.ranks = f.ranks("ranks");
  m.epoch = f.unsigned_integer("epoch");
  m.iteration = f.integer("iteration");
}

void to_json(json& j, const Result& m) {
  j = {{"node", m.node}, {"local_rank", m.local_rank}, {"detected", m.detected}};
  if (m.bandwidth)
    j["bandwidth"] = {{"gbps", m.bandwidth->gbps},
                      {"avg_us", m.bandwidth->avg_us},
                      {"min_us", m.bandwidth->min_us},
                      {"max_us", m.bandwidth->max_us}};
  if (m.split)
    j["split"] = {{"dispatch_gbps", m.split->dispatch_gbps},
                  {"dispatch_avg_us", m.split->dispatch_avg_us},
                  {"combine_gbps", m.split->combine_gbps},
                  {"combine_avg_us", m.split->combine_avg_us}};
  if (m.detect_ms) j["detect_ms"] = *m.detect_ms;
  if (m.validation_problem) j["validation_problem"] = *m.validation_problem;
}

void from_json(const json& j, Result& m) {
  const Fields f(j, Result::kType);
  m.node = f.string("node");
  m.local_rank = f.integer("local_rank");
  m.detected = f.ranks("detected");
  m.bandwidth.reset();
  if (f.has("bandwidth")) {
    const Fields b = f.object("bandwidth");
    m.bandwidth = report::BandwidthStats{b.number("gbps"), b.number("avg_us"), b.number("min_us"), b.number("max_us")};
  }
  m.split.reset();
  if (f.has("split")) {
    const Fields s = f.object("split");
    m.split = report::SplitBandwidth{s.number("dispatch_gbps"), s.number("dispatch_avg_us"), s.number("combine_gbps"),
                                     s.number("combine_avg_us")};
  }
  m.detect_ms = f.has("detect_ms") ? std::optional(f.number("detect_ms")) : std::nullopt;
  m.validation_problem = f.has("validation_problem") ? std::optional(f.string("validation_problem")) : std::nullopt;
}

}  // namespace hyrun::ep::elastic::msg

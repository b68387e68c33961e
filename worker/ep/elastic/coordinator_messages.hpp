#pragma once
// The messages between the elastic benchmark's coordinator (rank 0) and the other ranks, as
// types. On the wire each is a JSON object {"type": kType, fields...} sent with its
// direction's World tag (coordinator_link.hpp). from_json checks every field it reads and
// throws Error naming the message, the field, what it holds and what it should hold: a
// malformed message is a clear error, never a crash or a default value.
//
// The order of a run (docs/architecture.md, "The EP and elastic flow"):
//   rank -> 0: Register once per process; per phase Ready, then Failed per failure round,
//              then Result; Closed after Done.
//   0 -> rank: per phase Phase, Go, Resume per failure round; Free to a rank that leaves;
//              Done, then Free, at the end.
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyrun/ep/report/log_lines.hpp"

namespace hyrun::ep::elastic::msg {

/// One World tag per direction keeps each direction in order.
inline constexpr uint32_t kToRank = 0x45500001;
inline constexpr uint32_t kToCoordinator = 0x45500002;

// The direction of the messages without fields (the others name their kTag themselves, so
// that they stay aggregates initialised by their fields alone).
struct SignalToRank {
  static constexpr uint32_t kTag = kToRank;
};
struct SignalToCoordinator {
  static constexpr uint32_t kTag = kToCoordinator;
};

/// A process's first message: which process of its rank it is and its EP region.
struct Register {
  static constexpr const char* kType = "register";
  static constexpr uint32_t kTag = kToCoordinator;
  int incarnation = 0;     ///< HYRUN_INCARNATION of the process
  std::string descriptor;  ///< its region descriptor, hex
};

/// A rank of a phase as the coordinator knows it.
struct Peer {
  int rank = 0;
  int incarnation = 0;     ///< admissions of the rank so far: a peer attaches each once
  std::string address;     ///< hex World address of a restarted process; empty for a first one
  int world_node = 0;      ///< that process's World node (its launch's), for World::replace_peer
  std::string descriptor;  ///< hex region descriptor
  std::string process;     ///< hex World::Rejoin::process of a restarted process (may be empty)
};

/// A phase begins: every active rank of it (a rank that leaves now waits for Free and exits).
struct Phase {
  static constexpr const char* kType = "phase";
  static constexpr uint32_t kTag = kToRank;
  std::size_t global_phase = 0;  ///< index into the ElasticSchedule
  std::vector<Peer> peers;
};

/// Connected to the phase's peers (the join time ends here).
struct Ready : SignalToCoordinator {
  static constexpr const char* kType = "ready";
};

/// Every rank is ready: run the phase's calls.
struct Go : SignalToRank {
  static constexpr const char* kType = "go";
};

/// A survivor's view of a failure: the ranks it saw fail, when, at which iteration.
struct Failed {
  static constexpr const char* kType = "failed";
  static constexpr uint32_t kTag = kToCoordinator;
  std::vector<int> ranks;
  double detect_ms = 0;  ///< from the start of the failed call to the error
  int iteration = 0;     ///< the call that failed
};

/// The agreed failure: the ranks newly failed, the epoch and the iteration to go on at.
struct Resume {
  static constexpr const char* kType = "resume";
  static constexpr uint32_t kTag = kToRank;
  std::vector<int> ranks;
  uint64_t epoch = 0;
  int iteration = 0;
};

/// A rank's measurements of one phase.
struct Result {
  static constexpr const char* kType = "result";
  static constexpr uint32_t kTag = kToCoordinator;
  std::string node;  ///< host the process runs on
  int local_rank = 0;
  std::vector<int> detected;  ///< failed ranks it detected, ascending
  std::optional<report::BandwidthStats> bandwidth;
  std::optional<report::SplitBandwidth> split;  ///< --kineto
  std::optional<double> detect_ms;
  std::optional<std::string> validation_problem;  ///< --validate: the first failed check
};

/// The run is over: close the mappings of peers' regions, answer Closed, wait for Free.
struct Done : SignalToRank {
  static constexpr const char* kType = "done";
};

/// This rank's mappings of its peers' regions are closed.
struct Closed : SignalToCoordinator {
  static constexpr const char* kType = "closed";
};

/// No live rank maps this rank's region any more: free it and exit.
struct Free : SignalToRank {
  static constexpr const char* kType = "free";
};

// JSON of each message without its "type" (the link adds and checks it). from_json throws
// Error("'<type>' message: field '<name>' ...; expected ...").
void to_json(nlohmann::json& j, const Register& m);
void from_json(const nlohmann::json& j, Register& m);
void to_json(nlohmann::json& j, const Phase& m);
void from_json(const nlohmann::json& j, Phase& m);
void to_json(nlohmann::json& j, const Failed& m);
void from_json(const nlohmann::json& j, Failed& m);
void to_json(nlohmann::json& j, const Resume& m);
void from_json(const nlohmann::json& j, Resume& m);
void to_json(nlohmann::json& j, const Result& m);
void from_json(const nlohmann::json& j, Result& m);
// The messages without fields.
template <class M>
requires std::is_empty_v<M>
void to_json(nlohmann::json& j, const M&) { j = nlohmann::json::object(); }
template <class M>
requires std::is_empty_v<M>
void from_json(const nlohmann::json&, M&) {}

}  // namespace hyrun::ep::elastic::msg

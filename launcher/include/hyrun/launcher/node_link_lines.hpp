#pragma once
// The lines of the node link's protocol that carry fields (docs/architecture.md, The node
// link): parsed whole and strictly, so that a line that is not exactly the protocol is
// refused instead of half read.
#include <optional>
#include <string>
#include <string_view>

#include "hyrun/launcher/link_seal.hpp"

namespace hyrun {

/// The first line a node sends: "hyrun-link v2 <task> <nonce> <proof>" (link_seal.hpp).
struct LinkHello {
  int task = -1;      ///< the sender's task (PMIx rank)
  std::string nonce;  ///< 32 hex digits, fresh per connection: the session's key derives from it
  std::string proof;  ///< link_hello_proof(token, task, nonce)
};

/// The fields of a hello line; nullopt unless it is exactly "hyrun-link v2 <task> <nonce>
/// <proof>" with <task> a decimal int (no sign, no overflow), <nonce> 32 lower-case hex
/// digits and <proof> one word of at most 128 characters. Whether the task and proof are
/// right is the caller's check.
std::optional<LinkHello> parse_link_hello(std::string_view line);

/// "lost <task> <host> <why>": the root lost node <task> and the job goes on without it.
struct LinkLoss {
  int task = -1;
  std::string host;
  std::string why;  ///< the rest of the line, possibly empty
};

/// The fields of a "lost" line; nullopt unless <task> is a decimal int (no sign, no
/// overflow) and <host> a non-empty word of at most 128 characters.
std::optional<LinkLoss> parse_link_loss(std::string_view line);

}  // namespace hyrun

#pragma once
// The two bootstrap messages and their byte encoding (little-endian host order:
// every rank of a job runs the same build on the same architecture).
//   join  (rank -> rank 0): rank, job token, worker address
//   table (rank 0 -> rank): the worker address of every rank, by rank
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace hyrun::bootstrap {

struct JoinRequest {
  int rank = 0;
  std::string job_token;
  std::vector<std::byte> address;
};

std::vector<std::byte> encode(const JoinRequest& join);
/// Throws hyrun::Error naming the message if it is truncated or malformed.
JoinRequest decode_join(std::span<const std::byte> bytes);

std::vector<std::byte> encode_table(const std::vector<std::vector<std::byte>>& addresses);
std::vector<std::vector<std::byte>> decode_table(std::span<const std::byte> bytes);

}  // namespace hyrun::bootstrap

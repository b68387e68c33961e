// hyrun's PMI-1 server (pmi_service.hpp, pmi_wire.hpp): the wire protocol's lines, MPICH's
// process mapping of a layout, and a rank's requests over its socket, as MPICH's simple PMI
// client sends them, with the malformed input a rank could send.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <random>
#include <string>
#include <variant>

#include "hyrun/launcher/pmi_service.hpp"
#include "hyrun/launcher/pmi_wire.hpp"

namespace hyrun {
namespace {

TEST(PmiWire, ARequestIsItsCommandAndFields) {
  const auto parsed = parse_pmi_line("cmd=put kvsname=kvs0 key=-bcast-1-0 value=2F64=x");
  ASSERT_TRUE(std::holds_alternative<PmiRequest>(parsed));
  const auto& r = std::get<PmiRequest>(parsed);
  EXPECT_EQ(r.command, "put");
  EXPECT_EQ(r.field("kvsname"), "kvs0");
  EXPECT_EQ(r.field("key"), "-bcast-1-0");
  EXPECT_EQ(r.field("value"), "2F64=x");  // a value may hold '=': the key ends at the first
  EXPECT_EQ(r.field("other"), std::nullopt);
  EXPECT_EQ(std::get<PmiRequest>(parse_pmi_line("cmd=barrier_in")).command, "barrier_in");
}

TEST(PmiWire, AMalformedLineSaysWhy) {
  const auto why = [](std::string_view line) {
    const auto parsed = parse_pmi_line(line);
    return std::holds_alternative<std::string>(parsed) ? std::get<std::string>(parsed) : std::string("(parsed)");
  };
  EXPECT_EQ(why(""), "an empty line");
  EXPECT_EQ(why("put key=a"), "'put' is not key=value");
  EXPECT_EQ(why("key=a cmd=put"), "it does not start with cmd=NAME");
  EXPECT_EQ(why("cmd= key=a"), "it does not start with cmd=NAME");
  EXPECT_EQ(why("cmd=get key=a key=b"), "the field 'key' comes twice");
  EXPECT_EQ(why("cmd=get =b"), "'=b' is not key=value");
  EXPECT_EQ(why(std::string(kPmiMaxLine + 1, 'x')), "a line of more than 4096 bytes");
}

TEST(PmiWire, ARepliesFieldsComeInTheOrderGiven) {
  EXPECT_EQ(format_pmi_reply("get_result", {{"rc", "0"}, {"value", "v"}}), "cmd=get_result rc=0 value=v\n");
}

TEST(PmiService, TheProcessMappingIsMpichsBlocksOfNodes) {
  EXPECT_EQ(PmiService::process_mapping(JobLayout::uniform(1, 3)), "(vector,(0,1,3))");
  EXPECT_EQ(PmiService::process_mapping(JobLayout::uniform(4, 2)), "(vector,(0,4,2))");
  EXPECT_EQ(PmiService::process_mapping(JobLayout::of_tasks({2, 2, 3}, {0, 1, 2})), "(vector,(0,2,2),(2,1,3))");
  // Two tasks on one node: one block of both tasks' ranks.
  EXPECT_EQ(PmiService::process_mapping(JobLayout::of_tasks({2, 2, 2}, {0, 0, 1})), "(vector,(0,1,4),(1,1,2))");
}

// The relay of a node link, as far as a barrier across nodes needs: the fences it was given.
class FenceRecorder final : public CrossNodeRequests {
 public:
  void fence(std::shared_ptr<pmix::PendingRequest> fence) override { fences.push_back(std::move(fence)); }
  void direct_modex(std::uint32_t, std::shared_ptr<pmix::PendingRequest>) override {}
  void local_data(std::uint64_t, bool, std::string) override {}
  std::vector<std::shared_ptr<pmix::PendingRequest>> fences;
};

// A rank's end of its PMI socket, talking to `service` as MPICH's client does.
class Rank {
 public:
  Rank(PmiService& service, int rank) : service_(service), fd_(service.open(rank)) {}
  void send(const std::string& line) {
    ASSERT_EQ(::write(fd_->get(), line.data(), line.size()), static_cast<ssize_t>(line.size()));
    service_.settle();
  }
  // The next reply line, or "(closed)" / "(none)" when the service closed the socket or said nothing.
  std::string reply() {
    pollfd p{fd_->get(), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) return "(none)";
    std::string line;
    char c = 0;
    while (::read(fd_->get(), &c, 1) == 1) {
      if (c == '\n') return line;
      line += c;
    }
    return line.empty() ? "(closed)" : line;
  }
  std::string ask(const std::string& line) {
    send(line + "\n");
    return reply();
  }

 private:
  PmiService& service_;
  std::shared_ptr<UniqueFd> fd_;
};

TEST(PmiService, ARanksRequestsAreAnsweredAsHydraDoes) {
  PmiService service(JobLayout::uniform(1, 2), 0, "hyrun.test");
  Rank r0(service, 0), r1(service, 1);
  EXPECT_EQ(r0.ask("cmd=init pmi_version=1 pmi_subversion=1"),
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
  EXPECT_EQ(r0.ask("cmd=get_maxes"), "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024 rc=0");
  EXPECT_EQ(r0.ask("cmd=get_appnum"), "cmd=appnum appnum=0 rc=0");
  EXPECT_EQ(r0.ask("cmd=get_my_kvsname"), "cmd=my_kvsname kvsname=hyrun.test rc=0");
  EXPECT_EQ(r0.ask("cmd=get_universe_size"), "cmd=universe_size size=2 rc=0");
  EXPECT_EQ(r0.ask("cmd=get kvsname=hyrun.test key=PMI_process_mapping"), "cmd=get_result rc=0 value=(vector,(0,1,2))");
  // Random keys and values, every one read back by the other rank after a barrier.
  std::mt19937 random(std::random_device{}());
  std::vector<std::pair<std::string, std::string>> put;
  for (int i = 0; i < 20; ++i) {
    const std::string key = "k" + std::to_string(random());
    const std::string value(1 + random() % kPmiMaxValue, static_cast<char>('A' + random() % 26));
    ASSERT_EQ(r0.ask("cmd=put kvsname=hyrun.test key=" + key + " value=" + value), "cmd=put_result rc=0");
    put.emplace_back(key, value);
  }
  r0.send("cmd=barrier_in\n");
  EXPECT_EQ(r0.reply(), "(none)");  // rank 1 is not in it yet
  EXPECT_EQ(r1.ask("cmd=barrier_in"), "cmd=barrier_out rc=0");
  EXPECT_EQ(r0.reply(), "cmd=barrier_out rc=0");
  for (const auto& [key, value] : put)
    EXPECT_EQ(r1.ask("cmd=get kvsname=hyrun.test key=" + key), "cmd=get_result rc=0 value=" + value);
  EXPECT_EQ(r1.ask("cmd=get kvsname=hyrun.test key=never-put"), "cmd=get_result rc=-1 msg=key_not_found");
  EXPECT_EQ(r1.ask("cmd=get kvsname=other key=" + put[0].first), "cmd=get_result rc=-1 msg=no_such_kvsname_or_key");
  EXPECT_EQ(r0.ask("cmd=finalize"), "cmd=finalize_ack rc=0");
}

TEST(PmiService, APutPastThe1024ByteValueOrTheKeyLimitIsRefused) {
  PmiService service(JobLayout::uniform(1, 1), 0, "kvs");
  Rank r(service, 0);
  EXPECT_EQ(r.ask("cmd=put kvsname=kvs key=a value=" + std::string(kPmiMaxValue + 1, 'v')),
            "cmd=put_result rc=-1 msg=value_missing_or_too_long");
  EXPECT_EQ(r.ask("cmd=put kvsname=kvs key=" + std::string(kPmiMaxKey + 1, 'k') + " value=v"),
            "cmd=put_result rc=-1 msg=key_missing_or_too_long");
  EXPECT_EQ(r.ask("cmd=put kvsname=other key=a value=v"), "cmd=put_result rc=-1 msg=no_such_kvsname");
  EXPECT_EQ(r.ask("cmd=get kvsname=kvs key=a"), "cmd=get_result rc=-1 msg=key_not_found");  // nothing was kept
}

TEST(PmiService, PmiTwoOrACommandNotServedIsRefusedAndTheSocketStays) {
  PmiService service(JobLayout::uniform(1, 1), 0, "kvs");
  Rank r(service, 0);
  EXPECT_EQ(r.ask("cmd=init pmi_version=2 pmi_subversion=0"),
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1");
  EXPECT_EQ(r.ask("cmd=spawn nprocs=2"), "cmd=spawn rc=-1 msg=not_served_by_hyrun");
  EXPECT_EQ(r.ask("cmd=get_appnum"), "cmd=appnum appnum=0 rc=0");
}

TEST(PmiService, ALineThatIsNotPmiOrTooLongClosesThatRanksSocketOnly) {
  PmiService service(JobLayout::uniform(1, 3), 0, "kvs");
  Rank garbage(service, 0), endless(service, 1), good(service, 2);
  EXPECT_EQ(garbage.ask("hello there"), "(closed)");
  endless.send(std::string(kPmiMaxLine + 100, 'x'));  // no newline
  EXPECT_EQ(endless.reply(), "(closed)");
  EXPECT_EQ(good.ask("cmd=get_appnum"), "cmd=appnum appnum=0 rc=0");
}

TEST(PmiService, ABarrierAcrossNodesBringsEveryNodesPutsAndFailsWithTheRelay) {
  PmiService service(JobLayout::uniform(2, 1), 0, "kvs");
  Rank r(service, 0);
  ASSERT_EQ(r.ask("cmd=put kvsname=kvs key=mine value=0"), "cmd=put_result rc=0");
  r.send("cmd=barrier_in\n");
  EXPECT_EQ(r.reply(), "(none)");  // the node link is not up yet: held
  FenceRecorder relay;
  service.relay_to(relay);
  ASSERT_EQ(relay.fences.size(), 1u);
  EXPECT_EQ(relay.fences[0]->data(), "mine=0\n");  // this node's part: its puts since the last barrier
  relay.fences[0]->complete("mine=0\ntheirs=1=2\n");
  EXPECT_EQ(r.reply(), "cmd=barrier_out rc=0");
  EXPECT_EQ(r.ask("cmd=get kvsname=kvs key=theirs"), "cmd=get_result rc=0 value=1=2");
  // The next barrier sends only what was put since; a lost node fails it.
  r.send("cmd=barrier_in\n");
  ASSERT_EQ(relay.fences.size(), 2u);
  EXPECT_EQ(relay.fences[1]->data(), "");
  relay.fences[1]->fail();
  EXPECT_EQ(r.reply(), "cmd=barrier_out rc=-1 msg=barrier_failed");
}

}  // namespace
}  // namespace hyrun

// hyrun's PMI-1 server (pmi_service.hpp, pmi_wire.hpp): the wire protocol's lines, MPICH's
// process mapping of a layout, and a rank's requests over its socket, as MPICH's simple PMI
// client sends them, with the malformed input a rank could send.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "hyrun/launcher/pmi_service.hpp"
#include "hyrun/launcher/pmi_wire.hpp"

namespace hyrun {
namespace {

// What a parser said was wrong, or "(parsed)", or the length as text.
template <class T>
std::string said(const std::variant<T, std::string>& parsed) {
  if (const auto* why = std::get_if<std::string>(&parsed)) return *why;
  if constexpr (std::is_same_v<T, std::size_t>) return std::to_string(std::get<T>(parsed));
  return "(parsed)";
}

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

// Each input with what its parser must say of it.
using Said = std::vector<std::pair<std::string, std::string>>;

TEST(PmiWire, AMalformedLineSaysWhy) {
  for (const auto& [line, why] : Said{{"", "an empty line"},
                                      {"put key=a", "'put' is not key=value"},
                                      {"key=a cmd=put", "it does not start with cmd=NAME"},
                                      {"cmd= key=a", "it does not start with cmd=NAME"},
                                      {"cmd=get key=a key=b", "the field 'key' comes twice"},
                                      {"cmd=get =b", "'=b' is not key=value"},
                                      {std::string(kPmiMaxLine + 1, 'x'), "a line of more than 4096 bytes"}})
    EXPECT_EQ(said(parse_pmi_line(line)), why) << line.substr(0, 40);
}

TEST(PmiWire, ARepliesFieldsComeInTheOrderGiven) {
  EXPECT_EQ(format_pmi_reply("get_result", {{"rc", "0"}, {"value", "v"}}), "cmd=get_result rc=0 value=v\n");
}

TEST(PmiWire, APmi2CommandIsItsLengthThenKeyValuesWithSemicolonsDoubled) {
  std::mt19937 random(std::random_device{}());
  for (int round = 0; round < 200; ++round) {
    // Any bytes but a newline in a value, ';' and '=' included; keys without '=' or ';'.
    std::string value;
    for (std::size_t i = random() % (kPmi2MaxValue + 1); i > 0; --i) {
      const char c = static_cast<char>(1 + random() % 255);
      value += c == '\n' ? ';' : c;
    }
    const std::string key = "k" + std::to_string(random());
    const std::string framed = format_pmi2_reply("kvs-put", {{"key", key}, {"value", value}});
    const auto length = parse_pmi2_length(framed);
    ASSERT_TRUE(std::holds_alternative<std::size_t>(length)) << std::get<std::string>(length);
    ASSERT_EQ(std::get<std::size_t>(length) + kPmi2LengthField, framed.size());
    const auto parsed = parse_pmi2_command(std::string_view(framed).substr(kPmi2LengthField));
    ASSERT_TRUE(std::holds_alternative<PmiRequest>(parsed)) << std::get<std::string>(parsed);
    const auto& r = std::get<PmiRequest>(parsed);
    EXPECT_EQ(r.command, "kvs-put");
    EXPECT_EQ(r.field("key"), key);
    EXPECT_EQ(r.field("value"), value);
  }
  EXPECT_EQ(format_pmi2_reply("kvs-get-response", {{"rc", "0"}, {"value", "a;b"}}),
            "37    cmd=kvs-get-response;rc=0;value=a;;b;");
}

TEST(PmiWire, AMalformedPmi2CommandSaysWhy) {
  for (const auto& [body, why] :
       Said{{"cmd=finalize;", "(parsed)"},
            {"", "it does not end with ';'"},
            {"cmd=finalize", "it does not end with ';'"},
            {"key=a;cmd=get;", "it does not start with cmd=NAME;"},
            {"cmd=;", "it does not start with cmd=NAME;"},
            {"cmd=get;novalue;", "'novalue' is not key=value;"},
            {"cmd=get;=v;", "'=v' is not key=value;"},
            {"cmd=get;key=a;key=b;", "the field 'key' comes twice"},
            {"cmd=get;key=a;;", "a value without its closing ';'"},
            {"cmd=get;" + std::string(kPmi2MaxKey + 1, 'k') + "=v;", "a key of more than 64 bytes"},
            {"cmd=get;key=" + std::string(kPmi2MaxValue + 1, 'v') + ";", "a value of more than 1024 bytes"}})
    EXPECT_EQ(said(parse_pmi2_command(body)), why) << body.substr(0, 40);
  for (const auto& [head, why] : Said{{"13    cmd=finalize;", "13"},
                                      {"65536 ", "65536"},
                                      {"65537 ", "a PMI-2 command of 65537 bytes (1 to 65536 are allowed)"},
                                      {"0     ", "a PMI-2 command of 0 bytes (1 to 65536 are allowed)"},
                                      {"  13  ", "'  13  ' is not a PMI-2 length (digits, then spaces)"},
                                      {"1 3   ", "'1 3   ' is not a PMI-2 length (digits, then spaces)"},
                                      {"cmd=in", "'cmd=in' is not a PMI-2 length (digits, then spaces)"}})
    EXPECT_EQ(said(parse_pmi2_length(head)), why) << head;
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
  // PMI-2, once init chose it: a command as its client frames it, and the next framed reply
  // (its body), or "(closed)" / "(none)".
  void send2(const std::string& body) {
    std::string length = std::to_string(body.size());
    length.resize(kPmi2LengthField, ' ');
    send(length + body);
  }
  std::string reply2() {
    pollfd p{fd_->get(), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) return "(none)";
    char head[kPmi2LengthField + 1] = {};
    if (::read(fd_->get(), head, kPmi2LengthField) != static_cast<ssize_t>(kPmi2LengthField)) return "(closed)";
    std::string body(static_cast<std::size_t>(std::atoi(head)), '\0');
    return ::read(fd_->get(), body.data(), body.size()) == static_cast<ssize_t>(body.size()) ? body : "(short)";
  }
  std::string ask2(const std::string& body) {
    send2(body);
    return reply2();
  }

 private:
  PmiService& service_;
  std::shared_ptr<UniqueFd> fd_;
};

// Each request in turn, PMI-1 or (once init chose it) PMI-2, with the reply it must get.
void converse(Rank& r, const Said& dialogue, bool pmi2 = false) {
  for (const auto& [request, reply] : dialogue) EXPECT_EQ(pmi2 ? r.ask2(request) : r.ask(request), reply) << request;
}
void start_pmi2(Rank& r) {
  converse(r,
           {{"cmd=init pmi_version=2 pmi_subversion=0", "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0"}});
}

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

TEST(PmiService, AnUnknownVersionOrACommandNotServedIsRefusedAndTheSocketStays) {
  PmiService service(JobLayout::uniform(1, 1), 0, "kvs");
  Rank r(service, 0);
  converse(r, {{"cmd=init pmi_version=3 pmi_subversion=0", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1"},
               {"cmd=spawn nprocs=2", "cmd=spawn rc=-1 msg=not_served_by_hyrun"},
               {"cmd=get_appnum", "cmd=appnum appnum=0 rc=0"}});
}

// As Slurm's libpmi2 asks (`srun --mpi=pmi2`'s plugin answers the same), with a PMI-1 rank
// of the same job in the same fence.
TEST(PmiService, APmi2RanksRequestsAreAnsweredAsSlurmsPluginDoes) {
  PmiService service(JobLayout::uniform(1, 2), 0, "hyrun.test");
  Rank one(service, 0), two(service, 1);
  start_pmi2(two);
  EXPECT_EQ(two.ask2("cmd=fullinit;pmirank=1;threaded=FALSE;"),
            "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=2;appnum=0;debugged=FALSE;"
            "pmiverbose=FALSE;");
  EXPECT_EQ(two.ask2("cmd=job-getid;"), "cmd=job-getid-response;rc=0;jobid=hyrun.test;");
  EXPECT_EQ(two.ask2("cmd=info-getjobattr;key=PMI_process_mapping;"),
            "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,2));");
  EXPECT_EQ(two.ask2("cmd=info-getjobattr;key=universeSize;"), "cmd=info-getjobattr-response;rc=0;found=TRUE;value=2;");
  EXPECT_EQ(two.ask2("cmd=info-getjobattr;key=PMI_netinfo_of_task;"), "cmd=info-getjobattr-response;rc=0;found=FALSE;");
  ASSERT_EQ(one.ask("cmd=init pmi_version=1 pmi_subversion=1"),
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
  // Random values with ';' and '=' in them from the PMI-2 rank, read back by both after the fence.
  std::mt19937 random(std::random_device{}());
  std::vector<std::pair<std::string, std::string>> put;
  for (int i = 0; i < 20; ++i) {
    const std::string key = "k" + std::to_string(random());
    std::string value;
    for (std::size_t n = 1 + random() % 200; n > 0; --n) value += "ab;=c"[random() % 5];
    std::string escaped;
    for (const char c : value) escaped += c == ';' ? std::string(";;") : std::string(1, c);
    ASSERT_EQ(two.ask2("cmd=kvs-put;key=" + key + ";value=" + escaped + ";"), "cmd=kvs-put-response;rc=0;");
    put.emplace_back(key, value);
  }
  ASSERT_EQ(one.ask("cmd=put kvsname=hyrun.test key=from-one value=1"), "cmd=put_result rc=0");
  two.send2("cmd=kvs-fence;thrid=0x7f00;");
  EXPECT_EQ(two.reply2(), "(none)");  // rank 0 is not in it yet
  EXPECT_EQ(one.ask("cmd=barrier_in"), "cmd=barrier_out rc=0");
  EXPECT_EQ(two.reply2(), "cmd=kvs-fence-response;rc=0;thrid=0x7f00;");
  for (const auto& [key, value] : put) {
    std::string escaped;
    for (const char c : value) escaped += c == ';' ? std::string(";;") : std::string(1, c);
    EXPECT_EQ(two.ask2("cmd=kvs-get;jobid=hyrun.test;srcid=-1;key=" + key + ";"),
              "cmd=kvs-get-response;rc=0;found=TRUE;value=" + escaped + ";");
    if (value.find(' ') == std::string::npos && value.find(';') == std::string::npos) {
      EXPECT_EQ(one.ask("cmd=get kvsname=hyrun.test key=" + key), "cmd=get_result rc=0 value=" + value);
    }
  }
  converse(two,
           {{"cmd=kvs-get;jobid=hyrun.test;srcid=-1;key=from-one;", "cmd=kvs-get-response;rc=0;found=TRUE;value=1;"},
            {"cmd=kvs-get;jobid=hyrun.test;srcid=-1;key=never-put;", "cmd=kvs-get-response;rc=0;found=FALSE;"},
            {"cmd=kvs-put;key=a;value=line\nbreak;", "cmd=kvs-put-response;rc=-1;errmsg=value_missing_or_too_long;"},
            {"cmd=spawn;ncmds=1;", "cmd=spawn-response;rc=-1;errmsg=not served by hyrun;"},
            {"cmd=finalize;thrid=0x1;", "cmd=finalize-response;rc=0;thrid=0x1;"}},
           true);
}

TEST(PmiService, APmi2NodeAttributeWaitedForComesWithItsPut) {
  PmiService service(JobLayout::uniform(1, 2), 0, "kvs");
  Rank waiter(service, 0), putter(service, 1);
  for (Rank* r : {&waiter, &putter}) start_pmi2(*r);
  EXPECT_EQ(waiter.ask2("cmd=info-getnodeattr;key=shm;wait=FALSE;"), "cmd=info-getnodeattr-response;rc=0;found=FALSE;");
  // Two threads of a threaded client wait at once, one for the attribute, one in a fence:
  // each reply names its own thread.
  waiter.send2("cmd=info-getnodeattr;key=shm;wait=TRUE;thrid=0x2;");
  waiter.send2("cmd=kvs-fence;thrid=0x3;");
  EXPECT_EQ(waiter.reply2(), "(none)");
  EXPECT_EQ(putter.ask2("cmd=info-putnodeattr;key=shm;value=/dev/shm/x;"), "cmd=info-putnodeattr-response;rc=0;");
  EXPECT_EQ(waiter.reply2(), "cmd=info-getnodeattr-response;rc=0;found=TRUE;value=/dev/shm/x;thrid=0x2;");
  EXPECT_EQ(putter.ask2("cmd=kvs-fence;"), "cmd=kvs-fence-response;rc=0;");
  EXPECT_EQ(waiter.reply2(), "cmd=kvs-fence-response;rc=0;thrid=0x3;");
  EXPECT_EQ(putter.ask2("cmd=info-getnodeattr;key=shm;wait=TRUE;"),
            "cmd=info-getnodeattr-response;rc=0;found=TRUE;value=/dev/shm/x;");
}

TEST(PmiService, WhatIsNotPmi2AfterAPmi2InitClosesThatRanksSocketOnly) {
  PmiService service(JobLayout::uniform(1, 4), 0, "kvs");
  Rank bad_length(service, 0), bad_body(service, 1), too_long(service, 2), good(service, 3);
  for (Rank* r : {&bad_length, &bad_body, &too_long, &good}) start_pmi2(*r);
  bad_length.send("cmd=finalize\n");  // PMI-1 after choosing PMI-2
  EXPECT_EQ(bad_length.reply2(), "(closed)");
  EXPECT_EQ(bad_body.ask2("cmd=fullinit;pmirank"), "(closed)");
  too_long.send("99999999");
  EXPECT_EQ(too_long.reply2(), "(closed)");
  EXPECT_EQ(good.ask2("cmd=job-getid;"), "cmd=job-getid-response;rc=0;jobid=kvs;");
}

TEST(PmiService, APmi2FenceAcrossNodesBringsEveryNodesPutsAndFailsWithTheRelay) {
  PmiService service(JobLayout::uniform(2, 1), 0, "kvs");
  FenceRecorder relay;
  service.relay_to(relay);
  Rank r(service, 0);
  start_pmi2(r);
  ASSERT_EQ(r.ask2("cmd=kvs-put;key=mine;value=a;;b;"), "cmd=kvs-put-response;rc=0;");
  r.send2("cmd=kvs-fence;");
  ASSERT_EQ(relay.fences.size(), 1u);
  EXPECT_EQ(relay.fences[0]->data(), "mine=a;b\n");
  relay.fences[0]->complete("mine=a;b\ntheirs=1=2\n");
  EXPECT_EQ(r.reply2(), "cmd=kvs-fence-response;rc=0;");
  EXPECT_EQ(r.ask2("cmd=kvs-get;key=theirs;"), "cmd=kvs-get-response;rc=0;found=TRUE;value=1=2;");
  r.send2("cmd=kvs-fence;");
  ASSERT_EQ(relay.fences.size(), 2u);
  relay.fences[1]->fail();
  EXPECT_EQ(r.reply2(), "cmd=kvs-fence-response;rc=-1;errmsg=a fence across nodes failed;");
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

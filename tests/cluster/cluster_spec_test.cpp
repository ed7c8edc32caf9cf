// ClusterSpec: good specs give tasks in rank order (chief first) with their devices; every kind of
// bad spec is an InvalidArgument naming the source, the line:column of the offending element and
// the problem; the spec is found on the command line or in the environment.
#include "cluster/cluster_spec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "temp_dir.h"

namespace weft {
namespace {

// The message of the InvalidArgument that parsing `text` raises, or a note that none was raised.
std::string error_of(std::string_view text, std::string_view source = "spec.json") {
  try {
    ClusterSpec::parse(text, source);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(parsed without error)";
}

// Messages are checked up to the end of `expected`; the rest (a hint) may change.
#define EXPECT_SPEC_ERROR(text, expected)                                  \
  do {                                                                     \
    const std::string message_ = error_of(text);                           \
    const std::string expected_ = (expected);                              \
    EXPECT_EQ(message_.substr(0, expected_.size()), expected_) << message_; \
  } while (0)

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

constexpr const char* kFullSpec = R"({
  "cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]},
  "task": {"type": "worker", "index": 0},
  "devices": {"chief": {"logical_cpus": 2}, "worker": [{"logical_cpus": 1, "gpus": [0]}, {"gpus": []}]}
})";

TEST(ClusterSpec, ChiefFirstWithDevicesPerTaskAndTask) {
  const ClusterSpec spec = ClusterSpec::parse(kFullSpec, "spec.json");
  ASSERT_EQ(spec.num_tasks(), 3);
  EXPECT_EQ(spec.source(), "spec.json");
  EXPECT_EQ(spec.chief_rank(), 0);
  EXPECT_EQ(spec.task(0).name(), "/job:chief/replica:0/task:0");
  EXPECT_EQ(spec.task(0).address, "host0:2222");
  EXPECT_EQ(spec.task(0).devices.logical_cpus, 2);
  EXPECT_FALSE(spec.task(0).devices.gpus.has_value());
  EXPECT_EQ(spec.task(1).name(), "/job:worker/replica:0/task:0");
  EXPECT_EQ(spec.task(1).address, "host1:2222");
  EXPECT_EQ(spec.task(1).devices.logical_cpus, 1);
  EXPECT_EQ(spec.task(1).devices.gpus, std::vector<int>{0});
  EXPECT_EQ(spec.task(2).name(), "/job:worker/replica:0/task:1");
  EXPECT_FALSE(spec.task(2).devices.logical_cpus.has_value());
  EXPECT_EQ(spec.task(2).devices.gpus, std::vector<int>{});
  EXPECT_EQ(spec.declared_rank(), 1);
  EXPECT_THROW(spec.task(3), InvalidArgument);
  EXPECT_THROW(spec.task(-1), InvalidArgument);
}

TEST(ClusterSpec, WithoutChiefWorkerZeroIsTheChief) {
  const ClusterSpec spec = ClusterSpec::parse(R"({"cluster": {"worker": ["a:1", "b:2"]}})", "TF_CONFIG");
  ASSERT_EQ(spec.num_tasks(), 2);
  EXPECT_EQ(spec.task(0).name(), "/job:worker/replica:0/task:0");
  EXPECT_EQ(spec.task(1).name(), "/job:worker/replica:0/task:1");
  EXPECT_EQ(spec.task(1).address, "b:2");
  EXPECT_FALSE(spec.declared_rank().has_value());
  EXPECT_FALSE(spec.task(0).devices.logical_cpus.has_value());
  EXPECT_FALSE(spec.task(0).devices.gpus.has_value());
}

TEST(ClusterSpec, ChiefComesFirstWhereverItIsWritten) {
  const ClusterSpec spec = ClusterSpec::parse(
      R"({"task": {"index": 0, "type": "chief"}, "cluster": {"worker": ["w:1"], "chief": ["c:1"]}})", "s");
  ASSERT_EQ(spec.num_tasks(), 2);
  EXPECT_EQ(spec.task(0).job, "chief");
  EXPECT_EQ(spec.task(1).address, "w:1");
  EXPECT_EQ(spec.declared_rank(), 0);
}

TEST(ClusterSpec, DevicesObjectAppliesToEveryTaskOfTheJob) {
  const ClusterSpec spec = ClusterSpec::parse(
      R"({"cluster": {"worker": ["a:1", "b:1", "[::1]:3"]}, "devices": {"worker": {"logical_cpus": 256, "gpus": [3, 1]}}})",
      "s");
  ASSERT_EQ(spec.num_tasks(), 3);
  for (const TaskSpec& t : spec.tasks()) {
    EXPECT_EQ(t.devices.logical_cpus, 256);
    EXPECT_EQ(t.devices.gpus, (std::vector<int>{3, 1}));
  }
  EXPECT_EQ(spec.task(2).address, "[::1]:3");
  // An empty chief list means no chief.
  EXPECT_EQ(ClusterSpec::parse(R"({"cluster": {"chief": [], "worker": ["a:1"]}})", "s").task(0).job, "worker");
}

TEST(ClusterSpec, SyntaxErrorsNameLineAndColumn) {
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1",]}})", "[cluster] spec.json:1:31: invalid JSON: syntax error");
  EXPECT_SPEC_ERROR("{\n  \"cluster\": {\n    \"worker\": [\"a:1\"\n  }\n}",
                    "[cluster] spec.json:4:3: invalid JSON: syntax error");
  EXPECT_SPEC_ERROR("", "[cluster] spec.json:1:1: invalid JSON: ");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}} x)", "[cluster] spec.json:1:34: invalid JSON: ");
  const std::string bad_utf8 = error_of("{\"cluster\": {\"worker\": [\"a:1\xff\"]}}");
  EXPECT_EQ(bad_utf8.substr(0, 38), "[cluster] spec.json:1:29: invalid JSON") << bad_utf8;
  EXPECT_NE(bad_utf8.find("last read: '\"a:1\\xff'"), std::string::npos) << bad_utf8;  // escaped, not raw
  const std::string deep = "{\"cluster\": " + std::string(40, '[') + std::string(40, ']') + "}";
  EXPECT_EQ(error_of(deep), "[cluster] spec.json:1:44: invalid JSON: nesting deeper than 32 levels");
}

TEST(ClusterSpec, UnknownKeysAndJobsListTheAcceptedOnes) {
  EXPECT_EQ(error_of(R"({"cluster": {"worker": ["a:1"]}, "environment": "cloud"})"),
            "[cluster] spec.json:1:34: unknown key 'environment' (accepted: cluster, task, devices)");
  EXPECT_EQ(error_of(R"({"cluster": {"ps": ["a:1"]}})"),
            "[cluster] spec.json:1:14: unknown job 'ps' in 'cluster' (accepted: chief, worker)");
  EXPECT_EQ(error_of(R"({"cluster": {"worker": ["a:1"]}, "cluster": {"worker": ["b:1"]}})"),
            "[cluster] spec.json:1:34: duplicate key 'cluster' (also at 1:2)");
  // A key with a control character is escaped in the message.
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "a\nb": 1})", "[cluster] spec.json:1:34: unknown key 'a\\x0ab'");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0, "x": 1}})",
                    "[cluster] spec.json:1:73: unknown key 'x' in 'task' (accepted: type, index)");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "devices": {"worker": {"cpus": 1}}})",
                    "[cluster] spec.json:1:57: unknown key 'cpus' in 'devices.worker' (accepted: logical_cpus, gpus)");
}

TEST(ClusterSpec, WrongShapesNameWhatWasExpectedAndFound) {
  EXPECT_SPEC_ERROR("  [1]", "[cluster] spec.json:1:3: the spec must be a JSON object");
  EXPECT_SPEC_ERROR("{}", "[cluster] spec.json:1:1: the spec has no 'cluster' key");
  EXPECT_SPEC_ERROR(R"({"cluster": ["a:1"]})", "[cluster] spec.json:1:13: 'cluster' must be an object");
  EXPECT_EQ(error_of(R"({"cluster": {"worker": "a:1"}})"),
            "[cluster] spec.json:1:24: 'cluster.worker' must be a list of \"host:port\" addresses, got a string");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": [1]}})",
                    "[cluster] spec.json:1:25: an address in 'cluster.worker' must be a \"host:port\" string, got an integer");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "task": []})",
                    "[cluster] spec.json:1:42: 'task' must be an object");
  // A list where an object is needed.
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "devices": {"worker": [["gpus"]]}})",
                    "[cluster] spec.json:1:57: 'devices.worker[0]' must be an object like {\"logical_cpus\": 2, "
                    "\"gpus\": [0]}, got a list");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "devices": {"worker": "gpu"}})",
                    "[cluster] spec.json:1:56: 'devices.worker' must be an object (for every task of the job) or a list");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "devices": {"worker": {"gpus": 0}}})",
                    "[cluster] spec.json:1:65: 'devices.worker.gpus' must be a list of CUDA device indices, got an integer");
}

TEST(ClusterSpec, MalformedAddresses) {
  EXPECT_EQ(error_of(R"({"cluster": {"worker": ["a:1", "host1"]}})"),
            "[cluster] spec.json:1:32: malformed address 'host1': expected host:port, like \"host1:2222\"");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": [":2222"]}})",
                    "[cluster] spec.json:1:25: malformed address ':2222': the host is empty");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["my host:1"]}})",
                    "[cluster] spec.json:1:25: malformed address 'my host:1': the host has a space");
  for (const char* port : {"0", "65536", "", "22a", "-1", "+80", "1000000"}) {
    const std::string text = std::string(R"({"cluster": {"worker": ["h:)") + port + "\"]}}";
    EXPECT_EQ(error_of(text), std::string("[cluster] spec.json:1:25: malformed address 'h:") + port +
                                  "': the port '" + port + "' is not a number in 1..65535");
  }
  EXPECT_NO_THROW(ClusterSpec::parse(R"({"cluster": {"worker": ["h:1", "h:65535"]}})", "s"));
  // The element's position is its opening quote, also after escaped quotes in the string.
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1", "x\"y"]}})", "[cluster] spec.json:1:32: malformed address 'x\"y'");
}

TEST(ClusterSpec, DuplicateAddressNamesTheOtherTask) {
  const std::string text =
      "{\n"
      "  \"cluster\": {\n"
      "    \"worker\": [\"host1:2222\",\n"
      "                \"host1:2222\"]\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(error_of(text),
            "[cluster] spec.json:4:17: duplicate address 'host1:2222' (also task /job:worker/task:0 at 3:16)");
  EXPECT_EQ(error_of(R"({"cluster": {"chief": ["c:1"], "worker": ["c:1"]}})"),
            "[cluster] spec.json:1:43: duplicate address 'c:1' (also task /job:chief/task:0 at 1:24)");
  EXPECT_SPEC_ERROR(R"({"cluster": {"chief": ["c:1", "d:1"]}})",
                    "[cluster] spec.json:1:31: 'cluster.chief' has 2 addresses; a cluster has at most one chief");
}

TEST(ClusterSpec, TaskCountIsBounded) {
  EXPECT_SPEC_ERROR(R"({"cluster": {}})", "[cluster] spec.json:1:13: the cluster has no tasks");
  EXPECT_SPEC_ERROR(R"({"cluster": {"chief": [], "worker": []}})", "[cluster] spec.json:1:13: the cluster has no tasks");
  std::string text = R"({"cluster": {"worker": [)";
  size_t last = 0;
  for (int i = 0; i <= ClusterSpec::kMaxTasks; ++i) {
    if (i) text += ",";
    last = text.size();
    text += "\"h" + std::to_string(i) + ":1\"";
  }
  text += "]}}";
  ASSERT_LE(text.size(), ClusterSpec::kMaxSpecBytes);
  EXPECT_EQ(error_of(text), "[cluster] spec.json:1:" + std::to_string(last + 1) + ": more than 65536 tasks in the cluster");
}

TEST(ClusterSpec, NumbersOutOfRange) {
  const std::string head = R"({"cluster": {"worker": ["a:1"]}, "devices": {"worker": {"logical_cpus":)";
  EXPECT_EQ(error_of(head + "300}}}"), "[cluster] spec.json:1:72: 'devices.worker.logical_cpus' must be in 1..256, got 300");
  EXPECT_SPEC_ERROR(head + " 0 }}}", "[cluster] spec.json:1:73: 'devices.worker.logical_cpus' must be in 1..256, got 0");
  EXPECT_SPEC_ERROR(head + "-3}}}", "[cluster] spec.json:1:72: 'devices.worker.logical_cpus' must be in 1..256, got -3");
  EXPECT_SPEC_ERROR(head + "2.5}}}", "[cluster] spec.json:1:72: 'devices.worker.logical_cpus' must be an integer, got 2.5");
  EXPECT_SPEC_ERROR(head + "1e2}}}", "[cluster] spec.json:1:72: 'devices.worker.logical_cpus' must be an integer, got 1e2");
  EXPECT_SPEC_ERROR(head + "\"2\"}}}", "[cluster] spec.json:1:72: 'devices.worker.logical_cpus' must be an integer, got a string");
  EXPECT_SPEC_ERROR(head + "null}}}", "[cluster] spec.json:1:72: 'devices.worker.logical_cpus' must be an integer, got null");
  EXPECT_SPEC_ERROR(head + "18446744073709551615}}}",
                    "[cluster] spec.json:1:72: 'devices.worker.logical_cpus' must be in 1..256, got 18446744073709551615");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "devices": {"worker": {"gpus": [1, 0, 1]}}})",
                    "[cluster] spec.json:1:72: duplicate GPU index 1 in 'devices.worker.gpus' (also at 1:66)");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "devices": {"worker": {"gpus": [0, -1]}}})",
                    "[cluster] spec.json:1:69: 'devices.worker.gpus[]' must be in 0..2147483647, got -1");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 2}})",
                    "[cluster] spec.json:1:77: 'task.index' is 2, but job 'worker' has 2 tasks (indices 0..1)");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": -1}})",
                    "[cluster] spec.json:1:70: 'task.index' must be in 0..2147483647, got -1");
}

TEST(ClusterSpec, TaskAndDevicesMustNameTasksOfTheCluster) {
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}})",
                    "[cluster] spec.json:1:51: 'task.type' is 'chief', but the cluster has no chief");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}})",
                    "[cluster] spec.json:1:51: 'task.type' is 'ps', not a job (accepted: chief, worker)");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "task": {"index": 0}})",
                    "[cluster] spec.json:1:42: 'task' has no 'type'");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1"]}, "devices": {"chief": {}}})",
                    "[cluster] spec.json:1:46: 'devices.chief' is given, but the cluster has no chief");
  EXPECT_SPEC_ERROR(R"({"cluster": {"worker": ["a:1", "b:1"]}, "devices": {"worker": [{}, {}, {}]}})",
                    "[cluster] spec.json:1:63: 'devices.worker' has 3 entries, but job 'worker' has 2 tasks");
}

TEST(ClusterSpec, SizeLimit) {
  const std::string big(ClusterSpec::kMaxSpecBytes + 1, ' ');
  EXPECT_SPEC_ERROR(big, "[cluster] spec.json: the spec has 1048577 bytes, more than the limit of 1048576");
  testing::TempDir dir("cluster_spec");
  const std::string path = dir.file("big.json");
  write(path, big);
  try {
    ClusterSpec::load(path);
    ADD_FAILURE() << "no error for a file over 1 MiB";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "[cluster] " + path + " has 1048577 bytes, more than the limit of 1048576");
  }
  EXPECT_THROW(ClusterSpec::load(dir.file("missing.json")), NotFound);
  write(dir.file("bad.json"), "{\n  \"cluster\": 3\n}\n");
  try {
    ClusterSpec::load(dir.file("bad.json"));
    ADD_FAILURE() << "no error for a bad file";
  } catch (const InvalidArgument& e) {
    const std::string expected = "[cluster] " + dir.file("bad.json") + ":2:14: 'cluster' must be an object";
    EXPECT_EQ(std::string(e.what()).substr(0, expected.size()), expected) << e.what();
  }
}

TEST(ClusterSpec, ProcessCountSaysHowToStart) {
  const ClusterSpec spec = ClusterSpec::parse(kFullSpec, "spec.json");
  EXPECT_NO_THROW(spec.check_process_count(3));
  try {
    spec.check_process_count(2);
    ADD_FAILURE() << "no error for 2 processes";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[cluster] spec.json: the spec has 3 tasks (a chief and 2 workers) but 2 processes were started; "
              "start it with mpirun -np 3 or weft-launch --cluster=spec.json");
  }
  const ClusterSpec tf = ClusterSpec::parse(R"({"cluster": {"worker": ["a:1", "b:1"]}})", "TF_CONFIG");
  try {
    tf.check_process_count(1);
    ADD_FAILURE() << "no error for 1 process";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[cluster] TF_CONFIG: the spec has 2 tasks (2 workers) but 1 process was started; start it with "
              "mpirun -np 2, or set TF_CONFIG to a spec of 1 task");
  }
  EXPECT_NO_THROW(ClusterSpec::without_spec(4).check_process_count(4));
  EXPECT_THROW(ClusterSpec::without_spec(4).check_process_count(3), InvalidArgument);
}

TEST(ClusterSpec, WithoutSpecRankRIsWorkerR) {
  const ClusterSpec spec = ClusterSpec::without_spec(3);
  ASSERT_EQ(spec.num_tasks(), 3);
  EXPECT_EQ(spec.source(), "mpirun");
  EXPECT_EQ(spec.task(0).name(), "/job:worker/replica:0/task:0");
  EXPECT_EQ(spec.task(2).name(), "/job:worker/replica:0/task:2");
  EXPECT_EQ(spec.task(2).address, "");
  EXPECT_FALSE(spec.declared_rank().has_value());
  EXPECT_EQ(spec.rank_of("/job:worker/task:2"), 2);
  EXPECT_EQ(spec.rank_of("/job:chief/task:0"), -1);
  EXPECT_THROW(ClusterSpec::without_spec(0), InvalidArgument);
}

TEST(ClusterSpec, RankOfEveryNameForm) {
  const ClusterSpec spec = ClusterSpec::parse(kFullSpec, "spec.json");
  EXPECT_EQ(spec.rank_of("/job:chief/replica:0/task:0"), 0);
  EXPECT_EQ(spec.rank_of("/job:chief"), 0);  // a job of one task
  EXPECT_EQ(spec.rank_of("/job:chief/device:GPU:0"), 0);
  EXPECT_EQ(spec.rank_of("/job:worker/task:0"), 1);
  EXPECT_EQ(spec.rank_of("/job:worker/task:1"), 2);
  EXPECT_EQ(spec.rank_of("/job:worker/replica:0/task:1/device:CPU:0"), 2);
  EXPECT_EQ(spec.rank_of("/job:worker/task:1/gpu:0"), 2);
  EXPECT_EQ(spec.rank_of("/job:worker/task:2"), -1);
  EXPECT_EQ(spec.rank_of("/job:worker"), -1);  // two tasks: which one is not said
  EXPECT_EQ(spec.rank_of("/job:worker/replica:1/task:0"), -1);
  EXPECT_EQ(spec.rank_of("/job:ps/task:0"), -1);
  EXPECT_EQ(spec.rank_of("/device:CPU:0"), -1);
  EXPECT_EQ(spec.rank_of("/job:localhost/replica:0/task:0/device:CPU:0"), -1);
  EXPECT_THROW(spec.rank_of("/job:worker/task:x"), InvalidArgument);
}

// Saves and clears the variables the spec is found in, and puts them back.
class ClusterSpecEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"WEFT_CLUSTER", "TF_CONFIG"}) {
      if (const char* v = std::getenv(name)) saved_.emplace_back(name, v);
      ::unsetenv(name);
    }
    write(dir_.file("spec.json"), R"({"cluster": {"worker": ["a:1", "b:1", "c:1"]}})");
    write(dir_.file("other.json"), R"({"cluster": {"worker": ["a:1"]}})");
  }
  void TearDown() override {
    ::unsetenv("WEFT_CLUSTER");
    ::unsetenv("TF_CONFIG");
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }

  // Calls from_command_line_or_environment on a copy of `args`; `rest` gets what argv keeps.
  std::optional<ClusterSpec> from(std::vector<std::string> args, std::vector<std::string>* rest = nullptr) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int argc = static_cast<int>(args.size());
    auto spec = ClusterSpec::from_command_line_or_environment(argc, argv.data());
    EXPECT_EQ(argv[static_cast<size_t>(argc)], nullptr);
    if (rest) rest->assign(argv.begin(), argv.begin() + argc);
    return spec;
  }

  testing::TempDir dir_{"cluster_env"};
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(ClusterSpecEnvironment, NoneGiven) {
  std::vector<std::string> rest;
  EXPECT_FALSE(from({"prog", "x"}, &rest).has_value());
  EXPECT_EQ(rest, (std::vector<std::string>{"prog", "x"}));
  ::setenv("TF_CONFIG", "", 1);  // empty counts as not given
  EXPECT_FALSE(from({"prog"}).has_value());
}

TEST_F(ClusterSpecEnvironment, CommandLineOptionIsRemoved) {
  std::vector<std::string> rest;
  auto spec = from({"prog", "--cluster=" + dir_.file("spec.json"), "x"}, &rest);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->num_tasks(), 3);
  EXPECT_EQ(spec->source(), dir_.file("spec.json"));
  EXPECT_EQ(rest, (std::vector<std::string>{"prog", "x"}));
  spec = from({"prog", "a", "--cluster", dir_.file("spec.json")}, &rest);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(rest, (std::vector<std::string>{"prog", "a"}));
  // After "--" the arguments are the program's own.
  EXPECT_FALSE(from({"prog", "--", "--cluster=x.json"}, &rest).has_value());
  EXPECT_EQ(rest.size(), 3u);
  EXPECT_THROW(from({"prog", "--cluster="}), InvalidArgument);
  EXPECT_THROW(from({"prog", "--cluster"}), InvalidArgument);
  EXPECT_THROW(from({"prog", "--cluster=a.json", "--cluster=b.json"}), InvalidArgument);
  EXPECT_THROW(from({"prog", "--cluster=" + dir_.file("missing.json")}), NotFound);
}

TEST_F(ClusterSpecEnvironment, CommandLineThenWeftClusterThenTfConfig) {
  ::setenv("TF_CONFIG", R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]}, "task": {"type": "worker", "index": 0}})", 1);
  auto spec = from({"prog"});
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->source(), "TF_CONFIG");
  EXPECT_EQ(spec->num_tasks(), 2);
  EXPECT_EQ(spec->declared_rank(), 1);

  ::setenv("WEFT_CLUSTER", dir_.file("other.json").c_str(), 1);
  spec = from({"prog"});
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->source(), dir_.file("other.json"));
  EXPECT_EQ(spec->num_tasks(), 1);

  spec = from({"prog", "--cluster=" + dir_.file("spec.json")});
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->num_tasks(), 3);

  ::unsetenv("WEFT_CLUSTER");
  ::setenv("TF_CONFIG", "{\"cluster\": {\"worker\": [\"a:1\"]},\n \"task\": {\"type\": \"chief\"}}", 1);
  try {
    from({"prog"});
    ADD_FAILURE() << "no error for a bad TF_CONFIG";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "[cluster] TF_CONFIG:2:10: 'task' has no 'index'");
  }
}

}  // namespace
}  // namespace weft

// `geops site` for a client-defined model (workload = "client"), as an
// operator runs it: a real process on loopback, a worker over Thrift that
// brings the model, a restart from the store.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tests/common/scratch_files.h"
#include "thrift/ps_client.h"
#include "worker/ps_client.h"

namespace geops::cli {
namespace {

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// One `geops site` process, stopped with SIGTERM (and reaped) when it goes.
class SiteProcess {
 public:
  SiteProcess(const std::string& topology, const std::string& data_dir, int port, const std::string& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string p = std::to_string(port);
      std::freopen(log.c_str(), "a", stdout);
      std::freopen(log.c_str(), "a", stderr);
      ::execl(GEOPS_BIN, GEOPS_BIN, "site", "--topology", topology.c_str(), "--site", "local", "--shard", "0",
              "--port", p.c_str(), "--data-dir", data_dir.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~SiteProcess() { Stop(); }
  // SIGTERM, then the exit code (-1 if it had to be killed after 20 s).
  int Stop() {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return exit_code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

// The user's model: "enc.weight" 30x20 and "enc.bias" 20x1 with values from
// `seed` (as a framework would initialise them).
struct UserModel {
  explicit UserModel(float seed) {
    w.resize(600);
    b.resize(20);
    for (size_t i = 0; i < w.size(); ++i) w[i] = seed * 0.01f * static_cast<float>(i % 17) - 0.05f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = seed * 0.1f;
    spec = *ModelSpec::Create({{"enc.weight", 30, 20, InitKind::kProvided, 0.0f, ValuesChecksum(w)},
                               {"enc.bias", 20, 1, InitKind::kProvided, 0.0f, ValuesChecksum(b)}},
                              1024, 0);
    ptrs = {w.data(), b.data()};
  }
  std::vector<float> w, b;
  ModelSpec spec;
  std::vector<const float*> ptrs;
};

struct Worker {
  std::unique_ptr<rpc::ThriftShardConnectionFactory> factory;
  std::unique_ptr<worker::PsClient> client;
};

Result<Worker> StartWorker(int port, const UserModel& model, WorkerId id) {
  Worker w;
  rpc::ThriftClientOptions options;
  options.rpc_timeout_ms = 5000;
  GEOPS_ASSIGN_OR_RETURN(w.factory, rpc::ThriftShardConnectionFactory::Create(
                                        std::vector<std::string>{"127.0.0.1:" + std::to_string(port)}, options,
                                        std::make_shared<const ModelSpec>(model.spec)));
  WorkerClientOptions o;
  o.worker_id = id;
  o.staleness = 0;
  o.max_attempts = 60;  // the process may still be starting
  o.retry_backoff_ms = 50;
  GEOPS_ASSIGN_OR_RETURN(w.client, worker::PsClient::Create(model.spec, 1, o, w.factory.get()));
  GEOPS_RETURN_IF_ERROR(w.client->Start(model.ptrs));
  return w;
}

TEST(ClientModelSiteTest, AWorkerBringsTheModelAndARestartedSiteKeepsIt) {
  const std::string dir = test_files::FreshTestDir("client_model_site");
  const std::string topology = dir + "/client.toml";
  std::ofstream(topology) << "[model]\nworkload = \"client\"\n"
                             "[training]\nclocks = 10\nstaleness = 0\n"
                             "[storage]\ndata_dir = \"" << dir << "/data\"\ndurability = \"sync\"\n"
                             "[[sites]]\nname = \"local\"\nshards = 1\nworkers = 1\n";
  const int port = FreePort();
  const std::string store = dir + "/store";
  UserModel model(1.0f);
  {
    SiteProcess site(topology, store, port, dir + "/site.log");
    auto w = StartWorker(port, model, 0);
    ASSERT_TRUE(w.ok()) << w.status().ToString() << "\n" << test_files::ReadFile(dir + "/site.log");
    for (int k = 0; k < 3; ++k) {
      ASSERT_TRUE(w->client->Refresh().ok());
      std::fill(w->client->delta(0), w->client->delta(0) + 600, 0.5f);
      w->client->MarkAllDirty();
      ASSERT_TRUE(w->client->Clock().ok());
    }
    // A worker whose framework drew other initial values is told which table.
    UserModel other(2.0f);
    rpc::ThriftClientOptions options;
    auto factory = rpc::ThriftShardConnectionFactory::Create({"127.0.0.1:" + std::to_string(port)}, options);
    ASSERT_TRUE(factory.ok());
    auto conn = (*factory)->Connect(0);
    ASSERT_TRUE(conn.ok());
    Status refused = (*conn)->RegisterSchema(0, other.spec, "").status();
    EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(refused.message().find("table 'enc.weight' has other initial values"), std::string::npos)
        << refused.message();
    w->client.reset();
    EXPECT_EQ(site.Stop(), 0) << test_files::ReadFile(dir + "/site.log");
  }
  EXPECT_TRUE(std::filesystem::exists(store + "/MODEL"));

  // Restarted with its store: it serves at once, before any worker brings
  // the model, with the values it had.
  SiteProcess site(topology, store, port, dir + "/site.log");
  {
    rpc::ThriftClientOptions options;
    auto factory = rpc::ThriftShardConnectionFactory::Create({"127.0.0.1:" + std::to_string(port)}, options);
    ASSERT_TRUE(factory.ok());
    auto conn = (*factory)->Connect(0);
    ASSERT_TRUE(conn.ok());
    Result<ShardStatus> status = UnavailableError("not asked yet");
    for (int i = 0; i < 100 && !status.ok(); ++i) {
      status = (*conn)->GetStatus();
      if (!status.ok() && status.status().message().find("waiting for its model") != std::string::npos) break;
      if (!status.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(status.ok()) << status.status().ToString();
    EXPECT_EQ(status->num_elements, 620);
  }
  auto w = StartWorker(port, model, 0);
  ASSERT_TRUE(w.ok()) << w.status().ToString() << "\n" << test_files::ReadFile(dir + "/site.log");
  EXPECT_EQ(w->client->clock(), 3);
  ASSERT_TRUE(w->client->ReadAt(3, 0).ok());
  for (int i = 0; i < 600; ++i) {
    const float expected = ((model.w[i] + 0.5f) + 0.5f) + 0.5f;  // the shard adds one clock at a time
    ASSERT_EQ(w->client->table(0)[i], expected) << i;
  }
  for (int i = 0; i < 20; ++i) ASSERT_EQ(w->client->table(1)[i], model.b[i]) << i;
}

// SIGTERM (a supervisor's, or Kubernetes' stop) is a clean stop even while a
// worker's read waits for a worker that never comes: the read ends at once
// with Unavailable "shard 0 is stopping" (which a worker retries until the
// shard is back) and the process commits and exits 0 within the grace.
TEST(ClientModelSiteTest, SigtermStopsCleanlyWhileAReadWaits) {
  const std::string dir = test_files::FreshTestDir("client_model_sigterm");
  const std::string topology = dir + "/client.toml";
  std::ofstream(topology) << "[model]\nworkload = \"client\"\n"
                             "[training]\nclocks = 10\nstaleness = 0\nrpc_timeout_ms = 60000\n"
                             "[storage]\ndata_dir = \"" << dir << "/data\"\ndurability = \"sync\"\n"
                             "[[sites]]\nname = \"local\"\nshards = 1\nworkers = 2\n";
  const int port = FreePort();
  UserModel model(1.0f);
  SiteProcess site(topology, dir + "/store", port, dir + "/site.log");
  auto w = StartWorker(port, model, 0);
  ASSERT_TRUE(w.ok()) << w.status().ToString() << "\n" << test_files::ReadFile(dir + "/site.log");
  ASSERT_TRUE(w->client->Refresh().ok());
  ASSERT_TRUE(w->client->Clock().ok());
  // Worker 1 registers and never advances: worker 0's read at clock 1 waits.
  rpc::ThriftClientOptions long_reads;
  long_reads.rpc_timeout_ms = 60000;
  auto factory = rpc::ThriftShardConnectionFactory::Create({"127.0.0.1:" + std::to_string(port)}, long_reads);
  ASSERT_TRUE(factory.ok());
  auto other = (*factory)->Connect(0);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Register(1, model.spec.Fingerprint(), "").ok());

  auto conn = (*factory)->Connect(0);
  ASSERT_TRUE(conn.ok());
  std::vector<ChunkKey> keys = model.spec.ChunksOfShard(0, 1);
  std::vector<float> out(static_cast<size_t>(model.spec.total_elements()));
  Status read;
  std::thread reader([&] {
    read = (*conn)->Read(0, 1, 0, keys, out.data(), 50000).status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto start = std::chrono::steady_clock::now();
  const int code = site.Stop();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  reader.join();
  EXPECT_EQ(code, 0) << test_files::ReadFile(dir + "/site.log");
  EXPECT_LT(took, 8.0);
  EXPECT_EQ(read.code(), StatusCode::kUnavailable) << read.ToString();
  EXPECT_NE(read.message().find("is stopping"), std::string::npos) << read.ToString();
}

}  // namespace
}  // namespace geops::cli

// install_consumer: a small application that trains its own model on a
// geops site through the installed C++ client library (<geops/geops.h>).
//
//   install_consumer <topology.toml> <host:port of the site's shard 0>
//
// The site (one shard, two workers, staleness 0) must run the topology's
// `[model] workload = "client"`. Two workers run in two threads: worker 0
// takes its options from the topology file, worker 1 is configured by hand.
// They fit a linear regression y = x.w + b by gradient descent, each on its
// half of the data, and also add 1 to every value of a "count" table at
// every clock. Checked:
//   - at every clock c, every pulled count is init + 2c or init + 2c + 1:
//     with staleness 0 both workers' updates of every earlier clock are in,
//     and the other worker may already have pushed clock c, no more;
//   - at the end, both workers read the same values: the count is
//     init + 2 * clocks exactly, and w, b fit the data (loss near 0, within
//     1e-3 of the true ones);
//   - OptionsFromEnvironment reads the variables `geops launch` sets;
//   - errors come back as geops::client::Error with the right codes.
// Prints "install_consumer: OK" and exits 0 when all hold, else names the
// failure and exits 1.
#include <geops/geops.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>  // setenv
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kDim = 8;            // features
constexpr int kExamples = 64;      // split between the two workers
constexpr int kWorkers = 2;
constexpr float kLearningRate = 0.25f;
constexpr int64_t kCountRows = 300;  // 300x4 floats: several 1 KiB chunks
constexpr int64_t kCountCols = 4;

std::mutex failures_mu;
std::vector<std::string> failures;

void Fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(failures_mu);
  failures.push_back(what);
}

// The data set, the same in both workers: x uniform in [-1, 1) from a fixed
// generator, y = x.w_true + b_true.
struct Data {
  std::vector<float> x;  // kExamples x kDim
  std::vector<float> y;
  std::vector<float> w_true;
  float b_true = 0.3f;
  Data() {
    uint64_t state = 12345;
    auto next = [&] {
      state = (state * 1103515245 + 12345) % (uint64_t{1} << 31);
      return static_cast<float>(state) / static_cast<float>(uint64_t{1} << 31) * 2.0f - 1.0f;
    };
    for (int j = 0; j < kDim; ++j) w_true.push_back(0.5f * (j % 3) - 0.4f + 0.1f * j);
    for (int i = 0; i < kExamples; ++i) {
      float yi = b_true;
      for (int j = 0; j < kDim; ++j) {
        x.push_back(next());
        yi += x.back() * w_true[j];
      }
      y.push_back(yi);
    }
  }
};
const Data& TheData() {
  static const Data data;
  return data;
}

// Mean squared error of (w, b) over examples [lo, hi), and its gradient
// scaled by -learning rate (the delta a worker pushes).
float Step(std::span<const float> w, float b, int lo, int hi, std::vector<float>* dw, float* db) {
  const Data& d = TheData();
  dw->assign(kDim, 0.0f);
  *db = 0.0f;
  float loss = 0.0f;
  const float scale = 2.0f / static_cast<float>(hi - lo);
  for (int i = lo; i < hi; ++i) {
    float err = b - d.y[i];
    for (int j = 0; j < kDim; ++j) err += d.x[i * kDim + j] * w[j];
    loss += err * err / static_cast<float>(hi - lo);
    for (int j = 0; j < kDim; ++j) (*dw)[j] -= kLearningRate * scale * err * d.x[i * kDim + j];
    *db -= kLearningRate * scale * err;
  }
  return loss;
}

// The application's model: every worker builds it with the same values.
std::vector<geops::client::Table> Model() {
  std::vector<geops::client::Table> tables(3);
  tables[0] = {"w", kDim, 1, {}};
  for (int j = 0; j < kDim; ++j) tables[0].initial_values.push_back(0.1f * j - 0.3f);
  tables[1] = {"b", 1, 1, {0.5f}};
  tables[2] = {"count", kCountRows, kCountCols, {}};
  for (int64_t i = 0; i < kCountRows * kCountCols; ++i) tables[2].initial_values.push_back(0.25f * (i % 8));
  return tables;
}

// Checks that every value of the count table is exactly init + `adds`, or
// init + `adds` + 1 when `or_one_more`.
bool CountIs(const geops::client::Client& ps, float adds, bool or_one_more, const std::string& where) {
  const std::span<const float> count = ps.values("count");
  for (size_t i = 0; i < count.size(); ++i) {
    const float init = 0.25f * static_cast<float>(i % 8);
    if (count[i] != init + adds && !(or_one_more && count[i] == init + adds + 1.0f)) {
      Fail(where + ": count[" + std::to_string(i) + "] = " + std::to_string(count[i]) + ", expected " +
           std::to_string(init + adds) + (or_one_more ? " or one more" : ""));
      return false;
    }
  }
  return true;
}

// One worker's training loop; its final w and b land in `final_w`.
void RunWorker(const geops::client::Options& options, std::vector<float>* final_w) {
  const std::string who = "worker " + std::to_string(options.worker);
  try {
    geops::client::Client ps = geops::client::Client::Connect(options, Model());
    if (ps.clock() != 0 || ps.num_tables() != 3 || ps.table_name(2) != "count" || ps.rows(2) != kCountRows) {
      Fail(who + ": unexpected state after Connect");
      return;
    }
    const int w = ps.table_index("w");
    const int lo = options.worker * (kExamples / kWorkers);
    const int hi = lo + kExamples / kWorkers;
    const std::vector<float> ones(kCountRows * kCountCols, 1.0f);
    std::vector<float> dw;
    float db = 0;
    for (int64_t c = ps.clock(); c < options.clocks; ++c) {
      ps.Pull();
      if (!CountIs(ps, 2.0f * static_cast<float>(c), true, who + " at clock " + std::to_string(c))) return;
      Step(ps.values(w), ps.values("b")[0], lo, hi, &dw, &db);
      ps.Push(w, dw);
      ps.Push("b", std::span<const float>(&db, 1));
      ps.Push(ps.table_index("count"), ones);
      if (c == 3) {
        // A bad delta is refused with nothing added; the loop goes on.
        const float nan = std::numeric_limits<float>::quiet_NaN();
        try {
          ps.Push("b", std::span<const float>(&nan, 1));
          Fail(who + ": a NaN push was accepted");
        } catch (const geops::client::Error& e) {
          if (e.code() != geops::client::ErrorCode::kInvalidArgument) Fail(who + ": NaN push: " + e.what());
        }
      }
      if (c + 1 < options.clocks) {
        ps.Clock();
      } else {
        ps.Finish();
      }
    }
    if (!ps.finished() || ps.clock() != options.clocks) Fail(who + ": not finished at the last clock");
    ps.PullExact(20000);
    if (!CountIs(ps, 2.0f * static_cast<float>(options.clocks), false, who + " after the last clock")) return;
    const std::span<const float> wv = ps.values(w);
    final_w->assign(wv.begin(), wv.end());
    final_w->push_back(ps.values("b")[0]);
    const geops::client::Stats stats = ps.stats();
    if (stats.bytes_sent <= 0 || stats.bytes_received <= 0 || stats.max_staleness != 0) {
      Fail(who + ": unexpected stats (bytes sent " + std::to_string(stats.bytes_sent) + ", max staleness " +
           std::to_string(stats.max_staleness) + ")");
    }
  } catch (const geops::client::Error& e) {
    Fail(who + ": " + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <topology.toml> <host:port of shard 0>\n", argv[0]);
    return 2;
  }
  const std::string topology = argv[1];
  const std::string shard = argv[2];

  geops::client::Options from_topology;
  try {
    from_topology = geops::client::OptionsFromTopology(topology, "local", 0);
  } catch (const geops::client::Error& e) {
    std::fprintf(stderr, "install_consumer: FAILED: %s\n", e.what());
    return 1;
  }
  // The test's site listens on a port the kernel picked (base_port 0), so
  // the topology gives no address: the caller's wins.
  if (!from_topology.shards.empty() || from_topology.staleness != 0 || from_topology.clocks != 40 ||
      from_topology.chunk_bytes != 1024) {
    std::fprintf(stderr, "install_consumer: FAILED: unexpected options from %s\n", topology.c_str());
    return 1;
  }
  from_topology.shards = {shard};

  // As `geops launch` would start the application: the GEOPS_* variables.
  ::setenv("GEOPS_TOPOLOGY", topology.c_str(), 1);
  ::setenv("GEOPS_SITE", "local", 1);
  ::setenv("GEOPS_WORKER", "1", 1);
  ::setenv("GEOPS_SHARDS", (shard + "," + shard).c_str(), 1);
  ::setenv("GEOPS_CLOCKS", "7", 1);
  try {
    const geops::client::Options env = geops::client::OptionsFromEnvironment();
    if (env.worker != 1 || env.shards.size() != 2 || env.shards[1] != shard || env.clocks != 7 ||
        env.rpc_timeout_ms != from_topology.rpc_timeout_ms) {
      Fail("unexpected options from the environment");
    }
  } catch (const geops::client::Error& e) {
    Fail(std::string("options from the environment: ") + e.what());
  }
  // An unknown site is named.
  try {
    geops::client::OptionsFromTopology(topology, "elsewhere", 0);
    Fail("an unknown site was accepted");
  } catch (const geops::client::Error& e) {
    if (e.code() != geops::client::ErrorCode::kNotFound) Fail(std::string("unknown site: ") + e.what());
  }
  geops::client::Options by_hand;
  by_hand.shards = {shard};
  by_hand.worker = 1;
  by_hand.staleness = 0;
  by_hand.rpc_timeout_ms = from_topology.rpc_timeout_ms;
  by_hand.chunk_bytes = 1024;
  by_hand.clocks = from_topology.clocks;

  std::vector<float> result[kWorkers];
  std::thread t0(RunWorker, from_topology, &result[0]);
  std::thread t1(RunWorker, by_hand, &result[1]);
  t0.join();
  t1.join();

  if (failures.empty()) {
    // Both workers read the same final model, and it fits the data. (Which
    // model exactly depends on whether a worker's pull saw the other's
    // update of the same clock, so it is compared with the truth.)
    if (result[0] != result[1]) Fail("the workers read different final models");
    const Data& d = TheData();
    for (int j = 0; j <= kDim; ++j) {
      const float truth = j < kDim ? d.w_true[j] : d.b_true;
      if (!(std::fabs(result[0][j] - truth) < 1e-3f)) {
        Fail("final parameter " + std::to_string(j) + " = " + std::to_string(result[0][j]) + ", the data's is " +
             std::to_string(truth));
      }
    }
    std::vector<float> unused;
    float unused_b = 0;
    const float loss = Step(std::span<const float>(result[0].data(), kDim), result[0][kDim], 0, kExamples,
                            &unused, &unused_b);
    if (!(loss < 1e-5f)) Fail("final loss " + std::to_string(loss) + " is not near 0");
  }

  if (failures.empty()) {
    // A worker whose model has other initial values is refused, naming the table.
    std::vector<geops::client::Table> other = Model();
    other[0].initial_values[0] += 1.0f;
    try {
      geops::client::Client::Connect(from_topology, other);
      Fail("a model with other initial values was accepted");
    } catch (const geops::client::Error& e) {
      if (e.code() != geops::client::ErrorCode::kFailedPrecondition ||
          e.message().find("'w'") == std::string::npos) {
        Fail(std::string("other initial values: ") + e.what());
      }
    }
  }

  if (!failures.empty()) {
    for (const std::string& f : failures) std::fprintf(stderr, "install_consumer: FAILED: %s\n", f.c_str());
    return 1;
  }
  std::printf("install_consumer: OK (%d workers, %lld clocks, final w[0] = %.6f)\n", kWorkers,
              static_cast<long long>(from_topology.clocks), result[0][0]);
  return 0;
}

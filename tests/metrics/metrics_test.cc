// The metrics plumbing without processes: Histogram, MetricsBuilder's
// families, a MetricsEndpoint scraped over loopback HTTP, the shard's
// metric set from a ShardStatus, and the service-discovery file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/histogram.h"
#include "metrics/metrics_endpoint.h"
#include "metrics/shard_metrics.h"
#include "supervisor/launch/prometheus_targets.h"
#include "tests/common/loopback_http.h"

namespace geops::metrics {
namespace {

std::optional<std::string> Scrape(int port) { return geops::testing::LoopbackHttpGet(port, "/metrics"); }

TEST(HistogramTest, CountsEachSampleInTheFirstBucketThatHoldsIt) {
  Histogram h;
  h.Observe(0);       // first bucket (<= 1e-4)
  h.Observe(1e-4);    // first bucket: bounds are inclusive
  h.Observe(0.003);   // <= 0.005
  h.Observe(120);     // +Inf
  h.Observe(-1);      // counts as 0
  h.Observe(NAN);     // counts as 0
  HistogramSnapshot s = h.Snapshot();
  ASSERT_EQ(s.counts.size(), s.upper_bounds.size() + 1);
  EXPECT_EQ(s.count, 6u);
  EXPECT_EQ(s.counts[0], 4u);
  EXPECT_EQ(s.counts[5], 1u);  // 0.005
  EXPECT_EQ(s.counts.back(), 1u);
  EXPECT_NEAR(s.sum_seconds, 120.0031, 1e-6);
}

TEST(MetricsBuilderTest, GroupsSamplesIntoFamiliesWithTheCommonLabels) {
  MetricsBuilder b(Labels{{"site", "us"}});
  b.Counter("geops_x_total", "x", 3, {{"method", "read"}});
  b.Counter("geops_x_total", "x", 4, {{"method", "update"}});
  Histogram h;
  h.Observe(0.02);
  h.Observe(0.2);
  b.Histogram("geops_w_seconds", "w", h.Snapshot());
  auto families = b.Take();
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].metric.size(), 2u);
  EXPECT_EQ(families[0].metric[1].label.size(), 2u);
  EXPECT_EQ(families[0].metric[1].counter.value, 4);
  const auto& hist = families[1].metric[0].histogram;
  EXPECT_EQ(hist.sample_count, 2u);
  // Cumulative: 0 up to 0.01, 1 from 0.025, 2 from 0.25, and +Inf last.
  EXPECT_EQ(hist.bucket[6].cumulative_count, 0u);
  EXPECT_EQ(hist.bucket[7].cumulative_count, 1u);
  EXPECT_EQ(hist.bucket[10].cumulative_count, 2u);
  EXPECT_TRUE(std::isinf(hist.bucket.back().upper_bound));
  EXPECT_EQ(hist.bucket.back().cumulative_count, 2u);
}

TEST(MetricsEndpointTest, ServesAFreshSnapshotAtEachScrape) {
  int scrapes = 0;
  auto e = MetricsEndpoint::Start("127.0.0.1", 0, [&scrapes] {
    MetricsBuilder b({{"site", "us"}, {"shard", "0"}});
    ShardStatus st;
    st.shard_clock = ++scrapes;
    st.reads_served = 7;
    st.rejected_by_code[static_cast<size_t>(StatusCode::kPermissionDenied)] = 2;
    st.workers.push_back(WorkerState{3, 5});
    AppendShardMetrics(st, 1, &b);
    return b.Take();
  });
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_GT((*e)->port(), 0);
  auto first = Scrape((*e)->port());
  ASSERT_TRUE(first.has_value());
  EXPECT_NE(first->find("geops_shard_clock{site=\"us\",shard=\"0\"} 1"), std::string::npos) << *first;
  EXPECT_NE(first->find("geops_lan_refusals_total{site=\"us\",shard=\"0\",code=\"PERMISSION_DENIED\"} 2"),
            std::string::npos);
  EXPECT_NE(first->find("geops_shard_worker_clock{site=\"us\",shard=\"0\",worker=\"3\"} 5"), std::string::npos);
  EXPECT_NE(first->find("geops_ssp_read_wait_seconds_bucket"), std::string::npos);
  EXPECT_EQ(first->find("geops_store_commit_seconds"), std::string::npos);  // no store
  auto second = Scrape((*e)->port());
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(second->find("geops_shard_clock{site=\"us\",shard=\"0\"} 2"), std::string::npos);
  // A taken port is refused with the address named.
  auto busy = MetricsEndpoint::Start("127.0.0.1", (*e)->port(), [] { return std::vector<prometheus::MetricFamily>{}; });
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(busy.status().message().find("127.0.0.1:" + std::to_string((*e)->port())), std::string::npos);
}

TEST(PrometheusTargetsTest, OneGroupPerProcessAndARestartReplacesItsEntry) {
  const auto dir = std::filesystem::temp_directory_path() / ("geops-targets-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  supervisor::PrometheusTargets t((dir / "prometheus_targets.json").string());
  ASSERT_TRUE(t.Set("us", "shard-0", "127.0.0.1:9100").ok());
  ASSERT_TRUE(t.Set("us", "worker-0", "127.0.0.1:9101").ok());
  ASSERT_TRUE(t.Set("us", "shard-0", "127.0.0.1:9200").ok());  // restarted elsewhere
  std::ifstream in(t.path());
  nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["targets"][0], "127.0.0.1:9200");
  EXPECT_EQ(j[0]["labels"]["process"], "shard-0");
  EXPECT_EQ(j[0]["labels"]["site"], "us");
  EXPECT_EQ(j[1]["labels"]["process"], "worker-0");
  EXPECT_FALSE(std::filesystem::exists(t.path() + ".tmp"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace geops::metrics

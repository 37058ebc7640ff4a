// `geops inspect DATA_DIR`: what a shard's store holds, read without
// changing a byte of the directory. Best run while the shard is stopped (a
// store being written by a live site may fail to read; try again).
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "storage/rocksdb_shard_store.h"
#include "wan/replication/outbound_journal.h"

namespace geops::cli {
namespace {

// Table names from the model summary ("... tables=a:2x3,b:1x4"), by id; the
// summary of a very large model is cut short, so names may run out.
std::vector<std::string> TableNames(const std::string& summary) {
  std::vector<std::string> names;
  const size_t at = summary.find("tables=");
  if (at == std::string::npos) return names;
  size_t pos = at + 7;
  while (pos < summary.size()) {
    size_t end = summary.find(',', pos);
    if (end == std::string::npos) end = summary.size();
    const std::string entry = summary.substr(pos, end - pos);
    const size_t colon = entry.rfind(':');
    if (colon == std::string::npos) break;
    names.push_back(entry.substr(0, colon));
    pos = end + 1;
  }
  return names;
}

std::string Bytes(int64_t n) {
  char buf[32];
  if (n >= (int64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(n) / (1 << 30));
  } else if (n >= (1 << 20)) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(n) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(n) / 1024);
  }
  return buf;
}

}  // namespace

int RunInspect(const InspectArgs& args) {
  Result<storage::StoreInfo> info = storage::InspectShardStore(args.data_dir);
  if (!info.ok()) {
    std::fprintf(stderr, "geops inspect: %s\n", info.status().ToString().c_str());
    return info.status().code() == StatusCode::kFailedPrecondition ? 2 : 1;
  }
  const ShardState& st = info->state;
  const StoreFingerprint& fp = st.fingerprint;
  std::printf("shard store %s\n", args.data_dir.c_str());
  std::printf("  format version  %d\n", st.format_version);
  std::printf("  model           0x%016" PRIx64 "  %s\n", fp.model, fp.model_summary.c_str());
  std::printf("  shard           %d of %d\n", fp.shard_id, fp.num_shards);
  std::printf("  workers         %d\n", fp.num_workers);
  std::printf("  commits         %" PRIu64 "%s\n", st.commits, st.commits == 0 ? " (never written)" : "");
  std::printf("  shard clock     %" PRId64 " (when the last commit was taken)\n", st.shard_clock);
  std::printf("  worker clocks  ");
  if (st.workers.empty()) std::printf(" none stored");
  std::printf("\n");
  for (const WorkerRecord& w : st.workers) {
    std::printf("    worker %-5d clock %-8" PRId64 " last batch %-8" PRId64 "%s\n", w.worker, w.clock,
                w.last_update_clock, w.finished ? " finished" : "");
  }
  const std::vector<std::string> names = TableNames(fp.model_summary);
  int64_t chunks = 0;
  std::printf("  tables\n");
  for (const storage::StoreInfo::Table& t : info->tables) {
    const std::string name = t.table < names.size() ? names[t.table] : "table " + std::to_string(t.table);
    std::printf("    %-20s %6" PRId64 " chunks %12" PRId64 " floats\n", name.c_str(), t.chunks, t.elements);
    chunks += t.chunks;
  }
  std::printf("  origin seqs    ");
  if (st.origins.empty()) std::printf(" none");
  for (const OriginRecord& o : st.origins) std::printf(" site %d: %" PRIu64, o.origin, o.seq);
  std::printf("\n");
  std::printf("  ledgers        ");
  if (info->ledger_rows.empty()) std::printf(" none");
  for (const auto& [origin, rows] : info->ledger_rows) {
    std::printf(" site %d: %" PRId64 " chunks;", origin, rows);
  }
  std::printf(" (what each site contributed, kept to take it back if that site loses its disk)\n");
  std::printf("  outbox          %" PRId64 " records (WAN state not yet applied by every peer)\n",
              info->outbox_records);
  const wan::OutboundSummary out = wan::OutboundSummary::Of(st.outbound);
  if (out.incarnation != 0) std::printf("    incarnation   %" PRIu64 "\n", out.incarnation);
  if (info->outbox_records > 0) {
    std::printf("    accumulator   %" PRId64 " chunks with unshipped local mass\n", out.accumulator_rows);
    for (const auto& [peer, p] : out.peers) {
      std::printf("    to site %-5d last seq %-8" PRIu64 " backlog %" PRId64 " chunks, %" PRId64
                  " unacknowledged batches",
                  peer, p.last_assigned, p.backlog_rows, p.batches);
      if (p.batches > 0) {
        std::printf(" (seq %" PRIu64 ".., %s)", p.first_seq, Bytes(p.batch_bytes).c_str());
      }
      if (p.incarnation != 0) std::printf(", incarnation %" PRIu64, p.incarnation);
      std::printf("\n");
    }
    if (out.outer_records > 0) {
      std::printf("    outer step    %" PRId64 " records (avg, diloco: the synchronised model, its momentum and "
                  "contributions to steps not applied yet)\n",
                  out.outer_records);
    }
    if (out.unknown > 0) std::printf("    %" PRId64 " records of no known kind\n", out.unknown);
  }
  std::printf("  quarantined     %zu WAN batches (not added: a sum would not be finite)\n", info->quarantined.size());
  for (const QuarantineRecord& q : info->quarantined) {
    int64_t values = 0;
    for (const LedgerAdd& c : q.chunks) values += static_cast<int64_t>(c.values.size());
    std::printf("    site %d seq %" PRIu64 ", %zu chunks, %" PRId64 " values: %s\n", q.origin, q.seq, q.chunks.size(),
                values, q.reason.c_str());
  }
  std::printf("  on disk         %s in %" PRId64 " files\n", Bytes(info->disk_bytes).c_str(), info->files);
  std::printf("  checked         %" PRId64 " chunks: sizes and checksums ok\n", chunks);
  return 0;
}

}  // namespace geops::cli

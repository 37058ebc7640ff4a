#include "wan/replication/captured_rows.h"

#include <algorithm>
#include <cstring>

namespace geops::wan {
namespace {

// A row as a record value, or false when it holds no mass.
bool RowValue(std::span<const float> row, std::string* value) {
  bool any = false;
  for (float v : row) any = any || v != 0.0f;
  if (!any) return false;
  value->assign(reinterpret_cast<const char*>(row.data()), row.size_bytes());
  return true;
}

}  // namespace

CapturedRows::CapturedRows(SignificanceFilter* filter) : filter_(filter) { filter_->set_row_hook(this); }

CapturedRows::~CapturedRows() { filter_->set_row_hook(nullptr); }

void CapturedRows::Capture(ChunkKey key) {
  filter_->Locked([&] { captured_.insert(key); });
}

bool CapturedRows::Read(ChunkKey key, std::string* value) {
  bool put = false;
  filter_->InspectRow(key, [&](std::span<const float> live) {
    if (auto it = saved_.find(key); it != saved_.end()) {
      put = RowValue(it->second, value);
      saved_bytes_ -= static_cast<int64_t>(it->second.size() * sizeof(float));
      saved_.erase(it);
      return;
    }
    captured_.erase(key);
    put = RowValue(live, value);
  });
  return put;
}

void CapturedRows::Release() {
  filter_->Locked([&] {
    captured_.clear();
    saved_.clear();
    saved_bytes_ = 0;
  });
}

void CapturedRows::BeforeRowWrite(ChunkKey key, std::span<const float> current) {
  if (captured_.erase(key) == 0) return;
  saved_[key].assign(current.begin(), current.end());
  saved_bytes_ += static_cast<int64_t>(current.size_bytes());
  peak_saved_bytes_ = std::max(peak_saved_bytes_, saved_bytes_);
  ++rows_saved_;
}

int64_t CapturedRows::rows_saved() const {
  int64_t n = 0;
  filter_->Locked([&] { n = rows_saved_; });
  return n;
}

int64_t CapturedRows::peak_saved_bytes() const {
  int64_t n = 0;
  filter_->Locked([&] { n = peak_saved_bytes_; });
  return n;
}

}  // namespace geops::wan

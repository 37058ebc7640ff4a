#include "wan/link/csv_reader.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace geops::wan {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string> Split(std::string_view line) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    std::string_view f =
        line.substr(start, comma == std::string_view::npos ? line.npos : comma - start);
    out.emplace_back(Trim(f));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return DataLossError(path + ": read failed");
  return ss.str();
}

Status LineError(const std::string& path, int line, std::string_view message) {
  return InvalidArgumentError(path + ":" + std::to_string(line) + ": " + std::string(message));
}

bool ParseDouble(std::string_view text, double* out) {
  text = Trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseInt64(std::string_view text, int64_t* out) {
  text = Trim(text);
  if (text.empty()) return false;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0) return false;
  *out = v;
  return true;
}

Result<CsvTable> CsvTable::Read(const std::string& path,
                                const std::vector<std::string_view>& required_columns) {
  GEOPS_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  CsvTable t;
  t.path_ = path;
  std::string_view rest(text);
  int line_no = 0;
  bool have_header = false;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    ++line_no;
    std::string_view trimmed = Trim(line);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    std::vector<std::string> fields = Split(trimmed);
    if (!have_header) {
      t.header_ = std::move(fields);
      have_header = true;
      for (std::string_view c : required_columns) {
        bool found = false;
        for (const std::string& h : t.header_) found = found || h == c;
        if (!found) {
          return LineError(path, line_no, "header lacks column '" + std::string(c) + "'");
        }
      }
      continue;
    }
    if (fields.size() != t.header_.size()) {
      return LineError(path, line_no,
                       "expected " + std::to_string(t.header_.size()) + " fields, got " +
                           std::to_string(fields.size()));
    }
    t.rows_.push_back(CsvRow{line_no, std::move(fields)});
  }
  if (!have_header) return LineError(path, line_no > 0 ? line_no : 1, "empty file, no header");
  return t;
}

size_t CsvTable::Column(std::string_view name) const {
  for (size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) return i;
  }
  return 0;
}

Result<double> CsvTable::Number(const CsvRow& row, std::string_view column) const {
  const std::string& f = row.fields[Column(column)];
  double v = 0;
  if (!ParseDouble(f, &v)) {
    return LineError(path_, row.line,
                     "column '" + std::string(column) + "': '" + f + "' is not a finite number");
  }
  return v;
}

}  // namespace geops::wan

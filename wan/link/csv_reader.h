// CsvTable: a small reader for the comma-separated trace files (no quoting;
// none of the trace formats needs it). Blank lines and lines starting with
// '#' are skipped; fields are trimmed; every data row must have as many
// fields as the header. Errors name the file and line, "path:LINE: ...".
//
// Thread-compatible value type.
#ifndef GEOPS_WAN_LINK_CSV_READER_H_
#define GEOPS_WAN_LINK_CSV_READER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace geops::wan {

// Reads a whole file. NotFound when it does not exist or cannot be opened.
Result<std::string> ReadTextFile(const std::string& path);

// "path:LINE: message" as an InvalidArgument.
Status LineError(const std::string& path, int line, std::string_view message);

// Parses a finite double / a non-negative integer from the whole of `text`.
bool ParseDouble(std::string_view text, double* out);
bool ParseInt64(std::string_view text, int64_t* out);

struct CsvRow {
  int line = 0;  // 1-based line number in the file
  std::vector<std::string> fields;
};

class CsvTable {
 public:
  // Reads `path`, whose first non-comment line is the header. Errors:
  // NotFound for a missing file; InvalidArgument "path:LINE: ..." for an
  // empty file, a missing required column or a row of the wrong width.
  static Result<CsvTable> Read(const std::string& path,
                               const std::vector<std::string_view>& required_columns);

  const std::string& path() const { return path_; }
  const std::vector<CsvRow>& rows() const { return rows_; }
  // Index of a column named in the header. REQUIRES: it was required by Read.
  size_t Column(std::string_view name) const;

  // Field `column` of `row` as a finite double; InvalidArgument
  // "path:LINE: column 'name': 'text' is not a number" otherwise.
  Result<double> Number(const CsvRow& row, std::string_view column) const;
  const std::string& Text(const CsvRow& row, std::string_view column) const {
    return row.fields[Column(column)];
  }

 private:
  std::string path_;
  std::vector<std::string> header_;
  std::vector<CsvRow> rows_;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_LINK_CSV_READER_H_

// CSV reading, keyed permutations and batches (hjit/data.h).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>

#include <zlib.h>

#include <hjit/data.h>
#include <hjit/error.h>
#include <hjit/ops.h>
#include <hjit/random.h>

namespace hjit::data {

namespace {

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  if (b == std::string::npos) return "";
  std::string t = s.substr(b, e - b + 1);
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
  return t;
}

std::vector<std::string> fields_of(const std::string& line, char delimiter) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == delimiter && !quoted) {
      out.push_back(trimmed(field));
      field.clear();
    } else {
      field += c;
    }
  }
  out.push_back(trimmed(field));
  return out;
}

std::optional<double> number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;  // overflow gives +-inf, as numpy reads it
}

}  // namespace

Csv parse_csv(const std::string& text, const CsvOptions& o) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> line_of;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (trimmed(line).empty()) continue;
    rows.push_back(fields_of(line, o.delimiter));
    line_of.push_back(n);
  }
  if (rows.empty()) throw ValueError("read_csv: there are no rows");
  Csv out;
  bool header = o.header == Header::Yes;
  if (o.header == Header::Auto)
    header = std::any_of(rows[0].begin(), rows[0].end(), [](const std::string& f) { return !f.empty() && !number(f); });
  size_t first = 0;
  if (header) {
    out.columns = rows[0];
    first = 1;
  } else {
    for (size_t c = 0; c < rows[0].size(); ++c) out.columns.push_back(std::to_string(c));
  }
  const size_t cols = out.columns.size(), n = rows.size() - first;
  std::vector<double> values;
  values.reserve(n * cols);
  for (size_t r = first; r < rows.size(); ++r) {
    if (rows[r].size() != cols)
      throw ValueError("read_csv: line " + std::to_string(line_of[r]) + " has " + std::to_string(rows[r].size()) + " fields, the " +
                       (header ? "header " : "first row ") + std::to_string(cols));
    for (size_t c = 0; c < cols; ++c) {
      const std::string& f = rows[r][c];
      std::optional<double> v = f.empty() ? o.missing : number(f);
      if (!v)
        throw ValueError("read_csv: line " + std::to_string(line_of[r]) + ", column " + std::to_string(c + 1) + ": '" + f + "' is " +
                         (f.empty() ? "empty (CsvOptions::missing fills empty fields)" : "not a number"));
      values.push_back(*v);
    }
  }
  out.values = Tensor::from_vector(values, Shape{int64_t(n), int64_t(cols)}).astype(o.dtype);
  return out;
}

namespace {

// A gzip file's text (zlib, as numpy's loadtxt reads .gz files); ValueError when it is corrupt.
std::string gunzipped(const std::string& in) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw Error("read_csv: zlib could not start inflating");
  std::string out;
  char buf[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(std::min<size_t>(in.size(), UINT32_MAX));
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (rc == Z_OK && z.avail_in == 0 && sizeof buf == z.avail_out) rc = Z_BUF_ERROR;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) throw ValueError("read_csv: a gzip file that is corrupt or truncated");
  return out;
}

}  // namespace

Csv read_csv(const std::string& path, const CsvOptions& o) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ValueError("read_csv: cannot open '" + path + "'");
  std::ostringstream s;
  s << f.rdbuf();
  try {
    const std::string bytes = s.str();
    const bool gzip = bytes.size() >= 2 && uint8_t(bytes[0]) == 0x1f && uint8_t(bytes[1]) == 0x8b;
    return parse_csv(gzip ? gunzipped(bytes) : bytes, o);
  } catch (const ValueError& e) {
    throw ValueError(std::string(e.what()) + " ('" + path + "')");
  }
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ValueError("read_text: cannot open '" + path + "'");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

Vocabulary::Vocabulary(const std::string& text) {
  index_.fill(-1);
  std::array<bool, 256> seen{};
  for (char c : text) seen[uint8_t(c)] = true;
  for (int b = 0; b < 256; ++b)
    if (seen[size_t(b)]) index_[size_t(b)] = int16_t(chars_.size()), chars_ += char(b);
}

int64_t Vocabulary::id(char c) const {
  const int16_t i = index_[uint8_t(c)];
  if (i < 0) throw ValueError("data::Vocabulary: the character " + std::to_string(int(uint8_t(c))) + " is not in the vocabulary");
  return i;
}

Tensor Vocabulary::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(id(c));
  return Tensor::from_vector(ids, Shape{int64_t(ids.size())});
}

std::string Vocabulary::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t i : ids) {
    if (i < 0 || i >= size()) throw IndexError("data::Vocabulary: id " + std::to_string(i) + " of " + std::to_string(size()));
    out += chars_[size_t(i)];
  }
  return out;
}

Tensor permutation(const Tensor& key, int64_t n) {
  if (n < 0) throw ValueError("data::permutation: of " + std::to_string(n) + " elements");
  // Sorting by 64 random bits per element: ties are as rare as 64-bit collisions (and broken by
  // position, so the order is a function of the key alone).
  const std::vector<uint32_t> bits = random::bits(key, {2 * n}).to_vector<uint32_t>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto rank = [&](int64_t i) { return uint64_t(bits[size_t(2 * i)]) << 32 | bits[size_t(2 * i + 1)]; };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return rank(a) < rank(b); });
  return Tensor::from_vector(order, Shape{n});
}

Tensor Batch::mask() const {
  const int64_t n = tensors.empty() ? rows : tensors[0].shape()[0];
  return lt(Tensor::arange(n, DType::I64), Tensor::scalar(double(rows), DType::I64));
}

Batches::Batches(std::vector<Tensor> tensors, int64_t batch_size, LastBatch last)
    : tensors_(std::move(tensors)), batch_size_(batch_size), rows_(0), last_(last) {
  if (tensors_.empty()) throw ValueError("data::Batches: no tensors to batch");
  if (batch_size < 1) throw ValueError("data::Batches: a batch of " + std::to_string(batch_size) + " rows");
  for (const Tensor& t : tensors_) {
    if (!t.defined() || t.ndim() == 0) throw ShapeError("data::Batches: every tensor needs a leading axis of rows");
    if (t.shape()[0] != tensors_[0].shape()[0])
      throw ShapeError("data::Batches: tensors of " + std::to_string(tensors_[0].shape()[0]) + " and " + std::to_string(t.shape()[0]) + " rows");
  }
  rows_ = tensors_[0].shape()[0];
}

void Batches::shuffle(const Tensor& key) { order_ = permutation(key, rows_).to_vector<int64_t>(); }

size_t Batches::size() const {
  const int64_t full = rows_ / batch_size_, partial = rows_ % batch_size_ != 0;
  return size_t(full + (last_ == LastBatch::Drop ? 0 : partial));
}

Batch Batches::operator[](size_t i) const {
  if (i >= size()) throw IndexError("data::Batches: batch " + std::to_string(i) + " of " + std::to_string(size()));
  const int64_t start = int64_t(i) * batch_size_, stop = std::min(rows_, start + batch_size_);
  Batch b;
  b.rows = stop - start;
  for (const Tensor& t : tensors_) {
    Tensor piece;
    if (order_) {
      const std::vector<int64_t> idx(order_->begin() + start, order_->begin() + stop);
      piece = take(t, Tensor::from_vector(idx, Shape{b.rows}), 0);
    } else {
      piece = slice(t, 0, start, stop);
    }
    if (last_ == LastBatch::Pad && b.rows < batch_size_) {
      std::vector<std::pair<int64_t, int64_t>> widths(size_t(t.ndim()), {0, 0});
      widths[0] = {0, batch_size_ - b.rows};
      piece = pad(piece, widths, 0);
    }
    b.tensors.push_back(piece);
  }
  return b;
}

}  // namespace hjit::data

// Data for training loops: numeric CSV files, keyed shuffles and batches (what torch.utils.data
// and a numpy loader give for in-memory datasets).
//
//   hjit::data::Csv table = hjit::data::read_csv("iris.csv");        // a header line is detected
//   Tensor x = hjit::slice(table.values, 1, 0, 4), y = hjit::slice(table.values, 1, 4, 5).astype(DType::I64).reshape({-1});
//   hjit::data::Batches batches({x, y}, 32, hjit::data::LastBatch::Pad);
//   Tensor key = hjit::random::key(0);
//   for (int epoch = 0; epoch < 10; ++epoch) {
//     auto [next, sub] = hjit::random::split(key);
//     key = next;
//     batches.shuffle(sub);                       // a new order each epoch, the same for the same key
//     for (const hjit::data::Batch& b : batches) step(b[0], b[1], b.mask());
//   }
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <hjit/tensor.h>

namespace hjit::data {

enum class Header { Auto, Yes, No };

struct CsvOptions {
  char delimiter = ',';
  // Auto: the first line is a header when one of its fields is not a number.
  Header header = Header::Auto;
  DType dtype = DType::F32;
  // An empty field is this value; without one, an empty field is a ValueError.
  std::optional<double> missing{};
};

struct Csv {
  std::vector<std::string> columns;  // the header's names, or "0", "1", ... without one
  Tensor values;                     // [rows, columns]
};

// Fields are numbers as strtod reads them (nan and inf too), optionally in double quotes;
// surrounding spaces are ignored; blank lines are skipped. A field that is not a number, or a row
// with another number of fields, is a ValueError naming its line and column. A gzip file (.csv.gz)
// is read through zlib.
Csv read_csv(const std::string& path, const CsvOptions& options = {});
Csv parse_csv(const std::string& text, const CsvOptions& options = {});

// The whole of a text file (ValueError when it cannot be read).
std::string read_text(const std::string& path);

// The distinct characters of a text, in byte order: the ids of a character-level model.
class Vocabulary {
 public:
  explicit Vocabulary(const std::string& text);
  int64_t size() const { return int64_t(chars_.size()); }
  int64_t id(char c) const;                                   // ValueError for a character it lacks
  Tensor encode(const std::string& text) const;               // i64 [text.size()]
  std::string decode(const std::vector<int64_t>& ids) const;  // IndexError for an id outside
  const std::string& chars() const { return chars_; }

 private:
  std::string chars_;
  std::array<int16_t, 256> index_;
};

// A uniformly random order of 0..n-1 (i64), a pure function of the key (jax.random.permutation):
// the same key gives the same order. Computed on the host: not inside a traced function.
Tensor permutation(const Tensor& key, int64_t n);

enum class LastBatch {
  Keep,  // the last batch may be smaller
  Drop,  // a smaller last batch is left out (torch's drop_last)
  Pad,   // the last batch is filled up with zeros, Batch::rows saying how many are real: every
         // batch has one shape, so a jitted step compiles once
};

struct Batch {
  std::vector<Tensor> tensors;  // one per dataset tensor, each [batch rows, ...]
  int64_t rows = 0;             // the real rows (fewer than the batch's only in a padded last batch)
  const Tensor& operator[](size_t i) const { return tensors.at(i); }
  Tensor mask() const;  // bool [batch rows]: true for the real ones
};

// Batches of rows (the leading axis) of tensors that have the same number of rows.
class Batches {
 public:
  Batches(std::vector<Tensor> tensors, int64_t batch_size, LastBatch last = LastBatch::Keep);
  // A new order of the rows from the key (it stays until the next shuffle).
  void shuffle(const Tensor& key);
  size_t size() const;  // batches per pass
  Batch operator[](size_t i) const;  // IndexError past the end

  class iterator {
   public:
    iterator(const Batches* b, size_t i) : b_(b), i_(i) {}
    Batch operator*() const { return (*b_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const iterator& o) const { return i_ != o.i_; }

   private:
    const Batches* b_;
    size_t i_;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }

 private:
  std::vector<Tensor> tensors_;
  int64_t batch_size_, rows_;
  LastBatch last_;
  std::optional<std::vector<int64_t>> order_;  // row order after a shuffle
};

}  // namespace hjit::data

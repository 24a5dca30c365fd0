// The all_reduces of a graph combined into buckets, each started as soon as the last of its
// operands is computed (PyTorch DDP's gradient buckets, Horovod's tensor fusion): fewer, larger
// exchanges, and the first ones overlap whatever is computed after them (the backward pass of the
// layers before). The operands are concatenated into one flat buffer, which the pipeline computing
// them writes directly; after the exchange each result is a slice of it, read in place.
#pragma once
#include <hjit/graph.h>

namespace hjit {

struct BucketSizes {
  int64_t first_bytes = int64_t(1) << 20;  // the first bucket (the last layers' gradients), small to start early: DDP's 1 MiB
  int64_t bytes = int64_t(25) << 20;       // the others: DDP's 25 MiB
};

// g with its all_reduces of every rank (root -1) grouped by op and dtype, in the order their
// operands are computed, into buckets of at least the sizes above (the last one smaller). The
// same graph gives the same buckets on every rank.
Graph bucket_all_reduces(const Graph& g, const BucketSizes& sizes = {});

}  // namespace hjit

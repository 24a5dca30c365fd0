// Repeated blocks in a graph's node order: the layers of a network, traced one after another (and
// their gradients, in reverse), are runs of nodes alike but for the weights they read. Cutting a
// graph into parts at the blocks' boundaries makes the parts of alike blocks one graph, compiled
// once (torch.compile's regional compilation, found rather than declared).
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

#include <hjit/graph.h>

namespace hjit::backend {

struct Repeat {
  size_t begin = 0;   // the first node of the first block
  size_t period = 0;  // nodes a block
  size_t copies = 0;  // blocks in a row, 2 at least
};

// Runs of nodes that repeat with a period, largest first, not overlapping: nodes alike when their
// op, attributes and type are, and the ops and types of their inputs. (Only the cuts depend on it:
// parts are compared whole by their cache keys, so a false likeness costs compile time, never a
// wrong result.) Blocks of at least `min_period` nodes; at most `most` runs; none for graphs over
// 12000 nodes, where the search would take longer than it saves.
std::vector<Repeat> find_repeats(const std::vector<size_t>& hashes, size_t min_period, size_t most = 4);

// What find_repeats and alike_stretches compare, node by node: a hash of each node's op, attributes
// and type and the ops and types of its inputs. Computed once per graph, for both.
std::vector<size_t> node_hashes(const Graph& g);

// Stretches [begin, end) of nodes in [a, b), each ending at a contraction and starting after the
// contraction before it (or at a), that are alike node for node to at least min_copies - 1 others
// there, in order. DenseNet's layers grow (each concatenates every feature map before it and
// convolves them to 128 channels), so no run of whole layers repeats; but each layer's batch norm,
// relu and 3x3 convolution of those 128 channels is alike in all of a block's 6 to 24 layers.
std::vector<std::pair<size_t, size_t>> alike_stretches(const Graph& g, const std::vector<size_t>& hashes, size_t a, size_t b,
                                                       size_t min_copies);

}  // namespace hjit::backend

// hjit-bench --small-cnn: the training step of a small CNN on 8x8 images (issue 30's "small and
// odd shapes": conv-relu-pool twice, a linear head, cross entropy, SGD with momentum; batch 32),
// written as a user writes it, hjit's jitted step beside PyTorch's eager step
// (tools/models/small_cnn_train.py), in alternate child processes of one sitting.
#pragma once
#include <string>

namespace bench {

int small_cnn_rows(const std::string& self, bool quick);
int small_cnn_child(bool quick);

}  // namespace bench

// The char GPT of examples/char_gpt.cpp (pre-norm transformer blocks, causal attention, a GELU
// MLP), shared with the timed step of bench/char_gpt_step.cpp. Public headers only.
#pragma once
#include <hjit/nn.h>

struct GPT : hjit::nn::Module {
  int64_t V, C, T;
  hjit::nn::Embedding tok, pos;
  hjit::nn::ModuleList<hjit::nn::TransformerEncoderLayer> blocks;
  hjit::nn::LayerNorm ln;
  hjit::nn::Linear head;
  GPT(int64_t V_, int64_t C_ = 128, int64_t T_ = 64, int n_blocks = 2) : V(V_), C(C_), T(T_), tok(V, C), pos(T, C), ln({C}), head(C, V) {
    for (int i = 0; i < n_blocks; ++i) blocks.add(C, 4, hjit::nn::TransformerOptions{4 * C, 0.1, hjit::nn::Activation::Gelu, 1e-5, true, true});
    register_module("tok", tok), register_module("pos", pos), register_module("blocks", blocks);
    register_module("ln", ln), register_module("head", head);
  }
  hjit::Tensor operator()(const hjit::Tensor& x) {
    hjit::Tensor h = tok(x) + pos(hjit::iota({1, x.dim(1)}, 1, hjit::DType::I64));
    for (auto& b : blocks) h = (*b)(h, {.is_causal = true});
    return head(ln(h));
  }
};

// Parameter initializations with torch.nn.init's distributions, and the keys they draw from.
//
// Layers draw their initial values from one process-wide key, split at every draw (thread-safe):
// hjit::nn::manual_seed(s) makes the layers made after it the same in every run, as
// torch.manual_seed does. The values are hjit's own draws (threefry), not PyTorch's: the
// distributions and their bounds are PyTorch's. Each function below takes an explicit key too.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>

#include <hjit/tensor.h>

namespace hjit::nn {

void manual_seed(uint64_t seed);
Tensor next_key();  // a fresh key from the process-wide one
// The process-wide key itself (a copy), and setting it: what a checkpoint holds of it, so that
// layers made after a resume draw what they would have drawn.
Tensor process_key_now();
void set_process_key(const Tensor& key);  // ValueError for a tensor that is not a key

namespace init {

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, Relu, LeakyRelu, Selu };

// torch.nn.init.calculate_gain: `param` is leaky_relu's negative slope.
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);
// (fan_in, fan_out) of a weight [out, in, kernel...] (ValueError below rank 2).
std::pair<int64_t, int64_t> fans(const Shape& shape);

// Each assigns new values to `t` (its shape and floating dtype kept) and returns it.
Tensor& uniform_(Tensor& t, double lo = 0, double hi = 1, std::optional<Tensor> key = std::nullopt);
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, std::optional<Tensor> key = std::nullopt);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
// U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)); N(0, gain * sqrt(2 / (fan_in + fan_out))).
Tensor& xavier_uniform_(Tensor& t, double gain = 1, std::optional<Tensor> key = std::nullopt);
Tensor& xavier_normal_(Tensor& t, double gain = 1, std::optional<Tensor> key = std::nullopt);
// U(-b, b), b = gain * sqrt(3 / fan); N(0, gain / sqrt(fan)); gain from `nonlinearity` and `a`.
Tensor& kaiming_uniform_(Tensor& t, double a = 0, FanMode mode = FanMode::FanIn,
                         Nonlinearity nonlinearity = Nonlinearity::LeakyRelu, std::optional<Tensor> key = std::nullopt);
Tensor& kaiming_normal_(Tensor& t, double a = 0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyRelu, std::optional<Tensor> key = std::nullopt);

}  // namespace init
}  // namespace hjit::nn

// The built-in schedule's parameters for a pipeline nobody tuned, picked by a model fitted to tuning
// databases (issue 30, scope 3). A tuning run measures many built-in parameter sets on a pipeline
// and keeps the fastest; the model remembers, for each pipeline it was fitted on, what the pipeline
// looks like (its largest contraction's sizes, its work; features_of) and the parameters that won
// there. A new pipeline gets the parameters of the nearest one it remembers, when one is near
// enough (one size within about a factor of two), and the rules of the built-in schedule
// otherwise; picking is a scan of a few hundred samples, microseconds. A tuning run stays the way
// to go further.
//
// One model ships inside the library (schedules/param_model_shipped.txt, fitted on this project's
// sweep); `hjit-tune --fit-model FILE --db A.sqlite[,B.sqlite]` fits one on a user's databases,
// and HJIT_PARAM_MODEL names the file compiles use instead ("off": the rules alone). The model in
// use is part of every cache key of the built-in schedule with default parameters.
//
// The file is text, one sample a line (a '#' begins a comment):
//   hjit-param-model 1
//   sample matmul 256 10.00 9.00 7.00 26.00 0.00 | cols=2 rows=4 | 1.18 | matmul f32[1024,128], ...
// the largest contraction's kind, the target's vector width in bits (parameters won on one width are
// not used on another), the contraction's log2 sizes (M N K), log2 of the pipeline's multiply-adds
// and of the elements its other ops write, the parameters that won (nothing: the defaults), their
// speedup over the defaults, and a name for people.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include <hjit/graph.h>

#include "halide_backend/builtin_params.h"

namespace hjit::schedules {

// What a pipeline looks like to the model.
struct PipelineFeatures {
  // The largest contraction's kind: "none", "matmul", "conv2d", "conv2d_weight_grad", "attention"
  // (pipelines of different kinds are never near).
  std::string kind = "none";
  int vector_bits = 0;  // the target's natural f32 vector, in bits (256: AVX2, 512: AVX-512)
  // log2 of: its rows M, its columns N and its reduction K (a convolution's batch times output
  // pixels, output channels, input channels per group times window), the pipeline's multiply-adds,
  // the elements its other ops write.
  std::array<double, 5> v{};
  // The distance between two pipelines: infinite between kinds or vector widths, else Euclidean
  // over v.
  double distance(const PipelineFeatures& o) const;
};

PipelineFeatures features_of(const Graph& g, int vector_bits);

// The natural f32 vector width in bits of a target, from its Halide target string (0 when it does
// not parse), and of this machine.
int vector_bits_of(const std::string& halide_target);
int host_vector_bits();

struct ParamSample {
  PipelineFeatures features;
  backend::BuiltinParams params;  // the defaults when the built-in rules won
  double gain = 1;                // the parameters' speedup over the defaults where fitted
  std::string name;               // for people
};

class ParamModel {
 public:
  // The nearest sample farther than this is not used: one size doubled (which doubles the
  // multiply-adds, and the outputs with M or N) is 1.4 to 1.7 away.
  static constexpr double kNear = 1.75;
  // A sample whose parameters won by less than this counts as the defaults (timing noise).
  static constexpr double kLeastGain = 1.05;

  ParamModel() = default;
  explicit ParamModel(std::vector<ParamSample> samples);
  // Reads a model's text; ValueError naming `where` and the line for anything malformed.
  static ParamModel parse(const std::string& text, const std::string& where);
  std::string str() const;  // what parse reads back
  const std::vector<ParamSample>& samples() const { return samples_; }
  // The parameters for a pipeline: the nearest sample's, when near enough and a win; else the
  // defaults.
  backend::BuiltinParams choose(const PipelineFeatures& f) const;
  // A hash of the samples (a cache key's part).
  const std::string& identity() const { return identity_; }

 private:
  std::vector<ParamSample> samples_;
  std::string identity_;
};

// The model compiles use: HJIT_PARAM_MODEL's file when set ("off" or empty: none), else the shipped
// one. Read and checked at the first call (a bad file is a ValueError then and at every later call).
// nullptr: none.
std::shared_ptr<const ParamModel> active_param_model();

// The model shipped inside the library.
const ParamModel& shipped_param_model();

}  // namespace hjit::schedules

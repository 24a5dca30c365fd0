// Ops hjit reads but refuses, each with its reason, so that the error says why rather than that
// the op is unknown: string processing (hjit computes with numbers and bool only), and random
// draws, whose values in ONNX's reference come from numpy's generator, which hjit's counter-based
// keys (hjit/random.h) do not reproduce.
#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

V strings(const NodeContext& n) {
  n.fail("works on strings, which hjit does not compute with (numbers and bool only); run it before the model");
}

V random_draw(const NodeContext& n) {
  n.fail("draws random numbers, whose values in ONNX come from numpy's generator, which hjit does not reproduce; "
         "give the draw as an input, or draw it with hjit::random in C++");
}

}  // namespace

void add_refused_ops(ConverterTable& t) {
  for (const char* op : {"StringNormalizer", "TfIdfVectorizer", "RegexFullMatch", "StringConcat", "StringSplit"}) t[op] = strings;
  for (const char* op : {"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli", "Multinomial"})
    t[op] = random_draw;
}

}  // namespace hjit::onnx_import

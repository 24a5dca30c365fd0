// hjit::nn: layers, named parameters and their initializations, as torch.nn gives them; and, as
// `import torch` does, the rest of what a model's program uses: ops, jit, grad, optimizers and
// their schedules, files and data.
#pragma once
#include <hjit/data.h>
#include <hjit/hjit.h>
#include <hjit/io.h>
#include <hjit/optim.h>
#include <hjit/optim_schedule.h>
#include <hjit/random.h>
#include <hjit/nn/checkpoint.h>
#include <hjit/nn/generation.h>
#include <hjit/nn/gpt2.h>
#include <hjit/nn/init.h>
#include <hjit/nn/layers.h>
#include <hjit/nn/module.h>
#include <hjit/nn/quantize.h>
#include <hjit/nn/recurrent.h>
#include <hjit/nn/sequences.h>
#include <hjit/nn/transformer.h>

// hjit::nn: layers, named parameters and their initializations, as torch.nn gives them.
#pragma once
#include <hjit/nn/checkpoint.h>
#include <hjit/nn/init.h>
#include <hjit/nn/layers.h>
#include <hjit/nn/module.h>
#include <hjit/nn/recurrent.h>
#include <hjit/nn/transformer.h>

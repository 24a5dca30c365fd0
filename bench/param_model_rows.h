// hjit-bench --param-model: the built-in schedule's parameters from the fitted model
// (schedules/param_model.h) against the rules alone, on shapes near those the shipped model was
// fitted on but not equal to them (and two where the rules won), compiled both ways in one process
// and timed alternately.
#pragma once

namespace bench {

int param_model_rows(bool quick);

}  // namespace bench

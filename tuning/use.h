// jit() and Module with a tuning database: the best schedule the database knows for a pipeline,
// instead of searching.
#pragma once
#include <string>

#include "halide_backend/backend.h"

namespace hjit::tuning {

// The database to use: `db`, else $HJIT_TUNING_DB, else "" (none).
std::string tuning_db_path(const std::string& db);

// backend::compile(g, o), with the best schedule the database at db_path knows for g when it
// knows one (no search, and no compile when the disk cache has it). A schedule that no longer
// applies (a database from another version of a schedule's names) falls back to o, with a
// warning. A missing, corrupt or foreign database is a ValueError.
backend::Compiled compile_tuned(const Graph& g, const backend::Options& o, const std::string& db_path);

}  // namespace hjit::tuning

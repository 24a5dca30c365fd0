// Graphs with host steps, at run time: control flow ops (cond, while_loop, scan, checkpoint) and
// collectives between compiled pipelines. Each control flow op runs on the host, calling the
// compiled pipelines of its branches or body: a loop of compiled bodies driven by the host, the
// carries passed between two sets of buffers without copies, the scanned slices read and the
// stacked results written in place. Each collective is an exchange with the other ranks
// (distributed/collectives.h), run while the steps after it do, until a step reads its results.
// build/control_flow.h plans the steps.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "halide_backend/backend.h"

namespace hjit::backend {

// Where a value lives during a call.
struct Loc {
  enum Kind : uint8_t { Input, Const, Output, Boundary } kind = Input;
  int index = 0;
};

// A buffer's bytes: its element size times its extents, forms of the dynamic sizes (constants
// without them), evaluated per call.
struct SizedBytes {
  size_t element = 0;
  std::vector<Affine> extents;
  size_t at(const std::vector<int64_t>& symbols) const;
};

// A run of ordinary nodes compiled as one pipeline, one control flow operation, or one collective.
struct Step {
  std::shared_ptr<const Executable> exe;  // a part
  std::vector<Loc> in, out;               // a part: its inputs and outputs; an op: operands, results
  // A control flow operation: the node (result 0's attributes), and its graphs compiled.
  bool control_flow = false;
  // A collective (the node; its operand's type): an exchange with the other ranks.
  bool collective = false;
  std::vector<TensorType> operand_types;
  Node op;
  std::vector<TensorType> result_types;
  std::shared_ptr<const Executable> a, b;  // cond: then, else; while: cond, body; scan: body
  // Dynamic sizes: a part compiled for every size, called with those of the call's symbols it
  // uses (their indices), and a scan's trip count as a form of them (its `length` where fixed).
  bool sized = false;
  std::vector<int> symbols;
  Affine length;
};

struct CallBuffers;

class HostStepsExecutable final : public Executable {
 public:
  std::vector<Step> steps;
  std::vector<std::shared_ptr<void>> consts;  // 64-byte aligned, as compiled code wants them
  std::vector<SizedBytes> boundary_bytes;
  // Outputs another output slot or a source already holds: copied at the end of a call.
  struct Copy {
    Loc from;
    int slot;
    SizedBytes bytes;
  };
  std::vector<Copy> copies;
  std::string graph_name;
  std::vector<size_t> input_bytes, output_bytes;
  // Per step: the boundary values it writes first (allocated just before it), and those no later
  // step reads (freed just after it): a value is held only while it is needed.
  std::vector<std::vector<int>> born_at, dies_after;
  // All_reduces exchange while the steps after them run: per step, the started ones whose results
  // it reads (waited for before it runs); the rest are waited for at the end of the call.
  std::vector<std::vector<int>> waits_before;
  std::vector<int> waits_at_end;

  void run(const void* const* inputs, void* const* outputs) const override;
  // Planned with dynamic sizes: the values between steps and the scans' trip counts at these sizes.
  void run_sized(const void* const* inputs, void* const* outputs, const std::vector<int64_t>& symbols) const override;
  int64_t min_dynamic_size() const override;
  // The host drives the loops and reads the predicates, so the values meet in host memory: the
  // GPU pipelines of the parts and bodies copy their operands to the device and back per call.
  void run_on_device(const DeviceBuffer* const* inputs, DeviceBuffer* const* outputs) const override;
  std::string name() const override { return graph_name; }
  // Its buffers, and the most any compiled part or body took besides.
  int64_t temporary_bytes() const override;
  std::string device_code() const override;
  std::string explain() const override;
  // The first compiled part's schedule, and what runs on the host between the parts.
  std::string summary() const override;

 private:
  void run_op(const Step& s, const std::vector<const void*>& in, std::vector<void*> res, CallBuffers& buffers,
              const std::vector<int64_t>& symbols) const;
  void run_while(const Step& s, const std::vector<const void*>& in, std::vector<void*>& res, CallBuffers& buffers) const;
  void run_scan(const Step& s, const std::vector<const void*>& in, std::vector<void*>& res, CallBuffers& buffers,
                const std::vector<int64_t>& symbols) const;
  mutable std::atomic<int64_t> peak_buffers_{0};  // the most a call's own buffers took
};

}  // namespace hjit::backend

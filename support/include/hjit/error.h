// Typed errors. A user mistake throws one of the hjit::Error subclasses below with a message that
// names the op, the shapes and dtypes involved and, while tracing, the function being traced. A bug
// inside hjit throws InternalError (Halide's user_assert / internal_assert split). hjit never aborts.
#pragma once
#include <stdexcept>
#include <string>

namespace hjit {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ShapeError : Error { using Error::Error; };           // shapes that do not fit the op
struct DTypeError : Error { using Error::Error; };           // dtypes the op does not take
struct ValueError : Error { using Error::Error; };           // bad attribute values or arguments
struct DynamicDimsError : ValueError { using ValueError::ValueError; };  // one pipeline cannot serve every size of dynamic_dims
struct IndexError : Error { using Error::Error; };           // an index out of range
struct ConcretizationError : Error { using Error::Error; };  // reading the value of a traced tensor
struct CompileError : Error { using Error::Error; };        // a pipeline failed to compile or run
struct OutOfMemoryError : Error { using Error::Error; };    // an allocation failed
// A size past hjit's limits (set_memory_limit), refused before anything is allocated: an
// OutOfMemoryError that did not need to happen first.
struct ResourceError : OutOfMemoryError { using OutOfMemoryError::OutOfMemoryError; };
struct FloatingPointError : Error { using Error::Error; };  // debug_nans: an op made a NaN or an infinity
struct DeviceError : Error { using Error::Error; };         // a device (GPU) a call needs is missing or failed
struct DistributedError : Error { using Error::Error; };    // a collective failed: a rank did not answer in time, ranks disagree
struct InternalError : Error { using Error::Error; };       // a bug in hjit: please report it

}  // namespace hjit

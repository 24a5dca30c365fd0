#include "frontend/jit/donation.h"

namespace hjit::detail {

void check_donate(const std::string& fn, const std::vector<int>& donate, const CallArgs& args) {
  for (size_t k = 0; k < donate.size(); ++k) {
    const int i = donate[k];
    if (i < 0 || size_t(i) >= args.count)
      throw ValueError("jit '" + fn + "': donate names argument " + std::to_string(i) + ", but the call has " +
                       std::to_string(args.count) + " tensor arguments (positions count a std::vector<Tensor>'s tensors one by one)");
    for (size_t j = 0; j < k; ++j)
      if (donate[j] == i) throw ValueError("jit '" + fn + "': donate names argument " + std::to_string(i) + " twice");
  }
}

void check_donated_not_captured(const std::string& fn, const std::vector<int>& donate, const Version& v, const CallArgs& args) {
  for (int i : donate)
    for (const auto& c : v.captured)
      if (c.get() == args.tensor(size_t(i)).impl().get())
        throw ValueError("jit '" + fn + "': argument " + std::to_string(i) + " is donated (JitOptions::donate), but the "
                         "function also captures that tensor and reads it at every call: pass it as an argument only, or do "
                         "not donate it");
}

void consume_donated(const std::string& fn, const std::vector<int>& donate, const CallArgs& args) {
  for (int i : donate) {
    TensorImpl& t = *args.tensor(size_t(i)).impl();
    if (t.traced()) continue;
    t.storage.reset();
    t.borrowed = false;
    t.uniform.reset();
    t.donated_to = fn;
  }
}

}  // namespace hjit::detail

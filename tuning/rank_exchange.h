// Strings between the ranks of a tuning run spread over processes or machines (mpirun -np N
// hjit-tune ...), through hjit/distributed.h's send and recv on bytes.
#pragma once
#include <string>
#include <vector>

namespace hjit::tuning {

// Several strings as one (each length in 8 bytes, then its bytes), and back.
std::string pack_strings(const std::vector<std::string>& strings);
std::vector<std::string> unpack_strings(const std::string& packed);

// A string from this rank to one other (its length, then its bytes), and its receipt there.
void send_string(const std::string& s, int peer, int tag);
std::string recv_string(int peer, int tag);

}  // namespace hjit::tuning

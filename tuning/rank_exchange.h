// Strings between the ranks of a tuning run spread over processes or machines (mpirun -np N
// hjit-tune ...), through hjit/distributed.h's collectives on bytes. Every rank calls the collective
// ones at the same point; in a world of one they return what they were given.
#pragma once
#include <string>
#include <vector>

namespace hjit::tuning {

// Several strings as one (each length in 8 bytes, then its bytes), and back.
std::string pack_strings(const std::vector<std::string>& strings);
std::vector<std::string> unpack_strings(const std::string& packed);

// Rank 0's strings, on every rank (the others' argument is ignored).
std::vector<std::string> broadcast_strings(const std::vector<std::string>& from_rank0);
// A string from this rank to one other (its length, then its bytes), and its receipt there.
void send_string(const std::string& s, int peer, int tag);
std::string recv_string(int peer, int tag);

}  // namespace hjit::tuning

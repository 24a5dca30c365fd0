// The process group over Open MPI (Debian's libopenmpi-dev), for processes started by mpirun or
// Slurm's srun. MPI stays private to libhjit: nothing outside distributed/ includes mpi.h.
#pragma once
#include <memory>

#include "distributed/communicator.h"

namespace hjit::distributed {

// Whether this process was started by an MPI launcher (mpirun, or srun with PMI / PMIx), and how
// many processes it started; 0 when none.
int launched_world_size();

// MPI_Init_thread and the group of every process the launcher started; DistributedError when hjit
// was built without MPI or MPI cannot start.
std::unique_ptr<Communicator> mpi_world(std::chrono::milliseconds timeout);

}  // namespace hjit::distributed

// Whether this process was started as one of several ranks of an MPI launcher, told from the
// environment alone (no MPI library needed, so the build without MPI can refuse such a launch
// instead of running N independent jobs on one log).
#pragma once

#include <cstdlib>
#include <string>

namespace tilesearch::mpi {

/// True when the launcher's environment names more than one rank: PMI_SIZE (MPICH's hydra,
/// Intel MPI), OMPI_COMM_WORLD_SIZE (Open MPI), SLURM_NTASKS within a task of a job step
/// (SLURM_PROCID set: srun; a batch script's own shell has SLURM_NTASKS too).
inline bool LaunchedWithRanks() {
  auto ranks = [](const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr ? 0 : std::atoi(v);
  };
  if (ranks("PMI_SIZE") > 1 || ranks("OMPI_COMM_WORLD_SIZE") > 1) return true;
  return std::getenv("SLURM_PROCID") != nullptr && ranks("SLURM_NTASKS") > 1;
}

}  // namespace tilesearch::mpi

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
/// How many ranks the launcher's environment names (see LaunchedWithRanks); 1 when none.
inline int LaunchedRanks() {
  auto ranks = [](const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr ? 0 : std::atoi(v);
  };
  if (ranks("PMI_SIZE") > 1) return ranks("PMI_SIZE");
  if (ranks("OMPI_COMM_WORLD_SIZE") > 1) return ranks("OMPI_COMM_WORLD_SIZE");
  if (std::getenv("SLURM_PROCID") != nullptr && ranks("SLURM_NTASKS") > 1) {
    return ranks("SLURM_NTASKS");
  }
  return 1;
}

inline bool LaunchedWithRanks() { return LaunchedRanks() > 1; }

/// The CUDA device ordinal of a rank with local rank `local_rank`: its local rank, except where
/// the launcher shows each rank one GPU (CUDA_VISIBLE_DEVICES naming a single device, as Slurm's
/// --gpus-per-task=1 does), where it is device 0. (The CLI then takes it modulo the devices
/// present, so that ranks outnumbering the GPUs share them.)
inline int DeviceOfLocalRank(int local_rank) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible != nullptr && *visible != '\0' &&
      std::string(visible).find(',') == std::string::npos) {
    return 0;
  }
  return local_rank;
}

}  // namespace tilesearch::mpi

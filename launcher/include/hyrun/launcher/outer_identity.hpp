#pragma once
// The identity that the launcher above hyrun gives its tasks, rewritten for each rank, so that
// a program that reads it (JAX's, Lightning's and submitit's Slurm detection read SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID; DeepSpeed's and Horovod's MPI discovery read
// OMPI_COMM_WORLD_*) sees what a native launch of all the ranks would give it:
//  - under srun, a task of a step of K·n tasks (K hyrun tasks of n ranks each), numbered as
//    srun's block distribution numbers them: rank = task·n + local;
//  - under mpirun, a process of a job of K·n processes.
// hyrun's own value of each variable it rewrites stays readable as HYRUN_OUTER_<NAME>. A
// launch that is the whole job by itself (its world is its own n ranks: hyrun alone, or
// hyrun run by srun without PMIx) is a one-node step of n tasks.
#include <map>
#include <string>

#include "hyrun/launcher/rank_environment.hpp"

namespace hyrun {

class OuterIdentity {
 public:
  using Environment = std::map<std::string, std::string, std::less<>>;
  /// From `outer` (hyrun's own environment): a job of `world_size` ranks in which this hyrun
  /// starts `ranks` (its -n; every hyrun of a job the same).
  OuterIdentity(Environment outer, int world_size, int ranks);
  /// The same from this process's environment.
  static OuterIdentity of_this_process(int world_size, int ranks);

  /// The variables of rank `rank` (global), this hyrun's `local`-th: the rewritten ones and
  /// HYRUN_OUTER_<NAME> for each of them that hyrun had. Empty outside srun and mpirun.
  EnvironmentEntries for_rank(int rank, int local) const;
  /// The variable a rank's pid goes in (SLURM_TASK_PID under srun), or "".
  std::string pid_variable() const;

 private:
  EnvironmentEntries slurm(int rank, int local) const;
  EnvironmentEntries open_mpi(int rank, int local) const;
  // hyrun's value of `name` as a number, or `otherwise`.
  int number(const char* name, int otherwise) const;
  // Whether this launch is the whole job (its world is its own ranks).
  bool alone() const { return world_size_ == ranks_; }

  Environment outer_;
  int world_size_;
  int ranks_;
};

/// Slurm's compressed count list ("2(x3),1") with every count times `factor` ("4(x3),2").
/// Throws UsageError for a list that is not one.
std::string scale_slurm_counts(const std::string& list, int factor);

}  // namespace hyrun

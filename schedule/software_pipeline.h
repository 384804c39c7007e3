// Register-staged software pipelining of shared-memory fetches (a lowering pass for GPU kernels).
//
// A lowered GPU reduction loop with cache_read stages looks like
//   for k in [m, m+n) serial { fetch_1; ...; fetch_f; barrier; compute; barrier }
// where each fetch is a cooperative copy global -> shared. The warp stalls at every fetch until
// its global loads arrive, so only other resident blocks hide the latency. This pass issues the
// global loads of iteration k+1 into per-thread registers before the compute of iteration k, and
// stores them to shared memory at the top of iteration k+1:
//   stage <- global(m)
//   for k { shared <- stage; barrier; if (k+1 < m+n) stage <- global(k+1); compute; barrier }
// The classic "prefetch into registers" double buffering of SIMT GEMMs (CUTLASS's
// GemmPipelined / the register double buffer of Volkov & Demmel 2008, "Benchmarking GPUs to tune
// dense linear algebra", §5); MetaSchedule expresses it with the software_pipeline_stage
// annotation. Semantics are unchanged: every shared element is written with the same value at
// the same point relative to the barriers.
//
// Double-buffered variant (pragma software_pipeline$2): each shared tile gets two buffers, and
// the store of tile k+1 goes to the other buffer after the compute of tile k, so one barrier per
// iteration suffices (CUTLASS's two-stage shared-memory pipeline):
//   stage <- global(m); shared[0] <- stage; barrier
//   for k { if (k+1 < m+n) stage <- global(k+1); compute(shared[(k-m)%2]);
//           if (k+1 < m+n) shared[(k-m+1)%2] <- stage; barrier }
// A thread can only overwrite buffer (k-m)%2 again in iteration k+1, after the barrier that
// ends iteration k, which every thread reaches after its compute of k.
//
// Multi-stage cp.async variant (pragma software_pipeline$S, S = 3 or 4; hand schedules only):
// each shared tile gets S buffers and the fetches become asynchronous global -> shared copies
// (Stores with async_copy, PTX cp.async; no staging registers), S-1 tiles in flight, one barrier
// per iteration (CUTLASS's multistage mainloop; cuBLAS's sm80 "stage3" SIMT kernels):
//   for j in [0, S-1) { if (j < n) shared[j] <-async global(m+j); commit }
//   for k { wait(S-2); barrier; if (k+S-1 < m+n) shared[(k-m+S-1)%S] <-async global(k+S-1);
//           commit; compute(shared[(k-m)%S]) }
//   barrier
// Group g (the g-th commit of a thread) holds the copies of iteration m+g; at iteration k a
// thread has committed S-1+(k-m) groups, so wait(S-2) completes groups 0..k-m, its copies of tile
// k included, and the barrier after it makes every thread's copies visible (empty groups keep
// the count uniform). The copy issued in iteration k overwrites buffer (k-m-1)%S, which only
// the compute of iteration k-1 read, finished by every thread before iteration k's barrier. The
// barrier after the loop stands for the original loop's last one (the block's threads finish
// reading before code after the loop, or its next run, writes the buffers). A loop qualifies
// when each of its fetches ends in a vectorized loop of 4, 8 or 16 bytes storing a Load of a
// non-shared, non-local buffer, without guards (divisible tiles); any other loop gets the
// double-buffered pipeline of software_pipeline$2 instead. Codegen turns a copy it cannot issue
// as cp.async (alignment, dtype) into the plain store: correct, as a copy that completed early.
#pragma once

#include "ir/stmt.h"
#include "schedule/state.h"

namespace tilesearch::schedule {

/// Rewrites every serial loop of `kernel` (a lowered GPU kernel statement) whose body starts with
/// one or more cooperative fetches (loop nests of For / IfThenElse ending in one Store to a
/// shared buffer, whose value loads only non-shared, non-local buffers and depends on the loop
/// variable; the non-thread loops of each fetch have constant extents) followed by a barrier,
/// and ends with a barrier, and runs at least two iterations. Each fetch gets a local staging
/// array of (product of its non-thread loop extents) elements, named "<shared>.stage". Loops that
/// do not match are left as they are. Never fails. Lower applies it unless the state says
/// otherwise (SoftwarePipelineEnabled): generated code depends only on the state.
/// With `double_buffer`, the shared buffers of the rewritten loops get a leading dimension of 2
/// (their Allocate is rewritten; when some access of such a buffer lies outside the loop the
/// kernel is returned unchanged) and the loop keeps one barrier.
ir::Stmt PipelineSharedFetches(const ir::Stmt& kernel, bool double_buffer = false);

/// The multi-stage cp.async pipeline (header comment) of the loops PipelineSharedFetches
/// matches, with `stages` (3 or 4; CHECK-fails otherwise) shared buffers per tile; the shared
/// Allocates get a leading dimension of `stages`. Loops whose fetches do not qualify get the
/// double-buffered pipeline; a kernel where some rewritten buffer is also accessed outside its
/// loop is returned unchanged. Never fails.
ir::Stmt PipelineSharedFetchesAsync(const ir::Stmt& kernel, int stages);

/// Whether Lower applies PipelineSharedFetches to the GPU kernel of root stage `kernel_stage` of
/// `state`: true unless that stage, or a stage attached into it (following attach_stage, at any
/// depth), has pragma software_pipeline 0 (PragmaStep "software_pipeline$0"). Without such a
/// pragma the pass is on (records from before the pragma existed replay as they were measured).
/// Annotation puts the pragma on the stage that carries the reduction (and its
/// auto_unroll_max_step pragma): the root stage itself or its attached cache_write stage.
/// CHECK-fails when `kernel_stage` is not a stage id.
bool SoftwarePipelineEnabled(const State& state, int kernel_stage);

/// Whether the pipelining of that kernel is double-buffered: some stage of it (as above) has
/// pragma software_pipeline 2 and none has 0.
bool SoftwarePipelineDoubleBuffered(const State& state, int kernel_stage);

/// The pipelining that kernel asks for: 0 when SoftwarePipelineEnabled is false, else the
/// largest software_pipeline pragma value of its stages (as above), 1 without any: 1 register-
/// staged, 2 double-buffered, 3 or 4 a cp.async pipeline of that many stages.
int SoftwarePipelineStages(const State& state, int kernel_stage);

}  // namespace tilesearch::schedule

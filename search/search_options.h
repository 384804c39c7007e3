// The options of the search: sketch generation (SketchOptions), random annotation and mutation
// (AnnotationOptions) and the evolutionary search (SearchOptions, which holds the annotation
// options). Defaults are TVM v0.19's where it has one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "measure/precision_rule.h"

namespace tilesearch::search {

/// Knobs of random annotation; defaults are TVM v0.19's where it has one.
struct AnnotationOptions {
  /// Innermost tile length bound (max_innermost_split_factor).
  int64_t max_innermost_split_factor = 64;
  /// auto_unroll_max_step candidates (auto_unroll_configs_gpu / _cpu).
  std::vector<int64_t> gpu_unroll_steps = {0, 16, 64, 512, 1024};
  std::vector<int64_t> cpu_unroll_steps = {0, 16, 64, 512};
  /// Thread counts for cross-thread reductions and untiled GPU stages.
  std::vector<int64_t> gpu_thread_candidates = {32, 64, 128, 256, 512, 1024};
  /// Elements per block of a reduction split across blocks (the chunk of a block-reduction
  /// split, sketch rule SplitReductionAcrossBlocks); lengths > extent / 2 are not drawn. Our
  /// addition: each block reduces one chunk with a cross-thread reduction, so a thread's
  /// sequential float32 run is chunk / threads long.
  std::vector<int64_t> gpu_block_reduction_chunks = {256,  512,   1024,  2048, 4096,
                                                     8192, 16384, 32768, 65536};
  /// Largest product of fused innermost CPU iterators that is vectorized (max_vectorize_size).
  int64_t max_vectorize_size = 16;
  /// Probability of a non-divisible tiling for an extent with ≤ 4 divisors (our addition).
  double non_divisible_probability = 0.25;
  /// CPU: randomly change the compute location of untiled stages (InitChangeComputeLocation).
  bool change_compute_location = true;
  /// GPU register estimate of a thread: its local (register) buffer elements + this overhead
  /// (indices, addresses, operand fragments). Our addition: a launch fails when threads ×
  /// registers exceed the block's register file, which no Lower check can see.
  int64_t gpu_register_overhead = 32;
  /// Largest register estimate per thread (the sm_90 limit; more spills to local memory).
  int64_t gpu_max_registers_per_thread = 255;
  /// Largest vthread extent the search draws (annotation) or reaches (mutation, crossover); the
  /// target's max_vthread_extent bounds it too. Ansor's 8 since lowering injects virtual threads
  /// (schedule/inject_vthread.cc: shared tiles fetched once, sub-tiles interleaved): the best
  /// hand matmul 4096³ tiling on the H200 went 3.42 → 3.13 ms with 2×2 vthreads of 4×4
  /// (bench/NOTES.md). Before injection each virtual thread re-fetched the shared tiles and 1 was
  /// the measured best (V=2 1.4× slower at matmul 1024³).
  int64_t gpu_max_vthread = 8;
  /// Largest software_pipeline pragma value drawn (annotation) or reached (mutation): values
  /// 0..this, uniformly. 0 off, 1 register-staged prefetch, 2 double-buffered shared tiles, 3 and
  /// 4 a cp.async ring of that many stages (schedule/software_pipeline.h). 4: on the H200 the best
  /// hand matmul 4096³ tiling went 3.135 (1) → 3.358 (2) → 3.200 (3) → 3.003 ms (4)
  /// (bench/NOTES.md). 0 keeps the pragma off the states.
  int gpu_max_software_pipeline = 4;
  /// GPU tiled stages prefer tiles that leave at least this many blocks (when the space allows;
  /// our addition: uniform tiles often give a handful of blocks for a 132-SM device, e.g. 2
  /// blocks of a 14×14×256 conv2d). 0 disables the preference.
  int64_t gpu_min_blocks = 32;
  /// SampleInitialPopulation gives up after n · this many attempts.
  int max_attempts_per_state = 64;
  /// When some sketches carry a tensor_core step and some do not, the share of the initial
  /// population drawn from the tensor-core ones (the rest uniformly from the others). Uniform
  /// over sketches gave them a quarter of the trials of a bf16 matmul 4096³ on the H200 (one
  /// tensor-core sketch beside three SIMT ones), whose best SIMT kernel was 10x slower. A family
  /// drawn for less than half of the draws (share < 0.5 for tensor-core sketches, > 0.5 for SIMT
  /// ones) also gets at most that share of an evolutionary search's model-ranked picks; the
  /// tuner sets it per round from measurements (SearchOptions::family_dominance).
  double tensor_core_share = 0.5;
};

/// Knobs of sketch generation; defaults are TVM v0.19's (`sketch_policy.h`).
struct SketchOptions {
  /// Multi-level tiling structure on GPU ("S" = space level, "R" = reduce level).
  std::string gpu_structure = "SSSRRSRS";
  /// Multi-level tiling structure on CPU.
  std::string cpu_structure = "SSRSRS";
  /// At most this many sketches are returned (the first ones in generation order).
  int max_sketches = 16;
  /// GPU: also derive tensor-core sketches (the tensor_core step) for matmul-like stages.
  bool tensor_cores = true;
  /// Float32 problems may use one TF32 mma (opt-in, as PyTorch's allow_tf32); otherwise only
  /// 3xTF32, whose accuracy is float32's. A TuneContext whose SearchOptions::precision is tf32
  /// sets it.
  bool allow_tf32 = false;
};

/// Knobs of the evolutionary search; defaults are TVM v0.19's (search_policy.py) except the
/// population.
struct SearchOptions {
  /// States per generation (evolutionary_search_population). 512, MetaSchedule's default, not
  /// Ansor's 2048: the search's CPU time is per state, and on the H200 (fp32 matmul 4096³, 384
  /// trials, seed 3, 16 host cores) 2048 took 3.0-3.3 s of search per round of 64 against
  /// 0.9-1.2 s, for the same best (1.605 against 1.596 ms): 8.55 against 11.45 checked trials/s
  /// (bench/results/h200-2026-12-03-population-and-points-per-thread.md).
  int population = 512;
  /// Generations of evolution after the initial population (evolutionary_search_num_iters).
  /// Capped at 2 with a RandomModel, as in TVM (scores carry no information).
  int generations = 4;
  /// Probability that a selected parent is mutated (evolutionary_search_mutation_prob).
  double mutation_probability = 0.85;
  /// Probability that a selected parent not mutated is crossed with a second selected parent
  /// (our addition; 0 disables crossover).
  double crossover_probability = 0.05;
  /// Fraction of each round's output drawn at random from the initial population (eps_greedy).
  double eps_greedy = 0.05;
  /// Largest fraction of a round's model-ranked picks (the non-random ones) that may share one
  /// tile family (TileFamilyHash, search/mutation.h) while states of other families are ranked;
  /// the rest of the picks go to the next families by rank, and only when too few other
  /// families exist are more of one family taken. The cap is ceil(fraction · picks), at least 1
  /// (so 0 means one pick per family). 1 disables (TVM: top-k by score alone). Our
  /// addition: in a 1000-trial XGBoost run on matmul 4096³ (H200) 633 trials went to one family
  /// (50-60 of each round's 64 from round 5 on), and the faster 128×128 family one tile
  /// mutation away was never measured (bench/NOTES.md).
  double max_family_fraction = 0.25;
  /// Fraction of each tuning round's trials that come from local search around the best measured
  /// states (LocalSearchCandidates, search/local_search.h) in every round that has a valid
  /// measured state (so not the first): ceil(fraction · trials of the round), the rest from
  /// EvolutionarySearch (which also fills in when local search finds fewer). Read by the tuner
  /// (search/tuner.h), not by EvolutionarySearch. Our addition. Negative (the default): the
  /// tuner's choice per target (ResolveTuneOptions in search/tuner.h), 0.25 on GPU targets, 0 (off)
  /// on cpu. Why (bench/NOTES.md): in the SIMT-only space an A/B from scratch on matmul 4096³
  /// (H200, seed 1, 1000 trials) was a wash (0.25: 3.060 ms, 0: 3.003 ms), but with tensor-core
  /// sketches the evolved population holds few tensor-core states and local search is what walked
  /// from a found wgmma tiling to the good ones: fp32 matmul 4096³ 1.698 ms in 384 trials with 0.25
  /// against 2.2–2.4 ms in 256 without; bf16 0.229 ms in 512 trials against 0.252–0.261 ms.
  double local_search_fraction = -1;
  /// Measured sketch-family shares (our addition, read by the tuner, search/sketch_family.h):
  /// before each round, when the best valid time of the task's tensor-core records is at least
  /// this many times the SIMT records' best (or the other way round), the slower family gets only
  /// `family_floor` of the initial population's draws instead of annotation.tensor_core_share.
  /// Why (bench/NOTES.md): in the committed half-precision H200 logs SIMT states were ~60 % of
  /// every matmul-like tune while their best was 10-95x slower than the best wgmma state. 0
  /// disables (the share stays annotation.tensor_core_share).
  double family_dominance = 2.0;
  /// The draws a dominated family keeps, in [0, 0.5]: the search still decides (small and odd
  /// shapes may prefer SIMT), so it is never 0 by default.
  double family_floor = 0.1;
  /// How many of the best measured states (best first) local search takes the neighbors of
  /// (>= 1).
  int local_search_states = 4;
  /// Randomly annotated states sampled at least (sample_init_min_population).
  int init_min_population = 50;
  /// Fraction of the population taken from the best measured states
  /// (sample_init_use_measured_ratio).
  double init_measured_ratio = 0.2;
  /// Random annotation and mutation knobs.
  AnnotationOptions annotation;
  /// Worker threads for the per-state work; 0 = one per hardware thread. The result does not
  /// depend on it.
  int num_threads = 0;
  /// Within one EvolutionarySearch call, an edit (mutation, crossover) whose steps were tried
  /// before reuses that replay and lowering, or its error (LoweringCache, search/tune_context.h).
  /// The result does not depend on it (lowering is deterministic); false only checks that.
  bool reuse_lowerings = true;
  /// How float32 problems may compute (measure/precision_rule.h): ieee (float32 SIMT, or 3xTF32
  /// accepted only when no less accurate than the float32 reference on the checked points) or
  /// tf32 (the one-pass TF32 MMA kind drawn too, outputs judged with TF32's unit roundoff). Part
  /// of the task's workload key (measure::PrecisionWorkloadKey) and of every record; the tuner
  /// measures under it (MeasureOptions::precision).
  measure::Fp32Precision precision = measure::Fp32Precision::kIeee;
};

}  // namespace tilesearch::search

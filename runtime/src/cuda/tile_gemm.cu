// The tile product of tile_gemm.h: a persistent, warp-specialised Hopper kernel.
// Layout of one CTA (384 threads, one per SM): warpgroup 0 is the producer (one thread issues TMA bulk
// tensor copies of A [128, 64] and B [256, 64] tiles, 128-byte swizzled, into a ring of kStages
// shared-memory stages, each completing on its `full` mbarrier); warpgroups 1 and 2 are consumers (each
// multiplies its 64 rows of A by the 256 rows of B with wgmma m64n256k16 from shared memory, fp32
// accumulators in registers, and frees a stage on its `empty` mbarrier once the products reading it are
// done), then hand the finished tile to the epilogue: rounded to bf16, written with stmatrix into the
// consumer's staging buffer and stored by the copy engine, which drains it while the consumer goes on to its
// next tile. The gradient instantiation replaces each staged logit by its dx (logit_gradient.cuh) before
// the store, so the logits never reach global memory. The statistics instantiation also reduces each of the
// consumer's staged rows to (max, Σ exp) over the tile's 256 columns, under its next tile's first products
// (the staged tile stays until the next epilogue). The numerators instantiation rounds exp(z − shift) of
// each fp32 sum instead of the sum, and reduces those rows to (max, Σ) the same way. Two CTAs of a cluster take vertically adjacent
// tiles: the one of rank 0 copies the shared B tile into both CTAs' shared memory (multicast), so each
// stage of B is read from L2 once per pair. Tiles are visited in groups of kGroupPairs cluster rows, column
// after column, so the A rows and B columns in flight stay in L2. Operands contiguous along m and n (the
// weight product) are copied as boxes of 64 k-rows x 64 elements and read by wgmma transposed; the weight
// product's fp32 epilogues stage the tile as fp32 in two halves and store it, or reduce it into C, by the
// copy engine, and its last-chunk epilogue adds an fp32 addend (prefetched to L2 by the producer) before
// rounding.
// Contract: see tile_gemm.h. The kernel's device code exists only in the sm_90a pass (this file is built
// for that target alone); residentClusters checks the device before any launch.
#include "tile_gemm.h"

#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>

#include "check.h"
#include "logit_gradient.cuh"  // defines: rowToken, gradScale, rowGradient, gradientConstants, logitGradient

namespace lmfuse::detail::cuda {
namespace {

constexpr int kBlockM = 128;   // two consumer warpgroups of 64 rows
constexpr int kBlockN = 256;   // one m64n256k16 product per 16 of k
constexpr int kBlockK = 64;    // 64 bf16 = one 128-byte swizzle row
constexpr int kClusterM = 2;   // CTAs per cluster, stacked along m, sharing B
constexpr int kGroupPairs = 8; // cluster rows per group of the tile order
constexpr int kThreads = 384;
constexpr int kStageBytesA = kBlockM * kBlockK * 2;
constexpr int kStageBytesB = kBlockN * kBlockK * 2;
constexpr int kStages = 3;     // 4 left no room for the staging buffers and measured no faster with half of them
constexpr int kBoxBytes = 64 * 64 * 2;  // one 64 x 64 bf16 box of a consumer's finished tile
constexpr int kBoxes = 4;               // boxes per consumer tile (64 x 256)
constexpr int kStagedRowBytes = 32;     // StagedRow: a row's gradient terms (gradient epilogue)
constexpr int kSharedBytes = kStages * (kStageBytesA + kStageBytesB) + 2 * kBoxes * kBoxBytes +
                             2 * 64 * kStagedRowBytes + 2 * kStages * 8 + 1024;
static_assert(kBlockN == kRowStatisticsColumns, "one row statistic per row of a column tile");

// What the epilogue writes: the product, dx in its place, the product and the row statistics, or the
// softmax numerators in the product's place and their row statistics; for the weight product, also the fp32
// sums stored, added to C by the copy engine, or added to an fp32 addend and rounded (TileSink).
enum Epilogue : int { kPlain, kGradient, kStatistics, kNumerators, kFloat, kFloatAdd, kFromFloat };
__host__ __device__ constexpr bool hasStatistics(Epilogue e) { return e == kStatistics || e == kNumerators; }
// The tile order, shared by producer and consumers: cluster tile t (two CTA tiles stacked along m) to
// its first row block and column block.
struct Schedule {
  int pairs, columns;  // cluster rows (pairs of 128-row blocks), 256-column blocks
  __device__ bool tile(int t, int& pair, int& column) const {
    if (t >= pairs * columns) return false;
    const int perGroup = kGroupPairs * columns;
    const int group = t / perGroup, first = group * kGroupPairs;
    const int rows = min(kGroupPairs, pairs - first), local = t - group * perGroup;
    pair = first + local % rows;
    column = local / rows;
    return true;
  }
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ uint32_t sharedAddress(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void barrierInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sharedAddress(bar)), "r"(count));
}
__device__ __forceinline__ void expectBytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sharedAddress(bar)), "r"(bytes)
               : "memory");
}
// A waiting thread asks to be suspended until the phase completes (up to this long) rather than retrying at
// once: a retry loop takes issue slots from the consumers' epilogue on the same scheduler.
constexpr uint32_t kSuspendNanoseconds = 10000000;
__device__ __forceinline__ void waitPhase(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "LAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1, %2;\n"
      "@!done bra LAB_WAIT;\n}\n" ::"r"(sharedAddress(bar)),
      "r"(parity), "r"(kSuspendNanoseconds)
      : "memory");
}
// Arrives on the barrier at the same shared-memory offset in cluster CTA `rank`.
__device__ __forceinline__ void arriveCluster(uint64_t* bar, uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(sharedAddress(bar)),
      "r"(rank)
      : "memory");
}
__device__ __forceinline__ void clusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t clusterRank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ void loadTile(void* dst, const CUtensorMap* map, uint64_t* bar, int k, int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::
          "r"(sharedAddress(dst)),
      "l"(map), "r"(sharedAddress(bar)), "r"(k), "r"(row)
      : "memory");
}
__device__ __forceinline__ void loadTileMulticast(void* dst, const CUtensorMap* map, uint64_t* bar, int k, int row,
                                                  uint16_t ctaMask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(sharedAddress(dst)),
      "l"(map), "r"(sharedAddress(bar)), "r"(k), "r"(row), "h"(ctaMask)
      : "memory");
}

// Shared-memory matrix descriptor of a K-major operand in 128-byte swizzle atoms (8 rows of 128 bytes,
// 1024 bytes apart).
__device__ __forceinline__ uint64_t swizzledDescriptor(const void* p) {
  return uint64_t((sharedAddress(p) & 0x3FFFF) >> 4) | (uint64_t(16 >> 4) << 16) | (uint64_t(1024 >> 4) << 32) |
         (1ull << 62);
}

// The same for an operand contiguous along m (or n), held as boxes of 64 k-rows x 64 elements (one 128-byte
// swizzle row per k), kBoxBytes apart along m: wgmma's leading byte offset is the next box, its stride byte
// offset the next 8 k-rows.
__device__ __forceinline__ uint64_t mnMajorDescriptor(const void* p) {
  return uint64_t((sharedAddress(p) & 0x3FFFF) >> 4) | (uint64_t(kBoxBytes >> 4) << 16) |
         (uint64_t(1024 >> 4) << 32) | (1ull << 62);
}
// Descriptor units (16 bytes) between the k-steps of 16 in one stage: 32 bytes along a K-major row, 16
// rows of 128 bytes in an MN-major box.
template <bool kMnMajor>
constexpr uint64_t kStepUnits = kMnMajor ? 16 * 128 / 16 : 32 / 16;

__device__ __forceinline__ void wgmmaFence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmmaCommit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}
template <int Registers>
__device__ __forceinline__ void growRegisters() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Registers));
}
template <int Registers>
__device__ __forceinline__ void shrinkRegisters() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Registers));
}

// d[64 x 256 per warpgroup] (+)= A[64 x 16] · B[256 x 16]ᵀ; accumulate = 0 overwrites d. kMnMajor: both
// operands' shared-memory tiles are contiguous along m and n instead of k (wgmma's transpose flags).
template <bool kMnMajor>
__device__ __forceinline__ void wgmma256(float (&d)[128], uint64_t descA, uint64_t descB, uint32_t accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, %131, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(descA), "l"(descB), "r"(accumulate), "n"(int(kMnMajor)));
}

__device__ __forceinline__ void storeBox(const CUtensorMap* map, const void* box, int col, int row) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map),
               "r"(sharedAddress(box)), "r"(col), "r"(row)
               : "memory");
}
// C's box += the staged box, element by element in L2 (the copy engine's reduction).
__device__ __forceinline__ void addBox(const CUtensorMap* map, const void* box, int col, int row) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map),
               "r"(sharedAddress(box)), "r"(col), "r"(row)
               : "memory");
}
__device__ __forceinline__ void warpgroupBarrier(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }
// 2^x as one MUFU op (flushes subnormal results to 0: terms below 2^-126 of a row's max add nothing).
__device__ __forceinline__ float exp2Fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&pair);
}

// The gradient epilogue works on the staged bf16 tile, after stmatrix: the values are then exactly the
// logits the plain product stores, and a short loop over shared memory keeps the code small (unrolled over
// the 128 accumulator registers, the same formula measured 2.5x the product's time: instruction fetch).
// Each row's terms are loaded at its tile's start and staged in shared memory at its end, so the loads'
// latency passes under the tile's products.
struct StagedRow {
  RowGradient terms;
  int32_t active;  // 0: every column < n written as `fill` (ignored, out of range, compaction padding, past m)
  float fill;      // outOfRangeGradient for an out-of-range label, else 0
  int32_t padding[2];
};
static_assert(sizeof(StagedRow) == kStagedRowBytes, "the shared-memory layout reserves kStagedRowBytes per row");

// What thread slot < 64 of a consumer loads for row row0 + slot. Only the compaction map's load holds
// up the others: the rest is read whatever the target (every token has an lse), so all are in flight at once.
struct RowLoads {
  int64_t token = -1;
  int32_t target = kIgnored;
  float lse = 0.0f, g = 0.0f;
};

__device__ __forceinline__ RowLoads loadRow(const TileGradient& gradient, int64_t row0) {
  const int slot = threadIdx.x % 128;
  const RowParams& p = gradient.rows;
  RowLoads row;
  if (slot < 64 && row0 + slot < p.rows) row.token = rowToken(p, row0 + slot);
  if (row.token >= 0) {
    row.target = p.targets[row.token];
    row.lse = gradient.lse[row.token];
    row.g = gradScale(p, row.token);
  }
  return row;
}

// Called once the previous tile's epilogue is past its last barrier (no thread reads `rows` any more).
__device__ __forceinline__ void stageRow(StagedRow* rows, const TileGradient& gradient, const RowLoads& row) {
  const int slot = threadIdx.x % 128;
  if (slot >= 64) return;
  StagedRow staged{};
  if (row.target >= 0) {
    staged.terms = rowGradient(gradient.rows, row.g, row.target, row.lse);
    staged.active = 1;
  } else if (row.target == kOutOfRange) {
    staged.fill = outOfRangeGradient(gradient.rows);
  }
  rows[slot] = staged;
}

// Replaces the consumer's staged 64 x 256 tile of logits (four 64 x 64 boxes in 128-byte swizzle, C's
// columns from col0) by dx, as launchSliceGradient computes it: bias added, logitGradient applied;
// inactive rows become their fill (0, or NaN for an out-of-range label) and columns past n 0. Thread t
// takes 16-byte pieces t, t + 128, ...: a warp reads four whole 128-byte rows at a time (no bank
// conflicts). The softcap and the bias are template arguments, and a piece wholly inside n skips the
// column test: left to the compiler, the conditions were predicated into every element (the softcap's tanh
// computed and discarded), about 90 instructions per element; the rows' lse and scale stay runtime values,
// so the bits are the slice kernel's.
template <bool kSoftcap, bool kBias>
__device__ __forceinline__ void gradientPieces(uint8_t* staging, const StagedRow* rows, const RowParams& p,
                                               int col0) {
  GradientConstants constants = gradientConstants(p);
  if constexpr (kSoftcap) __builtin_assume(constants.loss.softcap > 0.0f);
  else constants.loss.softcap = 0.0f;  // folds transform_logit's test away
  const __nv_bfloat16* bias = kBias ? static_cast<const __nv_bfloat16*>(p.bias) + (p.columnBegin - p.biasBegin) : nullptr;
  const int columns = int(p.columns);
  auto dx = [&](__nv_bfloat16 logit, int column, const RowGradient& row) {
    const float b = kBias ? __bfloat162float(bias[column]) : 0.0f;
    return __float2bfloat16_rn(logitGradient(__bfloat162float(logit) + b, column, row, constants));
  };
#pragma unroll 1
  for (int piece = threadIdx.x % 128; piece < kBoxes * 64 * 8; piece += 128) {
    const int box = piece / (64 * 8), r = (piece / 8) % 64;
    uint4* at = reinterpret_cast<uint4*>(staging + box * kBoxBytes + r * 128 + (piece % 8) * 16);
    const StagedRow& row = rows[r];
    const int column0 = col0 + box * 64 + ((piece % 8) ^ (r % 8)) * 8;  // the swizzle: piece k of row r
    if (!row.active) {
      uint4 filled = make_uint4(0, 0, 0, 0);
      if (row.fill != 0.0f) {  // NaN: an out-of-range label (columns past n stay 0)
        __nv_bfloat16* values = reinterpret_cast<__nv_bfloat16*>(&filled);
#pragma unroll
        for (int e = 0; e < 8; ++e) values[e] = __float2bfloat16_rn(column0 + e < columns ? row.fill : 0.0f);
      }
      *at = filled;
      continue;
    }
    uint4 packed = *at;
    __nv_bfloat16* values = reinterpret_cast<__nv_bfloat16*>(&packed);
    if (column0 + 8 <= columns) {
#pragma unroll
      for (int e = 0; e < 8; ++e) values[e] = dx(values[e], column0 + e, row.terms);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        values[e] = column0 + e < columns ? dx(values[e], column0 + e, row.terms) : __float2bfloat16_rn(0.0f);
    }
    *at = packed;
  }
}

__device__ __forceinline__ void gradientStaged(uint8_t* staging, const StagedRow* rows, const TileGradient& gradient,
                                               int col0) {
  const RowParams& p = gradient.rows;
  if (p.softcap > 0.0f) {
    if (p.bias) gradientPieces<true, true>(staging, rows, p, col0);
    else gradientPieces<true, false>(staging, rows, p, col0);
  } else {
    if (p.bias) gradientPieces<false, true>(staging, rows, p, col0);
    else gradientPieces<false, false>(staging, rows, p, col0);
  }
}

// The numerators epilogue's terms of this thread's two accumulator rows (wgmma m64nNk16: registers i with
// i % 4 < 2 hold row 16·warp + lane / 4 of the consumer's 64, the others the row 8 below), in base 2.
struct NumeratorRows {
  float scale = 0.0f;           // logitScale · log2 e
  float shift[2] = {0.0f, 0.0f};  // shift · log2 e of each row
};

__device__ __forceinline__ NumeratorRows loadNumeratorRows(const TileStatistics& statistics, int64_t row0) {
  constexpr float kLog2e = 1.4426950408889634f;
  const RowParams& p = statistics.rows;
  const int slot = threadIdx.x % 128;
  NumeratorRows rows;
  rows.scale = p.logitScale * kLog2e;
  for (int i = 0; i < 2; ++i) {
    const int64_t r = row0 + (slot / 32) * 16 + (slot % 32) / 4 + 8 * i;
    const int64_t token = r < p.rows ? rowToken(p, r) : -1;
    rows.shift[i] = token >= 0 ? statistics.shift[token] * kLog2e : 0.0f;
  }
  return rows;
}

// u = 2^min(x·scale − shift, cap): `x > cap ? cap : x` keeps a NaN (fminf would drop it).
__device__ __forceinline__ void toNumerators(float (&d)[128], const NumeratorRows& rows) {
#pragma unroll
  for (int i = 0; i < 128; ++i) {
    float x = fmaf(d[i], rows.scale, -rows.shift[(i % 4) / 2]);
    x = x > kNumeratorExponentCap ? kNumeratorExponentCap : x;
    d[i] = exp2Fast(x);
  }
}

// Writes a consumer's 64 x 256 fp32 tile as bf16 at (row0, col0) of C: stmatrix into its staging buffer,
// four 64 x 64 boxes in TMA's 128-byte swizzle (conflict-free), then one thread stores the boxes; the map
// clips what lies past m or n. The stores run on while the consumer starts its next tile; the staging
// buffer is rewritten only after they have read it. Accumulator layout (wgmma m64nNk16): thread (warp w,
// lane l) holds, per 16-column block j, the four 8 x 8 matrices of rows 16w..16w+15 in stmatrix's order.
// With kGradient, the staged logits become dx (gradientStaged) before the store; with kNumerators, the fp32
// sums become their numerators before they are rounded.
template <Epilogue kEpilogue>
__device__ __forceinline__ void storeTileBf16(const CUtensorMap* mapC, uint8_t* staging, float (&d)[128],
                                              int row0, int col0, int barrier, const StagedRow* rows,
                                              const TileGradient& gradient, const NumeratorRows& numerators) {
  const int slot = threadIdx.x % 128, lane = slot % 32, warp = slot / 32;
  if constexpr (kEpilogue == kNumerators) toNumerators(d, numerators);
  if (slot == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  warpgroupBarrier(barrier);
  const int row = warp * 16 + ((lane / 8) % 2) * 8 + lane % 8;  // the row whose address this lane gives
  const uint32_t base = sharedAddress(staging) + row * 128;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int col = j * 16 + (lane / 16) * 8;
    const uint32_t address = base + (col / 64) * kBoxBytes + ((((col % 64) / 8) ^ (row % 8)) << 4);
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(address),
                 "r"(packBf16(d[j * 8 + 0], d[j * 8 + 1])), "r"(packBf16(d[j * 8 + 2], d[j * 8 + 3])),
                 "r"(packBf16(d[j * 8 + 4], d[j * 8 + 5])), "r"(packBf16(d[j * 8 + 6], d[j * 8 + 7]))
                 : "memory");
  }
  if constexpr (kEpilogue == kGradient) {
    warpgroupBarrier(barrier);  // the whole tile staged, and this tile's rows too
    gradientStaged(staging, rows, gradient, col0);
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the staged writes, seen by the copy engine
  warpgroupBarrier(barrier);
  if (slot == 0) {
#pragma unroll
    for (int box = 0; box < kBoxes; ++box) storeBox(mapC, staging + box * kBoxBytes, col0 + box * 64, row0);
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  }
}

// Writes a consumer's 64 x 256 fp32 tile in fp32 at (row0, col0) of C, or adds it to C (kFloatAdd), in two
// halves of 128 columns through the staging buffer: each half is four boxes of 64 rows x 32 floats in TMA's
// 128-byte swizzle, stored (or reduced into C) by one thread before the next half is staged. Accumulator
// layout (wgmma m64nNk16): register i holds row 16·warp + lane / 4 + 8·((i % 4) / 2), column
// 8·(i / 4) + 2·(lane % 4) + i % 2. A warp's two-float stores land on 16 distinct 16-byte slots of
// eight rows: two per slot, the fewest passes for its 256 bytes.
template <Epilogue kEpilogue>
__device__ __forceinline__ void storeTileFloat(const CUtensorMap* mapC, uint8_t* staging, const float (&d)[128],
                                               int row0, int col0, int barrier) {
  const int slot = threadIdx.x % 128, lane = slot % 32, warp = slot / 32;
  const uint32_t base = sharedAddress(staging);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (slot == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    warpgroupBarrier(barrier);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp * 16 + lane / 4 + 8 * h, c = j * 8 + (lane % 4) * 2;  // c: column in the half
        const uint32_t address = base + (c / 32) * kBoxBytes + r * 128 + ((((c % 32) / 4) ^ (r % 8)) << 4) + (c % 4) * 4;
        const int i = half * 64 + j * 4 + h * 2;
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(address), "f"(d[i]), "f"(d[i + 1]) : "memory");
      }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the staged writes, seen by the copy engine
    warpgroupBarrier(barrier);
    if (slot == 0) {
#pragma unroll
      for (int box = 0; box < 4; ++box) {
        const int col = col0 + half * 128 + box * 32;
        if constexpr (kEpilogue == kFloatAdd) addBox(mapC, staging + box * kBoxBytes, col, row0);
        else storeBox(mapC, staging + box * kBoxBytes, col, row0);
      }
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
}

// d += the fp32 addend's elements of this thread's accumulators (kFromFloat), read once, streaming (the
// producer has asked L2 for the tile kAddendLead k-blocks before). A tile wholly inside takes its loads in
// four batches of 16 pairs, each batch's loads issued before its first add (one at a time, each load waited
// for, the epilogue measured 1.2x the product's time); at an edge, rows past m and columns past n are skipped
// (their sums are clipped by the store).
constexpr int kAddendLead = 8;
__device__ __forceinline__ void addAddend(float (&d)[128], const TileAddend& addend, int row0, int col0) {
  const int slot = threadIdx.x % 128, lane = slot % 32, warp = slot / 32;
  if (row0 + 64 <= addend.rows && col0 + kBlockN <= addend.columns) {
    const float* base = addend.data + (row0 + warp * 16 + lane / 4) * addend.ld + col0 + (lane % 4) * 2;
#pragma unroll
    for (int batch = 0; batch < 4; ++batch) {
      float2 v[16];
#pragma unroll
      for (int e = 0; e < 16; ++e) {
        const int i = batch * 32 + e * 2;
        v[e] = __ldcs(reinterpret_cast<const float2*>(base + 8 * ((i % 4) / 2) * addend.ld + (i / 4) * 8));
      }
#pragma unroll
      for (int e = 0; e < 16; ++e) {
        d[batch * 32 + e * 2] += v[e].x;
        d[batch * 32 + e * 2 + 1] += v[e].y;
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 128; i += 2) {
    const int64_t r = row0 + warp * 16 + lane / 4 + 8 * ((i % 4) / 2);
    const int64_t c = col0 + (i / 4) * 8 + (lane % 4) * 2;
    if (r >= addend.rows || c >= addend.columns) continue;
    const float* at = addend.data + r * addend.ld + c;
    if (c + 1 < addend.columns) {
      const float2 v = __ldcs(reinterpret_cast<const float2*>(at));
      d[i] += v.x;
      d[i + 1] += v.y;
    } else {
      d[i] += __ldcs(at);
    }
  }
}

// Row statistics of a consumer's staged tile: for each of its 64 rows, (max, Σ exp(z − max)) over the
// tile's columns below n, z as the row kernel computes it from the stored bf16 logit (bias, then
// transform_logit), written as a float2 at the row's block `column` of the partials. They run in
// kStatisticsSteps steps under the consumer's next tile's first k-blocks, each step after that k-block's
// products are issued and before they are waited for (run after the store instead, they cost 3–13% of the
// product while the tensor cores waited: NOTES.md v26). Step 0 takes each row's max, each later step the
// sum over kStepPieces of each thread's pieces, the last one writes the float2. A step must take less time
// than a k-block's products, or the tensor cores wait for the next issue: the sum is bound by the ex2
// unit, two steps of it cost 4% of the tensor pipe's time at Llama-3 (v28), so it runs in eight. The
// staging buffer holds the tile until the next epilogue restages it, which comes after every step (a tile
// of fewer k-blocks runs the remaining steps before its epilogue, the last tile after the loop).
// Threads 2r and 2r + 1 take row r's first and second 128 columns, 16 pieces of 8 logits each, combined by
// one shuffle. A whole tile without a transform takes the max two logits per instruction (max.bf16x2) and
// the sum in four instructions per logit (unpack, fma, ex2, add); the last column block and transformed
// logits go element by element.
constexpr int kSumSteps = 8, kStepPieces = 16 / kSumSteps;
constexpr int kStatisticsSteps = 1 + kSumSteps;
struct PendingStatistics {
  int row0 = -1;  // < 0: no tile pending
  int col0 = 0, column = 0;
  float max = 0.0f, sum = 0.0f;  // this thread's, as far as the steps have come
};

__device__ __forceinline__ uint4 loadShared(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(address));
  return v;
}
__device__ __forceinline__ uint32_t maxBf16x2(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));  // a NaN loses to a number, as in fmaxf
  return r;
}
__device__ __forceinline__ float lowBf16(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float highBf16(uint32_t word) { return __uint_as_float(word & 0xffff0000u); }

template <bool kTransform, bool kNumerator>
__device__ __forceinline__ void statisticsStep(const uint8_t* staging, const TileStatistics& statistics,
                                               PendingStatistics& tile, int step) {
  constexpr float kLog2e = 1.4426950408889634f;
  const int slot = threadIdx.x % 128, r = slot / 2, half = slot % 2;
  const RowParams& p = statistics.rows;
  const int columns = int(p.columns), col0 = tile.col0;
  const uint32_t rowAddress = sharedAddress(staging) + r * 128;
  // Logical piece k of this thread's half: 16 bytes of the row's 64-column box, swizzled; its first column.
  auto logical = [&](int k) { return half * 16 + ((k + 4 * half) & 15); };
  auto address = [&](int k) {
    return rowAddress + (logical(k) >> 3) * kBoxBytes + (((logical(k) & 7) ^ (r & 7)) << 4);
  };
  const bool fast = !kTransform && col0 + kBlockN <= columns;
  // The element path: any transform, columns past n skipped.
  const detail::LossParams<float> loss = lossParams(p);
  const __nv_bfloat16* bias = kTransform && p.bias ? static_cast<const __nv_bfloat16*>(p.bias) + (p.columnBegin - p.biasBegin) : nullptr;
  auto logit = [&](const uint4& packed, int e, int c) {
    const uint32_t word = e < 4 ? (e < 2 ? packed.x : packed.y) : (e < 6 ? packed.z : packed.w);
    float z = e % 2 ? highBf16(word) : lowBf16(word);
    if constexpr (kTransform) z = transform_logit(z + (bias ? __bfloat162float(bias[c]) : 0.0f), loss);
    return z;
  };
  // The fast path reads this half's 16 pieces in any order (max and sum do not care): piece k of box
  // 2·half + k / 8 at 16-byte slot (k % 8) ^ (r % 8) ^ 4·half, one XOR with a constant per load
  // (rowAddress is 128-byte aligned), the slots of a quarter warp's 8 lanes all different.
  const uint32_t halfAddress = (rowAddress + 2 * half * kBoxBytes) | ((((r & 7) ^ (4 * half))) << 4);
  auto fastAddress = [&](int k) { return (halfAddress + (k / 8) * kBoxBytes) ^ uint32_t((k % 8) << 4); };
  if (step == 0) {
    float m = -INFINITY;
    if (fast) {
      uint32_t pair = 0xff80ff80u;  // two bf16 −inf
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        const uint4 v = loadShared(fastAddress(k));
        pair = maxBf16x2(maxBf16x2(pair, v.x), maxBf16x2(v.y, maxBf16x2(v.z, v.w)));
      }
      m = fmaxf(lowBf16(pair), highBf16(pair));
    } else {
#pragma unroll 1
      for (int k = 0; k < 16; ++k) {
        const uint4 packed = loadShared(address(k));
        const int first = col0 + logical(k) * 8;
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (first + e < columns) m = fmaxf(m, logit(packed, e, first + e));
      }
    }
    tile.max = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));  // finite: column col0 is below n
    tile.sum = 0.0f;
    return;
  }
  const float scaled = tile.max * kLog2e;
  const int k0 = (step - 1) * kStepPieces;
  float low = 0.0f, high = 0.0f;
  // A logit's term of the sum; a numerator is its own.
  auto term = [&](float z) { return kNumerator ? z : exp2Fast(fmaf(z, kLog2e, -scaled)); };
  if (fast) {
#pragma unroll
    for (int k = k0; k < k0 + kStepPieces; ++k) {
      const uint4 v = loadShared(fastAddress(k));
      for (uint32_t word : {v.x, v.y, v.z, v.w}) {
        low += term(lowBf16(word));
        high += term(highBf16(word));
      }
    }
  } else {
#pragma unroll 1
    for (int k = k0; k < k0 + kStepPieces; ++k) {
      const uint4 packed = loadShared(address(k));
      const int first = col0 + logical(k) * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (first + e < columns) low += term(logit(packed, e, first + e));
    }
  }
  tile.sum += low + high;
  if (step < kStatisticsSteps - 1) return;
  const float s = tile.sum + __shfl_xor_sync(0xffffffffu, tile.sum, 1);
  if (half == 0 && tile.row0 + r < p.rows)
    *reinterpret_cast<float2*>(statistics.partials + int64_t(tile.row0 + r) * statistics.stride +
                               int64_t(tile.column) * 8) = make_float2(tile.max, s);
}

// One step of the pending tile's statistics (every thread of the consumer warpgroup calls it alike).
__device__ __forceinline__ void statisticsStep(const uint8_t* staging, const TileStatistics& statistics,
                                               PendingStatistics& tile, int step) {
  const RowParams& p = statistics.rows;
  if (statistics.shift) statisticsStep<false, true>(staging, statistics, tile, step);  // scale applied before
  else if (p.bias || p.softcap > 0.0f || p.logitScale != 1.0f) statisticsStep<true, false>(staging, statistics, tile, step);
  else statisticsStep<false, false>(staging, statistics, tile, step);
}

template <Epilogue kEpilogue, bool kMnMajor>
__global__ void __launch_bounds__(kThreads, 1) __cluster_dims__(kClusterM, 1, 1)
    tileGemmKernel(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                   const __grid_constant__ CUtensorMap mapC, Schedule schedule, int kBlocks,
                   const __grid_constant__ TileGradient gradient, const __grid_constant__ TileStatistics statistics,
                   const __grid_constant__ TileAddend addend, const __grid_constant__ CUtensorMap mapAddend) {
  extern __shared__ uint8_t rawShared[];
  uint8_t* shared = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(rawShared) + 1023) & ~uintptr_t(1023));
  uint8_t* stageA = shared;
  uint8_t* stageB = shared + kStages * kStageBytesA;
  uint8_t* staging = stageB + kStages * kStageBytesB;  // [2][kBoxes boxes], one per consumer
  StagedRow* stagedRows = reinterpret_cast<StagedRow*>(staging + 2 * kBoxes * kBoxBytes);  // [2][64]
  uint64_t* full = reinterpret_cast<uint64_t*>(stagedRows + 2 * 64);
  uint64_t* empty = full + kStages;
  const uint32_t rank = clusterRank();
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrierInit(&full[s], 1);                    // the producer's arrive, plus the copies' bytes
      barrierInit(&empty[s], 2 * kClusterM);       // each consumer warpgroup of each CTA of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  clusterSync();  // barriers initialised before any CTA of the cluster copies or arrives

  const int clusters = gridDim.x / kClusterM, cluster = blockIdx.x / kClusterM;
  if (warpgroup == 0) {
    shrinkRegisters<40>();
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      int pair, column;
      for (int t = cluster; schedule.tile(t, pair, column); t += clusters) {
        const int row = (pair * kClusterM + int(rank)) * kBlockM, col = column * kBlockN;
        for (int kb = 0; kb < kBlocks; ++kb) {
          if constexpr (kEpilogue == kFromFloat)
            if (kb == max(0, kBlocks - kAddendLead))  // the tile's addend into L2 ahead of its epilogue
              asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(&mapAddend),
                           "r"(col), "r"(row)
                           : "memory");
          waitPhase(&empty[stage], phase ^ 1);  // first pass: the slot's preceding phase counts as done
          expectBytes(&full[stage], kStageBytesA + kStageBytesB);
          const uint16_t both = uint16_t((1u << kClusterM) - 1);
          if constexpr (kMnMajor) {  // boxes of 64 k-rows x 64 elements along m (A) and n (B)
#pragma unroll
            for (int box = 0; box < kBlockM / 64; ++box)
              loadTile(stageA + stage * kStageBytesA + box * kBoxBytes, &mapA, &full[stage], row + box * 64, kb * kBlockK);
            if (rank == 0)
#pragma unroll
              for (int box = 0; box < kBlockN / 64; ++box)
                loadTileMulticast(stageB + stage * kStageBytesB + box * kBoxBytes, &mapB, &full[stage], col + box * 64,
                                  kb * kBlockK, both);
          } else {
            loadTile(stageA + stage * kStageBytesA, &mapA, &full[stage], kb * kBlockK, row);
            if (rank == 0)
              loadTileMulticast(stageB + stage * kStageBytesB, &mapB, &full[stage], kb * kBlockK, col, both);
          }
          if (++stage == kStages) { stage = 0; phase ^= 1; }
        }
      }
    }
  } else {
    growRegisters<232>();
    const int consumer = warpgroup - 1;
    const int slot = threadIdx.x % 128;  // thread `slot` < kClusterM frees stages in cluster CTA `slot`
    float d[128];
    int stage = 0;
    uint32_t phase = 0;
    int pair, column;
    StagedRow* rows = stagedRows + consumer * 64;
    uint8_t* ownStaging = staging + consumer * kBoxes * kBoxBytes;
    PendingStatistics pending;  // the statistics epilogue's previous tile
    for (int t = cluster; schedule.tile(t, pair, column); t += clusters) {
      const int row0 = (pair * kClusterM + int(rank)) * kBlockM + consumer * 64;
      RowLoads loads;
      if constexpr (kEpilogue == kGradient) loads = loadRow(gradient, row0);
      NumeratorRows numerators;
      if constexpr (kEpilogue == kNumerators) numerators = loadNumeratorRows(statistics, row0);
      int stepsDone = 0;
      for (int kb = 0; kb < kBlocks; ++kb) {
        waitPhase(&full[stage], phase);
        const uint8_t* ownA = stageA + stage * kStageBytesA + consumer * 64 * 128;  // K-major rows or the MN box
        const uint64_t descA = kMnMajor ? mnMajorDescriptor(ownA) : swizzledDescriptor(ownA);
        const uint64_t descB = kMnMajor ? mnMajorDescriptor(stageB + stage * kStageBytesB)
                                        : swizzledDescriptor(stageB + stage * kStageBytesB);
        wgmmaFence();
#pragma unroll
        for (int k = 0; k < kBlockK / 16; ++k)
          wgmma256<kMnMajor>(d, descA + kStepUnits<kMnMajor> * k, descB + kStepUnits<kMnMajor> * k,
                             uint32_t(kb > 0 || k > 0));
        wgmmaCommit();
        if constexpr (hasStatistics(kEpilogue))
          if (pending.row0 >= 0 && stepsDone < kStatisticsSteps)
            statisticsStep(ownStaging, statistics, pending, stepsDone++);  // while the products run
        // Waiting for this stage's products before freeing it keeps two stages in flight for the producer
        // (keeping one product pending and freeing the previous stage measured the same, NOTES.md v21).
        wgmmaWait<0>();
        if (slot < kClusterM) arriveCluster(&empty[stage], uint32_t(slot));
        if (++stage == kStages) { stage = 0; phase ^= 1; }
      }
      if constexpr (hasStatistics(kEpilogue))
        if (pending.row0 >= 0)
          while (stepsDone < kStatisticsSteps) statisticsStep(ownStaging, statistics, pending, stepsDone++);
      if constexpr (kEpilogue == kGradient) stageRow(rows, gradient, loads);
      if constexpr (kEpilogue == kFloat || kEpilogue == kFloatAdd) {
        storeTileFloat<kEpilogue>(&mapC, ownStaging, d, row0, column * kBlockN, 1 + consumer);
      } else {
        if constexpr (kEpilogue == kFromFloat) addAddend(d, addend, row0, column * kBlockN);
        storeTileBf16<kEpilogue>(&mapC, ownStaging, d, row0, column * kBlockN, 1 + consumer, rows, gradient,
                                 numerators);
      }
      if constexpr (hasStatistics(kEpilogue)) pending = PendingStatistics{row0, column * kBlockN, column};
    }
    if constexpr (hasStatistics(kEpilogue))
      if (pending.row0 >= 0)
        for (int step = 0; step < kStatisticsSteps; ++step) statisticsStep(ownStaging, statistics, pending, step);
    if (slot == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
  clusterSync();  // no CTA leaves while its partner may still copy into it or arrive on its barriers
}

#else  // host pass, or a device pass without sm_90a features: never launched there

template <Epilogue kEpilogue, bool kMnMajor>
__global__ void __launch_bounds__(kThreads, 1) __cluster_dims__(kClusterM, 1, 1)
    tileGemmKernel(const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap,
                   const __grid_constant__ CUtensorMap, Schedule, int, const __grid_constant__ TileGradient,
                   const __grid_constant__ TileStatistics, const __grid_constant__ TileAddend,
                   const __grid_constant__ CUtensorMap) {
#if defined(__CUDA_ARCH__)
  __trap();
#endif
}

#endif

PFN_cuTensorMapEncodeTiled_v12000 encodeTiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 function = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    LMFUSE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault,
                                                       &found));
    if (found != cudaDriverEntryPointSuccess || !entry)
      LMFUSE_FAIL("CUDA backend: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }();
  return function;
}

// A 2-D tensor map over a row-major [rows, columns] bf16 (or fp32) matrix, boxes of [boxRows, one 128-byte
// row] in 128-byte swizzle; loads past the edges fill zeros, stores past them are dropped.
CUtensorMap matrixMap(const void* base, int64_t rows, int64_t columns, int64_t ld, int boxRows, bool fp32 = false) {
  CUtensorMap map{};
  const int elementBytes = fp32 ? 4 : 2;
  const cuuint64_t dims[2] = {cuuint64_t(columns), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(ld) * elementBytes};
  const cuuint32_t box[2] = {cuuint32_t(128 / elementBytes), cuuint32_t(boxRows)};
  const cuuint32_t elementStrides[2] = {1, 1};
  const CUresult result = encodeTiled()(&map, fp32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                        2, const_cast<void*>(base), dims,
                                        strides, box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    LMFUSE_FAIL("CUDA backend: cuTensorMapEncodeTiled failed (" << int(result) << ") for a [" << rows << ", "
                                                                 << columns << "] matrix, ld " << ld);
  return map;
}

// The addend's map for the producer's L2 prefetch: one box per 128 x 256 CTA tile (no swizzle: nothing lands
// in shared memory).
CUtensorMap addendPrefetchMap(const TileAddend& addend) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cuuint64_t(addend.columns), cuuint64_t(addend.rows)};
  const cuuint64_t strides[1] = {cuuint64_t(addend.ld) * 4};
  const cuuint32_t box[2] = {cuuint32_t(kBlockN), cuuint32_t(kBlockM)};
  const cuuint32_t elementStrides[2] = {1, 1};
  const CUresult result = encodeTiled()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(addend.data), dims,
                                        strides, box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                        CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    LMFUSE_FAIL("CUDA backend: cuTensorMapEncodeTiled failed (" << int(result) << ") for the weight product's ["
                                                                 << addend.rows << ", " << addend.columns << "] addend");
  return map;
}

// Per device: the kernel's shared-memory limit set, and how many of its clusters fit at once (a GPC's SMs
// may not pair up evenly); 0 where the device cannot run it.
int residentClusters(int device) {
  static std::mutex mutex;
  static std::map<int, int> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = known.find(device);
  if (found != known.end()) return found->second;
  int& clusters = known[device];
  cudaDeviceProp properties{};
  LMFUSE_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  if (properties.major != 9 || properties.minor != 0) return clusters = 0;
  int current = 0;
  LMFUSE_CUDA_CHECK(cudaGetDevice(&current));
  LMFUSE_CUDA_CHECK(cudaSetDevice(device));
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kClusterM, 1, 1);
  config.blockDim = dim3(kThreads, 1, 1);
  config.dynamicSmemBytes = kSharedBytes;
  clusters = INT_MAX;
  for (auto kernel : {tileGemmKernel<kPlain, false>, tileGemmKernel<kGradient, false>,
                      tileGemmKernel<kStatistics, false>, tileGemmKernel<kNumerators, false>,
                      tileGemmKernel<kPlain, true>, tileGemmKernel<kFloat, true>, tileGemmKernel<kFloatAdd, true>,
                      tileGemmKernel<kFromFloat, true>}) {
    int fit = 0;
    LMFUSE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes));
    LMFUSE_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&fit, kernel, &config));
    clusters = std::min(clusters, fit);
  }
  LMFUSE_CUDA_CHECK(cudaSetDevice(current));
  encodeTiled();  // the driver's entry point, looked up now rather than during a capture
  return clusters;
}

}  // namespace

bool tileGemmAvailable(int device) { return residentClusters(device) > 0; }

double tileGemmFill(int device, int64_t m, int64_t n) {
  const int64_t ctas = int64_t(residentClusters(device)) * kClusterM;
  if (ctas == 0 || m <= 0 || n <= 0) return 0.0;
  const int64_t tiles = ((m + kBlockM - 1) / kBlockM) * ((n + kBlockN - 1) / kBlockN);
  const int64_t waves = (tiles + ctas - 1) / ctas;
  return double(m) * double(n) / (double(waves * ctas) * kBlockM * kBlockN);
}

void tileGemm(const TileGemmShape& s, const void* a, const void* b, void* c, cudaStream_t stream,
              const TileGradient* gradient, const TileStatistics* statistics) {
  if (s.m == 0 || s.n == 0) return;
  if (gradient && (gradient->rows.rows != s.m || gradient->rows.columns != s.n || s.k == 0))
    LMFUSE_FAIL("CUDA backend: the tile product's gradient epilogue needs rows = m, columns = n and k > 0");
  if (statistics && (gradient || statistics->rows.rows != s.m || statistics->rows.columns != s.n || s.k == 0 ||
                     reinterpret_cast<uintptr_t>(statistics->partials) % 8 != 0 || statistics->stride % 8 != 0))
    LMFUSE_FAIL("CUDA backend: the tile product's statistics epilogue needs no gradient epilogue, rows = m, "
                "columns = n, k > 0 and 8-byte aligned partials");
  if (statistics && statistics->shift && (statistics->rows.bias || statistics->rows.softcap > 0.0f))
    LMFUSE_FAIL("CUDA backend: the tile product's numerators epilogue takes no bias and no softcap");
  if (s.k == 0) {
    LMFUSE_CUDA_CHECK(cudaMemset2DAsync(c, size_t(s.ldc) * 2, 0, size_t(s.n) * 2, size_t(s.m), stream));
    return;
  }
  int device = 0;
  LMFUSE_CUDA_CHECK(cudaGetDevice(&device));
  const CUtensorMap mapA = matrixMap(a, s.m, s.k, s.lda, kBlockM);
  const CUtensorMap mapB = matrixMap(b, s.n, s.k, s.ldb, kBlockN);
  const CUtensorMap mapC = matrixMap(c, s.m, s.n, s.ldc, 64);
  Schedule schedule{int((s.m + 2 * kBlockM - 1) / (2 * kBlockM)), int((s.n + kBlockN - 1) / kBlockN)};
  const int kBlocks = int((s.k + kBlockK - 1) / kBlockK);
  const int resident = residentClusters(device);
  if (resident == 0) LMFUSE_FAIL("CUDA backend: the tile product needs a device of compute capability 9.0");
  const int clusters = std::max(1, std::min(schedule.pairs * schedule.columns, resident));
  auto* kernel = gradient                             ? tileGemmKernel<kGradient, false>
                 : statistics && statistics->shift ? tileGemmKernel<kNumerators, false>
                 : statistics                       ? tileGemmKernel<kStatistics, false>
                                                    : tileGemmKernel<kPlain, false>;
  kernel<<<clusters * kClusterM, kThreads, kSharedBytes, stream>>>(mapA, mapB, mapC, schedule, kBlocks,
                                                                   gradient ? *gradient : TileGradient{},
                                                                   statistics ? *statistics : TileStatistics{},
                                                                   TileAddend{}, CUtensorMap{});
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void tileGemmWeight(const TileGemmShape& s, const void* a, const void* b, void* c, TileSink sink,
                    const TileAddend* addend, cudaStream_t stream) {
  if (s.m == 0 || s.n == 0) return;
  if ((sink == TileSink::Bf16FromFloat) != (addend != nullptr))
    LMFUSE_FAIL("CUDA backend: the weight product takes an fp32 addend exactly when its sink is Bf16FromFloat");
  if (addend && (addend->rows != s.m || addend->columns != s.n || addend->ld % 8 != 0 ||
                 reinterpret_cast<uintptr_t>(addend->data) % 16 != 0 || s.k == 0))
    LMFUSE_FAIL("CUDA backend: the weight product's addend needs rows = m, columns = n, ld a multiple of 8, "
                "16-byte alignment and k > 0");
  const bool fp32 = sink == TileSink::Float || sink == TileSink::FloatAdd;
  if (s.k == 0) {
    if (sink != TileSink::FloatAdd)
      LMFUSE_CUDA_CHECK(cudaMemset2DAsync(c, size_t(s.ldc) * (fp32 ? 4 : 2), 0, size_t(s.n) * (fp32 ? 4 : 2),
                                          size_t(s.m), stream));
    return;
  }
  int device = 0;
  LMFUSE_CUDA_CHECK(cudaGetDevice(&device));
  const int resident = residentClusters(device);
  if (resident == 0) LMFUSE_FAIL("CUDA backend: the tile product needs a device of compute capability 9.0");
  const CUtensorMap mapA = matrixMap(a, s.k, s.m, s.lda, kBlockK);
  const CUtensorMap mapB = matrixMap(b, s.k, s.n, s.ldb, kBlockK);
  const CUtensorMap mapC = matrixMap(c, s.m, s.n, s.ldc, 64, fp32);
  Schedule schedule{int((s.m + 2 * kBlockM - 1) / (2 * kBlockM)), int((s.n + kBlockN - 1) / kBlockN)};
  const int kBlocks = int((s.k + kBlockK - 1) / kBlockK);
  const int clusters = std::max(1, std::min(schedule.pairs * schedule.columns, resident));
  auto* kernel = sink == TileSink::Float           ? tileGemmKernel<kFloat, true>
                 : sink == TileSink::FloatAdd      ? tileGemmKernel<kFloatAdd, true>
                 : sink == TileSink::Bf16FromFloat ? tileGemmKernel<kFromFloat, true>
                                                   : tileGemmKernel<kPlain, true>;
  const CUtensorMap mapAddend = addend ? addendPrefetchMap(*addend) : CUtensorMap{};
  kernel<<<clusters * kClusterM, kThreads, kSharedBytes, stream>>>(mapA, mapB, mapC, schedule, kBlocks, TileGradient{},
                                                                   TileStatistics{}, addend ? *addend : TileAddend{},
                                                                   mapAddend);
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lmfuse::detail::cuda

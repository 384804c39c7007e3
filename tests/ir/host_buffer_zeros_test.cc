// HostBuffer::Zeros: every element of large buffers (whose pages are prefaulted in parallel before
// the zeroing) and small ones is +0.0, whatever the dtype, the size's page alignment, the thread
// cap, or what the allocator's memory held before; the shape and dtype are kept.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/host_buffer.h"
#include "ir/type.h"

namespace tilesearch::ir {
namespace {

constexpr int64_t kLarge = int64_t{1} << 22;  // above Zeros' 2^20-element parallel threshold

// The number of elements of `b` whose bits differ from +0.0 (so -0.0 and NaN both count).
int64_t NonZeroBits(const HostBuffer& b) {
  int64_t bad = 0;
  for (double v : b.data) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    bad += bits != 0;
  }
  return bad;
}

TEST(HostBufferZerosTest, LargeBuffersOfEveryDtypeAreAllPositiveZero) {
  for (ScalarType dtype : {ScalarType::kFloat32, ScalarType::kFloat16, ScalarType::kBFloat16,
                           ScalarType::kInt32, ScalarType::kInt64, ScalarType::kBool}) {
    SCOPED_TRACE(TypeName(dtype));
    const HostBuffer b = HostBuffer::Zeros(dtype, {kLarge});
    EXPECT_EQ(b.dtype, dtype);
    ASSERT_EQ(b.data.size(), static_cast<size_t>(kLarge));
    EXPECT_EQ(NonZeroBits(b), 0);
  }
}

TEST(HostBufferZerosTest, ReusedDirtyMemoryIsZeroedToo) {
  // Fill and free buffers of the same size first, so the allocator may hand back pages that hold
  // NaNs (a freed heap block) rather than fresh zero pages from the kernel.
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    {
      std::vector<double> dirty(static_cast<size_t>(kLarge),
                                std::numeric_limits<double>::quiet_NaN());
      asm volatile("" : : "r"(dirty.data()) : "memory");  // keeps the NaN fill from being elided
    }
    const HostBuffer b = HostBuffer::Zeros(ScalarType::kFloat32, {kLarge});
    ASSERT_EQ(b.data.size(), static_cast<size_t>(kLarge));
    EXPECT_EQ(NonZeroBits(b), 0);
  }
}

TEST(HostBufferZerosTest, MultiDimensionalShapeAndUnalignedSizesAreKept) {
  // 2 · 3 · (2^19 + 7) elements: above the threshold and not a whole number of pages.
  const std::vector<int64_t> shape = {2, 3, (int64_t{1} << 19) + 7};
  const HostBuffer b = HostBuffer::Zeros(ScalarType::kInt64, shape);
  EXPECT_EQ(b.dtype, ScalarType::kInt64);
  EXPECT_EQ(b.shape, shape);
  EXPECT_EQ(b.NumElements(), int64_t{6} * ((int64_t{1} << 19) + 7));
  ASSERT_EQ(b.data.size(), static_cast<size_t>(6 * ((1 << 19) + 7)));
  EXPECT_EQ(NonZeroBits(b), 0);
  EXPECT_EQ(b.at({1, 2, (int64_t{1} << 19) + 6}), 0.0);  // the last element
}

TEST(HostBufferZerosTest, SizesAroundTheThresholdAreZero) {
  for (int64_t n : {(int64_t{1} << 20) - 1, int64_t{1} << 20, (int64_t{1} << 20) + 1,
                    (int64_t{1} << 18) * 5 + 3}) {
    SCOPED_TRACE(n);
    const HostBuffer b = HostBuffer::Zeros(ScalarType::kFloat16, {n});
    ASSERT_EQ(b.data.size(), static_cast<size_t>(n));
    EXPECT_EQ(NonZeroBits(b), 0);
  }
}

TEST(HostBufferZerosTest, OneThreadCapGivesTheSameZeros) {
  // TILESEARCH_THREADS=1 caps the prefault to the calling thread.
  const char* old = std::getenv("TILESEARCH_THREADS");
  const std::string saved = old == nullptr ? "" : old;
  ASSERT_EQ(::setenv("TILESEARCH_THREADS", "1", 1), 0);
  const HostBuffer b = HostBuffer::Zeros(ScalarType::kFloat32, {kLarge + 5});
  if (old == nullptr) {
    ::unsetenv("TILESEARCH_THREADS");
  } else {
    ::setenv("TILESEARCH_THREADS", saved.c_str(), 1);
  }
  ASSERT_EQ(b.data.size(), static_cast<size_t>(kLarge + 5));
  EXPECT_EQ(NonZeroBits(b), 0);
}

TEST(HostBufferZerosTest, SmallEmptyAndScalarShapes) {
  const HostBuffer small = HostBuffer::Zeros(ScalarType::kBFloat16, {3, 4});
  EXPECT_EQ(small.shape, (std::vector<int64_t>{3, 4}));
  ASSERT_EQ(small.data.size(), 12u);
  EXPECT_EQ(NonZeroBits(small), 0);

  const HostBuffer empty = HostBuffer::Zeros(ScalarType::kFloat32, {4, 0, 1 << 22});
  EXPECT_EQ(empty.NumElements(), 0);
  EXPECT_TRUE(empty.data.empty());

  const HostBuffer scalar = HostBuffer::Zeros(ScalarType::kInt32, {});
  EXPECT_TRUE(scalar.shape.empty());
  ASSERT_EQ(scalar.data.size(), 1u);
  EXPECT_EQ(NonZeroBits(scalar), 0);
}

TEST(HostBufferZerosDeathTest, NegativeExtentIsAnInternalError) {
  EXPECT_DEATH(HostBuffer::Zeros(ScalarType::kFloat32, {4, -1}), "negative extent");
}

}  // namespace
}  // namespace tilesearch::ir

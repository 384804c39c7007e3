// The arguments of cuTensorMapEncodeTiled computed from a tensor map spec, against values worked
// out by hand from the CUDA driver API's conventions (dimensions innermost first, byte strides of
// the outer dimensions of a dense row-major tensor), and the specs it refuses.
#include "runtime/tensor_map.h"

#include <cstdint>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::Ok;
using ::tilesearch::testing::StatusIs;

TEST(TensorMapEncodeArgsTest, Bf16MatrixWith128ByteSwizzle) {
  // A [4096, 4096] bf16 operand in boxes of 128 rows × 64 columns: a row is 4096 × 2 = 8192 bytes,
  // a box row 64 × 2 = 128 bytes (the whole 128-byte swizzle span).
  const TensorMapEncoding e =
      Ok(TensorMapEncodeArgs({"A", {4096, 4096}, {128, 64}, 128}, ir::ScalarType::kBFloat16));
  EXPECT_EQ(e.data_type, 9);  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
  EXPECT_EQ(e.rank, 2u);
  EXPECT_THAT(e.global_dim, ElementsAre(4096, 4096));
  EXPECT_THAT(e.global_strides, ElementsAre(8192));
  EXPECT_THAT(e.box_dim, ElementsAre(64, 128));
  EXPECT_THAT(e.element_strides, ElementsAre(1, 1));
  EXPECT_EQ(e.interleave, 0);    // NONE
  EXPECT_EQ(e.swizzle, 3);       // CU_TENSOR_MAP_SWIZZLE_128B
  EXPECT_EQ(e.l2_promotion, 2);  // CU_TENSOR_MAP_L2_PROMOTION_L2_128B
  EXPECT_EQ(e.oob_fill, 0);      // NONE: zeros
}

TEST(TensorMapEncodeArgsTest, Float32Rank3ReversesDimsAndBox) {
  // [8, 100, 96] float32: the innermost row is 96 × 4 = 384 bytes, a [100, 96] plane 38400 bytes;
  // boxes of 1 × 64 × 32 (32 × 4 = 128 inner bytes).
  const TensorMapEncoding e =
      Ok(TensorMapEncodeArgs({"X", {8, 100, 96}, {1, 64, 32}, 128}, ir::ScalarType::kFloat32));
  EXPECT_EQ(e.data_type, 7);  // CU_TENSOR_MAP_DATA_TYPE_FLOAT32
  EXPECT_EQ(e.rank, 3u);
  EXPECT_THAT(e.global_dim, ElementsAre(96, 100, 8));
  EXPECT_THAT(e.global_strides, ElementsAre(384, 38400));
  EXPECT_THAT(e.box_dim, ElementsAre(32, 64, 1));
  EXPECT_THAT(e.element_strides, ElementsAre(1, 1, 1));
  EXPECT_EQ(e.swizzle, 3);
}

TEST(TensorMapEncodeArgsTest, DataTypesAndSwizzlesByValue) {
  // [64, 64] with a 16-element inner box: 32 bytes of float16, 64 of int32, 128 of int64.
  struct Case {
    ir::ScalarType dtype;
    int64_t swizzle;
    int data_type;
    int swizzle_enum;
  };
  for (const Case& c :
       {Case{ir::ScalarType::kFloat16, 32, 6, 1}, Case{ir::ScalarType::kInt32, 64, 3, 2},
        Case{ir::ScalarType::kInt64, 128, 5, 3}, Case{ir::ScalarType::kInt64, 0, 5, 0}}) {
    const TensorMapEncoding e =
        Ok(TensorMapEncodeArgs({"A", {64, 64}, {8, 16}, c.swizzle}, c.dtype));
    EXPECT_EQ(e.data_type, c.data_type) << ir::TypeName(c.dtype);
    EXPECT_EQ(e.swizzle, c.swizzle_enum) << c.swizzle;
  }
}

TEST(TensorMapEncodeArgsTest, RankOneHasNoStrides) {
  const TensorMapEncoding e =
      Ok(TensorMapEncodeArgs({"v", {1000}, {32}, 0}, ir::ScalarType::kFloat32));
  EXPECT_EQ(e.rank, 1u);
  EXPECT_THAT(e.global_dim, ElementsAre(1000));
  EXPECT_TRUE(e.global_strides.empty());
  EXPECT_THAT(e.box_dim, ElementsAre(32));
}

TEST(TensorMapEncodeArgsTest, RefusesWhatTheDriverCannotEncode) {
  EXPECT_THAT(TensorMapEncodeArgs({"M", {64, 64}, {8, 16}, 0}, ir::ScalarType::kBool),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor map of 'M': element type bool has no CUDA")));
  // 128 bf16 are 256 bytes per box row: more than one 128-byte swizzle span.
  EXPECT_THAT(
      TensorMapEncodeArgs({"A", {4096, 4096}, {128, 128}, 128}, ir::ScalarType::kBFloat16),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceed the 128-byte swizzle")));
  EXPECT_THAT(TensorMapEncodeArgs({"A", {64, 64}, {8, 16}, 16}, ir::ScalarType::kFloat32),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("swizzle 16")));
  // Rows of 3 float32 are 12 bytes: not a multiple of 16.
  EXPECT_THAT(TensorMapEncodeArgs({"A", {100, 3}, {8, 4}, 0}, ir::ScalarType::kFloat32),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stride 12 bytes")));
  EXPECT_THAT(TensorMapEncodeArgs({"A", {64, 64}, {8}, 0}, ir::ScalarType::kFloat32),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("box rank 1")));
}

}  // namespace
}  // namespace tilesearch::runtime

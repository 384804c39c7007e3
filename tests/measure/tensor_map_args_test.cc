// Which parameter a tensor-map kernel argument is encoded over, and the maps refused before any
// driver call (encoding and binding themselves need a device: cuda_runtime_test).
#include "measure/tensor_map_args.h"

#include <string>
#include <utility>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/measure/cuda_test_util.h"

namespace tilesearch::measure {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::Ok;
using ::tilesearch::testing::StatusIs;
using Kind = codegen::KernelArg::Kind;

using testing_util::KernelArgOf;

codegen::KernelArg Map(const std::string& name, ir::TensorMapSpec spec) {
  codegen::KernelArg a =
      KernelArgOf(name, ir::ScalarType::kInt64, {ir::kTensorMapWords}, Kind::kTensorMap);
  a.buffer.tensor_map = std::move(spec);
  return a;
}

// A bf16 matmul's arguments: A [256, 128], B [128, 192], C, a scratch buffer, B's and A's maps.
std::vector<codegen::KernelArg> MatmulArgs() {
  return {KernelArgOf("A", ir::ScalarType::kBFloat16, {256, 128}, Kind::kInput),
          KernelArgOf("B", ir::ScalarType::kBFloat16, {128, 192}, Kind::kInput),
          KernelArgOf("C", ir::ScalarType::kFloat32, {256, 192}, Kind::kOutput),
          KernelArgOf("T", ir::ScalarType::kFloat32, {64}, Kind::kScratch),
          Map("B.tmap", {"B", {128, 192}, {64, 64}, 128}),
          Map("A.tmap", {"A", {256, 128}, {128, 64}, 128})};
}

TEST(TensorMapSourceTest, FindsTheParameterByName) {
  const std::vector<codegen::KernelArg> args = MatmulArgs();
  EXPECT_EQ(Ok(TensorMapSource(args, 4)), 1u);
  EXPECT_EQ(Ok(TensorMapSource(args, 5)), 0u);
}

TEST(TensorMapSourceTest, RefusesWhatCannotBeEncodedOverAParameter) {
  std::vector<codegen::KernelArg> args = MatmulArgs();
  EXPECT_THAT(TensorMapSource(args, 3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'T' is not a tensor map")));
  // A scratch buffer is no parameter: its address is the runtime's own, not an input's.
  args.push_back(Map("T.tmap", {"T", {4, 16}, {4, 16}, 0}));
  EXPECT_THAT(TensorMapSource(args, 6),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("describes 'T', which is not a parameter")));
  // Dims covering another element count than the source holds.
  args.back() = Map("A.bad", {"A", {128, 128}, {128, 64}, 128});
  EXPECT_THAT(TensorMapSource(args, 6),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cover 16384 elements")));
}

}  // namespace
}  // namespace tilesearch::measure

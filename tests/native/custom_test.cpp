// Custom-operator records (MCL_NATIVE_FN_CUSTOM, manycl/native/custom.h): the validator's
// checks of the function name and tiles, the call through the exec context's resolver, the
// modeled cost the record carries, and the errors when nothing resolves or the function fails.
#include "native_test_util.h"

#include <cstring>
#include <string>

#include "manycl/native/custom.h"

namespace {

using native_test::place_tile;
using native_test::Spm;

// y = p0 * x + p1 over a strided tile (the test's user function).
int affine(const mcl_custom_call *call) {
  const auto *x = static_cast<const float *>(call->input);
  auto *y = static_cast<float *>(call->output);
  const mcl_tile &i = call->input_tile, &o = call->output_tile;
  for (uint32_t r = 0; r < o.h; ++r)
    for (uint32_t c = 0; c < o.w; ++c)
      for (uint32_t k = 0; k < o.c; ++k)
        y[r * o.row_stride + c * o.pixel_stride + k * o.channel_stride] =
            call->params[0] * x[r * i.row_stride + c * i.pixel_stride + k * i.channel_stride] +
            call->params[1];
  return 0;
}

int refuses(const mcl_custom_call *) {
  return 7;
}

void *resolve(void *, const char *name) {
  if (!std::strcmp(name, "affine"))
    return reinterpret_cast<void *>(&affine);
  if (!std::strcmp(name, "refuses"))
    return reinterpret_cast<void *>(&refuses);
  return nullptr;
}

mcl_custom_args make(Spm &spm, const char *function) {
  mcl_custom_args a{};
  a.input = place_tile(spm, 3, 5, 7, MCL_DTYPE_F32, 1, 2, 0);
  a.output = place_tile(spm, 3, 5, 7, MCL_DTYPE_F32, 0, 0, 0);
  std::strncpy(a.function, function, sizeof a.function - 1);
  a.params[0] = 2.0f;
  a.params[1] = -1.0f;
  a.param_count = 2;
  a.cycles = 1000;
  return a;
}

std::string validate(Spm &spm, const mcl_custom_args &a) {
  char msg[256] = {};
  if (mcl_native_validate(MCL_NATIVE_FN_CUSTOM, &a, sizeof a, spm.size(), msg, sizeof msg) ==
      MCL_NATIVE_OK)
    return "";
  return msg;
}

} // namespace

TEST(NativeCustom, CallsTheResolvedFunctionOnStridedTiles) {
  Spm spm;
  spm.exec().resolve = resolve;
  mcl_custom_args a = make(spm, "affine");
  for (uint32_t r = 0; r < 3; ++r)
    for (uint32_t c = 0; c < 5; ++c)
      for (uint32_t k = 0; k < 7; ++k)
        spm.at<float>(a.input.offset)[r * a.input.row_stride + c * a.input.pixel_stride + k] =
            float(r * 100 + c * 10 + k);
  spm.run(MCL_NATIVE_FN_CUSTOM, a);
  for (uint32_t r = 0; r < 3; ++r)
    for (uint32_t c = 0; c < 5; ++c)
      for (uint32_t k = 0; k < 7; ++k)
        EXPECT_EQ(
            spm.at<float>(a.output.offset)[r * a.output.row_stride + c * a.output.pixel_stride + k],
            2.0f * float(r * 100 + c * 10 + k) - 1.0f);
  EXPECT_EQ(mcl_native_cost(MCL_NATIVE_FN_CUSTOM, &a, 16), 1000u + 64u)
      << "the record's cycles plus the call overhead";
}

TEST(NativeCustom, UnresolvedOrFailingFunctionsAreErrorsNamingThem) {
  Spm spm;
  mcl_custom_args a = make(spm, "affine");
  char msg[256] = {};
  // No resolver at all, then a resolver that does not know the name.
  EXPECT_NE(mcl_native_run(&spm.exec(), MCL_NATIVE_FN_CUSTOM, &a, sizeof a, msg, sizeof msg),
            MCL_NATIVE_OK);
  EXPECT_NE(std::string(msg).find("'affine'"), std::string::npos) << msg;
  spm.exec().resolve = resolve;
  std::strcpy(a.function, "unknown_fn");
  EXPECT_NE(mcl_native_run(&spm.exec(), MCL_NATIVE_FN_CUSTOM, &a, sizeof a, msg, sizeof msg),
            MCL_NATIVE_OK);
  EXPECT_NE(std::string(msg).find("'unknown_fn'"), std::string::npos) << msg;
  std::memset(a.function, 0, sizeof a.function);
  std::strcpy(a.function, "refuses");
  EXPECT_NE(mcl_native_run(&spm.exec(), MCL_NATIVE_FN_CUSTOM, &a, sizeof a, msg, sizeof msg),
            MCL_NATIVE_OK);
  EXPECT_NE(std::string(msg).find("returned 7"), std::string::npos) << msg;
}

TEST(NativeCustom, ValidatorRejectsBadNamesAndTiles) {
  Spm spm;
  const mcl_custom_args good = make(spm, "affine");
  EXPECT_EQ(validate(spm, good), "");
  mcl_custom_args a = good;
  std::memset(a.function, 'x', sizeof a.function); // no NUL
  EXPECT_NE(validate(spm, a).find("NUL"), std::string::npos);
  a = good;
  std::strcpy(a.function, "../lib");
  EXPECT_NE(validate(spm, a).find("C identifier"), std::string::npos);
  a = good;
  a.function[7] = 'z'; // a byte after the terminator
  EXPECT_NE(validate(spm, a).find("C identifier"), std::string::npos);
  a = good;
  std::memset(a.function, 0, sizeof a.function);
  EXPECT_NE(validate(spm, a).find("empty"), std::string::npos);
  a = good;
  a.param_count = MCL_CUSTOM_PARAM_MAX + 1;
  EXPECT_NE(validate(spm, a).find("parameters"), std::string::npos);
  a = good;
  a.output.w = 4;
  EXPECT_NE(validate(spm, a).find("shapes differ"), std::string::npos);
  a = good;
  a.output.offset = static_cast<uint32_t>(spm.size()) - 4;
  EXPECT_NE(validate(spm, a), "");
  a = good;
  a.kind = 7;
  EXPECT_NE(validate(spm, a).find("kind"), std::string::npos);
  a = good;
  a.input_count = 2; // element-wise: one input
  EXPECT_NE(validate(spm, a).find("one input"), std::string::npos);
  // MCL_CUSTOM_WHOLE: any output shape, 1..MCL_CUSTOM_INPUT_MAX valid input tiles of the
  // output's type.
  a = good;
  a.kind = MCL_CUSTOM_WHOLE;
  a.output.w = 1;
  a.input_count = 2;
  a.more_inputs[0] = good.input;
  EXPECT_EQ(validate(spm, a), "");
  a.input_count = 0;
  EXPECT_NE(validate(spm, a).find("input_count"), std::string::npos);
  a.input_count = MCL_CUSTOM_INPUT_MAX + 1;
  EXPECT_NE(validate(spm, a).find("input_count"), std::string::npos);
  a.input_count = 3; // more_inputs[1] is no tile
  EXPECT_NE(validate(spm, a), "");
  a.input_count = 2;
  a.more_inputs[0].dtype = MCL_DTYPE_F16;
  EXPECT_NE(validate(spm, a).find("one element type"), std::string::npos);
}

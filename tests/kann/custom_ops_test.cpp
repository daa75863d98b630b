// Custom operators on the compiler side (kann/custom_ops.h): registering a table, the
// importer hook, the record a call gets (function, attributes, modeled cycles from
// cycles_per_element or the cost callback) and the errors for invalid tables. The end to
// end path (library, kann compile, the ICD) is examples/custom_operator in CTest.
#include <gtest/gtest.h>

#include <cstring>

#include "kann/custom_ops.h"

namespace {

using kann::custom::Operator;

uint64_t seven_per_element_plus_p0(const mcl_custom_call *call) {
  const mcl_tile &t = call->output_tile;
  return uint64_t(t.h) * t.w * t.c * 7 + uint64_t(call->params[0]);
}

// [a, b] and [n] -> [a * alpha, b]; 1 (refused) without two inputs.
int rows_times_alpha(const mcl_custom_shape *in, uint32_t count, const float *params, uint32_t,
                     mcl_custom_shape *out) {
  if (count != 2 || in[0].rank != 2)
    return 1;
  *out = in[0];
  out->dims[0] = int64_t(float(in[0].dims[0]) * params[0]);
  return 0;
}

const char *const kAttributes[] = {"alpha", "beta", nullptr};
const float kDefaults[] = {2.0f, 0.5f};

mcl_custom_op entry(const char *op_type, const char *function) {
  mcl_custom_op d{};
  d.domain = "test.custom";
  d.op_type = op_type;
  d.function = function;
  d.kind = MCL_CUSTOM_ELEMENTWISE;
  d.attributes = kAttributes;
  d.attribute_defaults = kDefaults;
  d.cycles_per_element = 3.0;
  return d;
}

mcl_tile tile(uint32_t h, uint32_t w, uint32_t c) {
  mcl_tile t{};
  t.h = h;
  t.w = w;
  t.c = c;
  t.pixel_stride = c;
  t.row_stride = w * c;
  t.channel_stride = 1;
  t.dtype = MCL_DTYPE_F32;
  return t;
}

} // namespace

TEST(CustomOps, ImportedNodesCarryTheirFunctionAttributesAndCost) {
  mcl_custom_op table[2] = {entry("PerElement", "per_element_fn"),
                            entry("Callback", "callback_fn")};
  table[1].cost = seven_per_element_plus_p0;
  ASSERT_TRUE(kann::custom::register_operators(table, 2, "test table"));

  kann::ir::Node unknown;
  auto refused = kann::custom::import_node("test.custom", "Missing", unknown);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("--custom-ops"), std::string::npos);

  kann::ir::Node n;
  ASSERT_TRUE(kann::custom::import_node("test.custom", "PerElement", n));
  EXPECT_EQ(n.op, kann::ir::Op::Custom);
  n.floats["alpha"] = 5.0f;
  n.ints["beta"] = {3}; // INT attributes convert
  const Operator *op = kann::custom::of(n);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->function, "per_element_fn");
  mcl_custom_args a = kann::custom::make_args(*op, n, tile(2, 3, 4), tile(2, 3, 4), 4);
  EXPECT_STREQ(a.function, "per_element_fn");
  ASSERT_EQ(a.param_count, 2u);
  EXPECT_EQ(a.params[0], 5.0f);
  EXPECT_EQ(a.params[1], 3.0f);
  EXPECT_EQ(a.cycles, 18u) << "3 cycles x 24 elements / 4 PEs";

  kann::ir::Node m; // no attributes: the defaults
  ASSERT_TRUE(kann::custom::import_node("test.custom", "Callback", m));
  a = kann::custom::make_args(*kann::custom::of(m), m, tile(1, 5, 2), tile(1, 5, 2), 16);
  EXPECT_EQ(a.params[0], 2.0f);
  EXPECT_EQ(a.params[1], 0.5f);
  EXPECT_EQ(a.cycles, 10u * 7 + 2) << "the cost callback, with the parameters";
}

TEST(CustomOps, InvalidTablesAreRefusedWithTheirReason) {
  auto refused = [](mcl_custom_op d) {
    auto r = kann::custom::register_operators(&d, 1, "bad table");
    return r ? std::string() : r.error().message;
  };
  EXPECT_NE(refused(entry("A", "not-an-identifier")).find("C identifier"), std::string::npos);
  EXPECT_NE(refused(entry("A", "0starts_with_digit")).find("C identifier"), std::string::npos);
  mcl_custom_op d = entry("A", "fine");
  d.kind = 7;
  EXPECT_NE(refused(d).find("unknown kind"), std::string::npos);
  d = entry("A", "fine");
  d.cycles_per_element = -1;
  EXPECT_NE(refused(d).find("cycles_per_element"), std::string::npos);
  d = entry("A", "fine");
  d.domain = nullptr;
  EXPECT_NE(refused(d).find("must be set"), std::string::npos);
  const char *const many[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", nullptr};
  d = entry("A", "fine");
  d.attributes = many;
  d.attribute_defaults = nullptr;
  EXPECT_NE(refused(d).find("attributes"), std::string::npos);
  d = entry("A", "fine");
  d.output_shape = rows_times_alpha;
  EXPECT_NE(refused(d).find("output_shape is for MCL_CUSTOM_WHOLE"), std::string::npos);
  EXPECT_EQ(kann::custom::find("test.custom", "A"), nullptr) << "nothing of a bad table is kept";
}

// MCL_CUSTOM_WHOLE: the output shape from the callback (with the node's attributes), or the
// first input's without one; a record naming every input tile, its cost on the output.
TEST(CustomOps, WholeOperatorsTakeSeveralInputsAndDeclareTheirShape) {
  mcl_custom_op table[2] = {entry("Whole", "whole_fn"), entry("WholeSame", "whole_same_fn")};
  table[0].kind = table[1].kind = MCL_CUSTOM_WHOLE;
  table[0].output_shape = rows_times_alpha;
  ASSERT_TRUE(kann::custom::register_operators(table, 2, "test table"));
  kann::ir::Node n;
  ASSERT_TRUE(kann::custom::import_node("test.custom", "Whole", n));
  n.floats["alpha"] = 3.0f;
  const Operator *op = kann::custom::of(n);
  ASSERT_NE(op, nullptr);
  auto shape = kann::custom::output_shape(*op, n, {{2, 5}, {7}});
  ASSERT_TRUE(shape) << shape.error().message;
  EXPECT_EQ(shape.value(), (std::vector<int64_t>{6, 5}));
  auto refused = kann::custom::output_shape(*op, n, {{2, 5}});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("returned 1"), std::string::npos);
  kann::ir::Node m;
  ASSERT_TRUE(kann::custom::import_node("test.custom", "WholeSame", m));
  auto same = kann::custom::output_shape(*kann::custom::of(m), m, {{1, 3, 4, 4}, {9}});
  ASSERT_TRUE(same);
  EXPECT_EQ(same.value(), (std::vector<int64_t>{1, 3, 4, 4}));
  mcl_custom_args a =
      kann::custom::make_args(*op, n, {tile(2, 5, 1), tile(1, 7, 1)}, tile(6, 5, 1), 2);
  EXPECT_EQ(a.kind, uint32_t(MCL_CUSTOM_WHOLE));
  EXPECT_EQ(a.input_count, 2u);
  EXPECT_EQ(a.input.w, 5u);
  EXPECT_EQ(a.more_inputs[0].w, 7u);
  EXPECT_EQ(a.cycles, 45u) << "3 cycles x 30 output elements / 2 PEs";
}

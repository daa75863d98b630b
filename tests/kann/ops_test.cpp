// The operator table (kann/ops.h): its lookups, its consistency with the passes, and the
// docs' operator table listing every ONNX operator it has (and nothing else).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "kann/ops.h"
#include "kann/passes.h"

namespace {

using kann::ir::Lowering;
using kann::ir::Op;
using kann::ir::OpInfo;
using kann::ir::Origin;

std::vector<OpInfo> table() {
  return {kann::ir::op_table_begin(), kann::ir::op_table_end()};
}

TEST(Ops, OnnxNamesRoundTripAndKannOwnOperatorsAreNotImportable) {
  std::set<std::string> names;
  for (const OpInfo &info : table()) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate name " << info.name;
    EXPECT_STREQ(kann::ir::op_info(info.op).name, info.name); // indexed by the enum
    const auto parsed = kann::ir::op_from_onnx(info.name);
    if (info.origin == Origin::Onnx) {
      ASSERT_TRUE(parsed.has_value()) << info.name;
      EXPECT_EQ(*parsed, info.op);
    } else {
      EXPECT_FALSE(parsed.has_value()) << info.name << " is kann's own";
    }
  }
  EXPECT_FALSE(kann::ir::op_from_onnx("LSTM").has_value());
  EXPECT_FALSE(kann::ir::op_from_onnx("conv").has_value()); // op_type is case-sensitive
}

// passes::activation_of and the kActivation ability describe the same operators, and the
// tile compiler runs them with the activation lowering.
TEST(Ops, ActivationAbilityMatchesThePasses) {
  kann::ir::Graph g;
  for (const OpInfo &info : table()) {
    kann::ir::Node n;
    n.op = info.op;
    mcl_activation act;
    EXPECT_EQ(kann::passes::activation_of(g, n, act), info.has(kann::ir::kActivation)) << info.name;
    if (info.has(kann::ir::kActivation)) {
      EXPECT_EQ(info.lowering, Lowering::Activation) << info.name;
    }
    if (info.has(kann::ir::kView)) {
      EXPECT_EQ(info.lowering, Lowering::View) << info.name;
    }
  }
}

// The operator table of docs/kann.md ("What is supported"): the operator names in the first
// column, in backquotes.
std::set<std::string> documented_operators() {
  std::ifstream f(std::string(KANN_SOURCE_DIR) + "/docs/kann.md");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const size_t start = doc.find("| operator | supported |");
  EXPECT_NE(start, std::string::npos) << "docs/kann.md has no operator table";
  const size_t end = doc.find("\n\n", start);
  std::istringstream rows(doc.substr(start, end - start));
  std::set<std::string> names;
  const std::regex name("`([A-Z][A-Za-z0-9]+)`");
  for (std::string row; std::getline(rows, row);) {
    row.erase(0, row.find_first_not_of(' ')); // the table is indented in a list item
    if (row.rfind("| `", 0) != 0)
      continue;
    const std::string first = row.substr(0, row.find(" | ", 2));
    for (std::sregex_iterator it(first.begin(), first.end(), name), stop; it != stop; ++it)
      names.insert((*it)[1]);
  }
  return names;
}

TEST(Ops, DocsOperatorTableListsEveryOnnxOperator) {
  const std::set<std::string> documented = documented_operators();
  std::set<std::string> onnx;
  for (const OpInfo &info : table())
    if (info.origin == Origin::Onnx)
      onnx.insert(info.name);
  for (const std::string &name : onnx)
    EXPECT_TRUE(documented.count(name)) << name << " is missing from docs/kann.md's operator table";
  for (const std::string &name : documented)
    EXPECT_TRUE(onnx.count(name)) << name
                                  << " is in docs/kann.md's operator table but not in "
                                     "kann/ops.h";
}

} // namespace

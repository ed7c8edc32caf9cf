// parse_positioned_json: every value and key knows where it starts, whatever follows it (the
// lexer reads one character past a number, except at the end of the text), and errors name the
// line and column.
#include "cluster/positioned_json.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/error.h"

namespace weft {
namespace {

std::string where(std::string_view text, const JsonNode& node) { return json_line_column(text, node.offset); }

TEST(PositionedJson, EveryKindKnowsItsStart) {
  const std::string text = "{\"a\": [12, -3.5e1,true ,false,null, \"s\\\"\\\\\" ,{}],\n \"b\\\"\":7}";
  const JsonNode root = parse_positioned_json(text, "t", "test");
  ASSERT_TRUE(root.is_object());
  ASSERT_EQ(root.members.size(), 2u);
  EXPECT_EQ(json_line_column(text, root.members[0].key_offset), "1:2");
  const JsonNode& a = root.members[0].value;
  EXPECT_EQ(where(text, a), "1:7");
  ASSERT_EQ(a.items.size(), 7u);
  EXPECT_EQ(where(text, a.items[0]), "1:8");
  EXPECT_EQ(a.items[0].integer, 12);
  EXPECT_EQ(where(text, a.items[1]), "1:12");
  EXPECT_EQ(a.items[1].text, "-3.5e1");
  EXPECT_EQ(where(text, a.items[2]), "1:19");
  EXPECT_TRUE(a.items[2].boolean);
  EXPECT_EQ(where(text, a.items[3]), "1:25");
  EXPECT_EQ(where(text, a.items[4]), "1:31");
  EXPECT_EQ(where(text, a.items[5]), "1:37");
  EXPECT_EQ(a.items[5].text, "s\"\\");
  EXPECT_EQ(where(text, a.items[6]), "1:46");
  EXPECT_EQ(root.members[1].key, "b\"");
  EXPECT_EQ(json_line_column(text, root.members[1].key_offset), "2:2");
  EXPECT_EQ(where(text, root.members[1].value), "2:8");
  EXPECT_EQ(root.members[1].value.integer, 7);
}

TEST(PositionedJson, ScalarsAtTheEndOfTheText) {
  EXPECT_EQ(where("  42", parse_positioned_json("  42", "t", "test")), "1:3");
  EXPECT_EQ(where("\n-1", parse_positioned_json("\n-1", "t", "test")), "2:1");
  EXPECT_EQ(where(" 0", parse_positioned_json(" 0", "t", "test")), "1:2");
  EXPECT_EQ(where("\ttrue", parse_positioned_json("\ttrue", "t", "test")), "1:2");
  const JsonNode big = parse_positioned_json("18446744073709551615", "t", "test");
  EXPECT_TRUE(big.integer_saturated);
  EXPECT_EQ(big.text, "18446744073709551615");
}

TEST(PositionedJson, ErrorsNameSourceLineAndColumn) {
  try {
    parse_positioned_json("[1,\n 2,,]", "x.json", "test");
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).substr(0, 34), "[test] x.json:2:4: invalid JSON: s") << e.what();
  }
  try {
    parse_positioned_json("\"a\x01\"", "x.json", "test");
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    // The control character nlohmann quotes is not copied raw into the message.
    EXPECT_EQ(std::string(e.what()).find('\x01'), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).substr(0, 18), "[test] x.json:1:3:") << e.what();
  }
}

}  // namespace
}  // namespace weft

// Registry: explicit registration, duplicate-name and unknown-name errors.
#include <catch2/catch.hpp>

#include "registry/registry.h"
#include "util/error.h"

using namespace hftrain;

namespace {

struct Shape {
  virtual ~Shape() = default;
  virtual double area() const = 0;
};

struct Square : Shape {
  struct Options {
    double side = 1.0;
    static void declare(Schema<Options>& s) { s.add("side", &Options::side, "Side length.").greater_than(0); }
  };
  Square(const Options& o, double scale) : side(o.side * scale) {}
  double area() const override { return side * side; }
  double side;
};

struct Circle : Shape {
  struct Options {
    double radius = 1.0;
    static void declare(Schema<Options>& s) { s.add("radius", &Options::radius, "Radius.").greater_than(0); }
  };
  Circle(const Options& o, double) : r(o.radius) {}
  double area() const override { return 3.0 * r * r; }
  double r;
};

}  // namespace

TEST_CASE("registered components build from validated options", "[unit][registry]") {
  Registry<Shape, double> reg("shape");
  reg.add<Square>("square", "A square.");
  reg.add<Circle>("circle", "A circle.");
  CHECK(reg.names() == std::vector<std::string>{"circle", "square"});
  Issues issues("f.yaml");
  auto opts = reg.parse("square", YAML::Load("{side: 3}"), "shape", issues, {});
  REQUIRE(issues.empty());
  CHECK(reg.build("square", opts, 2.0)->area() == 36.0);
  CHECK(reg.build("circle", nullptr, 1.0)->area() == 3.0);  // defaults
  CHECK(reg.options("square").at(0).help == "Side length.");
}

TEST_CASE("duplicate names are an error", "[unit][registry]") {
  Registry<Shape, double> reg("shape");
  reg.add<Square>("square", "A square.");
  CHECK_THROWS_WITH(reg.add<Circle>("square", "again"), Catch::Contains("duplicate shape component name 'square'"));
}

TEST_CASE("unknown names list the valid ones", "[unit][registry]") {
  Registry<Shape, double> reg("shape");
  reg.add<Square>("square", "A square.");
  reg.add<Circle>("circle", "A circle.");
  CHECK_THROWS_WITH(reg.build("sqare", nullptr, 1.0),
                    Catch::Contains("unknown shape type 'sqare' (did you mean 'square'?); valid types: circle, square"));
}

TEST_CASE("options belonging to a sibling component are named", "[unit][registry]") {
  Registry<Shape, double> reg("shape");
  reg.add<Square>("square", "A square.");
  reg.add<Circle>("circle", "A circle.");
  Issues issues("f.yaml");
  reg.parse("square", YAML::Load("{radius: 3}"), "shape", issues, {});
  REQUIRE(issues.messages().size() == 1);
  CHECK_THAT(issues.messages()[0], Catch::Contains("shape.radius: unknown key for shape type 'square': it is an option of type 'circle'"));
}

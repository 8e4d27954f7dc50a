// hetc-write-test-plan OUT.hplan: writes the unit tests' tiny plan (TestPlans.h, default shape)
// for tests that drive the hetc tool itself.
#include "TestPlans.h"

#include <cstdio>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hetc-write-test-plan OUT.hplan\n");
    return 2;
  }
  hetc::test::TinyPlan tiny = hetc::test::buildTinyPlan();
  hetc::Status written = hetc::test::writeTinyPlan(argv[1], tiny);
  if (!written) {
    std::fprintf(stderr, "hetc-write-test-plan: %s\n", written.message().c_str());
    return 1;
  }
  return 0;
}

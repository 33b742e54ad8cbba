#include <cstdio>

#include <model.h>

bool generatedRunsFused();

int main() {
  std::printf("main: %s, generated: %s\n", runsFused() ? "fused" : "original",
              generatedRunsFused() ? "fused" : "original");
  return 0;
}

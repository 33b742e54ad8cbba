// Reading a switch from the environment (environment.h).
#include "environment.h"

#include "errors.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string>

namespace lmfuse::torch_detail {

bool switchOn(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return false;
  std::string word = value;
  std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
  constexpr std::array<const char*, 5> off = {"", "0", "false", "no", "off"};
  constexpr std::array<const char*, 4> on = {"1", "true", "yes", "on"};
  if (std::find(off.begin(), off.end(), word) != off.end()) return false;
  if (std::find(on.begin(), on.end(), word) != on.end()) return true;
  LMFUSE_TORCH_CHECK(Check::Argument, false, "lmfuse: the environment variable ", name, "=\"", value,
                     "\" is not a switch's value: 1, true, yes or on turn it on; 0, false, no, off or empty leave it off");
  return false;
}

}  // namespace lmfuse::torch_detail

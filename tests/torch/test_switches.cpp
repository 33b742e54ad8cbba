// The environment switches' values: each read once per process, so each value is tried in a child process of
// its own (fork before LibTorch starts a thread), which reports what lmfuse::enabled() / return_logits() said
// or the error they threw.
#include <lmfuse/torch.h>
#include <torch/torch.h>

// c10's logging defines a glog-style CHECK that would shadow Catch's: LibTorch first, its CHECK dropped.
#undef CHECK
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

// What `read` gives in a child whose environment has `name`=`value`: "on", "off", or "error: <message>".
std::string inChild(const char* name, const char* value, bool (*read)()) {
  int channel[2];
  REQUIRE(::pipe(channel) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(channel[0]);
    ::setenv(name, value, 1);
    std::string said;
    try {
      said = read() ? "on" : "off";
    } catch (const c10::Error& error) {
      said = std::string("error: ") + error.what_without_backtrace();
    }
    (void)!::write(channel[1], said.data(), said.size());
    ::_exit(0);
  }
  ::close(channel[1]);
  std::string said;
  char buffer[4096];
  for (ssize_t got; (got = ::read(channel[0], buffer, sizeof buffer)) > 0;) said.append(buffer, size_t(got));
  ::close(channel[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return said;
}

bool disabled() { return !lmfuse::enabled(); }
bool returnsLogits() { return lmfuse::return_logits(); }

}  // namespace

TEST_CASE("a switch's value turns it on, leaves it off, or is an error naming it", "[torch][switches]") {
  struct Row {
    const char* value;
    const char* expected;
  };
  const Row rows[] = {
      {"1", "on"},   {"true", "on"},   {"TRUE", "on"}, {"Yes", "on"},  {"on", "on"},
      {"0", "off"},  {"false", "off"}, {"", "off"},    {"no", "off"},  {"OFF", "off"},
      {"2", "error"}, {" 1", "error"}, {"enabled", "error"},
  };
  for (const Row& row : rows) {
    for (auto [name, read] : {std::pair{"LMFUSE_DISABLE", &disabled}, std::pair{"LMFUSE_RETURN_LOGITS", &returnsLogits}}) {
      INFO(name << "=\"" << row.value << "\"");
      std::string said = inChild(name, row.value, read);
      if (std::string(row.expected) == "error") {
        CHECK(said.rfind("error: ", 0) == 0);
        CHECK(said.find(name) != std::string::npos);
        CHECK(said.find(std::string("\"") + row.value + "\"") != std::string::npos);
      } else {
        CHECK(said == row.expected);
      }
    }
  }
}

// Compares two training runs of the example trainer: the per-step losses of their CSVs
// (step,loss,ms,peak_mem) and their final parameters (the --params dumps: name, count, fp32 values).
//   compare_runs A.csv B.csv A.params B.params --loss-rtol X --param-rtol Y
//   compare_runs A.csv B.csv A.params B.params --bitwise
// Loss: |a - b| <= rtol * |a| at every step. Parameters: per tensor, ||a - b|| <= rtol * ||a|| (L2).
// The norm, not the largest element: AdamW divides each gradient by its own running RMS, so a parameter
// whose gradient is tiny (a rarely seen token's embedding row) moves by up to ~lr on rounding noise
// alone; no two correct implementations agree on such an element, while the tensor as a whole agrees.
// --bitwise: the loss texts (printed with 9 significant digits, exact for fp32) and the parameter bytes
// are identical. Prints every step's difference and the worst tensor; exits 1 on any violation.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Run {
  std::vector<std::string> lossTexts;
  std::vector<double> losses;
  std::vector<std::pair<std::string, std::vector<float>>> parameters;
};

bool readCsv(const char* path, Run& run) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != "step,loss,ms,peak_mem") {
    std::fprintf(stderr, "compare_runs: %s is not a trainer CSV\n", path);
    return false;
  }
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    std::string step, loss;
    std::getline(fields, step, ',');
    std::getline(fields, loss, ',');
    run.lossTexts.push_back(loss);
    run.losses.push_back(std::stod(loss));
  }
  return !run.losses.empty();
}

bool readParameters(const char* path, Run& run) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "compare_runs: cannot read %s\n", path);
    return false;
  }
  uint32_t nameLength = 0;
  while (in.read(reinterpret_cast<char*>(&nameLength), sizeof nameLength)) {
    std::string name(nameLength, '\0');
    int64_t count = 0;
    in.read(name.data(), nameLength);
    in.read(reinterpret_cast<char*>(&count), sizeof count);
    std::vector<float> values(static_cast<size_t>(count));
    in.read(reinterpret_cast<char*>(values.data()), count * static_cast<int64_t>(sizeof(float)));
    if (!in) {
      std::fprintf(stderr, "compare_runs: %s is truncated at %s\n", path, name.c_str());
      return false;
    }
    run.parameters.emplace_back(std::move(name), std::move(values));
  }
  return !run.parameters.empty();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: compare_runs A.csv B.csv A.params B.params (--loss-rtol X --param-rtol Y | --bitwise)\n");
    return 2;
  }
  bool bitwise = false;
  double lossTolerance = 0, paramTolerance = 0;
  for (int i = 5; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--bitwise")) bitwise = true;
    else if (!std::strcmp(argv[i], "--loss-rtol") && i + 1 < argc) lossTolerance = std::stod(argv[++i]);
    else if (!std::strcmp(argv[i], "--param-rtol") && i + 1 < argc) paramTolerance = std::stod(argv[++i]);
    else { std::fprintf(stderr, "compare_runs: unknown argument %s\n", argv[i]); return 2; }
  }
  Run a, b;
  if (!readCsv(argv[1], a) || !readCsv(argv[2], b) || !readParameters(argv[3], a) || !readParameters(argv[4], b))
    return 1;
  bool ok = true;
  if (a.losses.size() != b.losses.size()) {
    std::fprintf(stderr, "compare_runs: %zu steps against %zu\n", a.losses.size(), b.losses.size());
    return 1;
  }
  double worstLoss = 0;
  for (size_t step = 0; step < a.losses.size(); ++step) {
    const double relative = std::fabs(a.losses[step] - b.losses[step]) / std::fabs(a.losses[step]);
    worstLoss = std::max(worstLoss, relative);
    const bool stepOk = bitwise ? a.lossTexts[step] == b.lossTexts[step] : relative <= lossTolerance;
    std::printf("step %zu: %s vs %s (relative %.3g)%s\n", step + 1, a.lossTexts[step].c_str(),
                b.lossTexts[step].c_str(), relative, stepOk ? "" : "  <-- differs");
    ok = ok && stepOk;
  }
  if (a.parameters.size() != b.parameters.size()) {
    std::fprintf(stderr, "compare_runs: %zu parameter tensors against %zu\n", a.parameters.size(), b.parameters.size());
    return 1;
  }
  double worstParam = 0;
  std::string worstName;
  for (size_t t = 0; t < a.parameters.size(); ++t) {
    const auto& [name, x] = a.parameters[t];
    const auto& y = b.parameters[t].second;
    if (name != b.parameters[t].first || x.size() != y.size()) {
      std::fprintf(stderr, "compare_runs: parameter %s does not match %s\n", name.c_str(), b.parameters[t].first.c_str());
      return 1;
    }
    if (bitwise) {
      if (std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0) {
        std::printf("parameter %s differs bitwise  <-- differs\n", name.c_str());
        ok = false;
      }
      continue;
    }
    double norm = 0, differenceNorm = 0, difference = 0;
    size_t worstIndex = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
      norm += static_cast<double>(x[i]) * x[i];
      differenceNorm += d * d;
      if (d > difference) difference = d, worstIndex = i;
    }
    const double relative = norm > 0 ? std::sqrt(differenceNorm / norm) : std::sqrt(differenceNorm);
    if (relative > worstParam) worstParam = relative, worstName = name;
    if (relative > paramTolerance) {
      std::printf("parameter %s: relative difference %.3g (largest at element %zu: %.9g vs %.9g)  <-- differs\n",
                  name.c_str(), relative, worstIndex, x[worstIndex], y[worstIndex]);
      ok = false;
    }
  }
  std::printf("worst step loss difference %.3g (relative); worst parameter %s %.3g (relative)%s\n", worstLoss,
              worstName.c_str(), worstParam, bitwise ? "; compared bitwise" : "");
  std::printf("%s\n", ok ? "runs match" : "runs differ");
  return ok ? 0 : 1;
}

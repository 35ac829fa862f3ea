// A program that never touches CUDA, like the compilers and shells a training
// script spawns with LD_PRELOAD inherited. Its output must not change.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  std::printf("main ran\n");
  long sum = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&sum, i] { __atomic_add_fetch(&sum, i, __ATOMIC_RELAXED); });
  for (auto& t : threads) t.join();
  std::printf("sum %ld args %d\n", sum, argc);
  for (int i = 1; i < argc; ++i) std::printf("arg %s\n", argv[i]);
  return argc > 1 && std::string(argv[1]) == "fail" ? 7 : 0;
}

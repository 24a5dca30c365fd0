#include "support/run_queue.h"

#include <dirent.h>

#include <cstdio>

namespace hjit {

int64_t run_queue_wait_ns() {
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return 0;
  int64_t total = 0;
  while (const dirent* e = readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    char path[96];
    std::snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
    if (FILE* f = std::fopen(path, "r")) {
      unsigned long long running = 0, waiting = 0;
      if (std::fscanf(f, "%llu %llu", &running, &waiting) == 2) total += int64_t(waiting);
      std::fclose(f);
    }
  }
  closedir(tasks);
  return total;
}

}  // namespace hjit

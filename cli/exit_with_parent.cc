#include <csignal>
#include <thread>

#include <unistd.h>

#include "cli/commands.h"
#include "common/thread_name.h"

namespace geops::cli {

void ExitWithParent() {
  std::thread([] {
    NameThisThread("parent-watch");
    char buf[256];
    while (true) {
      const ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
      if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
    kill(getpid(), SIGTERM);
  }).detach();
}

}  // namespace geops::cli

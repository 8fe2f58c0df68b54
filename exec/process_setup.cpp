#include "exec/process_setup.h"

#include <execinfo.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <thread>

#include "planner/error.h"

namespace pipetwin::exec {

void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);  // glibc's largest; also stops the dynamic threshold
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 * 1024 * 1024);
}

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) ::close(fd);
    throw Error({"", 0, "port"}, "cannot find a free local port", "check the loopback interface");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

namespace {

// Async-signal-safe: write(2) and backtrace_symbols_fd only (backtrace is loaded at installation).
void on_fatal_signal(int signal_number) {
  char line[160];
  const char* name = strsignal(signal_number);
  int length = 0;
  const char* parts[] = {"pipetwin: fatal: ", name != nullptr ? name : "signal", " in process "};
  for (const char* part : parts) {
    for (const char* c = part; *c != '\0' && length < 120; ++c) line[length++] = *c;
  }
  char digits[16];
  int d = 0;
  for (long pid = ::getpid(); pid > 0 && d < 15; pid /= 10) digits[d++] = static_cast<char>('0' + pid % 10);
  while (d > 0) line[length++] = digits[--d];
  const char tail[] = "; call stack:\n";
  std::memcpy(line + length, tail, sizeof tail - 1);
  length += sizeof tail - 1;
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, line, static_cast<std::size_t>(length));
  void* frames[64];
  ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), STDERR_FILENO);
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

}  // namespace

std::vector<int> usable_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  return cpus;
}

bool pin_to_cpus(const std::vector<int>& cpus) {
  cpu_set_t chosen;
  CPU_ZERO(&chosen);
  for (int cpu : cpus) CPU_SET(cpu, &chosen);
  return !cpus.empty() && sched_setaffinity(0, sizeof(chosen), &chosen) == 0;
}

int usable_cores() {
  const std::vector<int> cpus = usable_cpus();
  if (!cpus.empty()) return static_cast<int>(cpus.size());
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void pin_to_own_core(int rank, int world_size) {
  const std::vector<int> cpus = usable_cpus();
  if (rank < 0 || rank >= world_size || world_size > static_cast<int>(cpus.size())) return;
  pin_to_cpus({cpus[rank]});
}

void report_fatal_signals() {
  void* warm[1];
  ::backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  for (int signal_number : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) ::signal(signal_number, on_fatal_signal);
}

}  // namespace pipetwin::exec

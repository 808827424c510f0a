// A kernel library built without mlxport's checks: what candidate code that got past them would
// do from inside the simulator's worker. tests/test_sandbox.py loads it into a real worker and
// names what to try in the first buffer's name; the outcome comes back as the launch's error.
#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

struct Buffer {
  const char* name;
  void* base;
  long long bytes;
  void* data;
  int elem_size;
  int space;
  void* mask;
  long long touched;
};
struct LaunchParams {
  Buffer* buffers;
  int nbuffers;
};

static int says(char* err, int errlen, const char* what, int ok) {
  std::snprintf(err, size_t(errlen), "%s", ok ? what : std::strerror(errno));
  return 1;
}

extern "C" __attribute__((visibility("default"))) int mlxsim_run(const LaunchParams* p, char* err,
                                                                 int errlen) {
  char op[32] = {0}, arg[4096] = {0};
  std::sscanf(p->buffers[0].name, "%31s %4095[^\n]", op, arg);
  if (!std::strcmp(op, "read")) {  // a file's first bytes, or why not
    int fd = open(arg, O_RDONLY);
    if (fd < 0) return says(err, errlen, "", 0);
    long n = read(fd, err, size_t(errlen - 1));
    err[n > 0 ? n : 0] = 0;
    return 1;
  }
  if (!std::strcmp(op, "write")) {  // write "pwned" into a file
    int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    return says(err, errlen, "written", fd >= 0 && write(fd, "pwned", 5) == 5);
  }
  if (!std::strcmp(op, "poke")) {  // open another process's memory for writing
    int fd = open(arg, O_RDWR);
    return says(err, errlen, "opened", fd >= 0);
  }
  if (!std::strcmp(op, "ptrace")) {
    return says(err, errlen, "attached", ptrace(PTRACE_ATTACH, atoi(arg), 0, 0) == 0);
  }
  if (!std::strcmp(op, "vmread")) {  // another process's memory without /proc
    char buf[8];
    struct iovec local = {buf, sizeof buf}, remote = {(void*)0x400000, sizeof buf};
    return says(err, errlen, "read", process_vm_readv(atoi(arg), &local, 1, &remote, 1, 0) >= 0);
  }
  if (!std::strcmp(op, "kill")) {
    return says(err, errlen, "killed", kill(atoi(arg), SIGKILL) == 0);
  }
  if (!std::strcmp(op, "connect")) {  // a TCP connection to 127.0.0.1:PORT
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return says(err, errlen, "", 0);
    sockaddr_in to = {};
    to.sin_family = AF_INET;
    to.sin_port = htons(atoi(arg));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return says(err, errlen, "connected", connect(s, (sockaddr*)&to, sizeof to) == 0);
  }
  if (!std::strcmp(op, "linger")) {  // a process that outlives the run: `sleep ARG` in its session
    pid_t pid = fork();
    if (pid == 0) {
      setsid();
      execl("/bin/sleep", "sleep", arg, (char*)nullptr);
      _exit(0);
    }
    return says(err, errlen, "forked", pid > 0);
  }
  if (!std::strcmp(op, "exec")) {  // sh -c ARG in place of the worker
    execl("/bin/sh", "sh", "-c", arg, (char*)nullptr);
    return says(err, errlen, "", 0);
  }
  if (!std::strcmp(op, "print")) {  // ARG MiB to stderr, where a kernel's printf goes
    static char line[1 << 20];
    std::memset(line, 'x', sizeof line);
    for (int k = 0; k < atoi(arg); ++k) fwrite(line, 1, sizeof line, stderr);
    return says(err, errlen, "printed", 1);
  }
  std::snprintf(err, size_t(errlen), "unknown op %s", op);
  return 1;
}

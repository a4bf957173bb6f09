// scripts/floor.c — the floor of a mediated call on this machine, and the same calls for
// sbx-shell's guard to answer (scripts/bench-guard.sh builds and drives it).
//
// Usage: floor MODE OP N DIR
//   MODE  bare   make the N calls in this process, unmediated (run it under sbx-shell
//                to measure the guard)
//         floor  a child makes them; each is handed to this process's supervisor
//                (seccomp user notification, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, the
//                wait killable once received), which reads the path(s) from the child's
//                memory (/proc/PID/mem), checks that the call still waits, does the call
//                itself and answers: with its value (SEND), or, for an open, with the
//                descriptor (ADDFD|SEND). The least any race-free mediator can do.
//         pinned the floor with both processes on CPU 0: what the hand-back would cost if
//                the kernel woke the program on the supervisor's CPU for ADDFD as it does
//                for SEND (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP covers SEND only)
//   OP    create   openat(O_CREAT|O_EXCL|O_WRONLY) of a new file, then close
//         open     openat(O_WRONLY|O_TRUNC) of an existing file, then close
//         mkdir | rename | link | symlink | unlink | chmod   one call each
//   N     calls (default 20000)
//   DIR   where (made if missing; emptied before and after the run)
// Prints one line: "OP MODE: X.XX us per call" (the timed loop only; files each call
// needs are made before it).
//
// With SIGNAL_US=P in the environment, an interval timer signals the calling process every
// P microseconds, to a handler without SA_RESTART: the line then ends with how many calls
// returned EINTR (a signal that came before the call was received; bare, none do).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

enum op { CREATE, OPEN, MKDIR, RENAME, LINK, SYMLINK, UNLINK, CHMOD };
static const char *names[] = {"create", "open", "mkdir", "rename", "link", "symlink", "unlink", "chmod"};
static const long numbers[] = {SYS_openat, SYS_openat, SYS_mkdir, SYS_rename, SYS_link, SYS_symlink, SYS_unlink, SYS_chmod};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
  perror(what);
  _exit(1);
}

static void name(char *out, char kind, int i) { snprintf(out, 32, "%c%d", kind, i); }

static void touch(const char *path) {
  int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) die(path);
  close(fd);
}

// What each call needs before the timed loop.
static void prepare(enum op op, int n) {
  char a[32];
  switch (op) {
  case OPEN: touch("o"); break;
  case LINK: touch("l"); break;
  case CHMOD: touch("m"); break;
  case RENAME: for (int i = 0; i < n; i++) { name(a, 'r', i); touch(a); } break;
  case UNLINK: for (int i = 0; i < n; i++) { name(a, 'u', i); touch(a); } break;
  default: break;
  }
}

static long eintr;
static void on_alarm(int s) { (void)s; }

static void one(enum op op, int i) {
  char a[32], b[32];
  long rc = 0;
  switch (op) {
  case CREATE:
    name(a, 'c', i);
    rc = syscall(SYS_openat, AT_FDCWD, a, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (rc >= 0) close((int)rc);
    break;
  case OPEN:
    rc = syscall(SYS_openat, AT_FDCWD, "o", O_WRONLY | O_TRUNC | O_CLOEXEC, 0);
    if (rc >= 0) close((int)rc);
    break;
  case MKDIR: name(a, 'd', i); rc = syscall(SYS_mkdir, a, 0755); break;
  case RENAME: name(a, 'r', i); name(b, 's', i); rc = syscall(SYS_rename, a, b); break;
  case LINK: name(a, 'k', i); rc = syscall(SYS_link, "l", a); break;
  case SYMLINK: name(a, 'y', i); rc = syscall(SYS_symlink, "target", a); break;
  case UNLINK: name(a, 'u', i); rc = syscall(SYS_unlink, a); break;
  case CHMOD: rc = syscall(SYS_chmod, "m", (i & 1) ? 0600 : 0644); break;
  }
  if (rc < 0 && errno == EINTR) eintr++;
  else if (rc < 0) die(names[op]);
}

// Remove what is in the working directory (what a run made): one call per entry.
static void clean(void) {
  DIR *d = opendir(".");
  if (!d) die("opendir");
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (unlinkat(dirfd(d), e->d_name, 0) && errno == EISDIR) unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
  }
  closedir(d);
}

static double timed(enum op op, int n) {
  const char *period = getenv("SIGNAL_US");
  if (period) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, 0);
    struct itimerval every = {{0, atol(period)}, {0, atol(period)}};
    setitimer(ITIMER_REAL, &every, 0);
  }
  double t0 = now();
  for (int i = 0; i < n; i++) one(op, i);
  double us = (now() - t0) / n * 1e6;
  struct itimerval off;
  memset(&off, 0, sizeof off);
  setitimer(ITIMER_REAL, &off, 0);
  return us;
}

// The line's end: how many calls returned EINTR, when signals were sent.
static const char *interrupted(void) {
  static char out[64];
  out[0] = 0;
  if (getenv("SIGNAL_US")) snprintf(out, sizeof out, ", %ld EINTR", eintr);
  return out;
}

static void send_fd(int sock, int fd) {
  char byte = 0, control[CMSG_SPACE(sizeof(int))];
  struct iovec io = {&byte, 1};
  struct msghdr m = {0};
  m.msg_iov = &io; m.msg_iovlen = 1; m.msg_control = control; m.msg_controllen = sizeof control;
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET; h->cmsg_type = SCM_RIGHTS; h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &fd, sizeof fd);
  if (sendmsg(sock, &m, 0) < 0) die("sendmsg");
}

static int recv_fd(int sock) {
  char byte, control[CMSG_SPACE(sizeof(int))];
  struct iovec io = {&byte, 1};
  struct msghdr m = {0};
  m.msg_iov = &io; m.msg_iovlen = 1; m.msg_control = control; m.msg_controllen = sizeof control;
  if (recvmsg(sock, &m, 0) <= 0) die("recvmsg");
  int fd;
  memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
  return fd;
}

// A filter that hands every call of `nr` to the listener it returns.
static int listen_to(long nr) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  struct sock_fprog p = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) die("no_new_privs");
  unsigned long flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
  int l = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p);
  if (l < 0) die("seccomp");
  return l;
}

static void path_at(int mem, unsigned long long addr, char *out) {
  ssize_t r = pread(mem, out, 255, (off_t)addr);
  out[r < 0 ? 0 : r] = 0;
}

// Answer calls until the child is gone: do each, answer with its value or descriptor.
static void supervise(int l, int mem, enum op op) {
  struct seccomp_notif req;
  struct seccomp_notif_resp resp;
  char a[256], b[256];
  for (;;) {
    memset(&req, 0, sizeof req);
    if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
      // ENOENT: the call went away (a signal) — or the child did (the listener hangs up).
      struct pollfd p = {l, POLLIN, 0};
      if (errno == EINTR || (errno == ENOENT && !(poll(&p, 1, 0) == 1 && (p.revents & POLLHUP)))) continue;
      return;
    }
    memset(&resp, 0, sizeof resp);
    resp.id = req.id;
    unsigned long long *args = req.data.args;
    int two = op == RENAME || op == LINK || op == SYMLINK;
    path_at(mem, args[op == CREATE || op == OPEN ? 1 : 0], a);
    if (two) path_at(mem, args[1], b);
    if (ioctl(l, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) < 0) continue;
    long rc = 0;
    if (op == CREATE || op == OPEN) {
      int fd = openat(AT_FDCWD, a, (int)args[2] | O_CLOEXEC, (mode_t)args[3]);
      if (fd >= 0) {
        struct seccomp_notif_addfd add = {.id = req.id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = fd};
        int sent = ioctl(l, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
        close(fd);
        if (sent >= 0) continue;
      }
      rc = -1;
    } else if (op == MKDIR) rc = mkdir(a, (mode_t)args[1]);
    else if (op == RENAME) rc = rename(a, b);
    else if (op == LINK) rc = link(a, b);
    else if (op == SYMLINK) rc = symlink(a, b);
    else if (op == UNLINK) rc = unlink(a);
    else if (op == CHMOD) rc = chmod(a, (mode_t)args[1]);
    if (rc < 0) resp.error = -errno;
    if (ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT) return;
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: floor bare|floor|pinned OP [N] [DIR]\n");
    return 2;
  }
  int pinned = !strcmp(argv[1], "pinned");
  int mediated = pinned || !strcmp(argv[1], "floor");
  int n = argc > 3 ? atoi(argv[3]) : 20000;
  const char *dir = argc > 4 ? argv[4] : ".";
  int op = -1;
  for (int i = 0; i < 8; i++) if (!strcmp(argv[2], names[i])) op = i;
  if (op < 0 || n <= 0) { fprintf(stderr, "floor: unknown op %s\n", argv[2]); return 2; }
  mkdir(dir, 0755);
  if (chdir(dir)) die(dir);
  clean();
  if (!mediated) {
    prepare(op, n);
    double us = timed(op, n);
    printf("%s bare: %.2f us per call%s\n", names[op], us, interrupted());
    clean();
    return 0;
  }
  if (pinned) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (sched_setaffinity(0, sizeof one, &one)) die("sched_setaffinity");
  }
  int sp[2], go[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) || pipe2(go, O_CLOEXEC)) die("pipe");
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) {
    prepare(op, n);
    int l = listen_to(numbers[op]);
    send_fd(sp[1], l);
    close(l);
    char x;
    if (read(go[0], &x, 1) != 1) _exit(1);
    double us = timed(op, n);
    printf("%s %s: %.2f us per call%s\n", names[op], argv[1], us, interrupted());
    fflush(stdout);
    _exit(0);
  }
  int l = recv_fd(sp[0]);
  __u64 sync_wake_up = 1;
  if (ioctl(l, SECCOMP_IOCTL_NOTIF_SET_FLAGS, sync_wake_up) < 0) die("SECCOMP_IOCTL_NOTIF_SET_FLAGS");
  char memp[64];
  snprintf(memp, sizeof memp, "/proc/%d/mem", child);
  int mem = open(memp, O_RDONLY | O_CLOEXEC);
  if (mem < 0) die(memp);
  if (write(go[1], "x", 1) != 1) die("write");
  supervise(l, mem, op);
  int status;
  waitpid(child, &status, 0);
  clean();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

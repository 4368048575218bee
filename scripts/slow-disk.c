// A slow disk for one directory, loaded with LD_PRELOAD (scripts/bench-starvation builds and uses it):
// every read and write of a file opened under SLOWDISK_DIR first sleeps SLOWDISK_IO_US microseconds, and
// every fsync or fdatasync of one SLOWDISK_SYNC_US. Nothing else changes: the calls then go to libc.
// SQLite's reads and writes (pread64, pwrite64), its syncs, and the outbox's write(2) and fsync(2) all pass
// through these, on whichever thread makes them.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define MAXFD 65536
static volatile unsigned char slow[MAXFD];
static const char *dir;
static size_t dirlen;
static useconds_t io_us, sync_us;

static void init(void) __attribute__((constructor));
static void init(void) {
    dir = getenv("SLOWDISK_DIR");
    dirlen = dir ? strlen(dir) : 0;
    io_us = getenv("SLOWDISK_IO_US") ? (useconds_t)atoi(getenv("SLOWDISK_IO_US")) : 0;
    sync_us = getenv("SLOWDISK_SYNC_US") ? (useconds_t)atoi(getenv("SLOWDISK_SYNC_US")) : 0;
}

static void mark(int fd, const char *path) {
    if (fd >= 0 && fd < MAXFD) slow[fd] = (dirlen && path && strncmp(path, dir, dirlen) == 0);
}
static void wait_io(int fd) {
    if (fd >= 0 && fd < MAXFD && slow[fd] && io_us) usleep(io_us);
}
static void wait_sync(int fd) {
    if (fd >= 0 && fd < MAXFD && slow[fd] && sync_us) usleep(sync_us);
}

#define REAL(name) \
    static __typeof__(&name) real = 0; \
    if (!real) real = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

int open(const char *path, int flags, ...) {
    va_list list; va_start(list, flags); mode_t mode = va_arg(list, int); va_end(list);
    REAL(open); int fd = real(path, flags, mode); mark(fd, path); return fd;
}
int open64(const char *path, int flags, ...) {
    va_list list; va_start(list, flags); mode_t mode = va_arg(list, int); va_end(list);
    REAL(open64); int fd = real(path, flags, mode); mark(fd, path); return fd;
}
int openat(int at, const char *path, int flags, ...) {
    va_list list; va_start(list, flags); mode_t mode = va_arg(list, int); va_end(list);
    REAL(openat); int fd = real(at, path, flags, mode); mark(fd, path); return fd;
}
int openat64(int at, const char *path, int flags, ...) {
    va_list list; va_start(list, flags); mode_t mode = va_arg(list, int); va_end(list);
    REAL(openat64); int fd = real(at, path, flags, mode); mark(fd, path); return fd;
}
ssize_t pread(int fd, void *buffer, size_t count, off_t offset) { REAL(pread); wait_io(fd); return real(fd, buffer, count, offset); }
ssize_t pread64(int fd, void *buffer, size_t count, off_t offset) { REAL(pread64); wait_io(fd); return real(fd, buffer, count, offset); }
ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) { REAL(pwrite); wait_io(fd); return real(fd, buffer, count, offset); }
ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) { REAL(pwrite64); wait_io(fd); return real(fd, buffer, count, offset); }
ssize_t read(int fd, void *buffer, size_t count) { REAL(read); wait_io(fd); return real(fd, buffer, count); }
ssize_t write(int fd, const void *buffer, size_t count) { REAL(write); wait_io(fd); return real(fd, buffer, count); }
int fsync(int fd) { REAL(fsync); wait_sync(fd); return real(fd); }
int fdatasync(int fd) { REAL(fdatasync); wait_sync(fd); return real(fd); }

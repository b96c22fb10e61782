/* A stand-in for a library that installs its own signal handler, as NCCL 2.12 did for SIGUSR1
 * (tests of mpi_resolver's signal watcher and of `check --deep --signal`).
 *
 * take(sig) installs this library's handler for sig at once. Preloaded (LD_PRELOAD) with the
 * environment variable SIGTAKER_AFTER_OURS=<signal number>, it also stands in for sigaction()
 * to take that signal after mpi_resolver's watcher, as NCCL did at its first all-reduce, at a
 * point fixed by the watcher's own steps rather than by time: the watcher installs its handler
 * (through Python's signal.signal), then reads the disposition back once to note its handler;
 * the next read of that signal's disposition (the check that looks for another library's
 * handler) finds this library's, installed just before it is answered. (An earlier version
 * polled every 10 ms from a thread of its own and lost the race where the check came within
 * those 10 ms of the install.) taken() counts the signals its handler got. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static volatile sig_atomic_t got = 0;
/* 0: waiting for a handler of the process's own; 1: installed; 2: read back once; 3: taken */
static int stage = 0;

static void handler(int sig) { (void)sig; got++; }

static sigaction_fn real_sigaction(void) {
    static sigaction_fn real = NULL;
    if (real == NULL)
        real = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    return real;
}

int take(int sig) {
    struct sigaction sa = {0};
    sa.sa_handler = handler;
    return real_sigaction()(sig, &sa, NULL);
}

int taken(void) { return got; }

int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    const char *after = getenv("SIGTAKER_AFTER_OURS");
    if (after != NULL && sig == atoi(after)) {
        if (act == NULL && stage == 2) {
            stage = 3;
            take(sig);
        } else if (act == NULL && stage == 1) {
            stage = 2;
        } else if (act != NULL && stage == 0 && act->sa_handler != SIG_DFL
                   && act->sa_handler != SIG_IGN && act->sa_handler != handler) {
            stage = 1;
        }
    }
    return real_sigaction()(sig, act, old);
}

/* A stand-in for a library that installs its own signal handler, as NCCL 2.12 did for SIGUSR1
 * (tests of mpi_resolver's signal watcher and of `check --deep --signal`).
 *
 * take(sig) installs this library's handler for sig at once. Loaded with the environment
 * variable SIGTAKER_AFTER_OURS=<signal number> (LD_PRELOAD), a thread of its own takes that
 * signal as soon as something else installed a handler for it: a library that sets up its
 * handler after mpi_resolver's watcher (NCCL did at its first all-reduce). taken() counts the
 * signals its handler got. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t got = 0;

static void handler(int sig) { (void)sig; got++; }

int take(int sig) {
    struct sigaction sa = {0};
    sa.sa_handler = handler;
    return sigaction(sig, &sa, NULL);
}

int taken(void) { return got; }

static void *take_after_ours(void *arg) {
    int sig = (int)(long)arg;
    for (int i = 0; i < 60000; i++) { /* 10 minutes at most */
        struct sigaction old;
        sigaction(sig, NULL, &old);
        if (old.sa_handler != SIG_DFL && old.sa_handler != handler) {
            take(sig);
            return NULL;
        }
        usleep(10000);
    }
    return NULL;
}

__attribute__((constructor)) static void init(void) {
    const char *after = getenv("SIGTAKER_AFTER_OURS");
    if (after) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, take_after_ours, (void *)(long)atoi(after)) == 0)
            pthread_detach(thread);
    }
}

/* 64 threads, each named (worker00 to worker63) and holding 1 MiB in
 * small blocks, for tests/test_parts_run.sh: run under `regionalloc run`,
 * each thread is a tag of its own. Prints "ready" once every thread holds
 * its blocks, then exits when its standard input ends, the threads still
 * alive and holding them, so that the report at exit counts them all. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 64
#define BLOCKS 4096
#define BLOCK 256

static pthread_barrier_t held;

static void *work(void *arg)
{
    char name[16];

    snprintf(name, sizeof name, "worker%02d", (int)(long)arg);
    pthread_setname_np(pthread_self(), name);
    for (int i = 0; i < BLOCKS; i++) {
        char *p = malloc(BLOCK);
        if (p == NULL)
            exit(1);
        memset(p, 1, BLOCK);
    }
    pthread_barrier_wait(&held);
    for (;;)
        pause();
    return NULL;
}

int main(void)
{
    pthread_t t;
    char line[64];

    pthread_barrier_init(&held, NULL, THREADS + 1);
    for (long i = 0; i < THREADS; i++)
        if (pthread_create(&t, NULL, work, (void *)i) != 0)
            return 1;
    pthread_barrier_wait(&held);
    puts("ready");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL)
        ;
    exit(0);
}

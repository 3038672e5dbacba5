/* regionalloc-top's live view: the table redrawn in place every interval
 * until q, a signal or the segment's end, keys read without Enter, and
 * three copies taking turns so that the rates survive a reader faster
 * than the publisher. */
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "top.h"

/* The live view's state for its signal handler and its exit: the quit
 * signal caught, and the terminal's settings to restore if keys_watched. */
static volatile sig_atomic_t quit_signal;
static bool keys_watched;
static struct termios saved_termios;

static void on_quit_signal(int sig)
{
    quit_signal = sig;
}

/* Catches the quit signals, which stay blocked except while waiting (in
 * ppoll, with *wait_mask), so none is lost between a check and the wait. */
static void catch_quit_signals(sigset_t *wait_mask)
{
    static const int quits[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa = {.sa_handler = on_quit_signal};
    sigset_t block;

    sigemptyset(&sa.sa_mask);
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof quits / sizeof quits[0]; i++) {
        sigaction(quits[i], &sa, NULL);
        sigaddset(&block, quits[i]);
    }
    sigprocmask(SIG_BLOCK, &block, wait_mask);
    for (size_t i = 0; i < sizeof quits / sizeof quits[0]; i++)
        sigdelset(wait_mask, quits[i]);
}

/* Keys without Enter or echo when stdin is a terminal; Ctrl-C still
 * raises SIGINT. */
static void enter_raw_mode(void)
{
    struct termios raw;

    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_termios) != 0)
        return;
    raw = saved_termios;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    keys_watched = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
}

static void leave_raw_mode(void)
{
    if (keys_watched)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_termios);
    keys_watched = false;
}

/* Waits ns. Returns true if the user quit meanwhile (q, or a signal). */
static bool wait_or_quit(uint64_t ns, const sigset_t *wait_mask)
{
    uint64_t deadline = monotonic_ns() + ns, now;
    struct pollfd key = {.fd = STDIN_FILENO, .events = POLLIN};

    while (quit_signal == 0 && (now = monotonic_ns()) < deadline) {
        struct timespec left = {(time_t)((deadline - now) / 1000000000u),
                                (long)((deadline - now) % 1000000000u)};
        char ch;
        if (ppoll(&key, keys_watched ? 1 : 0, &left, wait_mask) <= 0)
            continue;
        if (read(STDIN_FILENO, &ch, 1) != 1)
            leave_raw_mode(); /* the terminal hung up: only time now */
        else if (ch == 'q' || ch == 'Q')
            return true;
    }
    return quit_signal != 0;
}

/* The rows the terminal has room for below the summary and the column
 * titles; 0 if it does not say. */
static unsigned terminal_rows(void)
{
    struct winsize ws;

    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row < 7)
        return 0;
    return ws.ws_row - 6u;
}

/* Draws one frame: the screen cleared, the table. Returns true if the
 * view ends here (the process is gone, or out of memory: *status). */
static bool draw_frame(const struct options *o, const struct segment_copy *now,
                       const struct segment_copy *before, int *status)
{
    struct view v = {.now = now, .before = before, .pid = o->pid,
                     .stale = process_gone(o->pid),
                     .max_rows = terminal_rows(), .tree = o->tree};

    fputs("\033[H\033[2J", stdout);
    if (print_table(&v, o->sort)) {
        fprintf(stderr, PROGRAM ": out of memory\n");
        *status = 1;
        return true;
    }
    if (v.stale)
        printf("process %ld is gone without removing its segment; "
               PROGRAM " --clean removes it\n", o->pid);
    fflush(stdout);
    return v.stale;
}

/* Redraws every interval until q, a signal, or the segment's end, from
 * three copies that take turns: the newest, the one of an earlier
 * publication (the rates' base), and the next read. A read of the same
 * publication as the newest replaces it without moving the base, so that
 * the rates survive a reader faster than the publisher. Returns the exit
 * status. */
static int watch(const struct options *o, int dirfd,
                 struct segment_copy copies[3])
{
    struct segment_copy *now = &copies[0], *before = NULL,
                        *next = &copies[1], *spare = &copies[2];
    sigset_t wait_mask;
    char name[SEGMENT_NAME_MAX], why[WHY_MAX];
    int status = 0;

    catch_quit_signals(&wait_mask);
    enter_raw_mode();
    if (read_segment_or_say(PROGRAM, dirfd, o->dir, o->pid, now))
        return 1;
    for (;;) {
        struct segment_copy *old = now;
        if (draw_frame(o, now, before, &status) ||
            wait_or_quit(o->interval_ns, &wait_mask))
            return status;
        switch (read_pid_segment(dirfd, o->pid, next, name, why)) {
        case READ_OK:
            break;
        case READ_GONE:
            printf("process %ld has exited: its segment is gone\n", o->pid);
            return 0;
        case READ_FAILED:
        case READ_FOREIGN:
        case READ_STALE:
        case READ_VERSION:
            print_segment_error(PROGRAM, o->dir, name, why);
            return 1;
        }
        now = next;
        if (now->header.published != old->header.published) {
            next = before != NULL ? before : spare;
            before = old;
        } else {
            next = old;
        }
    }
}

int show_live(const struct options *o, int dirfd)
{
    struct segment_copy copies[3] = {0};
    int status = watch(o, dirfd, copies);

    leave_raw_mode();
    fflush(stdout);
    for (int i = 0; i < 3; i++)
        free(copies[i].records);
    return status;
}

/* The scaffolding of the emulator's own tests: checks that print "ok: ..." or "FAIL: ...",
 * and negative checks that run a broken piece of CUDA code in a child process and expect
 * the emulator to stop it with a message (the child must die of SIGABRT and its stderr
 * must contain every expected fragment, the .cu line among them). Header-only C++.
 */
#ifndef GB_TESTS_EMU_TEST_H
#define GB_TESTS_EMU_TEST_H

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>

static int emu_failures = 0;

static inline void emu_check(bool ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    fflush(stdout);
    emu_failures += !ok;
}

/* cudaFree() of each device array, then cudaStreamDestroy() of each stream: a test's
 * cleanup in one call. */
template <typename... Arrays>
static void emu_free(Arrays *...arrays)
{
    (cudaFree(arrays), ...);
}
template <typename... Streams>
static void emu_destroy_streams(Streams... streams)
{
    (cudaStreamDestroy(streams), ...);
}

/* Runs `body` in a child; returns its stderr and sets *aborted when it died of SIGABRT. */
static inline std::string emu_run_child(const std::function<void()> &body, bool *aborted)
{
    int pipefd[2];
    if (pipe(pipefd) != 0)
        abort();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        dup2(pipefd[1], 2);
        body();
        fflush(stdout);
        _exit(0);
    }
    close(pipefd[1]);
    std::string err;
    char buf[4096];
    ssize_t n;
    while ((n = read(pipefd[0], buf, sizeof buf)) > 0)
        err.append(buf, (size_t)n);
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    *aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    return err;
}

/* `body` must be stopped by the emulator with a message containing every fragment. */
static inline void emu_expect_stop(const char *what, const std::function<void()> &body,
                            std::initializer_list<const char *> fragments)
{
    bool aborted = false;
    std::string err = emu_run_child(body, &aborted);
    bool all = aborted;
    for (const char *f : fragments)
        all = all && err.find(f) != std::string::npos;
    printf("%s: caught: %s\n", all ? "ok" : "FAIL", what);
    if (!all)
        printf("  (aborted %s; stderr: %s)\n", aborted ? "yes" : "no",
               err.empty() ? "empty" : err.c_str());
    else
        printf("  %s", err.substr(0, err.find('\n') + 1).c_str());
    fflush(stdout);
    emu_failures += !all;
}

/* The line of `file` (a test's own __FILE__) whose comment ends in `// marker`, the place
 * a report must name; the test fails at once when the file cannot be read. */
static inline int emu_line_of(const char *file, const char *marker)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        printf("FAIL: cannot read %s for its line numbers\n", file);
        exit(1);
    }
    char line[512];
    std::string tag = std::string("// ") + marker;
    for (int n = 1; fgets(line, sizeof line, f); n++)
        if (strstr(line, tag.c_str()) && !strstr(line, "\"")) {
            fclose(f);
            return n;
        }
    fclose(f);
    return -1;
}

/* A stream that, as CUDA promises for non-blocking ones, waits for no other stream. */
static inline cudaStream_t emu_new_stream()
{
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
}

static int emu_finish(const char *name)
{
    printf("%s: %s\n", name, emu_failures ? "FAILED" : "all checks passed");
    return emu_failures ? 1 : 0;
}

#endif

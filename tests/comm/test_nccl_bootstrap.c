/* Tests for comm/nccl's launch reading and NCCL id exchange: no GPU, no NCCL.
 *
 * launch_read_env: the launch each set of environment variables makes (torchrun-style,
 * mpirun's OMPI_COMM_WORLD_* variables, none), and that every bad or missing variable is
 * refused with a message naming it.
 * tcp_bootstrap: three processes on one host and a free port. Rank 0 starts last, so the
 * others must retry, and serves a fixed 128-byte blob; every rank must receive the same
 * bytes. Then the failures: a rank connecting to a port nobody serves gives up within its
 * timeout naming MASTER_ADDR:MASTER_PORT; rank 0 names the rank that never came; a
 * WORLD_SIZE mismatch and a taken port are refused; a stray connection is ignored.
 *
 * Usage: test_nccl_bootstrap
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"
#include "monotonic.h"
#include "tcp_bootstrap.h"
#include "test_host.h"

#define BLOB_BYTES 128

/* ---- launch_read_env ------------------------------------------------------------------- */

static const char *const launch_variables[] = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_RANK", "PMIX_NAMESPACE", "RANK", "WORLD_SIZE",
    "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"};

typedef struct env_case {
    const char *env;     /* "NAME=value NAME=value ..." on top of an empty launch */
    const char *error;   /* NULL: accepted; else a part of the expected message */
    launch_kind kind;
    int rank, world, port;
    const char *addr;    /* where the id is served (with port); NULL: node0 */
} env_case;

#define TORCHRUN_2_OF_4 "RANK=2 WORLD_SIZE=4 LOCAL_RANK=2 MASTER_ADDR=node0 MASTER_PORT=29500"
#define TORCHRUN_1_OF_2 "RANK=1 WORLD_SIZE=2 MASTER_ADDR=node0 "
/* mpirun -np 4 on one node, and on two nodes of two ranks. */
#define MPIRUN_2_OF_4 "OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=2 " \
                      "OMPI_COMM_WORLD_LOCAL_RANK=2 OMPI_COMM_WORLD_LOCAL_SIZE=4"
#define MPIRUN_2_OF_4_2_NODES "OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=2 " \
                              "OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=2"

static const env_case env_cases[] = {
    {"", NULL, LAUNCH_SINGLE, 0, 1, 0, NULL},
    {"LOCAL_RANK=0", NULL, LAUNCH_SINGLE, 0, 1, 0, NULL},
    {"RANK=0 WORLD_SIZE=1", NULL, LAUNCH_TCP, 0, 1, 0, NULL},
    {TORCHRUN_2_OF_4, NULL, LAUNCH_TCP, 2, 4, 29500, NULL},
    {TORCHRUN_2_OF_4 " TORCHELASTIC_USE_AGENT_STORE=True", NULL, LAUNCH_TCP, 2, 4, 29501, NULL},
    {TORCHRUN_2_OF_4 " TORCHELASTIC_USE_AGENT_STORE=False", NULL, LAUNCH_TCP, 2, 4, 29500, NULL},
    /* Explicit torchrun-style variables win over mpirun's. */
    {"OMPI_COMM_WORLD_SIZE=4 " TORCHRUN_2_OF_4, NULL, LAUNCH_TCP, 2, 4, 29500, NULL},
    /* mpirun: rank and world from OMPI_COMM_WORLD_*, the id over TCP. */
    {"OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0", NULL, LAUNCH_MPI, 0, 1, 0, NULL},
    {MPIRUN_2_OF_4, NULL, LAUNCH_MPI, 2, 4, 29500, "127.0.0.1"},
    {MPIRUN_2_OF_4 " MASTER_ADDR=node0 MASTER_PORT=29600", NULL, LAUNCH_MPI, 2, 4, 29600, NULL},
    {MPIRUN_2_OF_4_2_NODES " MASTER_ADDR=node0", NULL, LAUNCH_MPI, 2, 4, 29500, NULL},
    {MPIRUN_2_OF_4_2_NODES, "mpirun -x MASTER_ADDR", 0, 0, 0, 0, NULL},
    {"OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK is not", 0, 0, 0, 0, NULL},
    {"OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=4", "OMPI_COMM_WORLD_RANK = 4 is not below",
     0, 0, 0, 0, NULL},
    {"PMIX_RANK=0", NULL, LAUNCH_SINGLE, 0, 1, 0, NULL},
    {"PMIX_RANK=3", "PMIX_RANK = 3", 0, 0, 0, 0, NULL},
    {"OMPI_COMM_WORLD_SIZE=many", "OMPI_COMM_WORLD_SIZE", 0, 0, 0, 0, NULL},
    {"RANK=4 WORLD_SIZE=4", "RANK = 4 is not below WORLD_SIZE = 4", 0, 0, 0, 0, NULL},
    {"RANK=one WORLD_SIZE=4", "RANK = \"one\"", 0, 0, 0, 0, NULL},
    {"RANK=1", "but WORLD_SIZE is not", 0, 0, 0, 0, NULL},
    {"WORLD_SIZE=2", "but RANK is not", 0, 0, 0, 0, NULL},
    {"RANK=0 WORLD_SIZE=0", "WORLD_SIZE = \"0\"", 0, 0, 0, 0, NULL},
    {"RANK=0 WORLD_SIZE=2 LOCAL_RANK=-1", "LOCAL_RANK = \"-1\"", 0, 0, 0, 0, NULL},
    {"RANK=1 WORLD_SIZE=2 MASTER_PORT=29500", "MASTER_ADDR is not set", 0, 0, 0, 0, NULL},
    {TORCHRUN_1_OF_2, "MASTER_PORT is not set", 0, 0, 0, 0, NULL},
    {TORCHRUN_1_OF_2 "MASTER_PORT=70000", "MASTER_PORT = \"70000\"", 0, 0, 0, 0, NULL},
    {TORCHRUN_1_OF_2 "MASTER_PORT=65535 TORCHELASTIC_USE_AGENT_STORE=True",
     "MASTER_PORT = 65535", 0, 0, 0, 0, NULL},
};

/* Clears every launch variable, then sets the NAME=value words of `env`. */
static void set_launch_env(const char *env)
{
    for (size_t i = 0; i < sizeof launch_variables / sizeof launch_variables[0]; i++)
        unsetenv(launch_variables[i]);
    char copy[256];
    snprintf(copy, sizeof copy, "%s", env);
    for (char *save = NULL, *word = strtok_r(copy, " ", &save); word;
         word = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(word, '=');
        *eq = '\0';
        setenv(word, eq + 1, 1);
    }
}

static int check_launch_env(void)
{
    int failures = 0;
    for (size_t i = 0; i < sizeof env_cases / sizeof env_cases[0]; i++) {
        const env_case *c = &env_cases[i];
        set_launch_env(c->env);
        gb_test_clear_error();
        launch_plan plan;
        int status = launch_read_env(gb_test_host(), &plan);
        const char *message = gb_test_last_error();
        if (c->error) {
            GB_TEST_CHECK(failures, status == -1 && strstr(message, c->error),
                          "\"%s\": status %d, message \"%s\"; expected a refusal "
                          "mentioning \"%s\"", c->env, status, message, c->error);
            printf("refused \"%s\": %s\n", c->env, message);
            continue;
        }
        GB_TEST_CHECK(failures, status == 0, "\"%s\" refused: %s", c->env, message);
        if (status != 0)
            continue;
        GB_TEST_CHECK(failures, plan.kind == c->kind && plan.rank == c->rank &&
                                    plan.world == c->world,
                      "\"%s\": launch %d rank %d world %d, expected %d, %d, %d", c->env,
                      plan.kind, plan.rank, plan.world, c->kind, c->rank, c->world);
        if (c->port)
            GB_TEST_CHECK(failures, plan.port == c->port &&
                                        strcmp(plan.master_addr, c->addr ? c->addr : "node0") == 0,
                          "\"%s\": id served at %s:%d, expected %s:%d", c->env,
                          plan.master_addr, plan.port, c->addr ? c->addr : "node0", c->port);
    }
    set_launch_env("");
    return failures;
}

/* ---- tcp_bootstrap --------------------------------------------------------------------- */

static void fill_blob(unsigned char *blob)
{
    for (int i = 0; i < BLOB_BYTES; i++)
        blob[i] = (unsigned char)(i * 37 + 11);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Child body of one rank > 0: fetch the blob and compare it. Exit code 0 when equal. */
static int fetch_and_compare(const char *addr, int port, int rank, int world, double timeout_s)
{
    unsigned char expected[BLOB_BYTES], got[BLOB_BYTES] = {0};
    fill_blob(expected);
    if (tcp_bootstrap_fetch(gb_test_host(), addr, port, rank, world, got, sizeof got, timeout_s)) {
        printf("FAIL: rank %d: %s\n", rank, gb_test_last_error());
        return 1;
    }
    if (memcmp(got, expected, sizeof got) != 0) {
        printf("FAIL: rank %d received other bytes than rank 0 served\n", rank);
        return 1;
    }
    return 0;
}

/* Runs `body(arg)` in a child process; returns its pid. */
static pid_t spawn(int (*body)(const void *), const void *arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        int code = body(arg);
        fflush(stdout);
        _exit(code);
    }
    return pid;
}

static int exit_code_of(pid_t pid)
{
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

typedef struct rank_job {
    const char *addr;
    int port, rank, world;
    double timeout_s;
} rank_job;

/* Rank 0's side: serves the test blob to a world of `world`; 0 or -1 as the call. */
static int serve_blob(int port, int world, double timeout_s)
{
    unsigned char blob[BLOB_BYTES];
    fill_blob(blob);
    gb_test_clear_error();
    return tcp_bootstrap_serve(gb_test_host(), port, world, blob, sizeof blob, timeout_s);
}

static int run_rank(const void *arg)
{
    const rank_job *job = arg;
    if (job->rank > 0)
        return fetch_and_compare(job->addr, job->port, job->rank, job->world, job->timeout_s);
    sleep_ms(300);   /* rank 0 comes last: the others must retry */
    if (serve_blob(job->port, job->world, job->timeout_s)) {
        printf("FAIL: rank 0: %s\n", gb_test_last_error());
        return 1;
    }
    return 0;
}

/* Three ranks, one of them finding rank 0 as "localhost" (IPv6 or IPv4 alike). */
static int check_exchange(void)
{
    int failures = 0, port = gb_test_free_port();
    const rank_job jobs[3] = {{"127.0.0.1", port, 0, 3, 10.0}, {"127.0.0.1", port, 1, 3, 10.0},
                              {"localhost", port, 2, 3, 10.0}};
    pid_t pids[3];
    for (int r = 0; r < 3; r++)
        pids[r] = spawn(run_rank, &jobs[r]);
    for (int r = 0; r < 3; r++) {
        int code = exit_code_of(pids[r]);
        GB_TEST_CHECK(failures, code == 0, "rank %d of 3 exited with %d", r, code);
    }
    printf("3 ranks on port %d received rank 0's %d bytes\n", port, BLOB_BYTES);
    return failures;
}

static int check_nobody_serves(void)
{
    int failures = 0, port = gb_test_free_port();
    unsigned char blob[BLOB_BYTES];
    gb_test_clear_error();
    double start = monotonic_s();
    int status =
        tcp_bootstrap_fetch(gb_test_host(), "127.0.0.1", port, 1, 2, blob, sizeof blob, 1.0);
    double took = monotonic_s() - start;
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%d (MASTER_ADDR:MASTER_PORT)", port);
    GB_TEST_CHECK(failures, status == -1, "fetching from a port nobody serves succeeded");
    GB_TEST_CHECK(failures, took >= 0.9 && took < 3.0, "gave up after %.2f s with timeout_s = 1",
                  took);
    GB_TEST_CHECK(failures, strstr(gb_test_last_error(), where) != NULL,
                  "message does not name %s: %s", where, gb_test_last_error());
    printf("unserved port, after %.2f s: %s\n", took, gb_test_last_error());
    return failures;
}

/* Rank 0 serves a world of `world` while `job` runs `run`: serving fails with a message
 * holding `needle` (the case is named `what`), and the job exits 0. */
static int expect_serve_refused(int (*run)(const void *), const rank_job *job, int world,
                                double timeout_s, const char *needle, const char *what)
{
    int failures = 0;
    pid_t pid = spawn(run, job);
    int status = serve_blob(job->port, world, timeout_s);
    GB_TEST_CHECK(failures, status == -1 && strstr(gb_test_last_error(), needle),
                  "%s: status %d, message \"%s\"", what, status, gb_test_last_error());
    printf("%s: %s\n", what, gb_test_last_error());
    int code = exit_code_of(pid);
    GB_TEST_CHECK(failures, code == 0, "%s: rank %d exited with %d", what, job->rank, code);
    return failures;
}

static int check_missing_rank(void)
{
    const rank_job rank1 = {"127.0.0.1", gb_test_free_port(), 1, 3, 10.0};
    return expect_serve_refused(run_rank, &rank1, 3, 1.5, "(RANK 2)", "rank 2 never came");
}

static int expect_fetch_refused(const void *arg)
{
    const rank_job *job = arg;
    unsigned char got[BLOB_BYTES];
    if (tcp_bootstrap_fetch(gb_test_host(), job->addr, job->port, job->rank, job->world, got,
                            sizeof got, job->timeout_s) == 0) {
        printf("FAIL: rank %d of WORLD_SIZE %d was served by a rank 0 of another size\n",
               job->rank, job->world);
        return 1;
    }
    printf("rank %d of the wrong world: %s\n", job->rank, gb_test_last_error());
    return strstr(gb_test_last_error(), "MASTER_ADDR:MASTER_PORT") ? 0 : 1;
}

static int check_world_mismatch(void)
{
    const rank_job stranger = {"127.0.0.1", gb_test_free_port(), 1, 3, 5.0};
    return expect_serve_refused(expect_fetch_refused, &stranger, 2, 5.0, "WORLD_SIZE",
                                "WORLD_SIZE 3 against 2");
}

static int check_port_taken(void)
{
    int failures = 0, port = gb_test_free_port();
    int holder = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (holder < 0 || bind(holder, (struct sockaddr *)&a, sizeof a) || listen(holder, 1)) {
        perror("holding a port");
        return 1;
    }
    int status = serve_blob(port, 2, 1.0);
    GB_TEST_CHECK(failures, status == -1 && strstr(gb_test_last_error(), "free MASTER_PORT"),
                  "serving on a taken port: status %d, message \"%s\"", status,
                  gb_test_last_error());
    printf("port taken: %s\n", gb_test_last_error());
    close(holder);
    return failures;
}

/* Connects to rank 0 like a port scanner would, and sends something else than a greeting. */
static int send_junk(const void *arg)
{
    const rank_job *job = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)job->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int tries = 0; connect(fd, (struct sockaddr *)&a, sizeof a) != 0; tries++) {
        if (tries == 100)
            return 1;
        sleep_ms(20);
    }
    static const char junk[] = "GET / HTTP/1.0\r\n\r\n";
    ssize_t sent = send(fd, junk, sizeof junk - 1, 0);
    sleep_ms(200);
    close(fd);
    return sent == (ssize_t)(sizeof junk - 1) ? 0 : 1;
}

static int check_stray_connection(void)
{
    int failures = 0, port = gb_test_free_port();
    const rank_job job = {"127.0.0.1", port, 1, 2, 10.0};
    pid_t junk = spawn(send_junk, &job);
    sleep_ms(100);
    pid_t rank1 = spawn(run_rank, &job);
    int status = serve_blob(port, 2, 10.0);
    GB_TEST_CHECK(failures, status == 0, "a stray connection broke the exchange: %s",
                  gb_test_last_error());
    int code = exit_code_of(rank1);
    GB_TEST_CHECK(failures, code == 0, "rank 1 exited with %d after a stray connection", code);
    exit_code_of(junk);
    return failures;
}

int main(void)
{
    int failures = check_launch_env();
    failures += check_exchange();
    failures += check_nobody_serves();
    failures += check_missing_rank();
    failures += check_world_mismatch();
    failures += check_port_taken();
    failures += check_stray_connection();
    printf("test_nccl_bootstrap: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}

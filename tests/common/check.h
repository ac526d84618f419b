/* The checks of the tests that call a module's functions directly (no plugin loaded):
 * CHECK(cond) prints "FILE:LINE: check failed: cond" and counts a failure (CHECK_NEAR and
 * CHECK_TEXT likewise for a number within a tolerance and a string, check_that with a
 * message of its own); check_exit() turns the count into main()'s status. One translation
 * unit a test, single-threaded.
 */
#ifndef GEARBOX_TESTS_CHECK_H
#define GEARBOX_TESTS_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int check_failures;

static inline int check_at(int ok, const char *what, const char *file, int line)
{
    if (!ok) {
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
        check_failures++;
    }
    return ok;
}
#define CHECK(cond) check_at(!!(cond), #cond, __FILE_NAME__, __LINE__)

static inline int check_near_at(double got, double want, double tol, const char *what,
                                const char *file, int line)
{
    if (fabs(got - want) <= tol)
        return 1;
    fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g (tolerance %g)\n", file, line, what, got,
            want, tol);
    check_failures++;
    return 0;
}
/* CHECK_NEAR(got, want, tol): |got - want| <= tol, else a failure naming both. */
#define CHECK_NEAR(got, want, tol)                                                           \
    check_near_at((got), (want), (tol), #got, __FILE_NAME__, __LINE__)

static inline int check_text_at(const char *actual, const char *expected, const char *what,
                                const char *file, int line)
{
    if (actual && strcmp(actual, expected) == 0)
        return 1;
    fprintf(stderr, "%s:%d: %s differs\n  expected: %s\n  actual:   %s\n", file, line, what,
            expected, actual ? actual : "(null)");
    check_failures++;
    return 0;
}
/* CHECK_TEXT(actual, expected): the same string, else a failure printing both. */
#define CHECK_TEXT(actual, expected)                                                         \
    check_text_at((actual), (expected), #actual, __FILE_NAME__, __LINE__)

/* check_that(ok, fmt, ...): else prints "FAIL: <message>" and counts a failure. */
static inline int check_that(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int check_that(bool ok, const char *fmt, ...)
{
    if (ok)
        return 1;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    check_failures++;
    return 0;
}

/* 1 after a failed check, saying how many under `name`; else 0, saying all passed. */
static inline int check_exit(const char *name)
{
    if (check_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

#endif

/* SHA-256 against known answers: the FIPS 180-2 / NIST example messages (empty, "abc",
 * the 448- and 896-bit messages, a million 'a'), messages around the padding boundaries
 * (55, 56, 63, 64, 65, 119, 120 bytes; digests from Python's hashlib), the same data fed
 * in uneven pieces, and a file hashed from disk. Prints each digest that differs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sha256.h"

static int failures;

static void expect(const char *what, const char *got, const char *want)
{
    if (strcmp(got, want) == 0) {
        printf("ok: %s\n", what);
        return;
    }
    printf("FAIL: %s\n  got  %s\n  want %s\n", what, got, want);
    failures++;
}

/* (i * 7 + 3) mod 256, a pattern with every byte value in it */
static void pattern(unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)((i * 7 + 3) & 255);
}

static void known_answers(void)
{
    static const struct {
        const char *name, *message, *digest;
    } nist[] = {
        {"empty", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"448 bits", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"896 bits",
         "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
         "klmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof nist / sizeof nist[0]; i++) {
        gb_sha256_hex(nist[i].message, strlen(nist[i].message), hex);
        expect(nist[i].name, hex, nist[i].digest);
    }
    char *million = malloc(1000000);
    memset(million, 'a', 1000000);
    gb_sha256_hex(million, 1000000, hex);
    expect("one million 'a'", hex,
           "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
}

static void padding_boundaries(void)
{
    static const struct {
        size_t n;
        const char *digest;
    } cases[] = {
        {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
        {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
        {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
        {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
        {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
        {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
        {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
    };
    unsigned char buf[128];
    char hex[65], what[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pattern(buf, cases[i].n);
        gb_sha256_hex(buf, cases[i].n, hex);
        snprintf(what, sizeof what, "%zu-byte pattern", cases[i].n);
        expect(what, hex, cases[i].digest);
    }
}

/* 1000 bytes fed as pieces of 1, 2, 3, ... bytes give the one-shot digest. */
static void uneven_pieces(void)
{
    static const char *const want =
        "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371";
    unsigned char buf[1000], digest[32];
    char hex[65];
    pattern(buf, sizeof buf);
    gb_sha256 h;
    gb_sha256_init(&h);
    for (size_t at = 0, piece = 1; at < sizeof buf; at += piece, piece++)
        gb_sha256_update(&h, buf + at, at + piece <= sizeof buf ? piece : sizeof buf - at);
    gb_sha256_final(&h, digest);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    expect("1000 bytes in uneven pieces", hex, want);
}

static void from_file(void)
{
    char path[] = "/tmp/gearbox-sha256-XXXXXX";
    int fd = mkstemp(path);
    unsigned char buf[1000];
    char hex[65] = "";
    pattern(buf, sizeof buf);
    if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf || close(fd) != 0 ||
        gb_sha256_file(path, hex) != 0)
        snprintf(hex, sizeof hex, "(could not write or read %s)", path);
    unlink(path);
    expect("a 1000-byte file", hex,
           "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371");
    expect("a missing file", gb_sha256_file("/nonexistent/gearbox", hex) == -1 ? "-1" : "0",
           "-1");
}

int main(void)
{
    known_answers();
    padding_boundaries();
    uneven_pieces();
    from_file();
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}

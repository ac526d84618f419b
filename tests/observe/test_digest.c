/* The plugin digests of manifest.json (gb_manifest_sha256_file, nettle's SHA-256) against
 * known answers: files holding the FIPS 180-2 example messages (empty, "abc", the 448-bit
 * message, a million 'a', which is read in several pieces), and a file that cannot be
 * read. Prints each digest that differs.
 *
 *   test_digest SCRATCH_DIR     the files are written there */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

static int failures;

static void expect_file(const char *dir, const char *name, const char *text, size_t size,
                        const char *want)
{
    char path[4096], got[65] = "";
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(text, 1, size, f) != size || fclose(f) != 0) {
        printf("FAIL: cannot write %s: %s\n", path, strerror(errno));
        failures++;
        return;
    }
    if (gb_manifest_sha256_file(path, got) == 0 && strcmp(got, want) == 0) {
        printf("ok: %s\n", name);
        return;
    }
    printf("FAIL: %s\n  got  %s\n  want %s\n", name, got, want);
    failures++;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_digest SCRATCH_DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    expect_file(dir, "empty", "", 0,
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect_file(dir, "abc", "abc", 3,
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    expect_file(dir, "448-bit", m448, strlen(m448),
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *million = malloc(1000000);
    if (million) {
        memset(million, 'a', 1000000);
        expect_file(dir, "million-a", million, 1000000,
                    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        free(million);
    }
    char hex[65];
    if (gb_manifest_sha256_file("/nonexistent/plugin.so", hex) == 0) {
        printf("FAIL: a missing file has a digest\n");
        failures++;
    } else {
        printf("ok: a missing file has no digest\n");
    }
    return failures ? 1 : 0;
}

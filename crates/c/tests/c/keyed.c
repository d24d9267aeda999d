/*
 * A client's pre-shared key and encryption from C, against the test's Rust server of program
 * 0x20000099 version 1 (ECHO is procedure 1) that holds the key and encrypts every session.
 *
 *   keyed URI KEY_FILE   an encrypted client echoes; one with the key but without encryption
 *                        is refused, saying so; a key file that is not there is an I/O error;
 *                        prints "ok"
 */
#include <stdio.h>
#include <string.h>

#include "lowlat.h"

#define PROGRAM 0x20000099u
#define ECHO 1u

#include "check.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: keyed URI KEY_FILE\n");
        return 2;
    }
    const char *uri = argv[1], *key = argv[2];
    lowlat_client *c = NULL;

    lowlat_client_options o = {0};
    o.psk_file = key;
    o.encrypt = 1;
    int rc = lowlat_client_connect_with(uri, PROGRAM, 1, &o, &c);
    CHECK(rc == LOWLAT_OK, "encrypted connect: %s: %s", lowlat_error_name(rc), lowlat_last_error());
    if (rc != LOWLAT_OK) return 1;
    uint8_t got[16];
    size_t n = 0;
    rc = lowlat_client_call(c, ECHO, (const uint8_t *)"secret", 6, got, sizeof got, &n);
    CHECK(rc == LOWLAT_OK && n == 6 && memcmp(got, "secret", 6) == 0, "encrypted ECHO: %s", lowlat_error_name(rc));
    lowlat_client_free(c);

    lowlat_client_options plain = {0};
    plain.psk_file = key;
    rc = lowlat_client_connect_with(uri, PROGRAM, 1, &plain, &c);
    CHECK(rc == LOWLAT_E_AUTH, "unencrypted connect: %s", lowlat_error_name(rc));
    CHECK(strstr(lowlat_last_error(), "--encrypt") != NULL, "the refusal says what to do: %s", lowlat_last_error());

    lowlat_client_options missing = {0};
    missing.psk_file = "/nonexistent/lowlat.key";
    rc = lowlat_client_connect_with(uri, PROGRAM, 1, &missing, &c);
    CHECK(rc == LOWLAT_E_IO, "missing key file: %s", lowlat_error_name(rc));

    return checks_done();
}

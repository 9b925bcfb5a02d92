/* Host test program for the codec.
 *   exo_bridge_test encode   < lines "TYPE SEQ HEXPAYLOAD"  → one hex frame per line
 *   exo_bridge_test decode   < raw bytes                    → "TYPE SEQ HEXPAYLOAD" per frame,
 *                                                              then "stats F C L V B O"
 *   exo_bridge_test bench N  → decodes N encoded frames, prints MB/s */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exo_bridge.h"

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int do_encode(void) {
    char line[512];
    while (fgets(line, sizeof line, stdin)) {
        unsigned type, seq;
        char hex[300] = "";
        if (sscanf(line, "%u %u %299s", &type, &seq, hex) < 2) continue;
        uint8_t payload[EB_MAX_PAYLOAD];
        size_t n = strlen(hex) / 2;
        if (strcmp(hex, "-") == 0) n = 0;
        if (n > EB_MAX_PAYLOAD) return 1;
        for (size_t i = 0; i < n; i++)
            payload[i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
        uint8_t out[EB_MAX_FRAME];
        size_t len = eb_encode((uint8_t)type, (uint8_t)seq, payload, (uint8_t)n, out, sizeof out);
        for (size_t i = 0; i < len; i++) printf("%02x", out[i]);
        printf("\n");
    }
    return 0;
}

static int do_decode(void) {
    eb_decoder d;
    eb_frame f;
    eb_decoder_init(&d);
    int c;
    while ((c = getchar()) != EOF) {
        if (eb_feed(&d, (uint8_t)c, &f)) {
            printf("%u %u ", f.type, f.sequence);
            if (f.length == 0) printf("-");
            for (unsigned i = 0; i < f.length; i++) printf("%02x", f.payload[i]);
            printf("\n");
        }
    }
    printf("stats %u %u %u %u %u %u\n", (unsigned)d.frames, (unsigned)d.crc_errors,
           (unsigned)d.bad_length, (unsigned)d.bad_version, (unsigned)d.cobs_errors,
           (unsigned)d.oversize);
    return 0;
}

static int do_bench(long count) {
    uint8_t payload[11] = {4, 10, 0, 20, 0, 30, 0, 40, 0, 0, 0};
    uint8_t frame[EB_MAX_FRAME];
    size_t len = eb_encode(0x82, 1, payload, 9, frame, sizeof frame);
    eb_decoder d;
    eb_frame f;
    eb_decoder_init(&d);
    clock_t t0 = clock();
    long got = 0;
    for (long k = 0; k < count; k++)
        for (size_t i = 0; i < len; i++) got += eb_feed(&d, frame[i], &f);
    double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("%ld frames %.1f MB/s\n", got, (double)count * (double)len / s / 1e6);
    return got == count ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "encode") == 0) return do_encode();
    if (argc >= 2 && strcmp(argv[1], "decode") == 0) return do_decode();
    if (argc >= 3 && strcmp(argv[1], "bench") == 0) return do_bench(atol(argv[2]));
    fprintf(stderr, "usage: %s encode|decode|bench N\n", argv[0]);
    return 2;
}

/* Host test program for the codec.
 *   exo_bridge_test encode   < lines "TYPE SEQ HEXPAYLOAD"  → one hex frame per line
 *   exo_bridge_test decode   < raw bytes                    → "TYPE SEQ HEXPAYLOAD" per frame,
 *                                                              then "stats F C L V B O"
 *   exo_bridge_test bench N  → decodes N encoded frames, prints MB/s
 * The session frames through their own encoders and decoders, one per line:
 *   "buttons SEQ MASK PRESSES", "answer SEQ KIND ANSWER REASON MOTION",
 *   "menu SEQ STATE POSTURE MOTION SELECTED POSSIBLE STEPS SPEED LEVEL" (decimal)
 *   exo_bridge_test fields-encode < such lines → one hex frame per line ("refused": 0 bytes)
 *   exo_bridge_test fields-decode < raw bytes  → such a line per session frame, "reject TYPE"
 *                                                per one of a wrong length, then the stats */
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

static void print_hex(const uint8_t *out, size_t len) {
    if (len == 0) printf("refused");
    for (size_t i = 0; i < len; i++) printf("%02x", out[i]);
    printf("\n");
}

static int do_fields_encode(void) {
    char line[512], name[16];
    unsigned long v[9] = {0};
    while (fgets(line, sizeof line, stdin)) {
        int n = sscanf(line, "%15s %lu %lu %lu %lu %lu %lu %lu %lu %lu", name, &v[0], &v[1],
                       &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]);
        uint8_t out[EB_MAX_FRAME];
        uint8_t seq = (uint8_t)v[0];
        if (strcmp(name, "buttons") == 0 && n == 4) {
            eb_buttons b = {(uint8_t)v[1], (uint16_t)v[2]};
            print_hex(out, eb_encode_buttons(&b, seq, out, sizeof out));
        } else if (strcmp(name, "answer") == 0 && n == 6) {
            eb_answer a = {(uint8_t)v[1], (uint8_t)v[2], (uint8_t)v[3], (uint8_t)v[4]};
            print_hex(out, eb_encode_answer(&a, seq, out, sizeof out));
        } else if (strcmp(name, "menu") == 0 && n == 10) {
            eb_menu m = {(uint8_t)v[1], (uint8_t)v[2], (uint8_t)v[3], (uint8_t)v[4],
                         (uint32_t)v[5], (uint16_t)v[6], (uint16_t)v[7], (uint8_t)v[8]};
            print_hex(out, eb_encode_menu(&m, seq, out, sizeof out));
        } else {
            return 1;
        }
    }
    return 0;
}

static int do_fields_decode(void) {
    eb_decoder d;
    eb_frame f;
    eb_buttons b;
    eb_answer a;
    eb_menu m;
    unsigned rejected = 0;
    eb_decoder_init(&d);
    int c;
    while ((c = getchar()) != EOF) {
        if (!eb_feed(&d, (uint8_t)c, &f)) continue;
        int rb = eb_decode_buttons(&f, &b), ra = eb_decode_answer(&f, &a);
        int rm = eb_decode_menu(&f, &m);
        if (rb == 1) printf("buttons %u %u %u\n", f.sequence, b.mask, b.presses);
        if (ra == 1)
            printf("answer %u %u %u %u %u\n", f.sequence, a.kind, a.answer, a.reason, a.motion);
        if (rm == 1)
            printf("menu %u %u %u %u %u %lu %u %u %u\n", f.sequence, m.state, m.posture,
                   m.motion, m.selected, (unsigned long)m.possible, m.steps, m.speed_mm_s,
                   m.level_pct);
        if (rb < 0 || ra < 0 || rm < 0) {
            printf("reject %u\n", f.type);
            rejected++;
        }
    }
    printf("stats %u %u %u %u %u %u rejected %u\n", (unsigned)d.frames, (unsigned)d.crc_errors,
           (unsigned)d.bad_length, (unsigned)d.bad_version, (unsigned)d.cobs_errors,
           (unsigned)d.oversize, rejected);
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
    if (argc >= 2 && strcmp(argv[1], "fields-encode") == 0) return do_fields_encode();
    if (argc >= 2 && strcmp(argv[1], "fields-decode") == 0) return do_fields_decode();
    if (argc >= 3 && strcmp(argv[1], "bench") == 0) return do_bench(atol(argv[2]));
    fprintf(stderr, "usage: %s encode|decode|fields-encode|fields-decode|bench N\n", argv[0]);
    return 2;
}

#include "exo_bridge.h"

uint16_t eb_crc16(const uint8_t *data, size_t len) {
    uint16_t crc = 0xFFFFu;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint16_t)data[i] << 8);
        for (int b = 0; b < 8; b++) {
            crc = (crc & 0x8000u) ? (uint16_t)((crc << 1) ^ 0x1021u) : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

static size_t cobs_encode(const uint8_t *in, size_t len, uint8_t *out) {
    size_t code_at = 0, o = 1;
    uint8_t code = 1;
    for (size_t i = 0; i < len; i++) {
        if (in[i] == 0) {
            out[code_at] = code;
            code_at = o++;
            code = 1;
        } else {
            out[o++] = in[i];
            if (++code == 0xFF) {
                out[code_at] = code;
                code_at = o++;
                code = 1;
            }
        }
    }
    out[code_at] = code;
    return o;
}

/* Returns the decoded length, or (size_t)-1 on a malformed COBS block. */
static size_t cobs_decode(const uint8_t *in, size_t len, uint8_t *out, size_t capacity) {
    size_t i = 0, o = 0;
    while (i < len) {
        uint8_t code = in[i++];
        if (code == 0) return (size_t)-1;
        for (uint8_t k = 1; k < code; k++) {
            if (i >= len || o >= capacity) return (size_t)-1;
            out[o++] = in[i++];
        }
        if (code != 0xFF && i < len) {
            if (o >= capacity) return (size_t)-1;
            out[o++] = 0;
        }
    }
    return o;
}

size_t eb_encode(uint8_t type, uint8_t sequence, const uint8_t *payload, uint8_t length,
                 uint8_t *out, size_t capacity) {
    uint8_t raw[EB_MAX_RAW];
    if (length > EB_MAX_PAYLOAD || capacity < EB_MAX_FRAME) return 0;
    raw[0] = EB_VERSION;
    raw[1] = type;
    raw[2] = sequence;
    raw[3] = length;
    for (uint8_t i = 0; i < length; i++) raw[4 + i] = payload[i];
    uint16_t crc = eb_crc16(raw, 4u + length);
    raw[4 + length] = (uint8_t)(crc & 0xFFu);
    raw[5 + length] = (uint8_t)(crc >> 8);
    size_t n = cobs_encode(raw, 6u + length, out);
    out[n] = 0;
    return n + 1;
}

void eb_decoder_init(eb_decoder *d) {
    d->len = 0;
    d->overflow = 0;
    d->frames = d->crc_errors = d->bad_length = d->bad_version = d->cobs_errors = 0;
    d->oversize = 0;
}

int eb_feed(eb_decoder *d, uint8_t byte, eb_frame *frame) {
    if (byte != 0) {
        if (d->len >= sizeof d->buf) {
            d->overflow = 1;
        } else if (!d->overflow) {
            d->buf[d->len++] = byte;
        }
        return 0;
    }
    size_t len = d->len;
    int overflow = d->overflow;
    d->len = 0;
    d->overflow = 0;
    if (overflow) {
        d->oversize++;
        return 0;
    }
    if (len == 0) return 0;
    uint8_t raw[EB_MAX_RAW];
    size_t n = cobs_decode(d->buf, len, raw, sizeof raw);
    if (n == (size_t)-1) {
        d->cobs_errors++;
        return 0;
    }
    if (n < 6 || n != 6u + raw[3]) {
        d->bad_length++;
        return 0;
    }
    uint16_t crc = (uint16_t)(raw[n - 2] | (raw[n - 1] << 8));
    if (crc != eb_crc16(raw, n - 2)) {
        d->crc_errors++;
        return 0;
    }
    if (raw[0] != EB_VERSION) {
        d->bad_version++;
        return 0;
    }
    frame->type = raw[1];
    frame->sequence = raw[2];
    frame->length = raw[3];
    for (uint8_t i = 0; i < raw[3]; i++) frame->payload[i] = raw[4 + i];
    d->frames++;
    return 1;
}

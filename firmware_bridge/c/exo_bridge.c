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

/* ---- the session frames (little-endian fields) */
static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

size_t eb_encode_buttons(const eb_buttons *b, uint8_t sequence, uint8_t *out, size_t capacity) {
    uint8_t p[EB_BUTTONS_LEN];
    p[0] = b->mask;
    put16(p + 1, b->presses);
    return eb_encode(EB_BUTTONS, sequence, p, EB_BUTTONS_LEN, out, capacity);
}

size_t eb_encode_answer(const eb_answer *a, uint8_t sequence, uint8_t *out, size_t capacity) {
    uint8_t p[EB_ANSWER_LEN] = {a->kind, a->answer, a->reason, a->motion};
    return eb_encode(EB_ANSWER, sequence, p, EB_ANSWER_LEN, out, capacity);
}

size_t eb_encode_menu(const eb_menu *m, uint8_t sequence, uint8_t *out, size_t capacity) {
    uint8_t p[EB_MENU_LEN];
    if (m->level_pct > 100u) return 0;
    p[0] = m->state;
    p[1] = m->posture;
    p[2] = m->motion;
    p[3] = m->selected;
    put16(p + 4, (uint16_t)(m->possible & 0xFFFFu));
    put16(p + 6, (uint16_t)(m->possible >> 16));
    put16(p + 8, m->steps);
    put16(p + 10, m->speed_mm_s);
    p[12] = m->level_pct;
    return eb_encode(EB_MENU, sequence, p, EB_MENU_LEN, out, capacity);
}

/* 1: a frame of this type and length; 0: another type; -1: this type, a wrong length */
static int check(const eb_frame *f, uint8_t type, uint8_t length) {
    if (f->type != type) return 0;
    return f->length == length ? 1 : -1;
}

int eb_decode_buttons(const eb_frame *f, eb_buttons *b) {
    int ok = check(f, EB_BUTTONS, EB_BUTTONS_LEN);
    if (ok == 1) {
        b->mask = f->payload[0];
        b->presses = get16(f->payload + 1);
    }
    return ok;
}

int eb_decode_answer(const eb_frame *f, eb_answer *a) {
    int ok = check(f, EB_ANSWER, EB_ANSWER_LEN);
    if (ok == 1) {
        a->kind = f->payload[0];
        a->answer = f->payload[1];
        a->reason = f->payload[2];
        a->motion = f->payload[3];
    }
    return ok;
}

int eb_decode_menu(const eb_frame *f, eb_menu *m) {
    int ok = check(f, EB_MENU, EB_MENU_LEN);
    if (ok == 1 && f->payload[12] > 100u) ok = -1; /* a level over 100 % */
    if (ok == 1) {
        const uint8_t *p = f->payload;
        m->state = p[0];
        m->posture = p[1];
        m->motion = p[2];
        m->selected = p[3];
        m->possible = (uint32_t)get16(p + 4) | ((uint32_t)get16(p + 6) << 16);
        m->steps = get16(p + 8);
        m->speed_mm_s = get16(p + 10);
        m->level_pct = p[12];
    }
    return ok;
}

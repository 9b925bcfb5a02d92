/* exo-rt board link codec, portable C99 (no dynamic allocation, fixed buffers).
 *
 * Frame = COBS([version, type, sequence, length, payload..., crc_lo, crc_hi]) + 0x00.
 * CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF) over version..payload. The same layout as
 * firmware_bridge/protocol.py; the Python tests cross-check both on shared vectors.
 */
#ifndef EXO_BRIDGE_H
#define EXO_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#define EB_VERSION 1u
#define EB_MAX_PAYLOAD 64u
#define EB_MAX_RAW (4u + EB_MAX_PAYLOAD + 2u)
#define EB_MAX_FRAME (EB_MAX_RAW + 2u + 1u) /* COBS overhead + delimiter */

typedef struct {
    uint8_t type;
    uint8_t sequence;
    uint8_t length;
    uint8_t payload[EB_MAX_PAYLOAD];
} eb_frame;

typedef struct {
    uint8_t buf[EB_MAX_FRAME];
    size_t len;
    int overflow;
    uint32_t frames, crc_errors, bad_length, bad_version, cobs_errors, oversize;
} eb_decoder;

uint16_t eb_crc16(const uint8_t *data, size_t len);
/* Writes one frame (delimiter included) into out; returns its length, or 0 if it does not fit. */
size_t eb_encode(uint8_t type, uint8_t sequence, const uint8_t *payload, uint8_t length,
                 uint8_t *out, size_t capacity);
void eb_decoder_init(eb_decoder *d);
/* Feeds one byte; returns 1 and fills *frame when a valid frame ends, else 0. Never fails on
 * garbage: bad frames are counted and decoding resumes at the next 0x00. */
int eb_feed(eb_decoder *d, uint8_t byte, eb_frame *frame);

/* ---- the session frames: the crutch's buttons, the PC's answers and the display's menu.
 * The codes are firmware_bridge/requests.py's (tests/test_board_buttons.py checks each one). */
#define EB_ANSWER 0x04u  /* PC -> board */
#define EB_MENU 0x05u    /* PC -> board */
#define EB_BUTTONS 0x85u /* board -> PC, every EB_BUTTON_PERIOD_MS and at once on a change */
#define EB_NO_INDEX 0xFFu /* an index field: no posture / motion */
#define EB_BUTTON_PERIOD_MS 20u
#define EB_BUTTON_SILENCE_MS 1000u /* silent longer while walking: the PC ends the stride */

/* buttons (bits of eb_buttons.mask) */
#define EB_B_GO 0x01u
#define EB_B_STOP 0x02u
#define EB_B_NEXT 0x04u
#define EB_B_PREV 0x08u
#define EB_B_MODE 0x10u
/* request kinds (eb_answer.kind) */
#define EB_K_START 1u
#define EB_K_STOP 2u
#define EB_K_GO 3u
#define EB_K_GO_RELEASE 4u
#define EB_K_SPEED 5u
#define EB_K_STEP_LENGTH 6u
#define EB_K_LEVEL 7u
#define EB_K_CONFIRM 8u
#define EB_K_NEXT 9u
#define EB_K_PREV 10u
#define EB_K_MODE 11u
#define EB_K_END 12u
/* answers (eb_answer.answer) */
#define EB_A_ACCEPTED 1u
#define EB_A_REJECTED 2u
#define EB_A_FINISHED 3u
/* why a request is refused (eb_answer.reason) */
#define EB_R_NONE 0u
#define EB_R_NOT_FROM_HERE 1u
#define EB_R_BUSY 2u
#define EB_R_GO_HELD 3u
#define EB_R_UNKNOWN_MOTION 4u
#define EB_R_SPEED_RANGE 5u
#define EB_R_STEP_RANGE 6u
#define EB_R_NOT_WALKING 7u
#define EB_R_ONLY_HOME 8u
#define EB_R_NEEDS_CONFIRM 9u
#define EB_R_NOT_ACTIVE 10u
#define EB_R_NOT_STOPPABLE 11u
#define EB_R_LEVEL_RANGE 12u
#define EB_R_ALREADY 13u
#define EB_R_NOT_IN_POSTURE 14u
#define EB_R_NOTHING_TO_CONFIRM 15u
#define EB_R_NOT_SELECTABLE 16u
#define EB_R_BEYOND_JOINTS 17u
#define EB_R_SESSION_FAULT 18u
#define EB_R_WINDING_HOT 19u
#define EB_R_WINDING_WARM 20u

typedef struct {
    uint8_t mask;     /* buttons held now (EB_B_*) */
    uint16_t presses; /* presses of any button since start, wrapping */
} eb_buttons;

typedef struct {
    uint8_t kind, answer, reason; /* EB_K_*, EB_A_*, EB_R_* */
    uint8_t motion;               /* index in the activities file, EB_NO_INDEX: none */
} eb_answer;

typedef struct {
    uint8_t state;         /* the controller's state */
    uint8_t posture;       /* indices, EB_NO_INDEX: none or unknown */
    uint8_t motion;        /* running */
    uint8_t selected;      /* to start on GO */
    uint32_t possible;     /* bit i: motion i may start now */
    uint16_t steps;        /* strides walked */
    uint16_t speed_mm_s;   /* walking speed (mm/s) */
    uint8_t level_pct;     /* assistance level (%, 0-100) */
} eb_menu;

#define EB_BUTTONS_LEN 3u
#define EB_ANSWER_LEN 4u
#define EB_MENU_LEN 13u

/* Encoders: one frame (delimiter included) into out (capacity >= EB_MAX_FRAME); its length,
 * or 0 if a field is out of range (a menu's level over 100) or out is too small. */
size_t eb_encode_buttons(const eb_buttons *b, uint8_t sequence, uint8_t *out, size_t capacity);
size_t eb_encode_answer(const eb_answer *a, uint8_t sequence, uint8_t *out, size_t capacity);
size_t eb_encode_menu(const eb_menu *m, uint8_t sequence, uint8_t *out, size_t capacity);
/* Decoders of a frame eb_feed returned: 1 filled, 0 a frame of another type, -1 a frame of
 * this type with a wrong payload length or a menu's level over 100 (count it and drop it, as
 * the PC's decoder does). */
int eb_decode_buttons(const eb_frame *f, eb_buttons *b);
int eb_decode_answer(const eb_frame *f, eb_answer *a);
int eb_decode_menu(const eb_frame *f, eb_menu *m);

#endif

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

#endif

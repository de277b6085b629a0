/* sim_pi.h - end-to-end protection information (PI) as the software
 * controller computes and checks it, for its namespaces with metadata and
 * for tests that build or inspect a block's PI.
 *
 * The guards: the T10 DIF CRC-16 (polynomial 8BB7h, not reflected, initial
 * value 0, no final XOR) of the 16-bit guard format, and the NVMe CRC-64
 * (polynomial AD93D23594C93659h, reflected, initial value and final XOR all
 * ones) of the 64-bit guard format.  A guard covers the block's data and,
 * when the PI is the last bytes of a larger metadata, the metadata bytes
 * before it.  The tuple is stored big-endian (struct nvme_pi16, nvme_pi64).
 *
 * Pure functions of their arguments (the CRC tables are built once, on
 * first use, thread-safely): any thread.  Prefix sim_pi_ and sim_crc.
 */
#ifndef NVMEFS_SIM_PI_H
#define NVMEFS_SIM_PI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The T10 DIF CRC-16 of len bytes at p, continuing crc (0 to start). */
uint16_t sim_crc16_t10dif(uint16_t crc, const void *p, size_t len);
/* The NVMe CRC-64 register after len bytes at p, continuing state
 * (SIM_CRC64_INIT to start); the CRC is the register's complement. */
#define SIM_CRC64_INIT (~0ull)
uint64_t sim_crc64_nvme_update(uint64_t state, const void *p, size_t len);
static inline uint64_t sim_crc64_nvme(const void *p, size_t len)
{
	return ~sim_crc64_nvme_update(SIM_CRC64_INIT, p, len);
}

/* A namespace's PI format. */
struct sim_pi_fmt {
	unsigned type; /* 1, 2 or 3 (0: no PI: nothing below applies) */
	bool g64;      /* the 64-bit guard format (16 bytes), else the 16-bit one (8) */
	bool first;    /* the PI is the first bytes of the metadata, else the last */
	unsigned ms;   /* metadata bytes per block, at least the PI's size */
};

/* One block's PI in host order; ref holds 32 or 48 bits. */
struct sim_pi_tuple {
	uint64_t guard;
	uint16_t app;
	uint64_t ref;
};

static inline unsigned sim_pi_size(const struct sim_pi_fmt *f)
{
	return f->g64 ? 16u : 8u;
}

/* Where the PI starts in a block's metadata. */
static inline unsigned sim_pi_off(const struct sim_pi_fmt *f)
{
	return f->first ? 0 : f->ms - sim_pi_size(f);
}

/* All ones of the reference tag's width. */
static inline uint64_t sim_pi_ref_mask(const struct sim_pi_fmt *f)
{
	return f->g64 ? 0xffffffffffffull : 0xffffffffull;
}

/* A running guard: start, add bytes, finish. */
static inline uint64_t sim_pi_guard_start(const struct sim_pi_fmt *f)
{
	return f->g64 ? SIM_CRC64_INIT : 0;
}
uint64_t sim_pi_guard_add(const struct sim_pi_fmt *f, uint64_t g, const void *p, size_t len);
static inline uint64_t sim_pi_guard_end(const struct sim_pi_fmt *f, uint64_t g)
{
	return f->g64 ? ~g : g;
}

/* The guard of one block: its data (lbs bytes) and, with the PI last, the
 * metadata bytes before the PI (md: the block's metadata). */
uint64_t sim_pi_guard(const struct sim_pi_fmt *f, const void *data, size_t lbs, const uint8_t *md);

/* The tuple in a block's metadata md (at sim_pi_off), and back. */
void sim_pi_get(const struct sim_pi_fmt *f, const uint8_t *md, struct sim_pi_tuple *t);
void sim_pi_put(const struct sim_pi_fmt *f, uint8_t *md, const struct sim_pi_tuple *t);

/* Whether checking is off for a block with this tuple: application tag FFFFh
 * (Types 1, 2), and a reference tag of all ones too (Type 3). */
bool sim_pi_escape(const struct sim_pi_fmt *f, const struct sim_pi_tuple *t);

/* The checks PRCHK asks for (prinfo: cdw12 as sent, NVME_RW_PRCHK_* bits)
 * of a block's tuple t, whose data and metadata give guard: the guard, then
 * the application tag under its mask (cdw15: lbat 15:0, lbatm 31:16), then
 * the reference tag against ref (the expected one for this block).  0, or
 * the status of the first that fails (SCT media, SC 82h guard, 83h
 * application tag, 84h reference tag).  An escaped tuple passes. */
uint16_t sim_pi_check(const struct sim_pi_fmt *f, const struct sim_pi_tuple *t, uint64_t guard,
                      uint32_t prinfo, uint32_t cdw15, uint64_t ref);

#endif

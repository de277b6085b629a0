/* nvme_spec.h - NVMe base + PCIe transport structures as nvmefs uses them.
 *
 * Register map, submission/completion entries, identify and log page layouts,
 * opcodes and status codes.  Every structure's size is static-asserted: these
 * are what crosses the bus, so a wrong size is a wrong driver.  Names follow
 * the specification's field names (lower-case), prefixed nvme_.
 */
#ifndef NVMEFS_NVME_SPEC_H
#define NVMEFS_NVME_SPEC_H

#include <assert.h>
#include <stdint.h>

/* ---- controller registers (BAR0 offsets) ---- */
enum {
	NVME_REG_CAP = 0x00,   /* 64 bit */
	NVME_REG_VS = 0x08,
	NVME_REG_INTMS = 0x0c,
	NVME_REG_INTMC = 0x10,
	NVME_REG_CC = 0x14,
	NVME_REG_CSTS = 0x1c,
	NVME_REG_NSSR = 0x20,
	NVME_REG_AQA = 0x24,
	NVME_REG_ASQ = 0x28,   /* 64 bit */
	NVME_REG_ACQ = 0x30,   /* 64 bit */
	NVME_REG_DBS = 0x1000, /* doorbells start here */
};

#define NVME_CAP_MQES(cap) ((uint32_t)((cap) & 0xffff))       /* 0-based */
#define NVME_CAP_CQR(cap) ((uint32_t)(((cap) >> 16) & 0x1))
#define NVME_CAP_TO(cap) ((uint32_t)(((cap) >> 24) & 0xff))   /* 500 ms units */
#define NVME_CAP_DSTRD(cap) ((uint32_t)(((cap) >> 32) & 0xf))
#define NVME_CAP_NSSRS(cap) ((uint32_t)(((cap) >> 36) & 0x1))
#define NVME_CAP_CSS(cap) ((uint32_t)(((cap) >> 37) & 0xff))
#define NVME_CAP_MPSMIN(cap) ((uint32_t)(((cap) >> 48) & 0xf)) /* 2^(12+x) */
#define NVME_CAP_MPSMAX(cap) ((uint32_t)(((cap) >> 52) & 0xf))
#define NVME_CAP_CSS_NVM 0x1

#define NVME_VS(maj, min, ter) (((uint32_t)(maj) << 16) | ((uint32_t)(min) << 8) | (ter))

enum {
	NVME_CC_EN = 1u << 0,
	NVME_CC_CSS_SHIFT = 4,
	NVME_CC_MPS_SHIFT = 7,
	NVME_CC_AMS_SHIFT = 11,
	NVME_CC_SHN_SHIFT = 14,
	NVME_CC_IOSQES_SHIFT = 16,
	NVME_CC_IOCQES_SHIFT = 20,
	NVME_CC_SHN_MASK = 3u << 14,
	NVME_CC_SHN_NORMAL = 1u << 14,
	NVME_CC_SHN_ABRUPT = 2u << 14,
};

enum {
	NVME_CSTS_RDY = 1u << 0,
	NVME_CSTS_CFS = 1u << 1,
	NVME_CSTS_SHST_MASK = 3u << 2,
	NVME_CSTS_SHST_NORMAL = 0u << 2,
	NVME_CSTS_SHST_OCCUR = 1u << 2,
	NVME_CSTS_SHST_CMPLT = 2u << 2,
	NVME_CSTS_NSSRO = 1u << 4,
};

/* doorbell offsets from BAR0 for queue qid with stride 4 << dstrd */
static inline uint32_t nvme_sq_tdbl_off(uint16_t qid, uint32_t dstrd)
{
	return NVME_REG_DBS + (2u * qid) * (4u << dstrd);
}
static inline uint32_t nvme_cq_hdbl_off(uint16_t qid, uint32_t dstrd)
{
	return NVME_REG_DBS + (2u * qid + 1) * (4u << dstrd);
}

/* The highest queue ID whose two doorbells (SQ tail, CQ head) lie inside a
 * BAR0 of bar_len bytes at stride 4 << dstrd, at most 65535; -1 when not
 * even the admin queue's do.  In 64 bits: at DSTRD 15 the offsets of large
 * queue IDs overflow 32.  Up to the ID returned, the 32-bit offsets above
 * are exact (bar_len counts only up to 4 GiB). */
static inline int64_t nvme_db_max_qid(uint64_t bar_len, uint32_t dstrd)
{
	uint64_t stride = 4ull << (dstrd & 0xf);
	if (bar_len > UINT32_MAX)
		bar_len = UINT32_MAX;
	if (bar_len < NVME_REG_DBS + stride + 4)
		return -1;
	/* doorbell i (2 * qid: SQ tail, 2 * qid + 1: CQ head) ends at
	 * NVME_REG_DBS + i * stride + 4 */
	uint64_t last = (bar_len - NVME_REG_DBS - 4) / stride;
	uint64_t q = (last - 1) / 2;
	return q > 0xffff ? 0xffff : (int64_t)q;
}

/* ---- submission and completion queue entries ---- */
struct nvme_sqe {
	uint8_t opc;
	uint8_t flags; /* fuse 1:0, psdt 7:6 */
	uint16_t cid;
	uint32_t nsid;
	uint32_t cdw2;
	uint32_t cdw3;
	uint64_t mptr;
	uint64_t prp1;
	uint64_t prp2;
	uint32_t cdw10;
	uint32_t cdw11;
	uint32_t cdw12;
	uint32_t cdw13;
	uint32_t cdw14;
	uint32_t cdw15;
};
static_assert(sizeof(struct nvme_sqe) == 64, "SQE is 64 bytes");
#define NVME_SQES_LOG2 6

struct nvme_cqe {
	uint32_t dw0;
	uint32_t dw1;
	uint16_t sq_head;
	uint16_t sq_id;
	uint16_t cid;
	uint16_t status; /* P bit 0, SC 8:1, SCT 11:9, CRD 13:12, M 14, DNR 15 */
};
static_assert(sizeof(struct nvme_cqe) == 16, "CQE is 16 bytes");
#define NVME_CQES_LOG2 4

/* status field without the phase bit: (dnr << 14) | (m << 13) | (crd << 11) | (sct << 8) | sc */
#define NVME_CQE_PHASE(st) ((st) & 1u)
#define NVME_CQE_STATUS(st) ((uint16_t)(((st) >> 1) & 0x7fff))
#define NVME_STATUS_SCT(s) (((s) >> 8) & 0x7)
#define NVME_STATUS_SC(s) ((s) & 0xff)
#define NVME_STATUS_DNR 0x4000 /* in the 15-bit status as shifted: bit 14 */
#define NVME_STATUS_MAKE(sct, sc) ((uint16_t)(((sct) << 8) | (sc)))

/* PSDT: 0 = PRPs */
#define NVME_SQE_PSDT_SGL_MPTR_CONTIG (1u << 6)

/* ---- opcodes ---- */
enum nvme_admin_opc {
	NVME_ADM_DELETE_SQ = 0x00,
	NVME_ADM_CREATE_SQ = 0x01,
	NVME_ADM_GET_LOG_PAGE = 0x02,
	NVME_ADM_DELETE_CQ = 0x04,
	NVME_ADM_CREATE_CQ = 0x05,
	NVME_ADM_IDENTIFY = 0x06,
	NVME_ADM_ABORT = 0x08,
	NVME_ADM_SET_FEATURES = 0x09,
	NVME_ADM_GET_FEATURES = 0x0a,
	NVME_ADM_ASYNC_EVENT = 0x0c,
};

enum nvme_io_opc {
	NVME_CMD_FLUSH = 0x00,
	NVME_CMD_WRITE = 0x01,
	NVME_CMD_READ = 0x02,
	NVME_CMD_WRITE_ZEROES = 0x08,
	NVME_CMD_DSM = 0x09,
};

/* Read/Write cdw12 */
#define NVME_RW_FUA (1u << 30)
/* Read, Write and Write Zeroes cdw12 bits 29:26: Protection Information
 * (PRINFO).  PRACT: the controller inserts the protection information on a
 * write and strips it on a read (with metadata of exactly the PI's size no
 * metadata crosses the bus then); PRCHK: which fields the controller checks
 * (guard, application tag, reference tag). */
#define NVME_RW_PRACT      (1u << 29)
#define NVME_RW_PRCHK_GUARD (1u << 28)
#define NVME_RW_PRCHK_APP  (1u << 27)
#define NVME_RW_PRCHK_REF  (1u << 26)
#define NVME_RW_PRINFO_MASK (0xfu << 26)
/* Read/Write cdw14: the (expected) initial logical block reference tag, bits
 * 31:0; with the 64-bit guard its bits 47:32 are cdw3 bits 15:0 (no storage
 * tag).  cdw15: the application tag (15:0) and its mask (31:16). */
/* Write Zeroes cdw12: deallocate */
#define NVME_WZ_DEAC (1u << 25)
/* DSM cdw11 attributes */
#define NVME_DSM_AD (1u << 2)

struct nvme_dsm_range {
	uint32_t cattr;
	uint32_t nlb; /* 1-based */
	uint64_t slba;
};
static_assert(sizeof(struct nvme_dsm_range) == 16, "DSM range is 16 bytes");
#define NVME_DSM_MAX_RANGES 256

/* Create I/O CQ cdw11 / Create I/O SQ cdw11 */
#define NVME_QUEUE_PC (1u << 0)
#define NVME_CQ_IEN (1u << 1)

/* Identify CNS values */
enum {
	NVME_ID_CNS_NS = 0x00,
	NVME_ID_CNS_CTRL = 0x01,
	NVME_ID_CNS_NS_ACTIVE_LIST = 0x02,
	NVME_ID_CNS_NS_CSI = 0x05,   /* I/O command set specific namespace (cdw11 CSI) */
	NVME_ID_CNS_CTRL_NVM = 0x06, /* I/O command set specific controller, NVM */
};
/* Identify cdw11 bits 31:24: the command set (CSI); the NVM command set is 0 */
#define NVME_ID_CSI_SHIFT 24
#define NVME_CSI_NVM 0

/* Feature identifiers */
enum {
	NVME_FEAT_ARBITRATION = 0x01,
	NVME_FEAT_POWER_MGMT = 0x02,
	NVME_FEAT_TEMP_THRESH = 0x04,
	NVME_FEAT_ERR_RECOVERY = 0x05,
	NVME_FEAT_VOLATILE_WC = 0x06,
	NVME_FEAT_NUM_QUEUES = 0x07,
	NVME_FEAT_IRQ_COALESCE = 0x08,
	NVME_FEAT_IRQ_CONFIG = 0x09,
	NVME_FEAT_ASYNC_EVENT = 0x0b,
};

/* Log page identifiers */
enum {
	NVME_LOG_ERROR = 0x01,
	NVME_LOG_SMART = 0x02,
	NVME_LOG_FW_SLOT = 0x03,
	NVME_LOG_CHANGED_NS = 0x04, /* 1024 x u32 NSIDs; FFFFFFFFh first: more changed */
	NVME_LOG_CMD_EFFECTS = 0x05,
};
#define NVME_CHANGED_NS_MAX 1024u

/* Asynchronous events: the AER completion's dw0 is type 2:0, info 15:8, log
 * page 23:16 */
#define NVME_AER_TYPE(dw0) ((dw0)&7u)
#define NVME_AER_INFO(dw0) (((dw0) >> 8) & 0xffu)
#define NVME_AER_LID(dw0)  (((dw0) >> 16) & 0xffu)
#define NVME_AER_DW0(type, info, lid) ((uint32_t)(type) | (uint32_t)(info) << 8 | (uint32_t)(lid) << 16)
enum {
	NVME_AER_TYPE_ERROR = 0,
	NVME_AER_TYPE_SMART = 1,
	NVME_AER_TYPE_NOTICE = 2,
};
enum { /* notice (type 2) info */
	NVME_AER_NOTICE_NS_CHANGED = 0x00,
	NVME_AER_NOTICE_FW_ACTIVATE = 0x01,
};
enum { /* SMART / health (type 1) info */
	NVME_AER_SMART_RELIABILITY = 0x00,
	NVME_AER_SMART_TEMPERATURE = 0x01,
	NVME_AER_SMART_SPARE = 0x02,
};
/* SMART critical warning bits (log 02h byte 0); Asynchronous Event
 * Configuration (feature 0Bh) bits 7:0 enable the same ones */
enum {
	NVME_SMART_CRIT_SPARE = 1u << 0,
	NVME_SMART_CRIT_TEMPERATURE = 1u << 1,
	NVME_SMART_CRIT_RELIABILITY = 1u << 2,
	NVME_SMART_CRIT_READONLY = 1u << 3,
	NVME_SMART_CRIT_VOLATILE_BACKUP = 1u << 4,
};
#define NVME_SMART_CRIT_ALL 0x1fu
/* Identify Controller OAES and AEC bits 8 and 9 */
#define NVME_OAES_NS_ATTR     (1u << 8)
#define NVME_OAES_FW_ACTIVATE (1u << 9)
#define NVME_AEC_NS_ATTR      NVME_OAES_NS_ATTR
#define NVME_AEC_FW_ACTIVATE  NVME_OAES_FW_ACTIVATE
/* Get Log Page cdw10 bit 15: Retain Asynchronous Event */
#define NVME_LOG_RAE (1u << 15)

/* Identify Controller LPA bit 1: the Commands Supported and Effects log */
#define NVME_LPA_CMD_EFFECTS (1u << 1)
/* Commands Supported and Effects log: 256 admin then 256 I/O dwords */
#define NVME_CMD_EFFECTS_LOG_BYTES 4096u
#define NVME_CSE_CSUPP (1u << 0)  /* command supported */
#define NVME_CSE_LBCC  (1u << 1)  /* logical block content change */
#define NVME_CSE_NCC   (1u << 2)  /* namespace capability change */
#define NVME_CSE_NIC   (1u << 3)  /* namespace inventory change */
#define NVME_CSE_CCC   (1u << 4)  /* controller capability change */
#define NVME_CSE_CSE_SHIFT 16     /* bits 18:16, command submission and execution */
#define NVME_CSE_CSE(e) (((e) >> NVME_CSE_CSE_SHIFT) & 0x7u)
#define NVME_CSE_USS   (1u << 19) /* UUID selection supported */
#define NVME_CSE_DEFINED (0x1fu | 0x7u << 16 | NVME_CSE_USS)


/* ---- status codes ---- */
enum { NVME_SCT_GENERIC = 0, NVME_SCT_CMD_SPECIFIC = 1, NVME_SCT_MEDIA = 2, NVME_SCT_PATH = 3 };

enum nvme_generic_sc {
	NVME_SC_SUCCESS = 0x00,
	NVME_SC_INVALID_OPCODE = 0x01,
	NVME_SC_INVALID_FIELD = 0x02,
	NVME_SC_CMDID_CONFLICT = 0x03,
	NVME_SC_DATA_XFER_ERROR = 0x04,
	NVME_SC_POWER_LOSS = 0x05,
	NVME_SC_INTERNAL = 0x06,
	NVME_SC_ABORT_REQ = 0x07,
	NVME_SC_ABORT_QUEUE = 0x08,
	NVME_SC_FUSED_FAIL = 0x09,
	NVME_SC_FUSED_MISSING = 0x0a,
	NVME_SC_INVALID_NS = 0x0b,
	NVME_SC_CMD_SEQ_ERROR = 0x0c,
	NVME_SC_INVALID_PRP_OFFSET = 0x13,
	NVME_SC_LBA_RANGE = 0x80,
	NVME_SC_CAP_EXCEEDED = 0x81,
	NVME_SC_NS_NOT_READY = 0x82,
};

enum nvme_cmd_specific_sc {
	NVME_SC_CQ_INVALID = 0x00,
	NVME_SC_QID_INVALID = 0x01,
	NVME_SC_QUEUE_SIZE = 0x02,
	NVME_SC_ABORT_LIMIT = 0x03,
	NVME_SC_ASYNC_LIMIT = 0x05,
	NVME_SC_INVALID_VECTOR = 0x08,
	NVME_SC_INVALID_LOG_PAGE = 0x09,
	NVME_SC_INVALID_QUEUE_DELETION = 0x0c,
	NVME_SC_FEATURE_NOT_SAVEABLE = 0x0d,
	NVME_SC_FEATURE_NOT_CHANGEABLE = 0x0e,
	/* Read, Write, Write Zeroes: PRINFO or the initial reference tag do not
	 * fit the namespace's protection information (Type 1: the reference
	 * tag must be the LBA) */
	NVME_SC_INVALID_PI = 0x81,
};

enum nvme_media_sc {
	NVME_SC_WRITE_FAULT = 0x80,
	NVME_SC_READ_ERROR = 0x81,
	NVME_SC_GUARD_CHECK = 0x82,
	NVME_SC_APPTAG_CHECK = 0x83,
	NVME_SC_REFTAG_CHECK = 0x84,
	NVME_SC_COMPARE_FAILED = 0x85,
	NVME_SC_ACCESS_DENIED = 0x86,
	NVME_SC_UNWRITTEN_BLOCK = 0x87,
};

/* ---- identify controller (CNS 01h) ---- */
struct nvme_id_psd {
	uint8_t bytes[32];
};

struct nvme_id_ctrl {
	uint16_t vid;
	uint16_t ssvid;
	char sn[20];
	char mn[40];
	char fr[8];
	uint8_t rab;
	uint8_t ieee[3];
	uint8_t cmic;
	uint8_t mdts;  /* 2^mdts * MPSMIN; 0 = no limit */
	uint16_t cntlid;
	uint32_t ver;
	uint32_t rtd3r;
	uint32_t rtd3e;
	uint32_t oaes;
	uint32_t ctratt;
	uint8_t rsvd100[156];
	uint16_t oacs; /* 256 */
	uint8_t acl;
	uint8_t aerl;
	uint8_t frmw;
	uint8_t lpa;
	uint8_t elpe;
	uint8_t npss;
	uint8_t avscc;
	uint8_t apsta;
	uint16_t wctemp;
	uint16_t cctemp;
	uint8_t rsvd270[242];
	uint8_t sqes; /* 512 */
	uint8_t cqes;
	uint16_t maxcmd;
	uint32_t nn;
	uint16_t oncs;
	uint16_t fuses;
	uint8_t fna;
	uint8_t vwc;
	uint16_t awun;
	uint16_t awupf;
	uint8_t nvscc;
	uint8_t nwpc;
	uint16_t acwu;
	uint16_t rsvd534;
	uint32_t sgls;
	uint32_t mnan;
	uint8_t rsvd544[224];
	char subnqn[256]; /* 768 */
	uint8_t rsvd1024[1024];
	struct nvme_id_psd psd[32]; /* 2048 */
	uint8_t vs[1024];
};
static_assert(sizeof(struct nvme_id_ctrl) == 4096, "identify controller is 4096 bytes");
static_assert(__builtin_offsetof(struct nvme_id_ctrl, ctratt) == 96, "ctratt at 96");
static_assert(__builtin_offsetof(struct nvme_id_ctrl, oacs) == 256, "oacs at 256");
static_assert(__builtin_offsetof(struct nvme_id_ctrl, sqes) == 512, "sqes at 512");
static_assert(__builtin_offsetof(struct nvme_id_ctrl, sgls) == 536, "sgls at 536");
static_assert(__builtin_offsetof(struct nvme_id_ctrl, subnqn) == 768, "subnqn at 768");

/* Identify Controller CTRATT bit 15: Extended LBA Formats (ELBAF in the NVM
 * command set's Identify Namespace, CNS 05h) */
#define NVME_CTRATT_ELBAS (1u << 15)

/* ONCS bits */
enum {
	NVME_ONCS_COMPARE = 1u << 0,
	NVME_ONCS_WRITE_UNCOR = 1u << 1,
	NVME_ONCS_DSM = 1u << 2,
	NVME_ONCS_WRITE_ZEROES = 1u << 3,
	NVME_ONCS_SAVE_SEL = 1u << 4,
};
/* VWC bit 0: a volatile write cache is present */
#define NVME_VWC_PRESENT 0x1

/* ---- identify controller, NVM command set specific (CNS 06h) ---- */
struct nvme_id_ctrl_nvm {
	uint8_t vsl;  /* verify size limit, 2^n MPSMIN units, 0: none */
	uint8_t wzsl; /* write zeroes size limit, 2^n MPSMIN units, 0: none */
	uint8_t wusl;
	uint8_t dmrl;   /* DSM ranges per command, 0: none */
	uint32_t dmrsl; /* DSM blocks per range, 0: none */
	uint64_t dmsl;  /* DSM blocks per command, 0: none */
	uint8_t rsvd16[4080];
};
static_assert(sizeof(struct nvme_id_ctrl_nvm) == 4096, "identify controller NVM is 4096 bytes");

/* ---- identify namespace (CNS 00h) ---- */
struct nvme_lbaf {
	uint16_t ms;
	uint8_t lbads; /* log2 of the LBA data size */
	uint8_t rp;
};
static_assert(sizeof(struct nvme_lbaf) == 4, "LBA format is 4 bytes");

struct nvme_id_ns {
	uint64_t nsze;
	uint64_t ncap;
	uint64_t nuse;
	uint8_t nsfeat;
	uint8_t nlbaf; /* 0-based */
	uint8_t flbas; /* bits 3:0 the format in use (low bits), 4 extended
	                  metadata, 6:5 the format's high bits when NLBAF >= 16 */
	uint8_t mc;
	uint8_t dpc;
	uint8_t dps;
	uint8_t nmic;
	uint8_t rescap;
	uint8_t fpi;
	uint8_t dlfeat; /* bits 2:0 = 001b: deallocated blocks read as zeroes */
	uint16_t nawun;
	uint16_t nawupf;
	uint16_t nacwu;
	uint16_t nabsn;
	uint16_t nabo;
	uint16_t nabspf;
	uint16_t noiob;
	uint8_t nvmcap[16];
	uint16_t npwg;
	uint16_t npwa;
	uint16_t npdg;
	uint16_t npda;
	uint16_t nows;
	uint8_t rsvd74[18];
	uint32_t anagrpid;
	uint8_t rsvd96[3];
	uint8_t nsattr;
	uint16_t nvmsetid;
	uint16_t endgid;
	uint8_t nguid[16];
	uint8_t eui64[8];
	struct nvme_lbaf lbaf[64]; /* 128; NLBAF > 16 uses entries 16..63 */
	uint8_t vs[3712];
};
static_assert(sizeof(struct nvme_id_ns) == 4096, "identify namespace is 4096 bytes");
static_assert(__builtin_offsetof(struct nvme_id_ns, lbaf) == 128, "lbaf at 128");
static_assert(__builtin_offsetof(struct nvme_id_ns, dpc) == 28, "dpc at 28");
static_assert(__builtin_offsetof(struct nvme_id_ns, dps) == 29, "dps at 29");

/* FLBAS bit 4: the metadata is transferred at the end of each block's data
 * (an extended LBA), else in a separate buffer (MPTR) */
#define NVME_FLBAS_EXT 0x10
/* DPC, end-to-end data protection capabilities: types 1, 2, 3, PI in the
 * first bytes of the metadata, PI in the last */
enum {
	NVME_DPC_TYPE1 = 1u << 0,
	NVME_DPC_TYPE2 = 1u << 1,
	NVME_DPC_TYPE3 = 1u << 2,
	NVME_DPC_FIRST = 1u << 3,
	NVME_DPC_LAST = 1u << 4,
};
/* DPS, the type in use (2:0, 0: none) and bit 3: the PI is the first 8 (16)
 * bytes of the metadata, else the last */
#define NVME_DPS_TYPE(dps) ((unsigned)(dps) & 7u)
#define NVME_DPS_FIRST 0x08

/* ---- identify namespace, NVM command set specific (CNS 05h, CSI 00h) ----
 * ELBAF n extends LBA format n: STS 6:0 (storage tag bits), PIF 8:7 (the
 * protection information format: 0 16-bit guard, 1 32-bit, 2 64-bit). */
struct nvme_id_ns_nvm {
	uint64_t lbstm;
	uint8_t pic;
	uint8_t rsvd9[3];
	uint32_t elbaf[64];
	uint8_t rsvd268[3828];
};
static_assert(sizeof(struct nvme_id_ns_nvm) == 4096, "identify namespace NVM is 4096 bytes");
static_assert(__builtin_offsetof(struct nvme_id_ns_nvm, elbaf) == 12, "elbaf at 12");
#define NVME_ELBAF_STS(e) ((unsigned)(e) & 0x7fu)
#define NVME_ELBAF_PIF(e) (((unsigned)(e) >> 7) & 3u)
enum { NVME_PIF_16 = 0, NVME_PIF_32 = 1, NVME_PIF_64 = 2 };

/* Protection information as stored with each block, big-endian: the 16-bit
 * guard format (8 bytes: guard, application tag, 32-bit reference tag) and
 * the 64-bit guard format (16 bytes: guard, application tag, 48-bit
 * reference tag, no storage tag).  An application tag of FFFFh (Types 1 and
 * 2), or that and a reference tag of all ones (Type 3), turns checking off
 * for the block: what an unwritten or deallocated block carries. */
struct nvme_pi16 {
	uint8_t guard[2];
	uint8_t apptag[2];
	uint8_t reftag[4];
};
static_assert(sizeof(struct nvme_pi16) == 8, "16-bit guard PI is 8 bytes");
struct nvme_pi64 {
	uint8_t guard[8];
	uint8_t apptag[2];
	uint8_t reftag[6];
};
static_assert(sizeof(struct nvme_pi64) == 16, "64-bit guard PI is 16 bytes");

/* ---- log pages ---- */
struct nvme_error_log {
	uint64_t error_count;
	uint16_t sqid;
	uint16_t cmdid;
	uint16_t status_field;
	uint16_t parm_error_location;
	uint64_t lba;
	uint32_t nsid;
	uint8_t vs;
	uint8_t trtype;
	uint8_t rsvd30[2];
	uint64_t cs;
	uint16_t trtype_spec_info;
	uint8_t rsvd42[22];
};
static_assert(sizeof(struct nvme_error_log) == 64, "error log entry is 64 bytes");

struct nvme_smart_log {
	uint8_t critical_warning;
	uint8_t temperature[2]; /* Kelvin, little endian, unaligned */
	uint8_t avail_spare;
	uint8_t spare_thresh;
	uint8_t percent_used;
	uint8_t endu_grp_crit_warn;
	uint8_t rsvd7[25];
	uint8_t data_units_read[16]; /* 128-bit counters, units of 1000 x 512 B */
	uint8_t data_units_written[16];
	uint8_t host_reads[16];
	uint8_t host_writes[16];
	uint8_t ctrl_busy_time[16];
	uint8_t power_cycles[16];
	uint8_t power_on_hours[16];
	uint8_t unsafe_shutdowns[16];
	uint8_t media_errors[16];
	uint8_t num_err_log_entries[16];
	uint32_t warning_temp_time;
	uint32_t critical_comp_time;
	uint16_t temp_sensor[8];
	uint8_t rsvd216[296];
};
static_assert(sizeof(struct nvme_smart_log) == 512, "SMART log is 512 bytes");
/* offsets as in the base specification's Figure "SMART / Health Information
 * Log Page" (and Linux include/linux/nvme.h, struct nvme_smart_log) */
static_assert(__builtin_offsetof(struct nvme_smart_log, avail_spare) == 3, "avail_spare at 3");
static_assert(__builtin_offsetof(struct nvme_smart_log, data_units_read) == 32, "data_units_read at 32");
static_assert(__builtin_offsetof(struct nvme_smart_log, host_reads) == 64, "host_reads at 64");
static_assert(__builtin_offsetof(struct nvme_smart_log, power_on_hours) == 128, "power_on_hours at 128");
static_assert(__builtin_offsetof(struct nvme_smart_log, media_errors) == 160, "media_errors at 160");
static_assert(__builtin_offsetof(struct nvme_smart_log, num_err_log_entries) == 176, "err entries at 176");
static_assert(__builtin_offsetof(struct nvme_smart_log, warning_temp_time) == 192, "wctemp time at 192");
static_assert(__builtin_offsetof(struct nvme_smart_log, temp_sensor) == 200, "temp_sensor at 200");
static_assert(__builtin_offsetof(struct nvme_error_log, lba) == 16, "error log lba at 16");
static_assert(__builtin_offsetof(struct nvme_error_log, nsid) == 24, "error log nsid at 24");
static_assert(__builtin_offsetof(struct nvme_error_log, cs) == 32, "error log cs at 32");

/* Firmware Slot Information (log 03h) */
struct nvme_fw_slot_log {
	uint8_t afi;         /* 2:0 active slot, 6:4 slot activated at the next reset */
	uint8_t rsvd1[7];
	char frs[7][8];      /* firmware revision per slot 1..7, ASCII, 0: empty */
	uint8_t rsvd64[448];
};
static_assert(sizeof(struct nvme_fw_slot_log) == 512, "firmware slot log is 512 bytes");
static_assert(__builtin_offsetof(struct nvme_fw_slot_log, frs) == 8, "frs at 8");

/* Get Log Page: cdw10 LID 7:0, NUMDL 31:16; cdw11 NUMDU 15:0 (NUMD 0-based
 * dwords); the broadcast NSID for controller-wide pages */
#define NVME_NSID_ALL 0xffffffffu
#define NVME_LOG_CDW10(lid, numd) ((uint32_t)(lid) | (((uint32_t)(numd) & 0xffff) << 16))
#define NVME_LOG_CDW11(numd) ((uint32_t)(numd) >> 16)

#endif

/* config.h - the nvmefs config file: parse, validate, print.
 *
 * An INI file (inih) becomes one typed, validated struct cfg.  Every error is
 * written to the error stream as "FILE:LINE: KEY = VALUE: what is allowed"
 * (or "FILE:LINE: [SECTION]: ..." for section errors) and makes cfg_load fail;
 * all errors of a file are reported, not just the first.  Defaults are filled
 * in for every key that is absent, so a loaded cfg is complete.
 */
#ifndef NVMEFS_CONFIG_H
#define NVMEFS_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define CFG_NAME_MAX 32
#define CFG_MAX_CPUS 1024
#define CFG_CPU_ID_MAX 65535 /* highest CPU number a CPU list takes */
#define CFG_MAX_CTRLS 64

enum cfg_log_level { CFG_LOG_ERROR, CFG_LOG_WARN, CFG_LOG_INFO, CFG_LOG_DEBUG };
enum cfg_mode { CFG_MODE_POLL, CFG_MODE_INTERRUPT, CFG_MODE_HYBRID };
/* which DMA buffers a controller's device can reach: its own controller's
 * (one pool per controller per reactor) or every controller's of its
 * reactors (one pool per reactor, mapped into every controller) */
enum cfg_dma_isolation { CFG_DMA_ISO_CONTROLLER, CFG_DMA_ISO_SHARED };
enum cfg_backing { CFG_BACKING_RAM, CFG_BACKING_NULL, CFG_BACKING_FILE };
enum cfg_exec { CFG_EXEC_INLINE, CFG_EXEC_THREAD };
/* the software controller's write cache: volatile (reported and modelled:
 * data is durable after Flush or FUA) or none (every completed write is) */
enum cfg_write_cache { CFG_WC_VOLATILE, CFG_WC_NONE };
/* the software controller's metadata and protection information (PI):
 * where metadata travels, the PI's type, its place in the metadata and its
 * guard */
enum cfg_md_layout { CFG_MD_SEPARATE, CFG_MD_EXTENDED };
enum cfg_pi_type { CFG_PI_NONE, CFG_PI_TYPE1, CFG_PI_TYPE2, CFG_PI_TYPE3 };
enum cfg_pi_location { CFG_PI_LAST, CFG_PI_FIRST };
enum cfg_pi_guard { CFG_PI_CRC16, CFG_PI_CRC64 };
/* auto: io_uring when the kernel offers it at FUSE_INIT, else /dev/fuse */
enum cfg_fuse_transport {
	CFG_FUSE_TRANSPORT_AUTO,
	CFG_FUSE_TRANSPORT_URING,
	CFG_FUSE_TRANSPORT_CLASSIC,
};

struct cfg_daemon {
	char mountpoint[PATH_MAX];
	char admin_socket[PATH_MAX];
	mode_t file_mode;            /* permission bits of the namespace files */
	char file_owner[CFG_NAME_MAX];
	char file_group[CFG_NAME_MAX];
	uid_t uid;                   /* resolved file_owner */
	gid_t gid;                   /* resolved file_group */
	/* who may use the admin socket: admin_group may run the read-only
	 * commands, operator_group (and root) every command; unset
	 * ("", gid -1): root only */
	char admin_group[CFG_NAME_MAX];
	char operator_group[CFG_NAME_MAX];
	gid_t admin_gid;
	gid_t operator_gid;
	bool allow_other;
	enum cfg_log_level log_level;
	enum cfg_fuse_transport fuse_transport;
	unsigned fuse_queue_depth;   /* io_uring entries per FUSE queue, 1..256 */
	unsigned health_interval;    /* seconds between SMART log reads, 0..86400, 0: off */
	bool allow_no_controller;    /* no [controller] section is valid (nr_ctrls 0) */
};

struct cfg_engine {
	unsigned queues;      /* I/O queue pairs per controller = reactors */
	unsigned queue_depth; /* entries per I/O queue */
	unsigned cq_budget;   /* completions reaped per queue per pass, < queue_depth */
	unsigned nr_cpus;     /* cpus[] in the order given, each online */
	unsigned cpus[CFG_MAX_CPUS];
	bool cpus_set;        /* false: the default (every online CPU) */
	enum cfg_mode mode;
	unsigned io_timeout_ms;
	unsigned io_retries;  /* resubmissions of a command after a reset or Abort */
	bool numa;
	enum cfg_dma_isolation dma_isolation;
};

struct cfg_controller {
	char name[CFG_NAME_MAX];  /* [controller NAME]; files are NAMEn<nsid> */
	int line;                 /* line of the section header, for messages */
	bool sim;                 /* device = sim */
	char device[32];          /* PCI address when !sim, normalised 0000:00:00.0 */
	/* software controller only (ignored, and rejected if set, for PCI) */
	unsigned namespaces;
	uint64_t size;            /* bytes per namespace, a multiple of block_size */
	unsigned block_size;      /* 512 or 4096 */
	enum cfg_backing backing;
	char backing_path[PATH_MAX]; /* pattern: %c controller name, %n nsid, %% */
	enum cfg_exec exec;
	uint64_t offload;         /* exec = inline: writes this large go to the copy thread, 0: never */
	enum cfg_write_cache write_cache;
	unsigned mdts;            /* log2 of max transfer in 4 KiB pages, 0 = no limit */
	unsigned max_queues;      /* I/O queue pairs the controller grants */
	unsigned metadata_size;   /* bytes of metadata per block, 0 = none */
	enum cfg_md_layout metadata_layout;
	enum cfg_pi_type pi_type;
	enum cfg_pi_location pi_location;
	enum cfg_pi_guard pi_guard;
};

struct cfg {
	char path[PATH_MAX];
	struct cfg_daemon daemon;
	struct cfg_engine engine;
	unsigned nr_ctrls;
	struct cfg_controller ctrls[CFG_MAX_CTRLS];
};

/* The keys of the file, one row each: the one source of their names,
 * sections, defaults, ranges and help.  The parser takes every key through
 * its row; etc/nvmefs.conf and nvmefs.conf(5) document the same keys with the
 * same defaults (tests/unit/test_config.c checks both). */
enum cfg_section { CFG_SEC_DAEMON, CFG_SEC_ENGINE, CFG_SEC_CONTROLLER };

/* what a key's def says */
enum cfg_def {
	CFG_DEF_VALUE,    /* a value of the key, written as in the file */
	CFG_DEF_UNSET,    /* "unset": the key's feature is off */
	CFG_DEF_DERIVED,  /* words: the default follows from other keys or the machine */
	CFG_DEF_REQUIRED, /* none (def is NULL): the section must give the key */
};

struct cfg_key {
	enum cfg_section section; /* [controller NAME] for CFG_SEC_CONTROLLER */
	const char *name;
	enum cfg_def def_kind;
	const char *def;          /* the default as the documents give it */
	const char *range;        /* what a value must be: errors say "must be RANGE" */
	const char *help;         /* one line */
	bool sim_only;            /* a software controller's key (device = sim) */
};

/* Row i of the key table, in the order the parser lists a section's keys;
 * NULL past the last row. */
const struct cfg_key *cfg_key(size_t i);

/* A CPU list such as "0-3,8" (the config's cpus, sysfs's online and
 * possible): the CPUs in the order given into cpus[].  Returns 0, or
 * -EINVAL (syntax, a number above CFG_CPU_ID_MAX), -E2BIG (more than max). */
int cfg_parse_cpu_list(const char *s, unsigned *cpus, unsigned max, unsigned *n);

/* Parse and validate PATH.  On success *out is a new cfg (cfg_free it) and 0
 * is returned; otherwise every problem has been written to errs and -EINVAL
 * (bad content) or -errno (cannot read the file) is returned.
 * Besides the text, the file system is asked what would stop the daemon at
 * start: a backing file's directory must exist and pass safepath.h's walk
 * (an existing file there must be a regular file of root's), the
 * mountpoint's existing parents must pass it, the admin socket's directory
 * must exist.  Looked at with the caller's rights: a directory it may not
 * search is not judged.  The mountpoint itself is never looked at (a mount
 * there may hang a look-up); that it is empty is checked at start. */
int cfg_load(const char *path, struct cfg **out, FILE *errs);

/* cfg_load without the file system: the text alone (nvmefsctl -c, which
 * needs admin_socket only, and tests). */
int cfg_load_syntax(const char *path, struct cfg **out, FILE *errs);

/* The text alone, on a string; name stands for the file name in messages. */
int cfg_load_string(const char *name, const char *text, struct cfg **out, FILE *errs);

/* The effective config (every key, defaults filled in) as a valid config
 * file: cfg_load of this output gives an equal cfg. */
void cfg_print(const struct cfg *cfg, FILE *out);

/* Expand a backing pattern for controller name and nsid into buf. */
int cfg_backing_file(const struct cfg_controller *c, unsigned nsid, char *buf, size_t len);

/* The first controller whose namespaces live in the daemon's own memory (a
 * software controller with backing = ram): their data does not outlive the
 * process, so no later run may serve its mount as the same disks.  NULL
 * when every namespace is a device's, a file's or null's. */
const struct cfg_controller *cfg_volatile_ctrl(const struct cfg *cfg);

/* Same settings (path and line numbers aside): a reload that changes nothing. */
bool cfg_equal(const struct cfg *a, const struct cfg *b);

const char *cfg_mode_name(enum cfg_mode m);
const char *cfg_dma_isolation_name(enum cfg_dma_isolation d); /* "controller", "shared" */
const char *cfg_fuse_transport_name(enum cfg_fuse_transport t); /* "auto", "uring", "classic" */
void cfg_free(struct cfg *cfg);

#endif

/* config.c - see config.h.
 *
 * Two phases.  Collect: inih splits KEY = VALUE lines; our own line reader in
 * front of it counts lines (Debian's libinih is built without
 * INI_HANDLER_LINENO), records section headers (inih does not report empty
 * sections) and reports malformed lines itself, so that every bad line is
 * reported rather than only the first.  Validate: one table, keys[], holds
 * every key (section, name, type, field, range, default, help); a table pass
 * takes each section's keys by their type and fills in defaults, then each
 * section's cross-key rules run (cq_budget < queue_depth, queues <= CPUs,
 * size against block_size, the backing pattern, a PCI device at most once, a
 * mountpoint that is no system directory; under cfg_load, what the file
 * system says of the paths, config.h).
 * Errors are gathered and printed sorted by line.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "safepath.h"

#if INI_HANDLER_LINENO
#error "the handler below has no lineno parameter; lines are counted by cfg_reader"
#endif

#define CFG_LINE_MAX      (PATH_MAX + 256) /* a PATH_MAX value fits on one line */
#define CFG_FILE_MAX      (1 << 20)        /* a config file is small; refuse junk */
#define CFG_NS_MAX        16
#define CFG_CTRL_NAME_MAX 16
#define CFG_NOLINE        0x7fffffff /* errors of the whole file sort last */

enum sec_kind { SEC_NONE, SEC_DAEMON, SEC_ENGINE, SEC_CTRL };

struct sec {
	char *name; /* text between [ and ] */
	int line;
	enum sec_kind kind;
	int ctrl; /* index into cfg->ctrls, or -1 */
};

struct kv {
	int sec; /* index into secs, -1 before any section */
	int line;
	char *key;
	char *val;
};

struct err {
	int line;
	unsigned seq;
	char *msg;
};

struct ctx {
	const char *name;
	const char *buf;
	size_t len, pos;
	int line;
	int cur_sec;
	struct sec *secs;
	unsigned nsecs, secs_cap;
	struct kv *kvs;
	unsigned nkvs, kvs_cap;
	struct err *errs;
	unsigned nerrs, errs_cap;
	bool oom;
	bool fs_checks; /* cfg_load: also ask the file system about the paths */
	struct cfg *cfg;
	uint8_t *online; /* bitmap of online CPUs, CFG_CPU_ID_MAX + 1 bits */
	char online_str[256];
};

/* ---- error collection ---- */

static void add_err(struct ctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_err(struct ctx *c, int line, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (!msg) {
		c->oom = true;
		return;
	}
	if (c->nerrs == c->errs_cap) {
		unsigned cap = c->errs_cap ? 2 * c->errs_cap : 16;
		struct err *e = realloc(c->errs, cap * sizeof(*e));

		if (!e) {
			free(msg);
			c->oom = true;
			return;
		}
		c->errs = e;
		c->errs_cap = cap;
	}
	c->errs[c->nerrs] = (struct err){line, c->nerrs, msg};
	c->nerrs++;
}

#define err_kv(c, kv, fmt, ...)                                                                    \
	add_err(c, (kv)->line, "%s:%d: %s = %s: " fmt, (c)->name, (kv)->line, (kv)->key,           \
	        (kv)->val, ##__VA_ARGS__)
#define err_sec(c, s, fmt, ...)                                                                    \
	add_err(c, (s)->line, "%s:%d: [%s]: " fmt, (c)->name, (s)->line, (s)->name, ##__VA_ARGS__)

static int err_cmp(const void *a, const void *b)
{
	const struct err *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* ---- phase 1: lines ---- */

static bool is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v';
}

/* fgets-style reader for inih: one physical line per call, leading blanks
 * removed (so no line is taken as a continuation of the previous value),
 * malformed lines reported here and handed on as empty lines. */
static char *cfg_reader(char *str, int num, void *stream)
{
	struct ctx *c = stream;
	const char *p, *eol, *nl, *s;
	size_t n;

	if (c->pos >= c->len)
		return NULL;
	p = c->buf + c->pos;
	nl = memchr(p, '\n', c->len - c->pos);
	eol = nl ? nl : c->buf + c->len;
	c->pos = nl ? (size_t)(nl - c->buf) + 1 : c->len;
	c->line++;
	str[0] = '\n';
	str[1] = '\0';

	if (c->line == 1 && eol - p >= 3 && !memcmp(p, "\xef\xbb\xbf", 3))
		p += 3; /* UTF-8 byte order mark */
	while (p < eol && is_blank(*p))
		p++;
	while (eol > p && is_blank(eol[-1]))
		eol--;
	n = (size_t)(eol - p);
	if (memchr(p, '\0', n)) {
		add_err(c, c->line, "%s:%d: line contains a NUL byte", c->name, c->line);
		return str;
	}
	if (n + 3 > (size_t)num) {
		add_err(c, c->line, "%s:%d: line too long: at most %d bytes", c->name, c->line,
		        num - 3);
		return str;
	}
	if (n == 0 || *p == '#' || *p == ';')
		return str;

	if (*p == '[') {
		const char *end = memchr(p, ']', n);
		struct sec *sec;

		if (!end) {
			add_err(c, c->line, "%s:%d: %.*s: a section header must be [NAME]", c->name,
			        c->line, (int)n, p);
			return str;
		}
		for (s = end + 1; s < eol && is_blank(*s); s++)
			;
		if (s < eol && *s != '#' && *s != ';') {
			add_err(c, c->line, "%s:%d: %.*s: nothing may follow ] but a comment",
			        c->name, c->line, (int)n, p);
			return str;
		}
		if (c->nsecs == c->secs_cap) {
			unsigned cap = c->secs_cap ? 2 * c->secs_cap : 8;

			sec = realloc(c->secs, cap * sizeof(*sec));
			if (!sec) {
				c->oom = true;
				return str;
			}
			c->secs = sec;
			c->secs_cap = cap;
		}
		sec = &c->secs[c->nsecs];
		for (s = p + 1; s < end && is_blank(*s); s++)
			;
		while (end > s && is_blank(end[-1]))
			end--;
		sec->name = strndup(s, (size_t)(end - s));
		if (!sec->name) {
			c->oom = true;
			return str;
		}
		sec->line = c->line;
		sec->kind = SEC_NONE;
		sec->ctrl = -1;
		c->cur_sec = (int)c->nsecs++;
	} else {
		/* inih splits at the first '=' or ':' */
		size_t k = strcspn(p, "=:");

		if (k >= n) {
			add_err(c, c->line, "%s:%d: %.*s: expected KEY = VALUE or [SECTION]",
			        c->name, c->line, (int)n, p);
			return str;
		}
		if (k == 0) {
			add_err(c, c->line, "%s:%d: %.*s: a key name is missing before '%c'",
			        c->name, c->line, (int)n, p, p[0]);
			return str;
		}
	}
	memcpy(str, p, n);
	str[n] = '\n';
	str[n + 1] = '\0';
	return str;
}

static int cfg_handler(void *user, const char *section, const char *name, const char *value)
{
	struct ctx *c = user;
	struct kv *kv;

	(void)section; /* ours is untruncated: c->cur_sec */
	if (c->nkvs == c->kvs_cap) {
		unsigned cap = c->kvs_cap ? 2 * c->kvs_cap : 32;

		kv = realloc(c->kvs, cap * sizeof(*kv));
		if (!kv) {
			c->oom = true;
			return 1;
		}
		c->kvs = kv;
		c->kvs_cap = cap;
	}
	kv = &c->kvs[c->nkvs];
	kv->sec = c->cur_sec;
	kv->line = c->line;
	kv->key = strdup(name);
	kv->val = strdup(value ? value : "");
	if (!kv->key || !kv->val) {
		free(kv->key);
		free(kv->val);
		c->oom = true;
		return 1;
	}
	c->nkvs++;
	return 1;
}

/* Debian's inih exposes its options as variables.  Values must be taken
 * literally (a ';' in a path is no comment), and a line must hold a PATH_MAX
 * path.  The settings are process-wide: set them under a lock and put the old
 * ones back. */
static pthread_mutex_t cfg_ini_lock = PTHREAD_MUTEX_INITIALIZER;

static int collect(struct ctx *c)
{
	bool multiline, inline_comments, stop_first, no_value;
	int max_line, rc;

	pthread_mutex_lock(&cfg_ini_lock);
	multiline = ini_allow_multiline;
	inline_comments = ini_allow_inline_comments;
	stop_first = ini_stop_on_first_error;
	no_value = ini_allow_no_value;
	max_line = ini_max_line;
	ini_allow_multiline = false;
	ini_allow_inline_comments = false;
	ini_stop_on_first_error = false;
	ini_allow_no_value = false;
	ini_max_line = CFG_LINE_MAX;

	rc = ini_parse_stream(cfg_reader, c, cfg_handler, c);

	ini_allow_multiline = multiline;
	ini_allow_inline_comments = inline_comments;
	ini_stop_on_first_error = stop_first;
	ini_allow_no_value = no_value;
	ini_max_line = max_line;
	pthread_mutex_unlock(&cfg_ini_lock);

	if (rc == -2)
		return -ENOMEM;
	/* the reader hands inih only well-formed lines; this is belt and braces */
	if (rc > 0 && c->nerrs == 0)
		add_err(c, rc, "%s:%d: cannot parse this line", c->name, rc);
	return c->oom ? -ENOMEM : 0;
}

/* ---- value parsers ---- */

/* decimal digits only: no sign, no blanks, no trailing junk */
static bool parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

int cfg_parse_cpu_list(const char *s, unsigned *cpus, unsigned max, unsigned *n)
{
	*n = 0;
	for (;;) {
		uint64_t a = 0, b;
		const char *p;

		while (is_blank(*s))
			s++;
		if (*s < '0' || *s > '9')
			return -EINVAL;
		for (p = s; *p >= '0' && *p <= '9'; p++) {
			a = a * 10 + (uint64_t)(*p - '0');
			if (a > CFG_CPU_ID_MAX)
				return -EINVAL;
		}
		b = a;
		s = p;
		if (*s == '-') {
			s++;
			if (*s < '0' || *s > '9')
				return -EINVAL;
			b = 0;
			for (p = s; *p >= '0' && *p <= '9'; p++) {
				b = b * 10 + (uint64_t)(*p - '0');
				if (b > CFG_CPU_ID_MAX)
					return -EINVAL;
			}
			s = p;
			if (b < a)
				return -EINVAL;
		}
		for (uint64_t i = a; i <= b; i++) {
			if (*n == max)
				return -E2BIG;
			cpus[(*n)++] = (unsigned)i;
		}
		while (is_blank(*s))
			s++;
		if (*s == '\0')
			return 0;
		if (*s != ',')
			return -EINVAL;
		s++;
	}
}

static bool bit_test(const uint8_t *map, unsigned i)
{
	return map[i / 8] & (1u << (i % 8));
}

static void bit_set(uint8_t *map, unsigned i)
{
	map[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* The kernel's list of online CPUs; without sysfs, the first N online. */
static int read_online(struct ctx *c)
{
	unsigned *tmp, n = 0;
	FILE *f;
	int rc = -1;

	c->online = calloc(1, CFG_CPU_ID_MAX / 8 + 1);
	tmp = malloc((CFG_CPU_ID_MAX + 1) * sizeof(*tmp));
	if (!c->online || !tmp) {
		free(tmp);
		return -ENOMEM;
	}
	f = fopen("/sys/devices/system/cpu/online", "re");
	if (f) {
		if (fgets(c->online_str, sizeof(c->online_str), f)) {
			c->online_str[strcspn(c->online_str, "\n")] = '\0';
			rc = cfg_parse_cpu_list(c->online_str, tmp, CFG_CPU_ID_MAX + 1, &n);
		}
		fclose(f);
	}
	if (rc == 0) {
		for (unsigned i = 0; i < n; i++)
			bit_set(c->online, tmp[i]);
	}
	free(tmp);
	if (rc != 0 || n == 0) {
		long k = sysconf(_SC_NPROCESSORS_ONLN);

		if (k < 1)
			k = 1;
		if (k > CFG_CPU_ID_MAX + 1)
			k = CFG_CPU_ID_MAX + 1;
		for (long i = 0; i < k; i++)
			bit_set(c->online, (unsigned)i);
		snprintf(c->online_str, sizeof(c->online_str), k > 1 ? "0-%ld" : "0", k - 1);
	}
	return 0;
}

/* "K/M/G/T" suffixes, powers of 1024; a bare number is bytes */
static bool parse_size(const char *s, uint64_t *out)
{
	char num[32];
	size_t n = strlen(s);
	unsigned shift = 0;
	uint64_t v;

	if (n == 0 || n >= sizeof(num))
		return false;
	switch (toupper((unsigned char)s[n - 1])) {
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	default:
		break;
	}
	if (shift)
		n--;
	memcpy(num, s, n);
	num[n] = '\0';
	if (!parse_u64(num, &v) || v > (UINT64_MAX >> shift))
		return false;
	*out = v << shift;
	return true;
}

/* DDDD:BB:DD.F or BB:DD.F, hex, device <= 0x1f, function <= 7 */
static bool parse_pci(const char *s, char *out, size_t len)
{
	unsigned dom = 0, bus, dev, fn;
	int pos = -1;
	const char *p = s;

	for (const char *q = s; *q; q++)
		if (!isxdigit((unsigned char)*q) && *q != ':' && *q != '.')
			return false;
	if (strlen(s) == 12) {
		if (sscanf(p, "%4x:%2x:%2x.%1u%n", &dom, &bus, &dev, &fn, &pos) != 4)
			return false;
		if (s[4] != ':' || s[7] != ':' || s[10] != '.')
			return false;
	} else if (strlen(s) == 7) {
		if (sscanf(p, "%2x:%2x.%1u%n", &bus, &dev, &fn, &pos) != 3)
			return false;
		if (s[2] != ':' || s[5] != '.')
			return false;
	} else {
		return false;
	}
	if (pos != (int)strlen(s) || dev > 0x1f || fn > 7)
		return false;
	snprintf(out, len, "%04x:%02x:%02x.%u", dom, bus, dev, fn);
	return true;
}

/* Checks a backing pattern's escapes; *has_n tells whether %n occurs. */
static bool backing_pattern_ok(const char *s, bool *has_n)
{
	*has_n = false;
	for (; *s; s++) {
		if (*s != '%')
			continue;
		s++;
		if (*s == 'n')
			*has_n = true;
		else if (*s != 'c' && *s != '%')
			return false;
	}
	return true;
}

/* A user or group name known here, or a numeric id below UINT32_MAX. */
static bool lookup_id(const char *val, bool user, unsigned *id)
{
	char buf[4096];
	uint64_t v;
	int rc;

	if (strlen(val) >= CFG_NAME_MAX || !val[0])
		return false;
	if (parse_u64(val, &v)) {
		if (v >= UINT32_MAX)
			return false;
		*id = (unsigned)v;
	} else if (user && !strcmp(val, "root")) {
		*id = 0; /* uid 0 whatever the user database says (a static guest has none) */
	} else if (user) {
		struct passwd pw, *res = NULL;

		rc = getpwnam_r(val, &pw, buf, sizeof(buf), &res);
		if (rc || !res)
			return false;
		*id = (unsigned)res->pw_uid;
	} else {
		struct group gr, *res = NULL;

		rc = getgrnam_r(val, &gr, buf, sizeof(buf), &res);
		if (rc || !res)
			return false;
		*id = (unsigned)res->gr_gid;
	}
	return true;
}

/* ---- the key table ---- */

/* How a value is written and where it goes; off and off2 are offsets into
 * the struct of the key's section (cfg_daemon, cfg_engine, cfg_controller). */
enum key_type {
	KT_UINT,    /* decimal lo..hi: unsigned at off */
	KT_UINT2,   /* lo or hi, nothing between: unsigned at off */
	KT_BOOL,    /* yes/true/on/1 or no/false/off/0, any case: bool at off */
	KT_ENUM,    /* one of names[]: its index into the enum at off */
	KT_PATH,    /* absolute, shorter than max: char[max] at off */
	KT_MODE,    /* octal 0000..0777: mode_t at off */
	KT_USER,    /* user name or uid: the name at off (char[CFG_NAME_MAX]), the id at off2 */
	KT_GROUP,   /* group name or gid: the same */
	KT_CPUS,    /* CPU list of at most hi CPUs: unsigned[] at off, the count at off2 */
	KT_SIZE,    /* bytes, K/M/G/T suffix: uint64_t at off */
	KT_DEVICE,  /* sim or a PCI address: char[32] at off, bool sim at off2 */
	KT_BACKING, /* ram, null or a file pattern: enum cfg_backing at off, the path at off2 */
};

struct key {
	struct cfg_key k; /* what cfg_key() shows */
	enum key_type type;
	size_t off, off2;
	unsigned lo, hi;
	const char *const *names; /* KT_ENUM, NULL-terminated */
	size_t max;               /* KT_PATH: bytes of the field, NUL included */
};

/* Index of each row: the cross-key rules after the table pass name keys by it.
 * The order within a section is the order of the "allowed:" lists. */
enum key_id {
	K_MOUNTPOINT,
	K_ADMIN_SOCKET,
	K_FILE_MODE,
	K_FILE_OWNER,
	K_FILE_GROUP,
	K_ALLOW_OTHER,
	K_LOG_LEVEL,
	K_FUSE_TRANSPORT,
	K_FUSE_QUEUE_DEPTH,
	K_ADMIN_GROUP,
	K_OPERATOR_GROUP,
	K_HEALTH_INTERVAL,
	K_ALLOW_NO_CONTROLLER,

	K_QUEUES,
	K_QUEUE_DEPTH,
	K_CQ_BUDGET,
	K_CPUS,
	K_MODE,
	K_IO_TIMEOUT_MS,
	K_IO_RETRIES,
	K_NUMA,
	K_DMA_ISOLATION,

	K_DEVICE,
	K_NAMESPACES,
	K_SIZE,
	K_BLOCK_SIZE,
	K_BACKING,
	K_EXEC,
	K_OFFLOAD,
	K_MDTS,
	K_MAX_QUEUES,
	K_WRITE_CACHE,
	K_METADATA_SIZE,
	K_METADATA_LAYOUT,
	K_PI_TYPE,
	K_PI_LOCATION,
	K_PI_GUARD,
	K_NKEYS
};

static const char *const log_level_names[] = {"error", "warn", "info", "debug", NULL};
static const char *const mode_names[] = {"poll", "interrupt", "hybrid", NULL};
static const char *const dma_isolation_names[] = {"controller", "shared", NULL};
static const char *const exec_names[] = {"inline", "thread", NULL};
static const char *const write_cache_names[] = {"volatile", "none", NULL};
static const char *const md_layout_names[] = {"separate", "extended", NULL};
static const char *const pi_type_names[] = {"none", "1", "2", "3", NULL};
static const char *const pi_location_names[] = {"last", "first", NULL};
static const char *const pi_guard_names[] = {"crc16", "crc64", NULL};
static const char *const fuse_transport_names[] = {"auto", "uring", "classic", NULL};

/* KT_ENUM stores an index through an unsigned *; KT_USER/KT_GROUP an id */
_Static_assert(sizeof(enum cfg_log_level) == sizeof(unsigned) &&
                   sizeof(enum cfg_mode) == sizeof(unsigned) &&
                   sizeof(enum cfg_dma_isolation) == sizeof(unsigned) &&
                   sizeof(enum cfg_backing) == sizeof(unsigned) &&
                   sizeof(enum cfg_exec) == sizeof(unsigned) &&
                   sizeof(enum cfg_write_cache) == sizeof(unsigned) &&
                   sizeof(enum cfg_md_layout) == sizeof(unsigned) &&
                   sizeof(enum cfg_pi_type) == sizeof(unsigned) &&
                   sizeof(enum cfg_pi_location) == sizeof(unsigned) &&
                   sizeof(enum cfg_pi_guard) == sizeof(unsigned) &&
                   sizeof(enum cfg_fuse_transport) == sizeof(unsigned),
               "an enum field is not the size of an unsigned");
_Static_assert(sizeof(uid_t) == sizeof(unsigned) && sizeof(gid_t) == sizeof(unsigned) &&
                   sizeof(mode_t) == sizeof(unsigned),
               "an id or mode field is not the size of an unsigned");
/* admin_socket's range says 107 bytes */
#define CFG_SUN_PATH 108
_Static_assert(sizeof(((struct sockaddr_un *)0)->sun_path) == CFG_SUN_PATH,
               "sun_path is not 108 bytes: fix admin_socket's range");

#define CFG_STR(x)  #x
#define CFG_XSTR(x) CFG_STR(x)

#define DMN(f) offsetof(struct cfg_daemon, f)
#define ENG(f) offsetof(struct cfg_engine, f)
#define CTL(f) offsetof(struct cfg_controller, f)

#define KEY(sec, nm, kind, dflt, hlp)                                                              \
	.k.section = CFG_SEC_##sec, .k.name = nm, .k.def_kind = CFG_DEF_##kind, .k.def = dflt,     \
	.k.help = hlp
/* the range is lo..hi, or rng when the key has more rules */
#define UINT(field, l, h)                                                                          \
	.type = KT_UINT, .off = field, .lo = l, .hi = h, .k.range = CFG_XSTR(l) ".." CFG_XSTR(h)
#define UINT_R(field, l, h, rng) .type = KT_UINT, .off = field, .lo = l, .hi = h, .k.range = rng
#define UINT2(field, l, h)                                                                         \
	.type = KT_UINT2, .off = field, .lo = l, .hi = h, .k.range = CFG_XSTR(l) " or " CFG_XSTR(h)
#define BOOL(field)           .type = KT_BOOL, .off = field, .k.range = "yes or no"
#define ENUM(field, nms, rng) .type = KT_ENUM, .off = field, .names = nms, .k.range = rng
#define PATH(field, mx, rng)  .type = KT_PATH, .off = field, .max = mx, .k.range = rng
#define IDS(t, name, id, rng) .type = t, .off = name, .off2 = id, .k.range = rng
#define USER(name, id)                                                                             \
	IDS(KT_USER, name, id, "a user name known to this system or a numeric uid")
#define GROUP(name, id)                                                                            \
	IDS(KT_GROUP, name, id, "a group name known to this system or a numeric gid")

static const struct key keys[K_NKEYS] = {
    [K_MOUNTPOINT] = {KEY(DAEMON, "mountpoint", VALUE, "/run/nvmefs",
                          "directory where each namespace appears as the file NAMEn<nsid>"),
                      PATH(DMN(mountpoint), PATH_MAX, "an absolute path")},
    [K_ADMIN_SOCKET] = {KEY(DAEMON, "admin_socket", VALUE, "/run/nvmefsd.sock",
                            "UNIX socket of the admin interface (nvmefsctl)"),
                        PATH(DMN(admin_socket), CFG_SUN_PATH,
                             "an absolute path of at most 107 bytes")},
    [K_FILE_MODE] = {KEY(DAEMON, "file_mode", VALUE, "0660",
                         "permission bits of the namespace files"),
                     .type = KT_MODE, .off = DMN(file_mode), .k.range = "an octal mode 0000..0777"},
    [K_FILE_OWNER] = {KEY(DAEMON, "file_owner", VALUE, "root", "owner of the namespace files"),
                      USER(DMN(file_owner), DMN(uid))},
    [K_FILE_GROUP] = {KEY(DAEMON, "file_group", VALUE, "disk", "group of the namespace files"),
                      GROUP(DMN(file_group), DMN(gid))},
    [K_ALLOW_OTHER] = {KEY(DAEMON, "allow_other", VALUE, "yes",
                           "let users other than root open the files (FUSE allow_other)"),
                       BOOL(DMN(allow_other))},
    [K_LOG_LEVEL] = {KEY(DAEMON, "log_level", VALUE, "info", "the least severe message logged"),
                     ENUM(DMN(log_level), log_level_names, "error, warn, info or debug")},
    [K_FUSE_TRANSPORT] = {KEY(DAEMON, "fuse_transport", VALUE, "auto",
                              "how FUSE requests reach the daemon: io_uring or /dev/fuse"),
                          ENUM(DMN(fuse_transport), fuse_transport_names,
                               "auto, uring or classic")},
    /* checked and printed with classic too, where it is unused */
    [K_FUSE_QUEUE_DEPTH] = {KEY(DAEMON, "fuse_queue_depth", VALUE, "16",
                                "entries per FUSE io_uring queue"),
                            UINT(DMN(fuse_queue_depth), 1, 256)},
    /* unset: root only (the admin socket is 0600) */
    [K_ADMIN_GROUP] = {KEY(DAEMON, "admin_group", UNSET, "unset",
                           "group that may run nvmefsctl's read-only commands"),
                       GROUP(DMN(admin_group), DMN(admin_gid))},
    [K_OPERATOR_GROUP] = {KEY(DAEMON, "operator_group", UNSET, "unset",
                              "group that may run every nvmefsctl command"),
                          GROUP(DMN(operator_group), DMN(operator_gid))},
    /* a day at most: a slower poll is no poll */
    [K_HEALTH_INTERVAL] = {KEY(DAEMON, "health_interval", VALUE, "60",
                               "seconds between SMART log reads, 0: off"),
                           UINT(DMN(health_interval), 0, 86400)},
    /* a packaged config has no controller to name yet: say so on purpose,
     * rather than take a forgotten section for an empty host */
    [K_ALLOW_NO_CONTROLLER] = {KEY(DAEMON, "allow_no_controller", VALUE, "no",
                                   "a config without a [controller NAME] section is valid"),
                               BOOL(DMN(allow_no_controller))},

    [K_QUEUES] = {KEY(ENGINE, "queues", DERIVED, "the number of CPUs in cpus",
                      "I/O queue pairs per controller, one reactor each"),
                  UINT(ENG(queues), 1, 64)},
    [K_QUEUE_DEPTH] = {KEY(ENGINE, "queue_depth", VALUE, "256", "entries per I/O queue"),
                       UINT(ENG(queue_depth), 2, 4096)},
    [K_CQ_BUDGET] = {KEY(ENGINE, "cq_budget", DERIVED, "64",
                         "completions reaped per queue per pass (queue_depth / 2 if smaller)"),
                     UINT_R(ENG(cq_budget), 1, 255, "1..255 (below queue_depth)")},
    [K_CPUS] = {KEY(ENGINE, "cpus", DERIVED, "every online CPU", "CPUs to run reactors on"),
                .type = KT_CPUS, .off = ENG(cpus), .off2 = ENG(nr_cpus), .hi = CFG_MAX_CPUS,
                .k.range = "a list of CPU numbers and ranges, e.g. 0-3,8"},
    [K_MODE] = {KEY(ENGINE, "mode", VALUE, "hybrid", "how reactors wait for completions"),
                ENUM(ENG(mode), mode_names, "poll, interrupt or hybrid")},
    [K_IO_TIMEOUT_MS] = {KEY(ENGINE, "io_timeout_ms", VALUE, "5000",
                             "milliseconds before a command is aborted"),
                         UINT(ENG(io_timeout_ms), 100, 600000)},
    [K_IO_RETRIES] = {KEY(ENGINE, "io_retries", VALUE, "3",
                          "resubmissions of a command after a reset or Abort"),
                      UINT(ENG(io_retries), 0, 10)},
    [K_NUMA] = {KEY(ENGINE, "numa", VALUE, "yes",
                    "allocate on the NUMA node of each reactor's CPU"),
                BOOL(ENG(numa))},
    [K_DMA_ISOLATION] = {KEY(ENGINE, "dma_isolation", VALUE, "controller",
                             "which DMA buffers a controller's device can reach"),
                         ENUM(ENG(dma_isolation), dma_isolation_names, "controller or shared")},

    [K_DEVICE] = {KEY(CONTROLLER, "device", REQUIRED, NULL,
                      "sim, the software controller, or a PCI function bound to vfio-pci"),
                  .type = KT_DEVICE, .off = CTL(device), .off2 = CTL(sim),
                  .k.range = "sim or a PCI address DDDD:BB:DD.F or BB:DD.F (e.g. 0000:01:00.0)"},
    [K_NAMESPACES] = {KEY(CONTROLLER, "namespaces", VALUE, "1", "namespaces of the controller"),
                      UINT(CTL(namespaces), 1, CFG_NS_MAX), .k.sim_only = true},
    [K_SIZE] = {KEY(CONTROLLER, "size", VALUE, "1G",
                    "bytes per namespace, a multiple of block_size"),
                .type = KT_SIZE, .off = CTL(size), .k.sim_only = true,
                .k.range = "a number of bytes with an optional K, M, G or T suffix (powers of "
                           "1024), e.g. 1G"},
    [K_BLOCK_SIZE] = {KEY(CONTROLLER, "block_size", VALUE, "4096", "bytes per logical block"),
                      UINT2(CTL(block_size), 512, 4096), .k.sim_only = true},
    [K_BACKING] = {KEY(CONTROLLER, "backing", VALUE, "ram",
                       "where the data lives: memory, nowhere, or a file per namespace"),
                   .type = KT_BACKING, .off = CTL(backing), .off2 = CTL(backing_path),
                   .k.sim_only = true,
                   .k.range = "ram, null or an absolute file path (%c controller name, %n nsid, "
                              "%% a %)"},
    [K_EXEC] = {KEY(CONTROLLER, "exec", VALUE, "inline",
                    "where commands run: at the doorbell write or on the controller's thread"),
                ENUM(CTL(exec), exec_names, "inline or thread"), .k.sim_only = true},
    [K_OFFLOAD] = {KEY(CONTROLLER, "offload", VALUE, "256K",
                       "exec = inline: writes of at least this many bytes are copied "
                       "on the controller's copy thread, 0: none"),
                   .type = KT_SIZE, .off = CTL(offload), .k.sim_only = true,
                   .k.range = "a number of bytes with an optional K, M, G or T suffix, 0: none"},
    [K_MDTS] = {KEY(CONTROLLER, "mdts", VALUE, "7",
                    "maximum transfer, log2 of 4 KiB pages, 0: no limit"),
                UINT(CTL(mdts), 0, 10), .k.sim_only = true},
    [K_MAX_QUEUES] = {KEY(CONTROLLER, "max_queues", VALUE, "64",
                          "I/O queue pairs the controller grants"),
                      UINT(CTL(max_queues), 1, 64), .k.sim_only = true},
    [K_WRITE_CACHE] = {KEY(CONTROLLER, "write_cache", VALUE, "volatile",
                           "a volatile write cache (durable after Flush or FUA) or none"),
                       ENUM(CTL(write_cache), write_cache_names, "volatile or none"),
                       .k.sim_only = true},
    [K_METADATA_SIZE] = {KEY(CONTROLLER, "metadata_size", VALUE, "0",
                             "bytes of metadata per block, 0: none"),
                         UINT_R(CTL(metadata_size), 0, 256, "0..256, a multiple of 8"),
                         .k.sim_only = true},
    [K_METADATA_LAYOUT] = {KEY(CONTROLLER, "metadata_layout", VALUE, "separate",
                               "metadata in a buffer of its own or after each block's data"),
                           ENUM(CTL(metadata_layout), md_layout_names, "separate or extended"),
                           .k.sim_only = true},
    [K_PI_TYPE] = {KEY(CONTROLLER, "pi_type", VALUE, "none",
                       "end-to-end protection information in the metadata: its type"),
                   ENUM(CTL(pi_type), pi_type_names, "none, 1, 2 or 3"), .k.sim_only = true},
    [K_PI_LOCATION] = {KEY(CONTROLLER, "pi_location", VALUE, "last",
                           "the protection information's place in the metadata"),
                       ENUM(CTL(pi_location), pi_location_names, "last or first"),
                       .k.sim_only = true},
    [K_PI_GUARD] = {KEY(CONTROLLER, "pi_guard", VALUE, "crc16",
                        "the guard: 16-bit T10 DIF CRC (8 bytes of PI) or 64-bit NVMe CRC (16)"),
                    ENUM(CTL(pi_guard), pi_guard_names, "crc16 or crc64"), .k.sim_only = true},
};
#undef KEY
#undef UINT
#undef UINT_R
#undef UINT2
#undef BOOL
#undef ENUM
#undef PATH
#undef IDS
#undef USER
#undef GROUP

const struct cfg_key *cfg_key(size_t i)
{
	return i < K_NKEYS ? &keys[i].k : NULL;
}

static enum cfg_section sec_section(enum sec_kind k)
{
	return k == SEC_DAEMON   ? CFG_SEC_DAEMON
	       : k == SEC_ENGINE ? CFG_SEC_ENGINE
	                         : CFG_SEC_CONTROLLER;
}

/* Takes val as the value of key k into its field in base.  kv is the line
 * it came from, for the message; NULL for a default, which reports nothing. */
static bool take(struct ctx *c, const struct key *k, const struct kv *kv, const char *val,
                 void *base)
{
	void *p = (char *)base + k->off, *p2 = (char *)base + k->off2;
	uint64_t v;

	switch (k->type) {
	case KT_UINT:
		if (!parse_u64(val, &v) || v < k->lo || v > k->hi)
			break;
		*(unsigned *)p = (unsigned)v;
		return true;
	case KT_UINT2:
		if (!parse_u64(val, &v) || (v != k->lo && v != k->hi))
			break;
		*(unsigned *)p = (unsigned)v;
		return true;
	case KT_BOOL: {
		static const char *const yes[] = {"yes", "true", "on", "1"};
		static const char *const no[] = {"no", "false", "off", "0"};

		for (unsigned i = 0; i < 4; i++) {
			if (!strcasecmp(val, yes[i]) || !strcasecmp(val, no[i])) {
				*(bool *)p = !strcasecmp(val, yes[i]);
				return true;
			}
		}
		break;
	}
	case KT_ENUM:
		for (unsigned i = 0; k->names[i]; i++) {
			if (!strcmp(val, k->names[i])) {
				*(unsigned *)p = i;
				return true;
			}
		}
		break;
	case KT_PATH: {
		size_t n = strlen(val);

		if (val[0] != '/' || n >= k->max)
			break;
		memcpy(p, val, n + 1);
		return true;
	}
	case KT_MODE: {
		unsigned m = 0;

		if (!*val || strspn(val, "01234567") != strlen(val))
			break;
		for (const char *s = val; *s && m <= 0777; s++)
			m = m * 8 + (unsigned)(*s - '0');
		if (m > 0777)
			break;
		*(mode_t *)p = m;
		return true;
	}
	case KT_USER:
	case KT_GROUP:
		if (!lookup_id(val, k->type == KT_USER, p2))
			break;
		strcpy(p, val);
		return true;
	case KT_CPUS: {
		int rc = cfg_parse_cpu_list(val, p, k->hi, p2);

		if (rc == -E2BIG) {
			if (kv)
				err_kv(c, kv, "must list at most %u CPUs", k->hi);
			return false;
		}
		if (rc)
			break;
		return true;
	}
	case KT_SIZE:
		if (!parse_size(val, &v))
			break;
		*(uint64_t *)p = v;
		return true;
	case KT_DEVICE:
		if (!strcmp(val, "sim")) {
			*(bool *)p2 = true;
			strcpy(p, "sim");
			return true;
		}
		if (!parse_pci(val, p, sizeof(((struct cfg_controller *)0)->device)))
			break;
		*(bool *)p2 = false;
		return true;
	case KT_BACKING: {
		bool has_n;

		if (!strcmp(val, "ram") || !strcmp(val, "null")) {
			*(unsigned *)p = val[0] == 'r' ? CFG_BACKING_RAM : CFG_BACKING_NULL;
			((char *)p2)[0] = '\0';
			return true;
		}
		/* %n's presence is a cross-key rule (namespaces), checked later */
		if (val[0] != '/' || strlen(val) >= PATH_MAX || !backing_pattern_ok(val, &has_n))
			break;
		*(unsigned *)p = CFG_BACKING_FILE;
		strcpy(p2, val);
		return true;
	}
	}
	if (kv)
		err_kv(c, kv, "must be %s", k->k.range);
	return false;
}

/* The default of key k into base, for a key not given.  A derived default
 * is set by the section's own rules after the table pass. */
static void set_default(struct ctx *c, const struct key *k, void *base)
{
	switch (k->k.def_kind) {
	case CFG_DEF_VALUE:
		if (take(c, k, NULL, k->k.def, base))
			break;
		/* a name default (file_group = disk) need not exist on every system */
		if (k->type == KT_USER || k->type == KT_GROUP)
			add_err(c, CFG_NOLINE,
			        "%s: %s: the default %s %s is unknown here; set %s", c->name,
			        k->k.name, k->type == KT_USER ? "user" : "group", k->k.def,
			        k->k.name);
		else
			add_err(c, CFG_NOLINE, "%s: %s: bad default %s", c->name, k->k.name,
			        k->k.def);
		break;
	case CFG_DEF_UNSET: /* a name key: no name, id -1 */
		*((char *)base + k->off) = '\0';
		*(unsigned *)((char *)base + k->off2) = (unsigned)-1;
		break;
	case CFG_DEF_DERIVED:
	case CFG_DEF_REQUIRED:
		break;
	}
}

/* ---- phase 2: sections and keys ---- */

static const char *sec_label(const struct sec *s)
{
	return s->kind == SEC_CTRL ? "controller" : s->name;
}

/* Finds the keys of section si: slot[k] is the kv of key k, or NULL.
 * Reports unknown and repeated keys. */
static void gather(struct ctx *c, int si, const struct kv **slot)
{
	enum cfg_section sec = sec_section(c->secs[si].kind);

	for (unsigned i = 0; i < c->nkvs; i++) {
		const struct kv *kv = &c->kvs[i];
		unsigned k;

		if (kv->sec != si)
			continue;
		for (k = 0; k < K_NKEYS; k++)
			if (keys[k].k.section == sec && !strcmp(kv->key, keys[k].k.name))
				break;
		if (k == K_NKEYS) {
			char allowed[512] = "";

			for (unsigned j = 0; j < K_NKEYS; j++) {
				if (keys[j].k.section != sec)
					continue;
				strcat(allowed, allowed[0] ? ", " : "");
				strcat(allowed, keys[j].k.name);
			}
			err_kv(c, kv, "unknown key in [%s]; allowed: %s", sec_label(&c->secs[si]),
			       allowed);
			continue;
		}
		if (slot[k]) {
			err_kv(c, kv, "%s given twice in this section (first at line %d)", kv->key,
			       slot[k]->line);
			continue;
		}
		slot[k] = kv;
	}
}

/* The table pass over one section (si < 0: absent): each key given is taken
 * by its type, each key not given gets its default.  ok[k]: key k was given
 * and is valid.  A software controller's keys are refused on a PCI
 * controller, whose fields for them stay clear. */
static void take_section(struct ctx *c, enum cfg_section sec, int si, void *base,
                         const struct kv **slot, bool *ok)
{
	for (unsigned k = 0; k < K_NKEYS; k++) {
		slot[k] = NULL;
		ok[k] = false;
	}
	if (si >= 0)
		gather(c, si, slot);
	for (unsigned k = 0; k < K_NKEYS; k++) {
		const struct key *key = &keys[k];
		const struct cfg_controller *ctl = base;

		if (key->k.section != sec)
			continue;
		/* device is the controller's first row: known by now */
		if (key->k.sim_only && ok[K_DEVICE] && !ctl->sim) {
			if (slot[k])
				err_kv(c, slot[k], "only for device = sim, not for a PCI device (%s)",
				       ctl->device);
			continue;
		}
		if (!slot[k]) {
			set_default(c, key, base);
			continue;
		}
		ok[k] = take(c, key, slot[k], slot[k]->val, base);
		/* the field keeps its default, which the cross-key rules may read
		 * (a name default is not looked up: its error would be noise) */
		if (!ok[k] && key->k.def_kind == CFG_DEF_VALUE && key->type != KT_USER &&
		    key->type != KT_GROUP)
			take(c, key, NULL, key->k.def, base);
	}
}

static bool valid_ctrl_name(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > CFG_CTRL_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
			return false;
	return true;
}

/* Gives each section its kind; reports unknown, repeated and misnamed ones.
 * A section with an error keeps SEC_NONE and its keys are not looked at. */
static void classify(struct ctx *c)
{
	int daemon = -1, engine = -1;

	for (unsigned i = 0; i < c->nsecs; i++) {
		struct sec *s = &c->secs[i];

		if (!strcmp(s->name, "daemon") || !strcmp(s->name, "engine")) {
			int *first = s->name[0] == 'd' ? &daemon : &engine;

			if (*first >= 0) {
				err_sec(c, s, "section given twice (first at line %d)",
				        c->secs[*first].line);
				continue;
			}
			*first = (int)i;
			s->kind = s->name[0] == 'd' ? SEC_DAEMON : SEC_ENGINE;
		} else if (!strncmp(s->name, "controller", 10) &&
		           (s->name[10] == '\0' || is_blank(s->name[10]))) {
			const char *nm = s->name + 10;
			struct cfg_controller *ctl;
			unsigned j;

			while (is_blank(*nm))
				nm++;
			if (!valid_ctrl_name(nm)) {
				err_sec(c, s,
				        "must be [controller NAME], NAME 1..16 of A-Z a-z 0-9 _ -");
				continue;
			}
			for (j = 0; j < c->cfg->nr_ctrls; j++)
				if (!strcmp(c->cfg->ctrls[j].name, nm))
					break;
			if (j < c->cfg->nr_ctrls) {
				err_sec(c, s, "controller name given twice (first at line %d)",
				        c->cfg->ctrls[j].line);
				continue;
			}
			if (c->cfg->nr_ctrls == CFG_MAX_CTRLS) {
				err_sec(c, s, "at most %d controllers", CFG_MAX_CTRLS);
				continue;
			}
			ctl = &c->cfg->ctrls[c->cfg->nr_ctrls];
			strcpy(ctl->name, nm);
			ctl->line = s->line;
			s->kind = SEC_CTRL;
			s->ctrl = (int)c->cfg->nr_ctrls++;
		} else {
			err_sec(c, s,
			        "unknown section; allowed: [daemon], [engine], [controller NAME]");
		}
	}
	for (unsigned i = 0; i < c->nkvs; i++)
		if (c->kvs[i].sec < 0)
			err_kv(c, &c->kvs[i],
			       "outside any section; put it under [daemon], [engine] or "
			       "[controller NAME]");
}

/* ---- paths ---- */

/* A path's text: no "." or ".." component (the daemon walks paths
 * component by component and refuses them, safepath.h). */
static bool dot_free(const char *p)
{
	for (const char *s = p; *s;) {
		size_t n = strcspn(s, "/");

		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return false;
		s += n;
		s += *s == '/';
	}
	return true;
}

/* The system directories a mountpoint may not be: the mount would hide
 * what the system keeps there (or, on a file system of the kernel's, make
 * no sense).  within: the directory and everything below it; otherwise the
 * directory itself only (a directory of its own below it is fine, such as
 * /run/nvmefs, /srv/nvme or /mnt/nvme). */
static const struct {
	const char *dir;
	bool within;
} system_dirs[] = {
    {"/", false},         {"/bin", true},      {"/boot", true},      {"/dev", true},
    {"/etc", true},       {"/home", false},    {"/lib", true},       {"/lib32", true},
    {"/lib64", true},     {"/libx32", true},   {"/media", false},    {"/mnt", false},
    {"/opt", false},      {"/proc", true},     {"/root", false},     {"/run", false},
    {"/sbin", true},      {"/srv", false},     {"/sys", true},       {"/tmp", false},
    {"/usr", true},       {"/var", false},     {"/var/cache", false}, {"/var/lib", false},
    {"/var/log", false},  {"/var/spool", false}, {"/var/tmp", false},
};

/* The system directory that mountpoint p (absolute, dot_free) is, or is
 * within; NULL if none.  "//" is read as the kernel reads it. */
static const char *system_dir(const char *p, bool *within)
{
	char n[PATH_MAX];
	size_t len = 0;

	for (const char *s = p; *s && len < sizeof(n) - 1; s++)
		if (*s != '/' || !len || n[len - 1] != '/')
			n[len++] = *s;
	if (len > 1 && n[len - 1] == '/')
		len--;
	n[len] = '\0';
	for (size_t i = 0; i < sizeof(system_dirs) / sizeof(system_dirs[0]); i++) {
		const char *d = system_dirs[i].dir;
		size_t dl = strlen(d);

		*within = system_dirs[i].within && strncmp(n, d, dl) == 0 && n[dl] == '/';
		if (!strcmp(n, d) || *within)
			return d;
	}
	return NULL;
}

/* An error about key (kv: where it is given; NULL: its default, val). */
#define err_path(c, kv, key, val, fmt, ...)                                                        \
	((kv) ? err_kv(c, kv, fmt, ##__VA_ARGS__)                                                  \
	      : add_err(c, CFG_NOLINE, "%s: %s = %s (the default): " fmt, (c)->name, key, val,     \
	                ##__VA_ARGS__))

/* What would stop the daemon at start, asked of the file system now (only
 * cfg_load; cfg_load_string is text alone).  A directory the caller may
 * not search (EACCES: not root) is not judged.  The mountpoint itself is
 * never looked at: a FUSE mount there whose server is gone would hang the
 * look-up (mount.c); its parents are walked as the daemon walks them, and
 * a missing one is fine (the daemon creates them). */
static void check_mountpoint_fs(struct ctx *c, const struct kv *kv, const char *mp)
{
	char msg[PATH_MAX + 160];
	const char *name;
	int fd = safepath_open_parent(mp, false, &name, msg, sizeof(msg));

	if (fd >= 0)
		close(fd);
	else if (fd != -ENOENT && fd != -EACCES)
		err_path(c, kv, "mountpoint", mp, "%s", msg);
}

/* The socket is made at start, its directory is not. */
static void check_socket_fs(struct ctx *c, const struct kv *kv, const char *sock)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(sock, '/');
	struct stat st;

	snprintf(dir, sizeof(dir), "%.*s", slash == sock ? 1 : (int)(slash - sock), sock);
	if (stat(dir, &st) < 0) {
		if (errno == ENOENT)
			err_path(c, kv, "admin_socket", sock,
			         "directory %s does not exist (the daemon makes the socket, not its "
			         "directory)",
			         dir);
		else if (errno == ENOTDIR)
			err_path(c, kv, "admin_socket", sock, "%s is not a directory", dir);
	} else if (!S_ISDIR(st.st_mode)) {
		err_path(c, kv, "admin_socket", sock, "%s is not a directory", dir);
	} else {
		/* the daemon's own walk (admin.h): whoever may change the
		 * directory may put a socket of their own there */
		char msg[PATH_MAX + 160];
		const char *name;
		int fd = safepath_open_parent(sock, false, &name, msg, sizeof(msg));

		if (fd >= 0)
			close(fd);
		else if (fd != -EACCES)
			err_path(c, kv, "admin_socket", sock, "%s", msg);
	}
}

static void do_daemon(struct ctx *c, int si)
{
	struct cfg_daemon *d = &c->cfg->daemon;
	const struct kv *slot[K_NKEYS];
	bool ok[K_NKEYS], mp_ok, within;
	const char *sys;

	take_section(c, CFG_SEC_DAEMON, si, d, slot, ok);

	mp_ok = !slot[K_MOUNTPOINT] || ok[K_MOUNTPOINT];
	if (mp_ok && !dot_free(d->mountpoint)) {
		err_kv(c, slot[K_MOUNTPOINT], "must have no . or .. component");
		mp_ok = false;
	} else if (mp_ok && strlen(d->mountpoint) > 1 &&
	           d->mountpoint[strlen(d->mountpoint) - 1] == '/') {
		err_kv(c, slot[K_MOUNTPOINT], "must not end with a slash");
		mp_ok = false;
	} else if (mp_ok && (sys = system_dir(d->mountpoint, &within))) {
		err_kv(c, slot[K_MOUNTPOINT],
		       "must not be %s %s: a mount there hides what the system keeps in it; give "
		       "the namespaces a directory of their own, such as /run/nvmefs or /srv/nvme",
		       within ? "inside the system directory" : "the system directory", sys);
		mp_ok = false;
	}
	if (c->fs_checks && mp_ok)
		check_mountpoint_fs(c, slot[K_MOUNTPOINT], d->mountpoint);
	if (c->fs_checks && (!slot[K_ADMIN_SOCKET] || ok[K_ADMIN_SOCKET]))
		check_socket_fs(c, slot[K_ADMIN_SOCKET], d->admin_socket);
}

/* Each CPU of a valid cpus once and online. */
static bool cpus_usable(struct ctx *c, const struct kv *kv, const struct cfg_engine *e)
{
	uint8_t seen[CFG_CPU_ID_MAX / 8 + 1] = {0};

	for (unsigned i = 0; i < e->nr_cpus; i++) {
		unsigned cpu = e->cpus[i];

		if (bit_test(seen, cpu)) {
			err_kv(c, kv, "CPU %u is listed twice; each CPU at most once", cpu);
			return false;
		}
		bit_set(seen, cpu);
		if (!bit_test(c->online, cpu)) {
			err_kv(c, kv, "CPU %u is not online (online CPUs: %s)", cpu, c->online_str);
			return false;
		}
	}
	return true;
}

static void do_engine(struct ctx *c, int si)
{
	struct cfg_engine *e = &c->cfg->engine;
	const struct kv *slot[K_NKEYS];
	bool ok[K_NKEYS], cpus_ok, depth_ok;

	take_section(c, CFG_SEC_ENGINE, si, e, slot, ok);

	/* cpus: every online CPU by default */
	e->cpus_set = slot[K_CPUS] != NULL;
	if (!e->cpus_set) {
		e->nr_cpus = 0;
		for (unsigned i = 0; i <= CFG_CPU_ID_MAX && e->nr_cpus < CFG_MAX_CPUS; i++)
			if (bit_test(c->online, i))
				e->cpus[e->nr_cpus++] = i;
		cpus_ok = true;
	} else {
		cpus_ok = ok[K_CPUS] && cpus_usable(c, slot[K_CPUS], e);
	}

	/* cq_budget < queue_depth; the default budget stays below a small queue_depth */
	depth_ok = !slot[K_QUEUE_DEPTH] || ok[K_QUEUE_DEPTH];
	if (ok[K_CQ_BUDGET] && depth_ok && e->cq_budget >= e->queue_depth) {
		err_kv(c, slot[K_CQ_BUDGET], "must be below queue_depth (%u)", e->queue_depth);
		ok[K_CQ_BUDGET] = false;
	}
	if (!ok[K_CQ_BUDGET])
		e->cq_budget = e->queue_depth / 2 < 64 ? e->queue_depth / 2 : 64;

	/* queues <= CPUs in cpus: one reactor per CPU */
	if (ok[K_QUEUES] && cpus_ok && e->queues > e->nr_cpus) {
		err_kv(c, slot[K_QUEUES],
		       "must be at most %u, the number of CPUs in cpus (one reactor per CPU)",
		       e->nr_cpus);
		ok[K_QUEUES] = false;
	}
	if (!ok[K_QUEUES])
		e->queues = cpus_ok && e->nr_cpus < 64 ? e->nr_cpus : 64;
}

/* Each namespace's backing file as the daemon will open it
 * (safepath_open_file): its directory must exist (the daemon creates the
 * file, not the directory) and pass the walk's rules, and a file there
 * must be a regular file of root's.  One error per key: the files of one
 * pattern share their directory. */
static void check_backing_fs(struct ctx *c, const struct kv *kv, const struct cfg_controller *ctl)
{
	char path[PATH_MAX], msg[PATH_MAX + 160];

	for (unsigned ns = 1; ns <= ctl->namespaces; ns++) {
		int rc;

		if (cfg_backing_file(ctl, ns, path, sizeof(path)))
			return;
		rc = safepath_check_file(path, msg, sizeof(msg));
		if (rc == -ENOENT) {
			err_kv(c, kv, "%s: the daemon creates a missing backing file, not its "
			       "directory (install -d -m 0700 %.*s)",
			       msg, (int)(strrchr(path, '/') - path), path);
			return;
		}
		if (rc && rc != -EACCES) {
			err_kv(c, kv, "%s", msg);
			return;
		}
	}
}

/* A software controller's metadata keys together: a size of whole 8-byte
 * steps, on a backing that stores it, large enough for the protection
 * information; the PI keys only with PI, the layout only with metadata. */
static void do_metadata(struct ctx *c, struct cfg_controller *ctl, const struct kv **slot,
                        const bool *ok)
{
	const struct kv *kv;
	unsigned pis = ctl->pi_guard == CFG_PI_CRC64 ? 16 : 8;

	if ((kv = slot[K_METADATA_SIZE]) && ok[K_METADATA_SIZE]) {
		if (ctl->metadata_size % 8)
			err_kv(c, kv, "must be a multiple of 8");
		else if (ctl->metadata_size && ctl->backing == CFG_BACKING_NULL)
			err_kv(c, kv, "needs backing ram or a file: null stores no metadata");
	}
	if ((kv = slot[K_PI_TYPE]) && ok[K_PI_TYPE] && ctl->pi_type != CFG_PI_NONE &&
	    ctl->metadata_size < pis)
		err_kv(c, kv,
		       "needs metadata_size of at least %u (the protection information's size with "
		       "pi_guard = %s)",
		       pis, pi_guard_names[ctl->pi_guard]);
	for (unsigned k = K_PI_LOCATION; k <= K_PI_GUARD; k++)
		if ((kv = slot[k]) && ok[k] && ctl->pi_type == CFG_PI_NONE)
			err_kv(c, kv, "only with pi_type 1, 2 or 3");
	if ((kv = slot[K_METADATA_LAYOUT]) && ok[K_METADATA_LAYOUT] && !ctl->metadata_size)
		err_kv(c, kv, "only with metadata_size above 0");
}

static void do_controller(struct ctx *c, int si)
{
	struct sec *s = &c->secs[si];
	struct cfg_controller *ctl = &c->cfg->ctrls[s->ctrl];
	const struct kv *slot[K_NKEYS];
	const struct kv *kv;
	bool ok[K_NKEYS], ns_ok, bs_ok;

	take_section(c, CFG_SEC_CONTROLLER, si, ctl, slot, ok);

	if (!slot[K_DEVICE]) {
		err_sec(c, s, "device is missing: give device = sim or a PCI address");
	} else if (ok[K_DEVICE] && !ctl->sim) {
		/* each PCI device at most once */
		for (unsigned j = 0; j < (unsigned)s->ctrl; j++) {
			const struct cfg_controller *o = &c->cfg->ctrls[j];

			if (!o->sim && !strcmp(o->device, ctl->device)) {
				err_kv(c, slot[K_DEVICE], "%s is already the device of [controller %s]",
				       ctl->device, o->name);
				break;
			}
		}
		return;
	}

	/* a software controller (or a bad device: its keys are still checked) */
	ns_ok = !slot[K_NAMESPACES] || ok[K_NAMESPACES];
	bs_ok = !slot[K_BLOCK_SIZE] || ok[K_BLOCK_SIZE];
	if ((kv = slot[K_SIZE]) && ok[K_SIZE] && bs_ok) {
		if (ctl->size < ctl->block_size)
			err_kv(c, kv, "must be at least one block (%u bytes)", ctl->block_size);
		else if (ctl->size % ctl->block_size)
			err_kv(c, kv, "must be a multiple of block_size (%u)", ctl->block_size);
	}
	if ((kv = slot[K_BACKING]) && ok[K_BACKING] && ctl->backing == CFG_BACKING_FILE) {
		char probe[PATH_MAX];
		bool has_n;

		backing_pattern_ok(ctl->backing_path, &has_n);
		if (ns_ok && ctl->namespaces > 1 && !has_n) {
			err_kv(c, kv, "must contain %%n when namespaces > 1 (one file per namespace)");
		} else if (cfg_backing_file(ctl, ctl->namespaces, probe, sizeof(probe))) {
			err_kv(c, kv, "must expand to a path shorter than %d bytes", PATH_MAX);
			ctl->backing = CFG_BACKING_RAM;
			ctl->backing_path[0] = '\0';
		} else if (!dot_free(ctl->backing_path)) {
			err_kv(c, kv, "must have no . or .. component");
		} else if (c->fs_checks && ns_ok) {
			check_backing_fs(c, kv, ctl);
		}
	}
	do_metadata(c, ctl, slot, ok);
	if (!ok[K_DEVICE]) {
		/* not known to be sim: keep the fields of a PCI controller clear */
		ctl->sim = false;
	}
}

/* a misnamed [controller ...] has its own error; "no controller" would be noise */
static bool any_controller_section(const struct ctx *c)
{
	for (unsigned i = 0; i < c->nsecs; i++)
		if (!strncmp(c->secs[i].name, "controller", 10))
			return true;
	return false;
}

static void ctx_free(struct ctx *c)
{
	for (unsigned i = 0; i < c->nsecs; i++)
		free(c->secs[i].name);
	for (unsigned i = 0; i < c->nkvs; i++) {
		free(c->kvs[i].key);
		free(c->kvs[i].val);
	}
	for (unsigned i = 0; i < c->nerrs; i++)
		free(c->errs[i].msg);
	free(c->secs);
	free(c->kvs);
	free(c->errs);
	free(c->online);
}

static int load_buf(const char *name, const char *buf, size_t len, bool fs_checks,
                    struct cfg **out, FILE *errs)
{
	struct ctx c = {.name = name, .buf = buf, .len = len, .cur_sec = -1, .fs_checks = fs_checks};
	int daemon = -1, engine = -1;
	int rc;

	*out = NULL;
	if (!errs)
		errs = stderr;
	c.cfg = calloc(1, sizeof(*c.cfg));
	if (!c.cfg)
		return -ENOMEM;
	snprintf(c.cfg->path, sizeof(c.cfg->path), "%s", name);
	rc = read_online(&c);
	if (rc)
		goto out;
	rc = collect(&c);
	if (rc)
		goto out;

	classify(&c);
	for (unsigned i = 0; i < c.nsecs; i++) {
		if (c.secs[i].kind == SEC_DAEMON)
			daemon = (int)i;
		else if (c.secs[i].kind == SEC_ENGINE)
			engine = (int)i;
	}
	do_daemon(&c, daemon);
	do_engine(&c, engine);
	for (unsigned i = 0; i < c.nsecs; i++)
		if (c.secs[i].kind == SEC_CTRL)
			do_controller(&c, (int)i);
	if (!any_controller_section(&c) && !c.cfg->daemon.allow_no_controller)
		add_err(&c, CFG_NOLINE,
		        "%s: no [controller NAME] section: at least one is required "
		        "(unless allow_no_controller = yes)",
		        name);
	if (c.oom) {
		rc = -ENOMEM;
		goto out;
	}

	if (c.nerrs)
		qsort(c.errs, c.nerrs, sizeof(*c.errs), err_cmp);
	for (unsigned i = 0; i < c.nerrs; i++)
		fprintf(errs, "%s\n", c.errs[i].msg);
	fflush(errs);
	rc = c.nerrs ? -EINVAL : 0;
out:
	if (rc == -ENOMEM)
		fprintf(errs, "%s: out of memory\n", name);
	if (rc == 0)
		*out = c.cfg;
	else
		free(c.cfg);
	ctx_free(&c);
	return rc;
}

int cfg_load_string(const char *name, const char *text, struct cfg **out, FILE *errs)
{
	return load_buf(name, text, strlen(text), false, out, errs);
}

static int load_file(const char *path, bool fs_checks, struct cfg **out, FILE *errs)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	*out = NULL;
	if (!errs)
		errs = stderr;
	f = fopen(path, "re");
	if (!f) {
		rc = -errno;
		fprintf(errs, "%s: cannot open: %s\n", path, strerror(-rc));
		return rc;
	}
	buf = malloc(CFG_FILE_MAX + 1);
	if (!buf) {
		rc = -ENOMEM;
		fprintf(errs, "%s: out of memory\n", path);
		goto out;
	}
	len = fread(buf, 1, CFG_FILE_MAX + 1, f);
	if (ferror(f)) {
		rc = -EIO;
		fprintf(errs, "%s: cannot read: %s\n", path, strerror(errno ? errno : EIO));
		goto out;
	}
	if (len > CFG_FILE_MAX) {
		rc = -EFBIG;
		fprintf(errs, "%s: too large for a config file (at most %d bytes)\n", path,
		        CFG_FILE_MAX);
		goto out;
	}
	rc = load_buf(path, buf, len, fs_checks, out, errs);
out:
	free(buf);
	fclose(f);
	return rc;
}

int cfg_load(const char *path, struct cfg **out, FILE *errs)
{
	return load_file(path, true, out, errs);
}

int cfg_load_syntax(const char *path, struct cfg **out, FILE *errs)
{
	return load_file(path, false, out, errs);
}

/* ---- output ---- */

static void print_size(FILE *out, uint64_t v)
{
	static const char suffix[] = "TGMK";

	for (int i = 0; i < 4; i++) {
		unsigned shift = 10u * (unsigned)(4 - i);

		if (v && !(v & ((1ull << shift) - 1))) {
			fprintf(out, "%llu%c", (unsigned long long)(v >> shift), suffix[i]);
			return;
		}
	}
	fprintf(out, "%llu", (unsigned long long)v);
}

/* ascending runs as ranges, the order kept: "0-3,8" */
static void print_cpus(FILE *out, const unsigned *cpus, unsigned n)
{
	for (unsigned i = 0; i < n;) {
		unsigned j = i;

		while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
			j++;
		fprintf(out, "%s%u", i ? "," : "", cpus[i]);
		if (j > i)
			fprintf(out, "-%u", cpus[j]);
		i = j + 1;
	}
}

const char *cfg_mode_name(enum cfg_mode m)
{
	return (unsigned)m < 3 ? mode_names[m] : "unknown";
}

const char *cfg_dma_isolation_name(enum cfg_dma_isolation d)
{
	return (unsigned)d < 2 ? dma_isolation_names[d] : "unknown";
}

const char *cfg_fuse_transport_name(enum cfg_fuse_transport t)
{
	return (unsigned)t < 3 ? fuse_transport_names[t] : "unknown";
}

void cfg_print(const struct cfg *cfg, FILE *out)
{
	const struct cfg_daemon *d = &cfg->daemon;
	const struct cfg_engine *e = &cfg->engine;

	fprintf(out, "# nvmefs: effective configuration of %s\n\n", cfg->path);
	fprintf(out, "[daemon]\n# the FUSE mount and its transport, the admin socket, and who may "
	             "use the namespace files\n");
	fprintf(out, "mountpoint = %s\n", d->mountpoint);
	fprintf(out, "admin_socket = %s\n", d->admin_socket);
	fprintf(out, "file_mode = %04o\n", (unsigned)d->file_mode);
	fprintf(out, "file_owner = %s\n", d->file_owner);
	fprintf(out, "file_group = %s\n", d->file_group);
	if (d->admin_group[0])
		fprintf(out, "admin_group = %s\n", d->admin_group);
	else
		fprintf(out, "# admin_group unset: only root may use the admin socket\n");
	if (d->operator_group[0])
		fprintf(out, "operator_group = %s\n", d->operator_group);
	else
		fprintf(out, "# operator_group unset: only root may change state\n");
	fprintf(out, "allow_other = %s\n", d->allow_other ? "yes" : "no");
	fprintf(out, "log_level = %s\n", log_level_names[d->log_level]);
	fprintf(out, "fuse_transport = %s\n", cfg_fuse_transport_name(d->fuse_transport));
	fprintf(out, "fuse_queue_depth = %u\n", d->fuse_queue_depth);
	fprintf(out, "health_interval = %u\n", d->health_interval);
	fprintf(out, "allow_no_controller = %s\n", d->allow_no_controller ? "yes" : "no");

	fprintf(out,
	        "\n[engine]\n# %u reactor%s (one per CPU), each with its own I/O queue pair per "
	        "controller\n",
	        e->queues, e->queues == 1 ? "" : "s");
	fprintf(out, "queues = %u\n", e->queues);
	fprintf(out, "queue_depth = %u\n", e->queue_depth);
	fprintf(out, "cq_budget = %u\n", e->cq_budget);
	if (e->cpus_set) {
		fprintf(out, "cpus = ");
		print_cpus(out, e->cpus, e->nr_cpus);
		fprintf(out, "\n");
	} else {
		/* left as the default, so the output keeps following the machine */
		fprintf(out, "# cpus = ");
		print_cpus(out, e->cpus, e->nr_cpus);
		fprintf(out, " (the default: every online CPU)\n");
	}
	fprintf(out, "mode = %s\n", cfg_mode_name(e->mode));
	fprintf(out, "io_timeout_ms = %u\n", e->io_timeout_ms);
	fprintf(out, "io_retries = %u\n", e->io_retries);
	fprintf(out, "numa = %s\n", e->numa ? "yes" : "no");
	fprintf(out, "dma_isolation = %s\n", cfg_dma_isolation_name(e->dma_isolation));

	if (!cfg->nr_ctrls)
		fprintf(out, "\n# no [controller NAME] section: nothing to serve (allow_no_controller)\n");
	for (unsigned i = 0; i < cfg->nr_ctrls; i++) {
		const struct cfg_controller *c = &cfg->ctrls[i];

		fprintf(out, "\n[controller %s]\n", c->name);
		if (!c->sim) {
			fprintf(out, "# PCI function %s through VFIO: files %sn1, %sn2, ...\n",
			        c->device, c->name, c->name);
			fprintf(out, "device = %s\n", c->device);
			continue;
		}
		fprintf(out, "# software controller: files %sn1", c->name);
		if (c->namespaces > 1)
			fprintf(out, "..%sn%u", c->name, c->namespaces);
		fprintf(out, "\ndevice = sim\n");
		fprintf(out, "namespaces = %u\n", c->namespaces);
		fprintf(out, "size = ");
		print_size(out, c->size);
		fprintf(out, "\nblock_size = %u\n", c->block_size);
		fprintf(out, "backing = %s\n",
		        c->backing == CFG_BACKING_RAM    ? "ram"
		        : c->backing == CFG_BACKING_NULL ? "null"
		                                         : c->backing_path);
		fprintf(out, "exec = %s\n", exec_names[c->exec]);
		fprintf(out, "offload = ");
		print_size(out, c->offload);
		fputc('\n', out);
		fprintf(out, "mdts = %u\n", c->mdts);
		fprintf(out, "max_queues = %u\n", c->max_queues);
		fprintf(out, "write_cache = %s\n", write_cache_names[c->write_cache]);
		fprintf(out, "metadata_size = %u\n", c->metadata_size);
		if (c->metadata_size)
			fprintf(out, "metadata_layout = %s\n", md_layout_names[c->metadata_layout]);
		fprintf(out, "pi_type = %s\n", pi_type_names[c->pi_type]);
		if (c->pi_type != CFG_PI_NONE) {
			fprintf(out, "pi_location = %s\n", pi_location_names[c->pi_location]);
			fprintf(out, "pi_guard = %s\n", pi_guard_names[c->pi_guard]);
		}
	}
}

const struct cfg_controller *cfg_volatile_ctrl(const struct cfg *cfg)
{
	for (unsigned i = 0; i < cfg->nr_ctrls; i++)
		if (cfg->ctrls[i].sim && cfg->ctrls[i].backing == CFG_BACKING_RAM)
			return &cfg->ctrls[i];
	return NULL;
}

int cfg_backing_file(const struct cfg_controller *c, unsigned nsid, char *buf, size_t len)
{
	size_t o = 0;
	int n;

	if (c->backing != CFG_BACKING_FILE)
		return -EINVAL;
	for (const char *p = c->backing_path; *p; p++) {
		const char *piece = NULL;
		char tmp[16];

		if (*p == '%' && p[1]) {
			p++;
			if (*p == 'c') {
				piece = c->name;
			} else if (*p == 'n') {
				snprintf(tmp, sizeof(tmp), "%u", nsid);
				piece = tmp;
			} else {
				piece = "%";
			}
		}
		n = piece ? snprintf(buf + o, o < len ? len - o : 0, "%s", piece)
		          : snprintf(buf + o, o < len ? len - o : 0, "%c", *p);
		o += (size_t)n;
		if (o >= len)
			return -ENAMETOOLONG;
	}
	if (len == 0)
		return -ENAMETOOLONG;
	buf[o] = '\0';
	return 0;
}

bool cfg_equal(const struct cfg *a, const struct cfg *b)
{
	const struct cfg_daemon *x = &a->daemon, *y = &b->daemon;
	const struct cfg_engine *e = &a->engine, *f = &b->engine;

	if (strcmp(x->mountpoint, y->mountpoint) || strcmp(x->admin_socket, y->admin_socket) ||
	    x->file_mode != y->file_mode || strcmp(x->file_owner, y->file_owner) ||
	    strcmp(x->file_group, y->file_group) || x->uid != y->uid || x->gid != y->gid ||
	    strcmp(x->admin_group, y->admin_group) || x->admin_gid != y->admin_gid ||
	    strcmp(x->operator_group, y->operator_group) || x->operator_gid != y->operator_gid ||
	    x->allow_other != y->allow_other || x->log_level != y->log_level ||
	    x->fuse_transport != y->fuse_transport || x->fuse_queue_depth != y->fuse_queue_depth ||
	    x->health_interval != y->health_interval ||
	    x->allow_no_controller != y->allow_no_controller)
		return false;
	if (e->queues != f->queues || e->queue_depth != f->queue_depth ||
	    e->cq_budget != f->cq_budget || e->nr_cpus != f->nr_cpus ||
	    e->cpus_set != f->cpus_set || e->mode != f->mode ||
	    e->io_timeout_ms != f->io_timeout_ms || e->io_retries != f->io_retries ||
	    e->numa != f->numa || e->dma_isolation != f->dma_isolation ||
	    memcmp(e->cpus, f->cpus, e->nr_cpus * sizeof(e->cpus[0])))
		return false;
	if (a->nr_ctrls != b->nr_ctrls)
		return false;
	for (unsigned i = 0; i < a->nr_ctrls; i++) {
		const struct cfg_controller *p = &a->ctrls[i], *q = &b->ctrls[i];

		if (strcmp(p->name, q->name) || p->sim != q->sim || strcmp(p->device, q->device))
			return false;
		if (p->sim && (p->namespaces != q->namespaces || p->size != q->size ||
		               p->block_size != q->block_size || p->backing != q->backing ||
		               strcmp(p->backing_path, q->backing_path) || p->exec != q->exec ||
		               p->offload != q->offload ||
		               p->mdts != q->mdts || p->max_queues != q->max_queues ||
		               p->write_cache != q->write_cache ||
		               p->metadata_size != q->metadata_size ||
		               p->metadata_layout != q->metadata_layout || p->pi_type != q->pi_type ||
		               p->pi_location != q->pi_location || p->pi_guard != q->pi_guard))
			return false;
	}
	return true;
}

void cfg_free(struct cfg *cfg)
{
	free(cfg);
}

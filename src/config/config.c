/* config.c - see config.h.
 *
 * Two phases.  Collect: inih splits KEY = VALUE lines; our own line reader in
 * front of it counts lines (Debian's libinih is built without
 * INI_HANDLER_LINENO), records section headers (inih does not report empty
 * sections) and reports malformed lines itself, so that every bad line is
 * reported rather than only the first.  Validate: each section's keys are
 * checked against a table, then cross-key rules; errors are gathered and
 * printed sorted by line.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

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

static bool get_uint(struct ctx *c, const struct kv *kv, unsigned lo, unsigned hi, unsigned *out)
{
	uint64_t v;

	if (!parse_u64(kv->val, &v) || v < lo || v > hi) {
		err_kv(c, kv, "must be %u..%u", lo, hi);
		return false;
	}
	*out = (unsigned)v;
	return true;
}

static bool get_bool(struct ctx *c, const struct kv *kv, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};

	for (unsigned i = 0; i < 4; i++) {
		if (!strcasecmp(kv->val, yes[i])) {
			*out = true;
			return true;
		}
		if (!strcasecmp(kv->val, no[i])) {
			*out = false;
			return true;
		}
	}
	err_kv(c, kv, "must be yes or no");
	return false;
}

/* names[] is NULL-terminated; allowed is the message */
static bool get_enum(struct ctx *c, const struct kv *kv, const char *const *names,
                     const char *allowed, int *out)
{
	for (int i = 0; names[i]; i++) {
		if (!strcmp(kv->val, names[i])) {
			*out = i;
			return true;
		}
	}
	err_kv(c, kv, "must be %s", allowed);
	return false;
}

static bool get_path(struct ctx *c, const struct kv *kv, size_t max, char *out)
{
	size_t n = strlen(kv->val);

	if (kv->val[0] != '/' || n >= max) {
		if (max == PATH_MAX)
			err_kv(c, kv, "must be an absolute path");
		else
			err_kv(c, kv, "must be an absolute path of at most %zu bytes", max - 1);
		return false;
	}
	memcpy(out, kv->val, n + 1);
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

static bool get_id(struct ctx *c, const struct kv *kv, bool user, char *name, unsigned *id)
{
	char buf[4096];
	uint64_t v;
	int rc;

	if (strlen(kv->val) >= CFG_NAME_MAX || !kv->val[0])
		goto bad;
	if (parse_u64(kv->val, &v)) {
		if (v >= UINT32_MAX)
			goto bad;
		*id = (unsigned)v;
	} else if (user) {
		struct passwd pw, *res = NULL;

		rc = getpwnam_r(kv->val, &pw, buf, sizeof(buf), &res);
		if (rc || !res)
			goto bad;
		*id = (unsigned)res->pw_uid;
	} else {
		struct group gr, *res = NULL;

		rc = getgrnam_r(kv->val, &gr, buf, sizeof(buf), &res);
		if (rc || !res)
			goto bad;
		*id = (unsigned)res->gr_gid;
	}
	strcpy(name, kv->val);
	return true;
bad:
	if (user)
		err_kv(c, kv, "must be a user name known to this system or a numeric uid");
	else
		err_kv(c, kv, "must be a group name known to this system or a numeric gid");
	return false;
}

/* ---- phase 2: sections and keys ---- */

enum {
	D_MOUNTPOINT,
	D_ADMIN_SOCKET,
	D_FILE_MODE,
	D_FILE_OWNER,
	D_FILE_GROUP,
	D_ALLOW_OTHER,
	D_LOG_LEVEL,
	D_FUSE_TRANSPORT,
	D_FUSE_QUEUE_DEPTH,
	D_ADMIN_GROUP,
	D_OPERATOR_GROUP,
	D_HEALTH_INTERVAL,
	D_NKEYS
};
static const char *const daemon_keys[] = {
    "mountpoint",       "admin_socket", "file_mode",      "file_owner",
    "file_group",       "allow_other",  "log_level",      "fuse_transport",
    "fuse_queue_depth", "admin_group",  "operator_group", "health_interval",
    NULL,
};

enum {
	E_QUEUES,
	E_QUEUE_DEPTH,
	E_CQ_BUDGET,
	E_CPUS,
	E_MODE,
	E_IO_TIMEOUT_MS,
	E_IO_RETRIES,
	E_NUMA,
	E_DMA_ISOLATION,
	E_NKEYS
};
static const char *const engine_keys[] = {
    "queues",        "queue_depth", "cq_budget", "cpus", "mode",
    "io_timeout_ms", "io_retries",  "numa",      "dma_isolation", NULL,
};

/* C_NAMESPACES.. are the software controller's own keys */
enum {
	C_DEVICE,
	C_NAMESPACES,
	C_SIZE,
	C_BLOCK_SIZE,
	C_BACKING,
	C_EXEC,
	C_MDTS,
	C_MAX_QUEUES,
	C_WRITE_CACHE,
	C_NKEYS
};
static const char *const ctrl_keys[] = {
    "device", "namespaces", "size",       "block_size",  "backing",
    "exec",   "mdts",       "max_queues", "write_cache", NULL,
};

#define MAX_KEYS 12 /* the most keys of a section: [daemon] */

static const char *const log_level_names[] = {"error", "warn", "info", "debug", NULL};
static const char *const mode_names[] = {"poll", "interrupt", "hybrid", NULL};
static const char *const dma_isolation_names[] = {"controller", "shared", NULL};
static const char *const exec_names[] = {"inline", "thread", NULL};
static const char *const write_cache_names[] = {"volatile", "none", NULL};
static const char *const fuse_transport_names[] = {"auto", "uring", "classic", NULL};

static const char *const *sec_keys(enum sec_kind k)
{
	switch (k) {
	case SEC_DAEMON:
		return daemon_keys;
	case SEC_ENGINE:
		return engine_keys;
	case SEC_CTRL:
		return ctrl_keys;
	default:
		return NULL;
	}
}

static const char *sec_label(const struct sec *s)
{
	return s->kind == SEC_CTRL ? "controller" : s->name;
}

/* Finds the keys of section si: slot[k] is the kv of key k, or NULL.
 * Reports unknown and repeated keys. */
static void gather(struct ctx *c, int si, const struct kv **slot)
{
	const char *const *keys = sec_keys(c->secs[si].kind);
	unsigned nkeys = 0;

	while (keys[nkeys])
		nkeys++;
	for (unsigned k = 0; k < MAX_KEYS; k++)
		slot[k] = NULL;
	for (unsigned i = 0; i < c->nkvs; i++) {
		const struct kv *kv = &c->kvs[i];
		unsigned k;

		if (kv->sec != si)
			continue;
		for (k = 0; k < nkeys; k++)
			if (!strcmp(kv->key, keys[k]))
				break;
		if (k == nkeys) {
			char allowed[256] = "";

			for (unsigned j = 0; j < nkeys; j++) {
				strcat(allowed, j ? ", " : "");
				strcat(allowed, keys[j]);
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

static void do_daemon(struct ctx *c, int si)
{
	struct cfg_daemon *d = &c->cfg->daemon;
	const struct kv *slot[MAX_KEYS];
	const struct kv *kv;
	int v;

	if (si >= 0)
		gather(c, si, slot);
	else
		memset(slot, 0, sizeof(slot));

	strcpy(d->mountpoint, "/run/nvmefs");
	if ((kv = slot[D_MOUNTPOINT]))
		get_path(c, kv, sizeof(d->mountpoint), d->mountpoint);
	strcpy(d->admin_socket, "/run/nvmefsd.sock");
	if ((kv = slot[D_ADMIN_SOCKET]))
		get_path(c, kv, sizeof(((struct sockaddr_un *)0)->sun_path), d->admin_socket);

	d->file_mode = 0660;
	if ((kv = slot[D_FILE_MODE])) {
		const char *s = kv->val;
		unsigned m = 0;

		if (!*s || strspn(s, "01234567") != strlen(s))
			m = 01000;
		for (; *s && m <= 0777; s++)
			m = m * 8 + (unsigned)(*s - '0');
		if (m > 0777)
			err_kv(c, kv, "must be an octal mode 0000..0777");
		else
			d->file_mode = m;
	}

	strcpy(d->file_owner, "root");
	d->uid = 0;
	if ((kv = slot[D_FILE_OWNER])) {
		unsigned id;

		if (get_id(c, kv, true, d->file_owner, &id))
			d->uid = id;
	}
	if ((kv = slot[D_FILE_GROUP])) {
		unsigned id;

		if (get_id(c, kv, false, d->file_group, &id))
			d->gid = id;
	} else {
		struct group gr, *res = NULL;
		char buf[4096];

		strcpy(d->file_group, "disk");
		if (getgrnam_r("disk", &gr, buf, sizeof(buf), &res) || !res)
			add_err(c, CFG_NOLINE,
			        "%s: file_group: the default group disk is unknown here; set "
			        "file_group",
			        c->name);
		else
			d->gid = res->gr_gid;
	}
	/* unset: root only (the admin socket is 0600) */
	d->admin_gid = d->operator_gid = (gid_t)-1;
	if ((kv = slot[D_ADMIN_GROUP])) {
		unsigned id;

		if (get_id(c, kv, false, d->admin_group, &id))
			d->admin_gid = id;
	}
	if ((kv = slot[D_OPERATOR_GROUP])) {
		unsigned id;

		if (get_id(c, kv, false, d->operator_group, &id))
			d->operator_gid = id;
	}

	d->allow_other = true;
	if ((kv = slot[D_ALLOW_OTHER]))
		get_bool(c, kv, &d->allow_other);
	d->log_level = CFG_LOG_INFO;
	if ((kv = slot[D_LOG_LEVEL]) &&
	    get_enum(c, kv, log_level_names, "error, warn, info or debug", &v))
		d->log_level = (enum cfg_log_level)v;
	d->fuse_transport = CFG_FUSE_TRANSPORT_AUTO;
	if ((kv = slot[D_FUSE_TRANSPORT]) &&
	    get_enum(c, kv, fuse_transport_names, "auto, uring or classic", &v))
		d->fuse_transport = (enum cfg_fuse_transport)v;
	/* kept with classic too: the value is checked and printed the same way */
	d->fuse_queue_depth = 16;
	if ((kv = slot[D_FUSE_QUEUE_DEPTH]))
		get_uint(c, kv, 1, 256, &d->fuse_queue_depth);
	/* a day at most: a slower poll is no poll */
	d->health_interval = 60;
	if ((kv = slot[D_HEALTH_INTERVAL]))
		get_uint(c, kv, 0, 86400, &d->health_interval);
}

static void do_engine(struct ctx *c, int si)
{
	struct cfg_engine *e = &c->cfg->engine;
	const struct kv *slot[MAX_KEYS];
	const struct kv *kv;
	bool cpus_ok = true, depth_ok = true;
	int v;

	if (si >= 0)
		gather(c, si, slot);
	else
		memset(slot, 0, sizeof(slot));

	if ((kv = slot[E_CPUS])) {
		int rc = cfg_parse_cpu_list(kv->val, e->cpus, CFG_MAX_CPUS, &e->nr_cpus);

		e->cpus_set = true;
		cpus_ok = false;
		if (rc == -E2BIG) {
			err_kv(c, kv, "must list at most %d CPUs", CFG_MAX_CPUS);
		} else if (rc) {
			err_kv(c, kv, "must be a list of CPU numbers and ranges, e.g. 0-3,8");
		} else {
			uint8_t seen[CFG_CPU_ID_MAX / 8 + 1] = {0};
			unsigned i;

			for (i = 0; i < e->nr_cpus; i++) {
				unsigned cpu = e->cpus[i];

				if (bit_test(seen, cpu)) {
					err_kv(c, kv,
					       "CPU %u is listed twice; each CPU at most once",
					       cpu);
					break;
				}
				bit_set(seen, cpu);
				if (!bit_test(c->online, cpu)) {
					err_kv(c, kv, "CPU %u is not online (online CPUs: %s)", cpu,
					       c->online_str);
					break;
				}
			}
			cpus_ok = i == e->nr_cpus;
		}
	} else {
		e->cpus_set = false;
		e->nr_cpus = 0;
		for (unsigned i = 0; i <= CFG_CPU_ID_MAX && e->nr_cpus < CFG_MAX_CPUS; i++)
			if (bit_test(c->online, i))
				e->cpus[e->nr_cpus++] = i;
	}

	e->queue_depth = 256;
	if ((kv = slot[E_QUEUE_DEPTH]))
		depth_ok = get_uint(c, kv, 2, 4096, &e->queue_depth);

	/* the default budget stays below a small queue_depth */
	e->cq_budget = e->queue_depth / 2 < 64 ? e->queue_depth / 2 : 64;
	if ((kv = slot[E_CQ_BUDGET])) {
		uint64_t b;

		if (!parse_u64(kv->val, &b) || b < 1 || b > 255)
			err_kv(c, kv, "must be 1..255 (below queue_depth)");
		else if (depth_ok && b >= e->queue_depth)
			err_kv(c, kv, "must be below queue_depth (%u)", e->queue_depth);
		else
			e->cq_budget = (unsigned)b;
	}

	e->queues = cpus_ok && e->nr_cpus < 64 ? e->nr_cpus : 64;
	if ((kv = slot[E_QUEUES])) {
		unsigned q;

		if (get_uint(c, kv, 1, 64, &q)) {
			if (cpus_ok && q > e->nr_cpus)
				err_kv(c, kv,
				       "must be at most %u, the number of CPUs in cpus (one "
				       "reactor per CPU)",
				       e->nr_cpus);
			else
				e->queues = q;
		}
	}

	e->mode = CFG_MODE_HYBRID;
	if ((kv = slot[E_MODE]) && get_enum(c, kv, mode_names, "poll, interrupt or hybrid", &v))
		e->mode = (enum cfg_mode)v;
	e->io_timeout_ms = 5000;
	if ((kv = slot[E_IO_TIMEOUT_MS]))
		get_uint(c, kv, 100, 600000, &e->io_timeout_ms);
	e->io_retries = 3;
	if ((kv = slot[E_IO_RETRIES]))
		get_uint(c, kv, 0, 10, &e->io_retries);
	e->numa = true;
	if ((kv = slot[E_NUMA]))
		get_bool(c, kv, &e->numa);
	e->dma_isolation = CFG_DMA_ISO_CONTROLLER;
	if ((kv = slot[E_DMA_ISOLATION]) &&
	    get_enum(c, kv, dma_isolation_names, "controller or shared", &v))
		e->dma_isolation = (enum cfg_dma_isolation)v;
}

static void do_controller(struct ctx *c, int si)
{
	struct sec *s = &c->secs[si];
	struct cfg_controller *ctl = &c->cfg->ctrls[s->ctrl];
	const struct kv *slot[MAX_KEYS];
	const struct kv *kv;
	bool dev_ok = false, ns_ok = true, bs_ok = true;
	int v;

	gather(c, si, slot);
	if ((kv = slot[C_DEVICE])) {
		if (!strcmp(kv->val, "sim")) {
			ctl->sim = true;
			strcpy(ctl->device, "sim");
			dev_ok = true;
		} else if (parse_pci(kv->val, ctl->device, sizeof(ctl->device))) {
			dev_ok = true;
			for (unsigned j = 0; j < (unsigned)s->ctrl; j++) {
				const struct cfg_controller *o = &c->cfg->ctrls[j];

				if (!o->sim && !strcmp(o->device, ctl->device)) {
					err_kv(c, kv, "%s is already the device of [controller %s]",
					       ctl->device, o->name);
					break;
				}
			}
		} else {
			err_kv(c, kv,
			       "must be sim or a PCI address DDDD:BB:DD.F or BB:DD.F (e.g. "
			       "0000:01:00.0)");
		}
	} else {
		err_sec(c, s, "device is missing: give device = sim or a PCI address");
	}

	if (dev_ok && !ctl->sim) {
		for (unsigned k = C_NAMESPACES; k < C_NKEYS; k++)
			if ((kv = slot[k]))
				err_kv(c, kv, "only for device = sim, not for a PCI device (%s)",
				       ctl->device);
		return;
	}

	/* a software controller (or a bad device: its keys are still checked) */
	ctl->namespaces = 1;
	if ((kv = slot[C_NAMESPACES]))
		ns_ok = get_uint(c, kv, 1, CFG_NS_MAX, &ctl->namespaces);
	ctl->block_size = 4096;
	if ((kv = slot[C_BLOCK_SIZE])) {
		uint64_t b;

		bs_ok = parse_u64(kv->val, &b) && (b == 512 || b == 4096);
		if (bs_ok)
			ctl->block_size = (unsigned)b;
		else
			err_kv(c, kv, "must be 512 or 4096");
	}
	ctl->size = 1ull << 30;
	if ((kv = slot[C_SIZE])) {
		uint64_t sz;

		if (!parse_size(kv->val, &sz))
			err_kv(c, kv,
			       "must be a number of bytes with an optional K, M, G or T suffix "
			       "(powers of 1024), e.g. 1G");
		else if (bs_ok && sz < ctl->block_size)
			err_kv(c, kv, "must be at least one block (%u bytes)", ctl->block_size);
		else if (bs_ok && sz % ctl->block_size)
			err_kv(c, kv, "must be a multiple of block_size (%u)", ctl->block_size);
		else
			ctl->size = sz;
	}
	ctl->backing = CFG_BACKING_RAM;
	ctl->backing_path[0] = '\0';
	if ((kv = slot[C_BACKING])) {
		bool has_n;
		char probe[PATH_MAX];

		if (!strcmp(kv->val, "ram")) {
			ctl->backing = CFG_BACKING_RAM;
		} else if (!strcmp(kv->val, "null")) {
			ctl->backing = CFG_BACKING_NULL;
		} else if (kv->val[0] != '/' || strlen(kv->val) >= sizeof(ctl->backing_path) ||
		           !backing_pattern_ok(kv->val, &has_n)) {
			err_kv(c, kv,
			       "must be ram, null or an absolute file path (%%c controller name, "
			       "%%n nsid, %%%% a %%)");
		} else if (ns_ok && ctl->namespaces > 1 && !has_n) {
			err_kv(c, kv,
			       "must contain %%n when namespaces > 1 (one file per namespace)");
		} else {
			ctl->backing = CFG_BACKING_FILE;
			strcpy(ctl->backing_path, kv->val);
			if (cfg_backing_file(ctl, ctl->namespaces, probe, sizeof(probe))) {
				err_kv(c, kv, "must expand to a path shorter than %d bytes",
				       PATH_MAX);
				ctl->backing = CFG_BACKING_RAM;
				ctl->backing_path[0] = '\0';
			}
		}
	}
	ctl->exec = CFG_EXEC_INLINE;
	if ((kv = slot[C_EXEC]) && get_enum(c, kv, exec_names, "inline or thread", &v))
		ctl->exec = (enum cfg_exec)v;
	ctl->mdts = 7;
	if ((kv = slot[C_MDTS]))
		get_uint(c, kv, 0, 10, &ctl->mdts);
	ctl->max_queues = 64;
	if ((kv = slot[C_MAX_QUEUES]))
		get_uint(c, kv, 1, 64, &ctl->max_queues);
	ctl->write_cache = CFG_WC_VOLATILE;
	if ((kv = slot[C_WRITE_CACHE]) &&
	    get_enum(c, kv, write_cache_names, "volatile or none", &v))
		ctl->write_cache = (enum cfg_write_cache)v;
	if (!dev_ok) {
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

static int load_buf(const char *name, const char *buf, size_t len, struct cfg **out, FILE *errs)
{
	struct ctx c = {.name = name, .buf = buf, .len = len, .cur_sec = -1};
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
	if (!any_controller_section(&c))
		add_err(&c, CFG_NOLINE,
		        "%s: no [controller NAME] section: at least one is required", name);
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
	return load_buf(name, text, strlen(text), out, errs);
}

int cfg_load(const char *path, struct cfg **out, FILE *errs)
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
	rc = load_buf(path, buf, len, out, errs);
out:
	free(buf);
	fclose(f);
	return rc;
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
		fprintf(out, "mdts = %u\n", c->mdts);
		fprintf(out, "max_queues = %u\n", c->max_queues);
		fprintf(out, "write_cache = %s\n", write_cache_names[c->write_cache]);
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
	    x->health_interval != y->health_interval)
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
		               p->mdts != q->mdts || p->max_queues != q->max_queues ||
		               p->write_cache != q->write_cache))
			return false;
	}
	return true;
}

void cfg_free(struct cfg *cfg)
{
	free(cfg);
}

/* test_fdstore.c - the fd store's pieces without a service manager: the
 * state record (fstate.h), the sealed memfd, the FDSTORE= / FDSTOREREMOVE=
 * messages as a notify socket receives them, the resend notification's
 * bytes and the fd checks of a handed-over /dev/fuse. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/fdstore.c"
#include "fstate.h"
#include "fuse_fs.h"
#include "fwire.h"

static struct fstate sample(void)
{
	struct fstate s;

	memset(&s, 0, sizeof(s));
	s.init = (struct fusefs_init_params){.major = 7, .minor = 42, .flags = 0x123456789aULL,
					     .max_write = 1 << 20, .max_pages = 256,
					     .max_background = 1024, .congestion_threshold = 768,
					     .time_gran = 1};
	s.transport = FUSEFS_TRANSPORT_CLASSIC;
	s.conn = 40;
	s.digest = 0xfeedfacecafebeefULL;
	strcpy(s.mountpoint, "/run/nvmefs");
	return s;
}

START_TEST(t_record_roundtrip)
{
	struct fstate s = sample(), o;
	char *buf = malloc(fstate_size());

	ck_assert_int_eq(fstate_encode(&s, buf, fstate_size()), 0);
	ck_assert_int_eq(fstate_decode(buf, fstate_size(), &o), 0);
	ck_assert_uint_eq(o.init.minor, 42);
	ck_assert_uint_eq(o.init.flags, 0x123456789aULL);
	ck_assert_uint_eq(o.init.max_write, 1 << 20);
	ck_assert_uint_eq(o.init.max_pages, 256);
	ck_assert_uint_eq(o.init.congestion_threshold, 768);
	ck_assert_int_eq(o.transport, FUSEFS_TRANSPORT_CLASSIC);
	ck_assert_uint_eq(o.conn, 40);
	ck_assert_uint_eq(o.digest, 0xfeedfacecafebeefULL);
	ck_assert_str_eq(o.mountpoint, "/run/nvmefs");
	free(buf);
}
END_TEST

/* What this daemon serves of a record: /dev/fuse at 7.40 or later (the
 * kernel resends), max_write within FUSEFS_MAX_IO; io_uring, 7.39 (Linux
 * 6.8: no resend), another major and a zero or larger max_write refused,
 * each with its reason. */
START_TEST(t_servable)
{
	struct fstate s = sample();
	char why[256];

	why[0] = '\0';
	ck_assert_int_eq(fstate_servable(&s, why, sizeof(why)), 0);
	s.init.minor = FW_PROTO_MINOR_RESEND;
	ck_assert_int_eq(fstate_servable(&s, why, sizeof(why)), 0);

	s.init.minor = FW_PROTO_MINOR_RESEND - 1;
	ck_assert_int_eq(fstate_servable(&s, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "7.39"));
	ck_assert_ptr_nonnull(strstr(why, "cannot resend"));

	s = sample();
	s.transport = FUSEFS_TRANSPORT_URING;
	ck_assert_int_eq(fstate_servable(&s, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "io_uring"));

	s = sample();
	s.init.major = 8;
	ck_assert_int_eq(fstate_servable(&s, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "protocol 8.42"));
	s = sample();
	s.init.max_write = FUSEFS_MAX_IO + 4096;
	ck_assert_int_eq(fstate_servable(&s, why, sizeof(why)), -EPROTO);
	s.init.max_write = 0;
	ck_assert_int_eq(fstate_servable(&s, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "max_write 0"));
}
END_TEST

START_TEST(t_record_refused)
{
	struct fstate s = sample(), o;
	size_t n = fstate_size();
	char *buf = malloc(n + 1);

	ck_assert_int_eq(fstate_encode(&s, buf, n - 1), -ENOSPC);
	ck_assert_int_eq(fstate_encode(&s, buf, n), 0);
	ck_assert_int_eq(fstate_decode(buf, n - 1, &o), -EMSGSIZE); /* short */
	ck_assert_int_eq(fstate_decode(buf, n + 1, &o), -EMSGSIZE); /* long */
	ck_assert_int_eq(fstate_decode(buf, 8, &o), -EMSGSIZE);
	buf[0] ^= 1;
	ck_assert_int_eq(fstate_decode(buf, n, &o), -EBADMSG);
	buf[0] ^= 1;
	buf[8]++; /* version */
	ck_assert_int_eq(fstate_decode(buf, n, &o), -EPROTO);
	buf[8]--;
	memset(buf + n - FSTATE_PATH_MAX, 'a', FSTATE_PATH_MAX); /* no NUL */
	ck_assert_int_eq(fstate_decode(buf, n, &o), -EINVAL);
	memset(s.mountpoint, 'a', sizeof(s.mountpoint));
	ck_assert_int_eq(fstate_encode(&s, buf, n), -ENAMETOOLONG);
	ck_assert_ptr_nonnull(strstr(fstate_strerror(-EPROTO), "version"));
	free(buf);
}
END_TEST

START_TEST(t_memfd_sealed)
{
	char in[100], out[200];
	size_t len = 0;
	int fd;

	memset(in, 0x5a, sizeof(in));
	ck_assert_int_eq(fdstore_memfd(in, sizeof(in), &fd), 0);
	ck_assert_int_eq(fcntl(fd, F_GET_SEALS), SEALS);
	ck_assert_int_lt(write(fd, "x", 1), 0); /* F_SEAL_WRITE */
	ck_assert_int_lt(ftruncate(fd, 0), 0);  /* F_SEAL_SHRINK */
	ck_assert_int_eq(fdstore_memfd_read(fd, out, sizeof(out), &len), 0);
	ck_assert_uint_eq(len, sizeof(in));
	ck_assert_int_eq(memcmp(in, out, sizeof(in)), 0);
	ck_assert_int_eq(fdstore_memfd_read(fd, out, 10, &len), -EMSGSIZE);
	close(fd);

	/* unsealed: refused, whatever it holds */
	fd = memfd_create("t", MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, in, sizeof(in)), (ssize_t)sizeof(in));
	ck_assert_int_eq(fdstore_memfd_read(fd, out, sizeof(out), &len), -EPERM);
	close(fd);
	/* a plain file cannot be sealed at all */
	fd = open("/dev/null", O_RDONLY);
	ck_assert_int_eq(fdstore_memfd_read(fd, out, sizeof(out), &len), -EPERM);
	close(fd);
}
END_TEST

/* One datagram from the notify socket: its text and its fds. */
static int recv_msg(int s, char *text, size_t cap, int *fds, int max)
{
	union {
		char b[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr a;
	} c;
	struct iovec iov = {.iov_base = text, .iov_len = cap - 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
			    .msg_controllen = sizeof(c.b)};
	int n = 0;
	ssize_t len = recvmsg(s, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (len < 0)
		return -1;
	text[len] = '\0';
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_type == SCM_RIGHTS) {
			int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (int i = 0; i < k && n < max; i++)
				memcpy(&fds[n++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
		}
	return n;
}

START_TEST(t_store_messages)
{
	char path[64], text[256];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int s, fuse, state, fds[4];
	pid_t p = getpid();

	snprintf(path, sizeof(path), "/tmp/nvmefs-fdstore-test.%d", (int)p);
	strcpy(sa.sun_path, path);
	unlink(path);
	s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setenv("NOTIFY_SOCKET", path, 1);
	fuse = open("/dev/null", O_RDWR);
	ck_assert_int_eq(fdstore_memfd("abc", 3, &state), 0);

	ck_assert_int_eq(fdstore_save(fuse, state), 0);
	ck_assert_int_eq(recv_msg(s, text, sizeof(text), fds, 4), 1);
	ck_assert_str_eq(text, "FDSTORE=1\nFDNAME=fuse");
	/* the very open file, not a new one */
	ck_assert_int_eq(syscall(SYS_kcmp, p, p, KCMP_FILE, fds[0], fuse), 0);
	close(fds[0]);
	ck_assert_int_eq(recv_msg(s, text, sizeof(text), fds, 4), 1);
	ck_assert_str_eq(text, "FDSTORE=1\nFDNAME=fuse-state");
	ck_assert_int_eq(syscall(SYS_kcmp, p, p, KCMP_FILE, fds[0], state), 0);
	close(fds[0]);

	fdstore_forget();
	ck_assert_int_eq(recv_msg(s, text, sizeof(text), fds, 4), 0);
	ck_assert_str_eq(text, "FDSTOREREMOVE=1\nFDNAME=fuse");
	ck_assert_int_eq(recv_msg(s, text, sizeof(text), fds, 4), 0);
	ck_assert_str_eq(text, "FDSTOREREMOVE=1\nFDNAME=fuse-state");
	ck_assert_int_eq(recv_msg(s, text, sizeof(text), fds, 4), -1); /* nothing more */

	/* without a service manager: nothing sent, no error */
	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(fdstore_available(), 0);
	ck_assert_int_eq(fdstore_save(fuse, state), 0);
	ck_assert_int_eq(recv_msg(s, text, sizeof(text), fds, 4), -1);
	close(fuse);
	close(state);
	close(s);
	unlink(path);
}
END_TEST

START_TEST(t_resend_bytes)
{
	struct fuse_out_header oh;
	char b[64];
	int p[2];

	signal(SIGPIPE, SIG_IGN);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(fw_dev_notify(p[1], FUSE_NOTIFY_RESEND), 0);
	ck_assert_int_eq(read(p[0], b, sizeof(b)), (ssize_t)sizeof(oh)); /* nothing more */
	memcpy(&oh, b, sizeof(oh));
	ck_assert_uint_eq(oh.len, sizeof(oh)); /* no payload */
	ck_assert_int_eq(oh.error, 7);         /* the notify code */
	ck_assert_uint_eq(oh.unique, 0);       /* unique 0: a notification */
	close(p[0]);
	ck_assert_int_eq(fw_dev_notify(p[1], FUSE_NOTIFY_RESEND), -EPIPE);
	close(p[1]);
}
END_TEST

/* A resent request's unique carries bit 63: the answer echoes it whole. */
START_TEST(t_resend_unique_echoed)
{
	struct fuse_out_header oh;
	uint64_t u = FUSE_UNIQUE_RESEND | 0x1234;
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(fw_dev_answer(p[1], u, 0, NULL, 0), 0);
	ck_assert_int_eq(read(p[0], &oh, sizeof(oh)), (ssize_t)sizeof(oh));
	ck_assert_uint_eq(oh.unique, u);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(t_conn_of_fd)
{
	unsigned conn = 99;
	int fd = open("/dev/null", O_RDWR);

	ck_assert_int_eq(fusefs_conn_of_fd(fd, &conn), -ENOTTY);
	close(fd);
	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd >= 0) { /* never mounted: no connection yet */
		ck_assert_int_eq(fusefs_conn_of_fd(fd, &conn), -ENODATA);
		close(fd);
	}
	ck_assert_int_eq(fusefs_conn_at("/nonexistent/nvmefs-mnt", &conn, &(bool){false}),
			 -ENOENT);
	ck_assert(!fusefs_conn_alive(0xfffffff0u));
	ck_assert_int_eq(fusefs_conn_abort(0xfffffff0u), -ENOENT);
	/* no control file, no mount: nothing to end, nothing failed */
	bool aborted = true;
	ck_assert_int_eq(fusefs_conn_end(0xfffffff0u, &aborted), 0);
	ck_assert(!aborted);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fdstore");
	TCase *tc = tcase_create("fdstore");

	tcase_add_test(tc, t_record_roundtrip);
	tcase_add_test(tc, t_record_refused);
	tcase_add_test(tc, t_servable);
	tcase_add_test(tc, t_memfd_sealed);
	tcase_add_test(tc, t_store_messages);
	tcase_add_test(tc, t_resend_bytes);
	tcase_add_test(tc, t_resend_unique_echoed);
	tcase_add_test(tc, t_conn_of_fd);
	suite_add_tcase(s, tc);

	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf ? 1 : 0;
}

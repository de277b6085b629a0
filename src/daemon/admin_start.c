/* admin_start.c - the admin socket put together (contract in admin.h): the server
 * (admin_server.c) with the command table (admin_cmd.c), the log page queue
 * (logread.h) and the health cache (health.h), started and stopped in order.
 */
#include "admin_priv.h"

#include <errno.h>
#include <stdlib.h>

#include "config.h"
#include "health.h"
#include "logread.h"

int admin_start(struct ev_loop *loop, const struct admin_ctx *ctx, struct admin **out)
{
	struct admin *a;
	int ret;

	if (!loop || !ctx || !ctx->cfg || !out || (ctx->nr_ctrls && !ctx->ctrls) ||
	    (ctx->nr_reactors && !ctx->reactors) || (ctx->nr_ns && !ctx->ns))
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->loop = loop;
	a->ctx = *ctx;
	a->fd = -1;
	a->cmds = admin_cmds;
	a->nr_cmds = admin_nr_cmds;
	a->idle_timeout = ctx->idle_timeout > 0 ? ctx->idle_timeout : ADMIN_IDLE_TIMEOUT;
	a->request_timeout =
	    ctx->request_timeout > 0 ? ctx->request_timeout : ADMIN_REQUEST_TIMEOUT;
	a->reply_max = ctx->reply_max ? ctx->reply_max : ADMIN_REPLY_MAX;
	a->log_timeout = ctx->log_timeout > 0 ? ctx->log_timeout : ADMIN_LOG_TIMEOUT;
	a->rl_request = (struct log_rl)LOG_RL_INIT(ADMIN_LOG_BURST, ADMIN_LOG_INTERVAL_MS);
	a->rl_client = (struct log_rl)LOG_RL_INIT(ADMIN_LOG_BURST, ADMIN_LOG_INTERVAL_MS);
	a->mono0 = mono_now();
	a->wall0 = time(NULL);
	ret = admin_srv_listen(a);
	if (ret < 0) {
		free(a);
		return ret;
	}
	ret = logrd_q_create(loop, &a->logq);
	if (ret == 0)
		ret = health_start(loop, a->logq, ctx->ctrls, ctx->nr_ctrls,
		                   ctx->cfg->daemon.health_interval, &a->health);
	if (ret < 0) {
		logrd_q_stop(a->logq);
		admin_srv_stop(a);
		free(a);
		return ret;
	}
	admin_srv_serve(a);
	*out = a;
	return 0;
}

void admin_stop(struct admin *a)
{
	if (!a)
		return;
	admin_srv_close_clients(a);
	health_stop(a->health);
	/* no engine callback reaches a handler from now on */
	logrd_q_stop(a->logq);
	admin_srv_stop(a);
	free(a);
}

struct health *admin_health(struct admin *a)
{
	return a ? a->health : NULL;
}

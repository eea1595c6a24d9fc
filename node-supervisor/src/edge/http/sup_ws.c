#include "sup_ws.h"

#include <errno.h>
#include <event2/buffer.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <wslay/wslay.h>

#include "sbx/cleanup.h"
#include "sup_b64.h"
#include "sup_text.h"

struct sup_ws {
	sup_http_req *r;
	wslay_event_context_ptr ctx;
	struct evbuffer *out;
	void (*on_message)(bool binary, const uint8_t *p, size_t n, void *ud);
	void *ud;
	bool in_recv;   /* inside wslay_event_recv: sending waits for its end */
	bool paused;
	bool ended;
	uint16_t close_code; /* our close, queued after what was sent before it */
	char close_reason[64];
};

/* ---- the upgrade ---- */

/* Whether the comma-separated value v holds token (any case). */
static bool has_token(const char *v, const char *token)
{
	size_t tl = strlen(token);
	while (v && *v) {
		v += strspn(v, " \t,");
		size_t n = strcspn(v, " \t,");
		if (n == tl && strncasecmp(v, token, tl) == 0)
			return true;
		v += n;
	}
	return false;
}

int sup_ws_check(const sup_http_in *in, char *accept, sbx_err *err)
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	const char *key = sup_http_in_header(in, "Sec-WebSocket-Key");
	const char *ver = sup_http_in_header(in, "Sec-WebSocket-Version");
	size_t kl = key ? strlen(key) : 0, n = 0, bad;
	if (!has_token(sup_http_in_header(in, "Connection"), "upgrade") ||
	    !has_token(sup_http_in_header(in, "Upgrade"), "websocket"))
		return sbx_err_set(err, -EINVAL, "want a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)");
	if (!ver || strcmp(ver, "13") != 0)
		return sbx_err_set(err, -EINVAL, "Sec-WebSocket-Version: want 13");
	SBX_AUTO_FREE uint8_t *raw = kl == 24 ? sup_base64_decode(key, kl, &n, &bad) : NULL;
	if (!raw || n != 16)
		return sbx_err_set(err, -EINVAL, "Sec-WebSocket-Key: want 16 bytes in base64");
	char buf[24 + sizeof(guid)];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdl = 0;
	memcpy(buf, key, 24);
	memcpy(buf + 24, guid, sizeof(guid) - 1);
	if (!EVP_Digest(buf, 24 + sizeof(guid) - 1, md, &mdl, EVP_sha1(), NULL) || mdl != 20)
		return sbx_err_set(err, -ENOMEM, "SHA-1");
	accept[sup_base64_encode_into(md, 20, accept)] = '\0';
	return 0;
}

/* ---- wslay's I/O: the connection's buffers ---- */

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
	sup_ws *w = ud;
	int n = w->paused ? 0 : evbuffer_remove(sup_http_raw_input(w->r), buf, len);
	if (n <= 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	return n;
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
		       void *ud)
{
	sup_ws *w = ud;
	if (evbuffer_add(w->out, data, len) < 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	sup_http_write(w->r, w->out);
	return (ssize_t)len;
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
		   void *ud)
{
	sup_ws *w = ud;
	if (!w->ended && (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME))
		w->on_message(arg->opcode == WSLAY_BINARY_FRAME, arg->msg, arg->msg_length, w->ud);
}

/* Send what is queued, then our close if one waits (wslay sends control
 * frames first); once both sides closed, the request is over. */
static void flush(sup_ws *w)
{
	if (w->ended || w->in_recv)
		return;
	int rc = wslay_event_send(w->ctx);
	if (rc == 0 && w->close_code) {
		wslay_event_queue_close(w->ctx, w->close_code, (const uint8_t *)w->close_reason,
					strlen(w->close_reason));
		w->close_code = 0;
		/* Our close is the last word: no wait for the client's. */
		wslay_event_shutdown_read(w->ctx);
		rc = wslay_event_send(w->ctx);
	}
	if (rc < 0 || (!wslay_event_want_read(w->ctx) && !wslay_event_want_write(w->ctx))) {
		w->ended = true;
		sup_http_end(w->r);
	}
}

static void on_read(void *ud)
{
	sup_ws *w = ud;
	if (w->ended || w->paused)
		return;
	w->in_recv = true;
	int rc = wslay_event_recv(w->ctx);
	w->in_recv = false;
	if (rc < 0) {
		w->ended = true;
		sup_http_cut(w->r, "websocket: out of memory");
		return;
	}
	flush(w);
}

sup_ws *sup_ws_start(sup_http_req *r, const char *accept,
		     void (*on_message)(bool binary, const uint8_t *p, size_t n, void *ud),
		     void *ud)
{
	static const struct wslay_event_callbacks cbs = {
		.recv_callback = on_recv,
		.send_callback = on_send,
		.on_msg_recv_callback = on_msg,
	};
	const char *hdrs[] = { "Sec-WebSocket-Accept", accept, NULL };
	sup_ws *w = calloc(1, sizeof(*w));
	if (!w || !(w->out = evbuffer_new()) || wslay_event_context_server_init(&w->ctx, &cbs, w) != 0) {
		if (w && w->out)
			evbuffer_free(w->out);
		free(w);
		return NULL;
	}
	wslay_event_config_set_max_recv_msg_length(w->ctx, SUP_WS_MAX_MSG);
	w->r = r;
	w->on_message = on_message;
	w->ud = ud;
	sup_http_upgrade(r, "websocket", hdrs, on_read, w);
	return w;
}

int sup_ws_send(sup_ws *w, bool binary, const void *p, size_t n, size_t cost)
{
	struct wslay_event_msg m = { binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME, p, n };
	int rc = w->ended || wslay_event_queue_msg(w->ctx, &m) != 0 ? -EPIPE : 0;
	flush(w);
	sup_http_charge(w->r, cost); /* given back at once when nobody reads */
	return rc;
}

void sup_ws_pause(sup_ws *w, bool paused)
{
	w->paused = paused;
	sup_http_raw_pause(w->r, paused);
	if (!paused && evbuffer_get_length(sup_http_raw_input(w->r)))
		on_read(w);
}

void sup_ws_close(sup_ws *w, uint16_t code, const char *reason)
{
	if (w->ended || w->close_code)
		return;
	w->close_code = code;
	snprintf(w->close_reason, sizeof(w->close_reason), "%s", reason);
	flush(w);
}

void sup_ws_free(sup_ws *w)
{
	if (!w)
		return;
	wslay_event_context_free(w->ctx);
	evbuffer_free(w->out);
	free(w);
}

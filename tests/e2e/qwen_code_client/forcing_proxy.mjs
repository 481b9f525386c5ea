// A loopback HTTP proxy in front of `syv serve` that forces one tool round trip: every request is
// forwarded to syv with syv's API key, and syv's reply goes back unchanged, except the reply to the
// first chat completion, which is replaced (once syv has answered it in full, with 200) by one
// carrying a call of `toolCall.name` with `toolCall.arguments`, in syv's own wire format (SSE
// chunks when the request streamed, one chat.completion object otherwise). A tiny model cannot
// decide to call a tool; everything after the forced call is syv's.
//
// Every exchange is recorded: { method, url, body (parsed JSON or null), status (syv's),
// replyText (syv's reply body as text), replaced (true for the forced one) }.
import http from 'node:http';

// syvUrl: http://127.0.0.1:PORT of syv; syvKey: its API key (the client's key is replaced);
// toolCall: { id, name, arguments (a JSON string) }. Resolves once listening on 127.0.0.1 at a
// free port: { url, exchanges, close() }.
export async function startForcingProxy({ syvUrl, syvKey, toolCall }) {
  const exchanges = [];
  let forced = false;
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const raw = Buffer.concat(chunks);
    const exchange = { method: req.method, url: req.url, body: parseJson(raw), replaced: false };
    exchanges.push(exchange);
    try {
      const upstream = await forward(syvUrl, syvKey, req, raw);
      exchange.status = upstream.statusCode;
      const force = !forced && req.method === 'POST' && req.url.endsWith('/chat/completions');
      if (force) {
        forced = true;
        exchange.replyText = await readAll(upstream);
        // syv's headers (its content type) over the new body; an error of syv's goes through as is.
        const headers = { ...upstream.headers };
        delete headers['content-length'];
        delete headers['transfer-encoding'];
        if (upstream.statusCode !== 200) {
          res.writeHead(upstream.statusCode, headers);
          res.end(exchange.replyText);
          return;
        }
        exchange.replaced = true;
        const reply = exchange.body?.stream === true
          ? toolCallStream(exchange.replyText, toolCall)
          : toolCallObject(exchange.replyText, toolCall);
        res.writeHead(200, headers);
        res.end(reply);
        return;
      }
      res.writeHead(upstream.statusCode, upstream.headers);
      const parts = [];
      for await (const chunk of upstream) {
        parts.push(chunk);
        res.write(chunk);
      }
      exchange.replyText = Buffer.concat(parts).toString();
      res.end();
    } catch (e) {
      exchange.error = String(e);
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`forcing proxy: ${e}`);
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    exchanges,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

// The assistant text of a recorded reply: the content deltas of an SSE stream put together, or
// choices[0].message.content of a chat.completion object.
export function replyContent(exchange) {
  if (exchange.body?.stream !== true) {
    return parseJson(exchange.replyText)?.choices?.[0]?.message?.content ?? '';
  }
  return sseChunks(exchange.replyText)
    .map((c) => c.choices?.[0]?.delta?.content ?? '')
    .join('');
}

// Sends the request on to syv as it came (method, path, headers, body bytes), with syv's key.
function forward(syvUrl, syvKey, req, raw) {
  const headers = { ...req.headers, authorization: `Bearer ${syvKey}` };
  delete headers.host;
  return new Promise((resolve, reject) => {
    const out = http.request(syvUrl + req.url, { method: req.method, headers }, resolve);
    out.on('error', reject);
    out.end(raw);
  });
}

async function readAll(stream) {
  const parts = [];
  for await (const chunk of stream) parts.push(chunk);
  return Buffer.concat(parts).toString();
}

// syv's streamed reply with its content replaced by the tool call, each chunk syv's first one
// with other choices (its id, created, model, `usage: null` kept): the opening delta, one delta
// with the whole call (as syv sends a parsed call), the finish chunk with "tool_calls", then syv's
// usage chunk if it sent one, and [DONE].
function toolCallStream(syvReply, call) {
  const chunks = sseChunks(syvReply);
  if (chunks.length === 0) throw new Error(`syv's reply has no SSE chunk: ${syvReply.slice(0, 400)}`);
  const choice = (delta, finish) => ({
    ...chunks[0],
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  });
  const out = [
    choice({ role: 'assistant', content: '' }, null),
    choice({ tool_calls: [{ index: 0, ...wireCall(call) }] }, null),
    choice({}, 'tool_calls'),
  ];
  const usage = chunks.find((c) => c.usage && (c.choices ?? []).length === 0);
  if (usage) out.push(usage);
  return out.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('') + 'data: [DONE]\n\n';
}

function toolCallObject(syvReply, call) {
  const reply = parseJson(syvReply);
  if (!reply?.choices) throw new Error(`syv's reply is no chat.completion: ${syvReply.slice(0, 400)}`);
  reply.choices = [{
    index: 0,
    message: {
      role: 'assistant',
      content: null,
      tool_calls: [wireCall(call)],
    },
    logprobs: null,
    finish_reason: 'tool_calls',
  }];
  return JSON.stringify(reply);
}

function wireCall(call) {
  return { id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } };
}

function sseChunks(text) {
  return (text ?? '')
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice(6)));
}

function parseJson(raw) {
  try {
    return JSON.parse(raw.toString());
  } catch {
    return null;
  }
}

// `rocky serve` driven by the official OpenAI Node SDK (and plain fetch for the llama-server
// endpoints and the bad-input table). CTest runs this (test_server_node) with ROCKY_BIN, ROCKY_MODEL
// and ROCKY_DEVICE set; each server listens on a free port chosen by the kernel (--port 0).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const BIN = process.env.ROCKY_BIN;
const MODEL = process.env.ROCKY_MODEL;
const DEVICE = process.env.ROCKY_DEVICE ?? 'vulkan';
const SHARED = process.env.ROCKY_SHARED ?? path.join(path.dirname(MODEL), '../..');
assert.ok(BIN && MODEL, 'ROCKY_BIN and ROCKY_MODEL must be set');
const CTX = 256;

// Starts `rocky serve`, resolves once /health says ok. Returns {proc, url, stderr(), exited}.
async function startServer(extra = []) {
  const args = ['serve', '-m', MODEL, '--port', '0', '-c', String(CTX), '--kv-unified', '--device', DEVICE, ...extra];
  const proc = spawn(BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no port after 60 s:\n${err}`)), 60000);
    proc.stderr.on('data', (d) => {
      err += d;
      const m = /listening on (http:\/\/[^\s]+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code) => reject(new Error(`rocky serve exited ${code}:\n${err}`)));
  });
  for (let i = 0; i < 600; ++i) {
    try {
      const r = await fetch(`${url}/health`);
      const j = await r.json();
      if (r.status === 200) {
        assert.deepEqual(j, { status: 'ok' });
        break;
      }
      assert.equal(r.status, 503);
      assert.deepEqual(j, { status: 'loading model' });
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { proc, url, stderr: () => err, exited };
}

function rockyRun(args) {
  return execFileSync(BIN, ['run', '-m', MODEL, '--device', DEVICE, '-c', String(CTX), ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

async function post(url, path, body, headers = {}) {
  const r = await fetch(url + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: r.status, headers: r.headers, json, text };
}

async function metric(url, name) {
  const t = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^rocky:${name} (\\S+)$`, 'm').exec(t);
  assert.ok(m, `metric ${name} missing:\n${t}`);
  return Number(m[1]);
}

let S;  // main server: 2 slots, queue 8, max body 64 KiB
let client;
before(async () => {
  S = await startServer(['-np', '2', '--queue', '8', '--max-body', '65536', '--alias', 'stories']);
  client = new OpenAI({ baseURL: `${S.url}/v1`, apiKey: 'none', maxRetries: 0 });
});
after(async () => {
  S.proc.kill('SIGTERM');
  const { code } = await S.exited;
  assert.equal(code, 0, S.stderr());
});

const SYS = 'You tell short stories.';
const USER = 'Once upon a time';

test('models', async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  const m = list.data[0];
  assert.equal(m.id, 'stories');
  assert.equal(m.object, 'model');
  assert.equal(m.owned_by, 'rocky');
  assert.ok(m.meta.n_params > 200000 && m.meta.n_params < 400000, JSON.stringify(m.meta));
  assert.ok(m.meta.size > 0);
  assert.equal(m.meta.n_ctx_train, 2048);  // stories260K's llama.context_length
  const props = await (await fetch(`${S.url}/props`)).json();
  assert.equal(props.n_ctx, CTX);
  assert.equal(props.total_slots, 2);
  assert.match(props.chat_template, /im_start/);
  assert.equal(props.model_path, MODEL);
});

test('chat completion equals rocky run -cnv (greedy)', async () => {
  const r = await client.chat.completions.create({
    model: 'stories',
    messages: [{ role: 'system', content: SYS }, { role: 'user', content: USER }],
    max_tokens: 24,
    temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, 'stories');
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.ok(c.message.content.length > 0);
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  assert.ok(r.usage.prompt_tokens > 10);
  assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 24);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(r.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(r.timings.prompt_n, r.usage.prompt_tokens);
  assert.equal(r.timings.cache_n, 0);
  assert.ok(r.timings.predicted_per_second > 0);
  // rocky's split of predicted_ms: the part inside the model's evaluation.
  assert.ok(r.timings.predicted_eval_ms >= 0 && r.timings.predicted_eval_ms <= r.timings.predicted_ms);
  const run = JSON.parse(rockyRun(['-cnv', '-st', '-sys', SYS, '-p', USER, '-n', '24', '--temp', '0', '--json']).trim());
  assert.equal(c.message.content, run.text);
  assert.equal(r.usage.prompt_tokens, run.prompt_ids.length);
  assert.equal(r.usage.completion_tokens, run.generated_ids.length);
});

test('chat stream equals non-stream, with a final usage chunk', async () => {
  // cache_prompt: false (llama-server's field, passed through by the SDK): both requests evaluate
  // the whole prompt, so their usage blocks are equal, cached_tokens included.
  const req = { model: 'stories', messages: [{ role: 'user', content: [{ type: 'text', text: USER }] }], max_tokens: 20, temperature: 0, cache_prompt: false };
  const whole = await client.chat.completions.create(req);
  const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  let first = true;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (first) {
      assert.equal(chunk.choices[0].delta.role, 'assistant');
      first = false;
    }
    if (chunk.choices.length === 0) {
      usage = chunk.usage;
      continue;
    }
    text += chunk.choices[0].delta.content ?? '';
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);
});

test('completions equal rocky run --temp 0 for the same raw prompt', async () => {
  const prompt = 'Lily went to the park. She saw';
  const r = await client.completions.create({ model: 'stories', prompt, max_tokens: 24, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  const run = JSON.parse(rockyRun(['-p', prompt, '-n', '24', '--temp', '0', '--json']).trim());
  assert.equal(r.choices[0].text, run.text);
  assert.equal(r.usage.prompt_tokens, run.prompt_ids.length);
  assert.equal(r.usage.completion_tokens, run.generated_ids.length);
  // Streamed: the same text; token ids as the prompt: the same text again.
  const stream = await client.completions.create({ model: 'stories', prompt, max_tokens: 24, temperature: 0, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, run.text);
  const byIds = await client.completions.create({ model: 'stories', prompt: run.prompt_ids, max_tokens: 24, temperature: 0 });
  assert.equal(byIds.choices[0].text, run.text);
  // llama-server's native /completion.
  const native = await post(S.url, '/completion', { prompt, n_predict: 24, temperature: 0, cache_prompt: true });
  assert.equal(native.status, 200, native.text);
  assert.equal(native.json.content, run.text);
  assert.equal(native.json.tokens_predicted, run.generated_ids.length);
  assert.equal(native.json.stop, true);
});

test('stop strings may span tokens; seeds repeat', async () => {
  const prompt = 'Lily went to the park. She saw';
  const full = (await client.completions.create({ model: 'stories', prompt, max_tokens: 24, temperature: 0 })).choices[0].text;
  assert.ok(full.length > 12, full);
  const stop = full.slice(5, 12);
  const cut = await client.completions.create({ model: 'stories', prompt, max_tokens: 24, temperature: 0, stop: [stop] });
  assert.equal(cut.choices[0].text, full.slice(0, full.indexOf(stop)));
  assert.equal(cut.choices[0].finish_reason, 'stop');
  const a = await client.completions.create({ model: 'stories', prompt, max_tokens: 16, temperature: 1, seed: 7 });
  const b = await client.completions.create({ model: 'stories', prompt, max_tokens: 16, temperature: 1, seed: 7 });
  assert.equal(a.choices[0].text, b.choices[0].text);
});

test('tokenize, detokenize, apply-template', async () => {
  const t = await post(S.url, '/tokenize', { content: 'Once upon a time', add_special: true });
  assert.equal(t.status, 200);
  const run = JSON.parse(rockyRun(['-p', 'Once upon a time', '-n', '0', '--json']).trim());
  assert.deepEqual(t.json.tokens, run.prompt_ids);
  const p = await post(S.url, '/tokenize', { content: 'Once upon', with_pieces: true });
  assert.ok(p.json.tokens.every((x) => typeof x.id === 'number' && typeof x.piece === 'string'));
  const d = await post(S.url, '/detokenize', { tokens: t.json.tokens.slice(1) });
  assert.equal(d.status, 200);
  assert.equal(d.json.content, 'Once upon a time');
  const a = await post(S.url, '/apply-template', { messages: [{ role: 'system', content: SYS }, { role: 'user', content: USER }] });
  assert.equal(a.status, 200, a.text);
  assert.equal(a.json.prompt, `<|im_start|>system\n${SYS}<|im_end|>\n<|im_start|>user\n${USER}<|im_end|>\n<|im_start|>assistant\n`);
  const b = await post(S.url, '/apply-template', { messages: [{ role: 'user', content: USER }], add_generation_prompt: false });
  assert.equal(b.json.prompt, `<|im_start|>user\n${USER}<|im_end|>\n`);
  const e = await post(S.url, '/v1/embeddings', { input: 'x' });
  // As llama-server: a completion server answers embeddings 501, naming the flag that serves them.
  assert.equal(e.status, 501);
  assert.ok(e.json.error.message.includes('does not support embeddings') && e.json.error.message.includes('--embedding'), e.text);
});

test('4 concurrent clients get the same greedy answer', async () => {
  const req = { model: 'stories', messages: [{ role: 'user', content: 'Tom had a red ball.' }], max_tokens: 32, temperature: 0 };
  const all = await Promise.all([0, 1, 2, 3].map((i) =>
    i % 2 ? client.chat.completions.create(req)
          : (async () => {
              let s = '';
              for await (const c of await client.chat.completions.create({ ...req, stream: true })) s += c.choices[0]?.delta?.content ?? '';
              return { choices: [{ message: { content: s } }] };
            })()));
  for (const r of all) assert.equal(r.choices[0].message.content, all[0].choices[0].message.content);
  assert.ok(all[0].choices[0].message.content.length > 0);
});

// Streams a native /completion request; resolves to {text, timings}. abortAfter > 0: the
// client leaves after that many content chunks (resolves to {text, aborted: true}).
async function streamCompletion(url, body, abortAfter = 0) {
  const ctl = new AbortController();
  const r = await fetch(`${url}/completion`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }), signal: ctl.signal,
  });
  assert.equal(r.status, 200);
  const dec = new TextDecoder();
  let buf = '', text = '', n = 0, timings = null;
  try {
    for await (const part of r.body) {
      buf += dec.decode(part, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (!line.startsWith('data: ')) continue;
        const j = JSON.parse(line.slice(6));
        if (j.stop) timings = j.timings;
        else if (j.content) {
          text += j.content;
          if (abortAfter > 0 && ++n === abortAfter) {
            ctl.abort();
            return { text, aborted: true };
          }
        }
      }
    }
  } catch (e) {
    if (abortAfter > 0 && ctl.signal.aborted) return { text, aborted: true };
    throw e;
  }
  return { text, timings };
}

test('--cont-batching: 4 concurrent streams give the texts of 4 runs alone; a cancel mid-batch leaves the others right', async () => {
  // A short token delay keeps the four streams overlapping on lavapipe; prompt chunks of 8 tokens
  // share steps with the streams already decoding.
  const B = await startServer(['-np', '4', '--cont-batching', '--prefill-chunk', '8', '--test-token-delay-ms', '5']);
  try {
    const prompts = ['Tom had a red ball.', 'Once upon a time', 'The little dog ran to the park and saw a big', 'Lily'];
    const body = (p) => ({ prompt: p, n_predict: 40, temperature: 0, cache_prompt: false, ignore_eos: true });
    const alone = [];
    for (const p of prompts) {
      const r = await post(B.url, '/completion', body(p));
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.timings.batch_seqs_max, 1, 'alone: one sequence per step');
      assert.ok(r.json.content.length > 0);
      alone.push(r.json.content);
    }
    // The same four at once (streamed): identical greedy texts, batched.
    const together = await Promise.all(prompts.map((p) => streamCompletion(B.url, body(p))));
    for (let i = 0; i < 4; ++i) assert.equal(together[i].text, alone[i], `stream ${i} differs when batched`);
    const widest = Math.max(...together.map((r) => r.timings.batch_seqs_max));
    assert.ok(widest > 1, `batch_seqs_max ${widest}: the streams never shared a step`);
    assert.ok((await metric(B.url, 'batch_seqs_per_step_max')) > 1);
    assert.ok((await metric(B.url, 'batch_prefill_tokens_total')) > 0);
    assert.ok((await metric(B.url, 'batch_steps_total')) > 0);
    // where the steps' wall time went: compute within the step, its GPU wait within it.
    const stepS = await metric(B.url, 'batch_step_seconds_total');
    const computeS = await metric(B.url, 'batch_compute_seconds_total');
    assert.ok(stepS > 0 && computeS > 0 && computeS <= stepS, `step ${stepS} s, compute ${computeS} s`);
    assert.ok((await metric(B.url, 'batch_submit_wait_seconds_total')) <= computeS);
    assert.ok((await metric(B.url, 'batch_gather_seconds_total')) >= 0);
    if (DEVICE !== 'cpu') assert.ok((await metric(B.url, 'batch_replays_total')) > 0, 'batched decode steps replay');
    // One of four leaves after 5 chunks: the other three still equal their runs alone, and its
    // sequence is freed at once (the slot is idle again right after the others finish).
    const mixed = await Promise.all(prompts.map((p, i) => streamCompletion(B.url, body(p), i === 1 ? 5 : 0)));
    assert.ok(mixed[1].aborted);
    assert.ok(alone[1].startsWith(mixed[1].text), 'the cancelled stream was right until it left');
    for (const i of [0, 2, 3]) assert.equal(mixed[i].text, alone[i], `stream ${i} differs after a cancel mid-batch`);
    const t0 = Date.now();
    while ((await metric(B.url, 'slots_busy')) !== 0) {
      assert.ok(Date.now() - t0 < 3000, 'a slot is still busy 3 s after the streams ended');
      await new Promise((r) => setTimeout(r, 20));
    }
    // A request after all that is served as alone.
    const again = await post(B.url, '/completion', body(prompts[2]));
    assert.equal(again.json.content, alone[2]);
  } finally {
    B.proc.kill('SIGTERM');
    await B.exited;
  }
});

test('a client that disconnects cancels its generation', async () => {
  // A slow server (50 ms a token) so that the generation is still running when the client leaves.
  const slow = await startServer(['-np', '1', '--queue', '0', '--test-token-delay-ms', '50']);
  try {
    const c = new OpenAI({ baseURL: `${slow.url}/v1`, apiKey: 'none', maxRetries: 0 });
    const ctl = new AbortController();
    const stream = await c.chat.completions.create(
      { model: 'x', messages: [{ role: 'user', content: USER }], max_tokens: 200, temperature: 0.8, ignore_eos: true, stream: true },
      { signal: ctl.signal });
    let n = 0;
    try {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta?.content && ++n === 3) ctl.abort();
        assert.ok(n <= 3, 'chunks after the abort');
      }
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;  // else: the SDK's abort error
    }
    assert.equal(n, 3);
    // Within a token or two the slot is free again, far before the 200 tokens (10 s) would end.
    const t0 = Date.now();
    while ((await metric(slow.url, 'slots_busy')) !== 0) {
      assert.ok(Date.now() - t0 < 1500, 'the slot is still busy 1.5 s after the disconnect');
      await new Promise((r) => setTimeout(r, 20));
    }
    const generated = await metric(slow.url, 'tokens_predicted_total');
    assert.ok(generated < 20, `generated ${generated} tokens after a disconnect at 3`);
    // Non-streaming: the same, the request aborted while waiting for the whole answer.
    const ctl2 = new AbortController();
    const p = c.completions.create({ model: 'x', prompt: USER, max_tokens: 200, ignore_eos: true }, { signal: ctl2.signal });
    setTimeout(() => ctl2.abort(), 300);
    await assert.rejects(p);
    const t1 = Date.now();
    while ((await metric(slow.url, 'slots_busy')) !== 0) {
      assert.ok(Date.now() - t1 < 1500, 'the slot is still busy 1.5 s after the disconnect');
      await new Promise((r) => setTimeout(r, 20));
    }
    // One slot, no queue: while it generates, a second request is 503 with Retry-After.
    const busy = fetch(`${slow.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: USER, max_tokens: 10, ignore_eos: true }) });
    await new Promise((r) => setTimeout(r, 150));
    const refused = await post(slow.url, '/v1/completions', { prompt: USER, max_tokens: 1 });
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal(refused.json.error.code, 'queue_full');
    assert.equal((await busy).status, 200);
    // SIGTERM with a request in flight: it finishes (within the grace), then exit 0.
    const inflight = post(slow.url, '/v1/completions', { prompt: USER, max_tokens: 10, ignore_eos: true });
    await new Promise((r) => setTimeout(r, 150));
    slow.proc.kill('SIGTERM');
    const done = await inflight;
    assert.equal(done.status, 200, done.text);
    assert.equal(done.json.usage.completion_tokens, 10);
    const { code } = await slow.exited;
    assert.equal(code, 0, slow.stderr());
  } finally {
    slow.proc.kill('SIGKILL');
  }
});

test('--api-key: 401 without it, served with it; SIGTERM cancels after --shutdown-grace', async () => {
  // 50 ms a token: the 200-token requests would run 10 s; cancelled, the process is gone in < 5 s
  // even on a loaded 2-core CI machine (3.2 s seen with two requests in flight).
  const k = await startServer(['-np', '2', '--api-key', 'sekrit', '--shutdown-grace', '0.5', '--test-token-delay-ms', '50']);
  try {
    const none = await post(k.url, '/v1/completions', { prompt: USER, max_tokens: 2 });
    assert.equal(none.status, 401);
    assert.equal(none.json.error.type, 'authentication_error');
    const wrong = await post(k.url, '/v1/completions', { prompt: USER, max_tokens: 2 }, { Authorization: 'Bearer nope' });
    assert.equal(wrong.status, 401);
    assert.equal((await fetch(`${k.url}/health`)).status, 200);
    const c = new OpenAI({ baseURL: `${k.url}/v1`, apiKey: 'sekrit', maxRetries: 0 });
    const r = await c.completions.create({ model: 'x', prompt: USER, max_tokens: 2 });
    assert.equal(r.choices.length, 1);
    // Two long requests (one streamed), then SIGTERM: cancelled after 0.5 s, the process exits 0
    // soon after. A cut generation is a 503 "shutting_down" error (an error event when streamed),
    // never a finish_reason that would pass the cut text off as complete.
    const long = post(k.url, '/v1/completions', { prompt: USER, max_tokens: 200, ignore_eos: true }, { Authorization: 'Bearer sekrit' });
    const streamed = (async () => {
      const s = await c.chat.completions.create({
        model: 'x', messages: [{ role: 'user', content: USER }], max_tokens: 200, ignore_eos: true, stream: true,
      });
      let n = 0;
      try {
        for await (const chunk of s) {
          assert.equal(chunk.choices[0]?.finish_reason ?? null, null, 'a finish_reason on a cut stream');
          n += 1;
        }
      } catch (e) {
        if (e instanceof assert.AssertionError) throw e;
        return { n, error: e };
      }
      return { n, error: null };
    })();
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    k.proc.kill('SIGTERM');
    const res = await long;
    assert.equal(res.status, 503, res.text);
    assert.equal(res.json.error.code, 'shutting_down');
    assert.match(res.json.error.message, /cancelled after \d+ token\(s\)/);
    const st = await streamed;
    assert.ok(st.n > 1, `only ${st.n} chunks before the shutdown`);
    assert.ok(st.error instanceof OpenAI.APIError, `the cut stream ended without an error: ${st.error}`);
    assert.match(st.error.message, /shutting down/);
    const { code } = await k.exited;
    assert.equal(code, 0, k.stderr());
    assert.ok(Date.now() - t0 < 5000, `exit took ${Date.now() - t0} ms`);
  } finally {
    k.proc.kill('SIGKILL');
  }
});

// A declared Content-Length over --max-body (or not a number) is answered from the headers: the
// client that sends no body does not wait for --timeout.
test('a Content-Length over --max-body is a 413 at once; a non-number a 400', async () => {
  const { createConnection } = await import('node:net');
  const u = new URL(S.url);
  for (const [cl, status] of [['20000000', 413], ['99999999999999999999', 413], ['-5', 400], ['abc', 400]]) {
    const t0 = Date.now();
    const head = await new Promise((resolve, reject) => {
      const sock = createConnection({ host: u.hostname, port: Number(u.port) }, () =>
        sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${cl}\r\n\r\n`));
      let got = '';
      sock.on('data', (d) => {
        got += d;
        if (got.includes('}}')) {
          sock.destroy();
          resolve(got);
        }
      });
      sock.on('error', reject);
      setTimeout(() => { sock.destroy(); reject(new Error(`no answer for Content-Length ${cl}: ${got}`)); }, 5000);
    });
    assert.match(head, new RegExp(`^HTTP/1.1 ${status} `), head);
    assert.match(head, status === 413 ? /payload_too_large/ : /invalid_content_length/, head);
    assert.ok(Date.now() - t0 < 5000);
  }
  assert.equal((await fetch(`${S.url}/health`)).status, 200);
});

test('bad input gets a 4xx OpenAI error naming the field; the next request is served', async () => {
  const msgs = [{ role: 'user', content: 'hi' }];
  const long = 'the cat sat on the mat and '.repeat(80);
  const cases = [
    ['malformed JSON', '/v1/chat/completions', '{"messages": [', 400, null],
    ['body not an object', '/v1/chat/completions', '[1,2]', 400, null],
    ['missing messages', '/v1/chat/completions', { model: 'x' }, 400, 'messages'],
    ['messages not a list', '/v1/chat/completions', { messages: 'hi' }, 400, 'messages'],
    ['empty messages', '/v1/chat/completions', { messages: [] }, 400, 'messages'],
    ['unknown role', '/v1/chat/completions', { messages: [{ role: 'wizard', content: 'hi' }] }, 400, 'messages[0].role'],
    ['missing role', '/v1/chat/completions', { messages: [{ content: 'hi' }] }, 400, 'messages[0].role'],
    ['content a number', '/v1/chat/completions', { messages: [{ role: 'user', content: 5 }] }, 400, 'messages[0].content'],
    ['image part', '/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 400, 'messages[0].content[0].type'],
    ['temperature a string', '/v1/chat/completions', { messages: msgs, temperature: 'hot' }, 400, 'temperature'],
    ['top_p above 1', '/v1/chat/completions', { messages: msgs, top_p: 3 }, 400, 'top_p'],
    ['negative max_tokens', '/v1/chat/completions', { messages: msgs, max_tokens: -5 }, 400, 'max_tokens'],
    ['huge max_tokens', '/v1/chat/completions', { messages: msgs, max_tokens: 1e12 }, 400, 'max_tokens'],
    ['huge max_completion_tokens', '/v1/chat/completions', { messages: msgs, max_completion_tokens: 2 ** 40 }, 400, 'max_completion_tokens'],
    ['n = 17 (at most 16 choices)', '/v1/chat/completions', { messages: msgs, n: 17 }, 400, 'n'],
    ['stop a number', '/v1/chat/completions', { messages: msgs, stop: 3 }, 400, 'stop'],
    ['stream a string', '/v1/chat/completions', { messages: msgs, stream: 'yes' }, 400, 'stream'],
    ['tool_choice required without tools', '/v1/chat/completions', { messages: msgs, tool_choice: 'required' }, 400, 'tool_choice'],
    ['tool_choice named without tools', '/v1/chat/completions', { messages: msgs, tool_choice: { type: 'function', function: { name: 'f' } } }, 400, 'tool_choice'],
    ['tools not a list', '/v1/chat/completions', { messages: msgs, tools: {} }, 400, 'tools'],
    ['prompt over the context', '/v1/completions', { prompt: long }, 400, 'prompt'],
    ['chat over the context', '/v1/chat/completions', { messages: [{ role: 'user', content: long }] }, 400, 'messages'],
    ['prompt missing', '/v1/completions', { max_tokens: 3 }, 400, 'prompt'],
    ['prompt token out of range', '/v1/completions', { prompt: [1, 99999] }, 400, 'prompt[1]'],
    ['detokenize bad id', '/detokenize', { tokens: [1, -3] }, 400, 'tokens[1]'],
    ['tokenize without content', '/tokenize', {}, 400, 'content'],
    ['body over --max-body', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(70000) }] }), 413, null],
  ];
  for (const [name, path, body, status, param] of cases) {
    const r = await post(S.url, path, body);
    assert.equal(r.status, status, `${name}: ${r.text}`);
    assert.ok(r.json && r.json.error, `${name}: no error object: ${r.text}`);
    const e = r.json.error;
    assert.equal(typeof e.message, 'string', name);
    assert.ok(e.message.length > 0, name);
    assert.ok('type' in e && 'param' in e && 'code' in e, `${name}: ${r.text}`);
    assert.equal(e.param, param, `${name}: ${r.text}`);
    // (exceed_context_size_error keeps llama-server's message word for word; its param names the field.)
    if (param && e.type !== 'exceed_context_size_error')
      assert.ok(e.message.includes(param.split('[')[0]), `${name}: the message names the field: ${e.message}`);
  }
  const ctx = await post(S.url, '/v1/completions', { prompt: long });
  // llama-server's shape: type exceed_context_size_error, code 400, n_prompt_tokens and n_ctx.
  assert.match(ctx.json.error.message, /request \(\d+ tokens\) exceeds the available context size \(256 tokens\)/);
  assert.equal(ctx.json.error.type, 'exceed_context_size_error');
  assert.equal(ctx.json.error.code, 400);
  assert.equal(ctx.json.error.n_ctx, 256);
  assert.ok(ctx.json.error.n_prompt_tokens > 256, ctx.text);
  // Invalid UTF-8 in the body.
  const bad = new Uint8Array([...Buffer.from('{"messages":[{"role":"user","content":"'), 0xff, 0xfe, ...Buffer.from('"}]}')]);
  const u = await post(S.url, '/v1/chat/completions', bad);
  assert.equal(u.status, 400, u.text);
  assert.match(u.json.error.message, /UTF-8/);
  // The SDK surfaces the same errors as exceptions with the status.
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: [{ role: 'wizard', content: 'x' }] }),
    (err) => err.status === 400 && /role/.test(err.message));
  // What agents send stays valid: content null with tool_calls, arguments as object or string, tool results.
  const ok = await post(S.url, '/v1/chat/completions', {
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'weather?' }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get', arguments: { city: 'Oslo' } } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'c2', type: 'function', function: { name: 'get', arguments: '{"city":"Rome"}' } }] },
      { role: 'tool', tool_call_id: 'c2', content: [{ type: 'text', text: 'rain' }] },
    ],
    tools: [{ type: 'function', function: { name: 'get', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    max_tokens: 4,
  });
  assert.equal(ok.status, 200, ok.text);
  const after = await client.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 4 });
  assert.equal(after.choices.length, 1);
  assert.ok((await metric(S.url, 'errors_total')) >= cases.length);
});

test('apply-template shows the template output verbatim (reference cases, two real templates)', async () => {
  const ref = path.join(SHARED, 'reference/chat');
  const cases = JSON.parse(readFileSync(path.join(ref, 'cases.json'), 'utf8')).cases;
  for (const name of ['qwen2.5-7b-instruct', 'qwen3-0.6b']) {
    const srv = await startServer(['--chat-template-file', path.join(ref, 'templates', `${name}.jinja`)]);
    try {
      let n = 0;
      for (const c of cases.filter((x) => x.template === name && x.mode !== 'cont')) {
        const conv = JSON.parse(readFileSync(path.join(ref, c.conversation_file), 'utf8'));
        const body = { messages: conv.messages, add_generation_prompt: c.add_generation_prompt };
        if (conv.tools) body.tools = conv.tools;
        if (conv.chat_template_kwargs) body.chat_template_kwargs = conv.chat_template_kwargs;
        const r = await post(srv.url, '/apply-template', body);
        const what = `${name} ${c.conversation} ${c.mode}`;
        if (c.result === 'ok') {
          assert.equal(r.status, 200, `${what}: ${r.text}`);
          assert.equal(r.json.prompt, readFileSync(path.join(ref, c.expected_file), 'utf8'), what);
        } else {
          assert.equal(r.status, 400, `${what}: ${r.text}`);
          assert.ok(r.json.error.message.includes(c.error_message), `${what}: ${r.json.error.message}`);
        }
        ++n;
      }
      assert.ok(n >= 24, `${name}: ${n} cases`);
    } finally {
      srv.proc.kill('SIGTERM');
      await srv.exited;
    }
  }
});

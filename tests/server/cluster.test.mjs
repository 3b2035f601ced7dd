// Several `rocky serve` nodes as one endpoint: the shipped deploy/haproxy/rocky.cfg run by a real
// HAProxy in front of three nodes on loopback ports, driven by the official OpenAI Node SDK.
// CTest runs this (test_cluster, label `cluster`) with ROCKY_BIN, ROCKY_MODEL, ROCKY_SHARED and
// HAPROXY set. Three phases, each with fresh nodes unless said:
//   1. one node alone: 8 agent conversations × 5 turns (a shared system prompt, a new user message
//      each turn, the replies kept in the history): the share of prompt tokens the node's prefix
//      cache supplied (usage.prompt_tokens_details.cached_tokens / prompt_tokens);
//   2. the same conversations over three nodes behind HAProxy: the share within 10 points of (1),
//      and each conversation served by one node (the balancer's affinity);
//   3. new conversations on the same three nodes: one node gets SIGTERM (it drains: /health 503,
//      still serving) after the first turns, another is killed (kill -9) later. No request that
//      started on a surviving or draining node fails; requests on the killed node fail cleanly
//      (the SDK raises: a stream ends without [DONE], or a 502/503) and their retry succeeds on
//      another node, where the conversation's next turns are served.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

const BIN = process.env.ROCKY_BIN;
const MODEL = process.env.ROCKY_MODEL;
const HAPROXY = process.env.HAPROXY ?? 'haproxy';
const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const SHARED = process.env.ROCKY_SHARED ?? path.resolve(ROOT, '../shared');
const CFG = path.join(ROOT, 'deploy/haproxy/rocky.cfg');
const TEMPLATE = path.join(SHARED, 'reference/chat/templates/qwen2.5-7b-instruct.jinja');
assert.ok(BIN && MODEL, 'ROCKY_BIN and ROCKY_MODEL must be set');

const procs = new Set();
after(() => {
  for (const p of procs) p.kill('SIGKILL');
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

async function health(url) {
  try {
    const r = await fetch(`${url}/health`);
    return { status: r.status, body: await r.json() };
  } catch {
    return { status: 0, body: null };
  }
}

// A node: CPU backend, small blocks so the prefix cache works at token-level granularity, a short
// delay per token so streams are in flight when a node is drained or killed.
async function startNode(name) {
  const port = await freePort();
  const args = ['serve', '-m', MODEL, '--port', String(port), '-c', '4096', '-np', '4', '--device', 'cpu',
    '--chat-template-file', TEMPLATE, '--cache-block', '16', '--no-warmup', '--test-token-delay-ms', '15',
    '--shutdown-drain', '2', '--shutdown-grace', '20'];
  const proc = spawn(BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  procs.add(proc);
  let err = '';
  proc.stderr.on('data', (d) => (err += d));
  const exited = new Promise((r) => proc.on('exit', (code, sig) => r({ code, sig })));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; ++i) {
    if ((await health(url)).status === 200) break;
    if (proc.exitCode !== null) throw new Error(`node ${name} exited ${proc.exitCode}:\n${err}`);
    await sleep(100);
  }
  assert.equal((await health(url)).status, 200, `node ${name} never became healthy:\n${err}`);
  return { name, proc, port, url, exited, stderr: () => err };
}

async function startBalancer(nodes) {
  const port = await freePort();
  const stats = await freePort();
  const env = { ...process.env, ROCKY_LB_BIND: `127.0.0.1:${port}`, ROCKY_STATS_BIND: `127.0.0.1:${stats}` };
  nodes.forEach((n, i) => (env[`ROCKY_NODE${i + 1}`] = `127.0.0.1:${n.port}`));
  const proc = spawn(HAPROXY, ['-db', '-f', CFG], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  procs.add(proc);
  let err = '';
  proc.stderr.on('data', (d) => (err += d));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; ++i) {
    if ((await health(url)).status === 200) break;
    if (proc.exitCode !== null) throw new Error(`haproxy exited ${proc.exitCode}:\n${err}`);
    await sleep(100);
  }
  await sleep(1500);  // the first health checks of every node
  return { proc, url, statsUrl: `http://127.0.0.1:${stats}`, stderr: () => err };
}

const SYSTEM =
  'You are a coding agent working in a repository. You read files, run commands and edit code. ' +
  'Answer briefly. Tools: read_file(path), write_file(path, content), run_shell(command). ' +
  'The repository holds src/main.cpp, src/util.cpp, include/util.hpp, tests/test_util.cpp and README.md. ' +
  'Keep every change small and explain it in one sentence.';
const TASKS = ['fix the build', 'add a test', 'rename a function', 'update the README', 'remove dead code',
  'speed up the parser', 'handle an empty file', 'add a flag'];

// One conversation: `turns` turns, each a new user message after the history. Returns per turn
// the node that served it, the usage, and the errors of failed attempts (retried up to 4 times).
async function converse(client, c, turns, onTurn, onServed) {
  const messages = [{ role: 'system', content: SYSTEM }];
  const out = [];
  for (let t = 0; t < turns; ++t) {
    if (onTurn) await onTurn(c, t);
    messages.push({ role: 'user', content: `Conversation ${c}, step ${t}: ${TASKS[(c + t) % TASKS.length]} in src/util.cpp.` });
    const stream = (c + t) % 2 === 0;
    const record = { turn: t, stream, errors: [] };
    for (let attempt = 0; ; ++attempt) {
      const t0 = Date.now();
      let node;  // known once the response's headers came (a stream cut later still names it)
      try {
        const req = { model: 'rocky', messages, max_tokens: 12, temperature: 0 };
        // Half of the conversations carry a session header, half OpenAI's `user`; the body's
        // start is the key otherwise (the config's last rule, exercised by phase 1's direct node).
        const opts = c % 2 === 0 ? { headers: { 'X-Session-Id': `conv-${c}` } } : {};
        if (c % 2 === 1) req.user = `conv-${c}`;
        let text = '';
        let usage;
        if (stream) {
          const { data, response } = await client.chat.completions
            .create({ ...req, stream: true, stream_options: { include_usage: true } }, opts)
            .withResponse();
          node = response.headers.get('x-served-by');
          for await (const ch of data) {
            if (ch.choices?.[0]?.delta?.content) text += ch.choices[0].delta.content;
            if (ch.usage) usage = ch.usage;
          }
        } else {
          const { data, response } = await client.chat.completions.create(req, opts).withResponse();
          node = response.headers.get('x-served-by');
          text = data.choices[0].message.content;
          usage = data.usage;
        }
        assert.ok(usage, 'usage missing');
        Object.assign(record, { node, usage, text, ms: Date.now() - t0, end: Date.now() });
        messages.push({ role: 'assistant', content: text });
        if (onServed) onServed(c, record);
        break;
      } catch (e) {
        record.errors.push({ at: t0, ms: Date.now() - t0, message: String(e?.message ?? e), status: e?.status,
          node: node ?? e?.headers?.get?.('x-served-by') ?? undefined });
        if (attempt >= 4) throw new Error(`conversation ${c} turn ${t}: ${attempt + 1} attempts failed: ${e}`);
        await sleep(1000);
      }
    }
    out.push(record);
  }
  return out;
}

function cacheShare(results) {
  let cached = 0;
  let prompt = 0;
  for (const conv of results)
    for (const r of conv) {
      cached += r.usage.prompt_tokens_details?.cached_tokens ?? 0;
      prompt += r.usage.prompt_tokens;
    }
  return cached / prompt;
}

async function stopAll(list) {
  for (const p of list) p.proc.kill('SIGKILL');
  await sleep(200);
}

const N_CONV = 8;
const TURNS = 5;
let oneNodeShare;

test('one node: the prefix cache supplies most of an agent conversation', async () => {
  const node = await startNode('solo');
  const client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'none', maxRetries: 0 });
  const results = await Promise.all([...Array(N_CONV).keys()].map((c) => converse(client, c, TURNS)));
  oneNodeShare = cacheShare(results);
  console.log(`cluster: 1 node: prompt tokens from the prefix cache ${(100 * oneNodeShare).toFixed(1)} %`);
  assert.ok(oneNodeShare >= 0.7, `1-node cache share ${oneNodeShare}`);
  for (const conv of results) for (const r of conv) assert.equal(r.errors.length, 0, JSON.stringify(r.errors));
  await stopAll([node]);
});

test('three nodes behind HAProxy: conversations stay on their node, the share holds', async () => {
  const nodes = [await startNode('a'), await startNode('b'), await startNode('c')];
  const lb = await startBalancer(nodes);
  const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: 'none', maxRetries: 0 });
  const results = await Promise.all([...Array(N_CONV).keys()].map((c) => converse(client, c, TURNS)));
  const share = cacheShare(results);
  const used = new Set(results.flatMap((conv) => conv.map((r) => r.node)));
  console.log(`cluster: 3 nodes: prompt tokens from the prefix cache ${(100 * share).toFixed(1)} % ` +
    `(1 node: ${(100 * oneNodeShare).toFixed(1)} %), nodes used: ${[...used].join(', ')}`);
  for (const conv of results) {
    assert.equal(new Set(conv.map((r) => r.node)).size, 1, `a conversation moved: ${conv.map((r) => r.node)}`);
    for (const r of conv) assert.equal(r.errors.length, 0, JSON.stringify(r.errors));
  }
  assert.ok(used.size >= 2, `the hash used ${used.size} node(s) for ${N_CONV} conversations`);
  assert.ok(oneNodeShare - share <= 0.1, `3-node share ${share} against 1-node ${oneNodeShare}`);
  // Each node's /metrics through the balancer's metrics frontend, with the routing gauges.
  for (const n of ['node1', 'node2', 'node3']) {
    const r = await fetch(`${lb.statsUrl}/node/${n}/metrics`);
    assert.equal(r.status, 200);
    const text = await r.text();
    for (const m of ['rocky:requests_running', 'rocky:requests_waiting', 'rocky:kv_cells_used', 'rocky:kv_cells_total',
      'rocky:prefix_cache_hit_ratio'])
      assert.match(text, new RegExp(`^${m} `, 'm'), `${n} /metrics lacks ${m}`);
  }
  assert.equal((await fetch(`${lb.statsUrl}/stats`)).status, 200);
  await stopAll([lb, ...nodes]);
});

test('drain one node, kill another: nothing started on a live node fails, the rest retries', async () => {
  const nodes = [await startNode('a'), await startNode('b'), await startNode('c')];
  const lb = await startBalancer(nodes);
  const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: 'none', maxRetries: 0 });
  // Which node holds which conversation: learned from the first turn's X-Served-By.
  const home = new Map();
  let drained = null;
  let killed = null;
  let killAt = 0;
  const byName = { node1: nodes[0], node2: nodes[1], node3: nodes[2] };
  const onTurn = async (c, t) => {
    // Turn 1 of conversation 0: SIGTERM the node of conversation 0.
    if (c === 0 && t === 1 && !drained) {
      drained = home.get(0);
      byName[drained].proc.kill('SIGTERM');
      const h = await health(byName[drained].url);
      assert.equal(h.status, 503, 'a draining node answers /health 503 at once');
      assert.deepEqual(h.body, { status: 'draining' });
    }
  };
  const killer = (async () => {
    // Later, while streams are in flight: kill -9 a node that is neither drained nor idle.
    while (!drained || home.size < N_CONV) await sleep(50);
    await sleep(1500);
    killed = [...new Set(home.values())].find((n) => n !== drained) ?? Object.keys(byName).find((n) => n !== drained);
    killAt = Date.now();
    byName[killed].proc.kill('SIGKILL');
  })();
  const onServed = (c, r) => {
    if (r.turn === 0) home.set(c, r.node);
  };
  const results = await Promise.all([...Array(N_CONV).keys()].map((c) => converse(client, c, TURNS, onTurn, onServed)));
  await killer;
  let served = 0;
  let failed = 0;
  let retried = 0;
  const moved = [];
  for (const [c, conv] of results.entries()) {
    for (const r of conv) {
      served += 1;
      failed += r.errors.length;
      if (r.errors.length) retried += 1;
      for (const e of r.errors) {
        // A failure is allowed only for a request on the killed node, around the kill. The node
        // that took it is known when its headers came; else it is where the balancer sent the
        // conversation: its last node, or (that one drained or killed) wherever the hash moved it.
        const prev = conv[Math.max(0, r.turn - 1)].node;
        const where = e.node ?? prev;
        const mayHaveMoved = e.node === undefined && (prev === drained || prev === killed);
        assert.ok(where === killed || mayHaveMoved,
          `conversation ${c} turn ${r.turn} failed on a live node (${where}, last turn on ${prev}): ${e.message}`);
        assert.ok(e.at + e.ms >= killAt - 100, `conversation ${c} turn ${r.turn} failed before the kill: ${e.message}`);
      }
    }
    const nodesOf = conv.map((r) => r.node);
    if (nodesOf.includes(drained) || nodesOf.includes(killed)) moved.push(`${c}: ${nodesOf.join(' ')}`);
    // Nothing is served by the killed node after the kill.
    for (const r of conv) if (r.node === killed) assert.ok(r.end === undefined || r.end <= killAt + 100);
  }
  console.log(`cluster: drain ${drained}, kill -9 ${killed}: ${served} turns served, ${failed} failed attempts, ` +
    `${retried} turns retried; conversations that moved: ${moved.join('; ') || 'none'}`);
  const dr = await byName[drained].exited;
  assert.equal(dr.code, 0, `the drained node exited ${JSON.stringify(dr)}:\n${byName[drained].stderr()}`);
  assert.match(byName[drained].stderr(), /draining for 2 s/);
  await stopAll([lb, ...nodes]);
});

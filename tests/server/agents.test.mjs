// The agent APIs of `rocky serve` driven by the official clients: Anthropic's TypeScript SDK on
// /v1/messages (messages.create, messages.stream, countTokens, error classes) and the OpenAI Node
// SDK's responses.create on /v1/responses (stream and not, function_call items, previous_response_id).
// CTest runs this (test_server_agents_node) with ROCKY_BIN, ROCKY_MODEL and ROCKY_DEVICE set. The
// model (stories260K) has random-ish weights and never writes a tool call by itself: the tool round
// trips feed tool_use/tool_result (function_call/function_call_output) history and check that it is
// rendered as the chat template renders the same OpenAI conversation; forced choices (Anthropic's
// any / tool, Responses' required / named function) and text.format make it write a call or JSON
// through the grammar, which must parse into tool_use / function_call / JSON text. The embeddings
// test runs the OpenAI SDK's embeddings.create on an --embedding server (a synth model).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const BIN = process.env.ROCKY_BIN;
const MODEL = process.env.ROCKY_MODEL;
const DEVICE = process.env.ROCKY_DEVICE ?? 'vulkan';
const SHARED = process.env.ROCKY_SHARED ?? path.join(path.dirname(MODEL), '../..');
assert.ok(BIN && MODEL, 'ROCKY_BIN and ROCKY_MODEL must be set');
const TEMPLATE = path.join(SHARED, 'reference/chat/templates/qwen2.5-7b-instruct.jinja');
const KEY = 'sekrit';

async function startServer(extra = [], model = MODEL) {
  const args = ['serve', '-m', model, '--port', '0', '-c', '2048', '--device', DEVICE, ...extra];
  const proc = spawn(BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
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
      if ((await fetch(`${url}/health`)).status === 200) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  return { proc, url, stderr: () => err };
}

async function post(url, route, body, headers = {}) {
  const r = await fetch(url + route, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}`, ...headers },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

let S;
let anthropic;
let openai;
before(async () => {
  S = await startServer(['--chat-template-file', TEMPLATE, '--api-key', KEY]);
  anthropic = new Anthropic({ baseURL: S.url, apiKey: KEY, maxRetries: 0 });
  openai = new OpenAI({ baseURL: `${S.url}/v1`, apiKey: KEY, maxRetries: 0 });
});
after(() => S?.proc.kill('SIGKILL'));

const USER = 'Once upon a time there was a little dog.';
const TOOLS_A = [
  {
    name: 'get_weather',
    description: 'The weather in a city',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
];
const TOOLS_OAI = [
  {
    type: 'function',
    function: { name: 'get_weather', description: 'The weather in a city', parameters: TOOLS_A[0].input_schema },
  },
];

test('messages.create: greedy text equals /v1/chat/completions for the same conversation', async () => {
  const m = await anthropic.messages.create({
    model: 'stories',
    system: [{ type: 'text', text: 'You tell stories.' }],
    messages: [{ role: 'user', content: USER }],
    max_tokens: 24,
    temperature: 0,
  });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_/);
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  const chat = await openai.chat.completions.create({
    model: 'stories',
    messages: [
      { role: 'system', content: 'You tell stories.' },
      { role: 'user', content: USER },
    ],
    max_tokens: 24,
    temperature: 0,
  });
  assert.equal(m.content[0].text, chat.choices[0].message.content);
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, chat.usage.prompt_tokens);
  assert.equal(m.usage.output_tokens, chat.usage.completion_tokens);
  assert.equal(m.stop_reason === 'max_tokens', chat.choices[0].finish_reason === 'length');
});

test('messages.stream: events in order, text equals messages.create', async () => {
  const req = { model: 'stories', messages: [{ role: 'user', content: USER }], max_tokens: 20, temperature: 0 };
  const whole = await anthropic.messages.create(req);
  const stream = anthropic.messages.stream(req);
  const types = [];
  for await (const ev of stream) types.push(ev.type);
  const final = await stream.finalMessage();
  assert.equal(final.content[0].text, whole.content[0].text);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  // The same prompt again: read from the prefix cache (the slot's own KV).
  assert.ok(final.usage.cache_read_input_tokens > 0, JSON.stringify(final.usage));
  assert.equal(final.usage.input_tokens + final.usage.cache_read_input_tokens, whole.usage.input_tokens + whole.usage.cache_read_input_tokens);
  assert.equal(types[0], 'message_start');
  assert.equal(types[1], 'content_block_start');
  assert.equal(types.at(-3), 'content_block_stop');
  assert.equal(types.at(-2), 'message_delta');
  assert.equal(types.at(-1), 'message_stop');
  // The raw stream also carries Anthropic's ping and event: lines.
  const raw = await fetch(`${S.url}/v1/messages`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ ...req, stream: true }),
  });
  const text = await raw.text();
  assert.match(text, /^event: message_start\ndata: /);
  assert.match(text, /event: ping\ndata: \{"type":"ping"\}/);
  assert.match(text, /event: message_stop\ndata: \{"type":"message_stop"\}\n\n$/);
});

test('stop_sequences end with stop_reason stop_sequence', async () => {
  const req = { model: 'stories', messages: [{ role: 'user', content: USER }], max_tokens: 24, temperature: 0 };
  const full = (await anthropic.messages.create(req)).content[0].text;
  const words = full.trim().split(/\s+/);
  assert.ok(words.length >= 3, full);
  const stop = words[2];
  const cut = await anthropic.messages.create({ ...req, stop_sequences: [stop] });
  assert.equal(cut.stop_reason, 'stop_sequence');
  assert.equal(cut.stop_sequence, stop);
  assert.equal(cut.content[0].text, full.slice(0, full.indexOf(stop)));
});

test('tool round trip: tool_use / tool_result history renders as the OpenAI conversation; answer is a message', async () => {
  const messages = [
    { role: 'user', content: 'What is the weather in Oslo?' },
    {
      role: 'assistant',
      content: [
        { type: 'text', text: 'Let me check.' },
        { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Oslo' } },
      ],
    },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: 'Sunny, 21 C' }] },
  ];
  const counted = await anthropic.messages.countTokens({ model: 'stories', messages, tools: TOOLS_A });
  const oai = [
    { role: 'user', content: 'What is the weather in Oslo?' },
    {
      role: 'assistant',
      content: 'Let me check.',
      tool_calls: [{ id: 'toolu_01', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
    },
    { role: 'tool', tool_call_id: 'toolu_01', content: 'Sunny, 21 C' },
  ];
  // /apply-template renders verbatim: the arguments as the object chat completions makes of them.
  const rendered = oai.map((m) => (m.tool_calls ? { ...m, tool_calls: [{ ...m.tool_calls[0], function: { name: 'get_weather', arguments: { city: 'Oslo' } } }] } : m));
  const tmpl = await post(S.url, '/apply-template', { messages: rendered, tools: TOOLS_OAI });
  assert.match(tmpl.json.prompt, /<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Oslo"\}\}\n<\/tool_call>/);
  assert.match(tmpl.json.prompt, /<tool_response>\nSunny, 21 C\n<\/tool_response>/);
  const tok = await post(S.url, '/tokenize', { content: tmpl.json.prompt, add_special: true, parse_special: true });
  assert.equal(counted.input_tokens, tok.json.tokens.length);
  const answer = await anthropic.messages.create({ model: 'stories', messages, tools: TOOLS_A, max_tokens: 12, temperature: 0 });
  assert.ok(answer.content.length >= 1);
  const chat = await openai.chat.completions.create({ model: 'stories', messages: oai, tools: TOOLS_OAI, max_tokens: 12, temperature: 0 });
  assert.equal(answer.usage.input_tokens + answer.usage.cache_read_input_tokens, chat.usage.prompt_tokens);
  assert.equal(answer.content.find((b) => b.type === 'text')?.text ?? '', chat.choices[0].message.content ?? '');
});

test('messages errors: SDK error classes, Anthropic error bodies', async () => {
  await assert.rejects(
    // max_tokens is required
    anthropic.messages.create({ model: 'stories', messages: [{ role: 'user', content: 'hi' }] }),
    (e) => e instanceof Anthropic.BadRequestError && e.error.type === 'error' && e.error.error.type === 'invalid_request_error' && /max_tokens/.test(e.message),
  );
  const bad = new Anthropic({ baseURL: S.url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.messages.create({ model: 'stories', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }), (e) => e instanceof Anthropic.AuthenticationError && e.error.error.type === 'authentication_error');
  await assert.rejects(
    anthropic.messages.create({
      model: 'stories',
      max_tokens: 4,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }],
    }),
    (e) => e instanceof Anthropic.BadRequestError && /messages\[0\]\.content\[0\]\.type/.test(e.message),
  );
  await assert.rejects(
    anthropic.messages.create({ model: 'stories', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }], tool_choice: { type: 'any' } }),
    (e) => e instanceof Anthropic.BadRequestError && /tool_choice\.type/.test(e.message) && /no tools/.test(e.message),
  );
  await assert.rejects(
    anthropic.messages.create({ model: 'stories', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }], tools: TOOLS_A, tool_choice: { type: 'tool', name: 'nope' } }),
    (e) => e instanceof Anthropic.BadRequestError && /tool_choice\.name/.test(e.message),
  );
  // The next request is served.
  const ok = await anthropic.messages.create({ model: 'stories', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(ok.type, 'message');
});

test('responses.create: text equals chat completions; stream events numbered and in order', async () => {
  const req = { model: 'stories', instructions: 'You tell stories.', input: USER, max_output_tokens: 20, temperature: 0 };
  const r = await openai.responses.create(req);
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(r.status));
  const msg = r.output.find((o) => o.type === 'message');
  assert.equal(msg.content[0].type, 'output_text');
  assert.equal(r.output_text, msg.content[0].text);
  const chat = await openai.chat.completions.create({
    model: 'stories',
    messages: [
      { role: 'system', content: 'You tell stories.' },
      { role: 'user', content: USER },
    ],
    max_tokens: 20,
    temperature: 0,
  });
  assert.equal(r.output_text, chat.choices[0].message.content);
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');

  const stream = await openai.responses.create({ ...req, stream: true });
  const types = [];
  let text = '';
  let seq = 0;
  let completed;
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, seq++);
    if (types.at(-1) !== ev.type) types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') completed = ev.response;
  }
  assert.deepEqual(types, [
    'response.created',
    'response.in_progress',
    'response.output_item.added',
    'response.content_part.added',
    'response.output_text.delta',
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
    r.status === 'completed' ? 'response.completed' : 'response.incomplete',
  ]);
  assert.equal(text, r.output_text);
  assert.equal(completed.output[0].content[0].text, r.output_text);
  // A streamed response is stored too: the next turn can name it.
  const next = await openai.responses.create({ model: 'stories', previous_response_id: completed.id, input: 'And then?', max_output_tokens: 4, temperature: 0 });
  assert.equal(next.previous_response_id, completed.id);
  assert.ok(next.usage.input_tokens > r.usage.input_tokens + r.usage.output_tokens - 2, JSON.stringify(next.usage));
});

test('responses: function_call items round trip; previous_response_id replays the conversation (a cache hit)', async () => {
  const input = [
    { role: 'user', content: 'What is the weather in Oslo?' },
    { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
    { type: 'function_call_output', call_id: 'call_1', output: 'Sunny, 21 C' },
  ];
  const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: TOOLS_A[0].input_schema, strict: false }];
  const first = await openai.responses.create({ model: 'stories', input, tools, max_output_tokens: 8, temperature: 0 });
  const oai = [
    { role: 'user', content: 'What is the weather in Oslo?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'Sunny, 21 C' },
  ];
  const chat = await openai.chat.completions.create({ model: 'stories', messages: oai, tools: TOOLS_OAI, max_tokens: 8, temperature: 0 });
  assert.equal(first.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(first.output_text, chat.choices[0].message.content ?? '');

  // The next turn by id: the same prompt as the whole conversation sent again.
  const next = { role: 'user', content: 'Thanks. And tomorrow?' };
  const counted = await post(S.url, '/v1/responses/input_tokens', { model: 'stories', previous_response_id: first.id, input: [next], tools });
  assert.equal(counted.json.object, 'response.input_tokens');
  const full = [...input, { role: 'assistant', content: first.output_text }, next];
  const countedFull = await post(S.url, '/v1/responses/input_tokens', { model: 'stories', input: full, tools });
  assert.equal(counted.json.input_tokens, countedFull.json.input_tokens);
  const second = await openai.responses.create({ model: 'stories', previous_response_id: first.id, input: [next], tools, max_output_tokens: 8, temperature: 0 });
  assert.equal(second.previous_response_id, first.id);
  assert.equal(second.usage.input_tokens, counted.json.input_tokens);
  assert.ok(second.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(second.usage));

  // store: false is not kept; an unknown id is OpenAI's error naming previous_response_id.
  const unstored = await openai.responses.create({ model: 'stories', input: 'hi', store: false, max_output_tokens: 2 });
  for (const id of [unstored.id, 'resp_nope']) {
    await assert.rejects(
      openai.responses.create({ model: 'stories', previous_response_id: id, input: 'again', max_output_tokens: 2 }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id' && e.code === 'previous_response_not_found',
    );
  }
});

test('responses errors name the field', async () => {
  const cases = [
    [{ input: 'hi', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    [{ input: 'hi', tool_choice: 'required' }, 'tool_choice'],
    [{ input: 'hi', tool_choice: { type: 'function', name: 'g' }, tools: [{ type: 'function', name: 'f', parameters: {} }] }, 'tool_choice.name'],
    [{ input: 'hi', tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [] }, tools: [{ type: 'function', name: 'f', parameters: {} }] }, 'tool_choice.type'],
    [{ input: 'hi', text: { format: { type: 'json_schema', schema: { type: 'object' } } } }, 'text.format.name'],
    [{ input: 'hi', text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } } } }, 'text.format.schema'],
    [{ input: 'hi', text: { format: { type: 'yaml' } } }, 'text.format.type'],
    [{ input: 'hi', text: { format: { type: 'json_object' } }, tool_choice: 'required', tools: [{ type: 'function', name: 'f', parameters: {} }] }, 'tool_choice'],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'data:' }] }] }, 'input[0].content[0].type'],
    [{}, 'input'],
  ];
  for (const [body, param] of cases) {
    await assert.rejects(openai.responses.create({ model: 'stories', ...body }), (e) => e instanceof OpenAI.BadRequestError && e.param === param, param);
  }
  const bad = new OpenAI({ baseURL: `${S.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.responses.create({ model: 'stories', input: 'hi' }), (e) => e instanceof OpenAI.AuthenticationError);
});

// A schema small enough that stories260K's greedy walk through the grammar ends well within the
// token budget: the forced call must parse into a tool_use / function_call with valid input.
const UNIT_SCHEMA = { type: 'object', properties: { unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['unit'], additionalProperties: false };
const TOOLS_FORCED = [
  { name: 'get_weather', description: 'The weather', input_schema: UNIT_SCHEMA },
  { name: 'get_time', description: 'The time', input_schema: { type: 'object', properties: {}, additionalProperties: false } },
];

test('messages: tool_choice any / tool force a tool_use that parses (create and stream)', async () => {
  const base = { model: 'stories', max_tokens: 200, temperature: 0, messages: [{ role: 'user', content: USER }], tools: TOOLS_FORCED };
  for (const tool_choice of [{ type: 'any' }, { type: 'tool', name: 'get_weather' }, { type: 'tool', name: 'get_time' }]) {
    const r = await anthropic.messages.create({ ...base, tool_choice });
    assert.equal(r.stop_reason, 'tool_use', JSON.stringify(r));
    const uses = r.content.filter((b) => b.type === 'tool_use');
    assert.equal(uses.length, 1, JSON.stringify(r.content));
    assert.match(uses[0].id, /^toolu_/);
    if (tool_choice.name) assert.equal(uses[0].name, tool_choice.name);
    if (uses[0].name === 'get_weather') assert.ok(['celsius', 'fahrenheit'].includes(uses[0].input.unit), JSON.stringify(uses[0].input));
    else assert.deepEqual(uses[0].input, {});
    // The stream gives the same call through input_json_delta.
    const final = await anthropic.messages.stream({ ...base, tool_choice }).finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    const su = final.content.filter((b) => b.type === 'tool_use');
    assert.equal(su.length, 1);
    assert.equal(su[0].name, uses[0].name);
    assert.deepEqual(su[0].input, uses[0].input);
  }
  // none: no tools in the prompt, plain text.
  const none = await anthropic.messages.create({ ...base, max_tokens: 8, tool_choice: { type: 'none' } });
  assert.notEqual(none.stop_reason, 'tool_use');
});

test('responses: tool_choice required / named and text.format json_schema / json_object parse', async () => {
  const tools = TOOLS_FORCED.map((t) => ({ type: 'function', name: t.name, description: t.description, parameters: t.input_schema, strict: true }));
  const base = { model: 'stories', input: USER, tools, max_output_tokens: 200, temperature: 0 };
  for (const tool_choice of ['required', { type: 'function', name: 'get_weather' }]) {
    const r = await openai.responses.create({ ...base, tool_choice });
    assert.equal(r.status, 'completed', JSON.stringify(r));
    assert.deepEqual(r.tool_choice, tool_choice);
    const calls = r.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(r.output));
    if (typeof tool_choice === 'object') assert.equal(calls[0].name, 'get_weather');
    const args = JSON.parse(calls[0].arguments);
    if (calls[0].name === 'get_weather') assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
    const stream = await openai.responses.create({ ...base, tool_choice, stream: true });
    let done;
    for await (const ev of stream) if (ev.type === 'response.function_call_arguments.done') done = ev;
    assert.equal(done.arguments, calls[0].arguments);
  }
  const format = { type: 'json_schema', name: 'unit', schema: UNIT_SCHEMA, strict: true };
  const j = await openai.responses.create({ model: 'stories', input: USER, text: { format }, max_output_tokens: 200, temperature: 0 });
  assert.equal(j.status, 'completed', JSON.stringify(j));
  assert.equal(j.text.format.name, 'unit');
  assert.ok(['celsius', 'fahrenheit'].includes(JSON.parse(j.output_text).unit), j.output_text);
  const o = await openai.responses.create({ model: 'stories', input: USER, text: { format: { type: 'json_object' } }, max_output_tokens: 200, temperature: 0 });
  if (o.status === 'completed') assert.equal(typeof JSON.parse(o.output_text), 'object', o.output_text);
  else assert.match(o.output_text, /^\s*\{/);
});

test('embeddings.create (the OpenAI SDK; base64 on the wire by default) on an --embedding server', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rocky-emb-'));
  const model = path.join(dir, 'emb.gguf');
  try {
    execFileSync(BIN, ['synth', '--preset', 'qwen3-embedding-test', '--type', 'f32', '-q', '-o', model]);
    const emb = await startServer(['--embedding', '--no-warmup'], model);
    try {
      const client = new OpenAI({ baseURL: `${emb.url}/v1`, apiKey: 'none', maxRetries: 0 });
      const r = await client.embeddings.create({ model: 'emb', input: ['a panda', 'a bear'] });
      assert.equal(r.data.length, 2);
      const floats = await client.embeddings.create({ model: 'emb', input: ['a panda', 'a bear'], encoding_format: 'float' });
      for (let i = 0; i < 2; ++i) {
        const v = r.data[i].embedding;
        assert.equal(v.length, 256);
        assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-4);
        assert.deepEqual(v, floats.data[i].embedding.map((x) => Math.fround(x)));
      }
      assert.equal(r.usage.prompt_tokens, floats.usage.prompt_tokens);
      await assert.rejects(client.chat.completions.create({ model: 'emb', messages: [{ role: 'user', content: 'hi' }] }), (e) => e.status === 501);
    } finally {
      emb.proc.kill('SIGKILL');
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a stream silent for 5 s gets a ping (Anthropic keeps idle streams alive that way)', async () => {
  // Each token is followed by 5.5 s of nothing: a ping comes between the text and message_delta.
  const slow = await startServer(['--test-token-delay-ms', '5500']);
  try {
    const r = await fetch(`${slow.url}/v1/messages`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: USER }], max_tokens: 2, temperature: 0, stream: true }),
    });
    const names = [...(await r.text()).matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
    const firstDelta = names.indexOf('content_block_delta');
    assert.ok(firstDelta > 0, names.join(' '));
    assert.ok(names.indexOf('ping', firstDelta) > firstDelta, names.join(' '));
    assert.ok(names.indexOf('ping', firstDelta) < names.indexOf('message_delta'), names.join(' '));
  } finally {
    slow.proc.kill('SIGKILL');
  }
});

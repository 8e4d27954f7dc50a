// The official OpenAI JavaScript client against an OpenAI-compatible server (hetc serve):
//
//   node openai_client.mjs --base-url http://127.0.0.1:PORT/v1 --model NAME [--max-tokens N]
//
// Greedy requests (temperature 0) streamed and not streamed must give the same text, finish
// reason and consistent usage, for chat and plain completions; /v1/models lists the model; bad
// requests raise the client's APIError with the status and a message naming the field. Any
// mismatch exits 1 with one FAIL line.
import OpenAI from 'openai';

function parseArgs(argv) {
  const args = { maxTokens: 8 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--base-url') args.baseURL = value;
    else if (flag === '--model') args.model = value;
    else if (flag === '--max-tokens') args.maxTokens = Number(value);
    else throw new Error(`unknown argument ${flag}`);
  }
  if (!args.baseURL || !args.model) throw new Error('usage: --base-url URL --model NAME [--max-tokens N]');
  return args;
}

class Mismatch extends Error {}

function expect(condition, message) {
  if (!condition) throw new Mismatch(message);
}

const show = (value) => JSON.stringify(value);

// Usage of a non-streamed response: counts that add up, within max_tokens, exactly max_tokens
// when the reason is the length.
function checkUsage(what, usage, finishReason, maxTokens) {
  expect(usage && typeof usage === 'object', `${what}: no usage in the response`);
  const { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total } = usage;
  expect(Number.isInteger(prompt) && prompt > 0, `${what}: usage.prompt_tokens ${show(prompt)}`);
  expect(Number.isInteger(completion) && completion >= 0 && completion <= maxTokens,
         `${what}: usage.completion_tokens ${show(completion)} (max_tokens ${maxTokens})`);
  expect(total === prompt + completion,
         `${what}: usage.total_tokens ${total} != prompt_tokens ${prompt} + completion_tokens ${completion}`);
  if (finishReason === 'length')
    expect(completion === maxTokens,
           `${what}: finish_reason length after ${completion} tokens, max_tokens ${maxTokens}`);
  return usage;
}

function checkFinish(what, reason) {
  expect(reason === 'stop' || reason === 'length',
         `${what}: finish_reason ${show(reason)}, expected "stop" or "length"`);
}

async function streamedChat(client, request) {
  const stream = await client.chat.completions.create({ ...request, stream: true });
  let text = '';
  let finish = null;
  let chunks = 0;
  const ids = new Set();
  for await (const chunk of stream) {
    chunks += 1;
    expect(chunk.object === 'chat.completion.chunk',
           `streamed chat: chunk object ${show(chunk.object)}, expected "chat.completion.chunk"`);
    ids.add(chunk.id);
    for (const choice of chunk.choices ?? []) {
      expect(choice.index === 0, `streamed chat: choice index ${show(choice.index)}`);
      if (choice.delta?.content) text += choice.delta.content;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  expect(chunks > 0, 'streamed chat: the stream had no chunks');
  expect(ids.size === 1, `streamed chat: chunks carry ${ids.size} different ids`);
  checkFinish('streamed chat', finish);
  return { text, finish, chunks };
}

async function streamedCompletion(client, request) {
  const stream = await client.completions.create({ ...request, stream: true });
  let text = '';
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    expect(chunk.object === 'text_completion',
           `streamed completion: chunk object ${show(chunk.object)}, expected "text_completion"`);
    for (const choice of chunk.choices ?? []) {
      if (choice.text) text += choice.text;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  expect(chunks > 0, 'streamed completion: the stream had no chunks');
  checkFinish('streamed completion', finish);
  return { text, finish, chunks };
}

// Expects the request to be refused with the client's APIError, one of `statuses`, and a message
// that names `needle`.
async function expectRefusal(what, call, statuses, needle) {
  let error = null;
  try {
    await call();
  } catch (caught) {
    error = caught;
  }
  expect(error !== null, `${what}: the server accepted it`);
  expect(error instanceof OpenAI.APIError,
         `${what}: ${error?.constructor?.name} (${error?.message}), expected OpenAI.APIError`);
  expect(statuses.includes(error.status),
         `${what}: status ${error.status}, expected ${statuses.join(' or ')} (${error.message})`);
  expect(String(error.message).includes(needle),
         `${what}: the message ${show(error.message)} does not name ${show(needle)}`);
  console.log(`${what}: ${error.constructor.name} ${error.status}: ${error.message}`);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const client = new OpenAI({ baseURL: args.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 300000 });
  const maxTokens = args.maxTokens;

  // (d) the served model is listed.
  const listed = [];
  for await (const model of client.models.list()) listed.push(model.id);
  expect(listed.includes(args.model), `models.list(): ${show(listed)} does not hold ${show(args.model)}`);
  console.log(`models.list(): ${show(listed)}`);

  // (a), (b) chat, streamed then not: the same reply.
  const chat = {
    model: args.model,
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hello' }],
    max_tokens: maxTokens,
    temperature: 0,
  };
  const streamed = await streamedChat(client, chat);
  const whole = await client.chat.completions.create(chat);
  expect(whole.object === 'chat.completion', `chat: object ${show(whole.object)}, expected "chat.completion"`);
  expect(whole.choices.length === 1, `chat: ${whole.choices.length} choices, expected 1`);
  const message = whole.choices[0].message;
  expect(message.role === 'assistant', `chat: message role ${show(message.role)}`);
  expect(message.content === streamed.text,
         `chat: not streamed ${show(message.content)} != streamed ${show(streamed.text)}`);
  expect(whole.choices[0].finish_reason === streamed.finish,
         `chat: finish_reason ${show(whole.choices[0].finish_reason)} not streamed, ${show(streamed.finish)} streamed`);
  const chatUsage = checkUsage('chat', whole.usage, streamed.finish, maxTokens);
  console.log(`chat: ${show(streamed.text)} (${streamed.chunks} chunks, finish ${streamed.finish}, ` +
              `usage ${show(chatUsage)})`);

  // (c) plain completions, a text prompt and a prompt of token ids, streamed then not.
  for (const prompt of ['Once upon a time', [5, 17, 42, 7]]) {
    const request = { model: args.model, prompt, max_tokens: maxTokens, temperature: 0 };
    const what = `completion of ${show(prompt)}`;
    const streamedText = await streamedCompletion(client, request);
    const wholeText = await client.completions.create(request);
    expect(wholeText.object === 'text_completion',
           `${what}: object ${show(wholeText.object)}, expected "text_completion"`);
    expect(wholeText.choices[0].text === streamedText.text,
           `${what}: not streamed ${show(wholeText.choices[0].text)} != streamed ${show(streamedText.text)}`);
    expect(wholeText.choices[0].finish_reason === streamedText.finish,
           `${what}: finish_reason ${show(wholeText.choices[0].finish_reason)} not streamed, ` +
           `${show(streamedText.finish)} streamed`);
    const usage = checkUsage(what, wholeText.usage, streamedText.finish, maxTokens);
    if (Array.isArray(prompt))
      expect(usage.prompt_tokens >= prompt.length,
             `${what}: usage.prompt_tokens ${usage.prompt_tokens} < the ${prompt.length} ids sent`);
    console.log(`${what}: ${show(streamedText.text)} (${streamedText.chunks} chunks, finish ` +
                `${streamedText.finish}, usage ${show(usage)})`);
  }

  // (e) bad requests.
  await expectRefusal('max_tokens -1',
                      () => client.completions.create({ model: args.model, prompt: 'hi', max_tokens: -1 }),
                      [400], 'max_tokens');
  const unknown = 'no-such-model';
  await expectRefusal('an unknown model',
                      () => client.chat.completions.create({ ...chat, model: unknown }),
                      [400, 404], unknown);
  console.log('openai client: every check passed');
}

main().catch((error) => {
  if (error instanceof Mismatch) console.error(`FAIL: ${error.message}`);
  else console.error(`FAIL: ${error?.constructor?.name ?? 'error'}: ${error?.message ?? error}`);
  process.exit(1);
});

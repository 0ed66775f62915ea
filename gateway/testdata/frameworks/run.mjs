// Drives one agent framework through the Vigil gateway with only its base
// URL (and the Vigil key header) changed: a tool-using loop in which the
// model calls the tool "step" until it answers. Run by
// gateway/frameworks_test.go:
//
//   node run.mjs <agents|ai|langchain> <chat|responses> <stream|json> <baseURL> <vigilKey>
//
// It prints one JSON line: {"ok": bool, "steps": [n…], "text": "…", "error": "…", "apiError": bool}.
import { z } from 'zod';

const [framework, api, mode, baseURL, key] = process.argv.slice(2);
const stream = mode === 'stream';
const headers = { 'Invariant-Authorization': 'Bearer ' + key };
const steps = [];
const stepImpl = async ({ n }) => {
  steps.push(n);
  return 'result call_' + n;
};
const system = 'You are an agent. Call step until told to stop.';
const prompt = 'Do the steps.';

async function agentsSDK() {
  const { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } = await import('@openai/agents');
  const { default: OpenAI } = await import('openai');
  setTracingDisabled(true);
  setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey: 'sk-test', defaultHeaders: headers, maxRetries: 0 }));
  setOpenAIAPI(api === 'chat' ? 'chat_completions' : 'responses');
  const step = tool({ name: 'step', description: 'Do one step.', parameters: z.object({ n: z.number() }), execute: stepImpl });
  const agent = new Agent({ name: 'stepper', instructions: system, tools: [step], model: 'gpt-4o' });
  if (!stream) {
    const r = await run(agent, prompt);
    return r.finalOutput;
  }
  const r = await run(agent, prompt, { stream: true });
  for await (const _ of r) { /* drain */ }
  await r.completed;
  if (r.error) throw r.error;
  return r.finalOutput;
}

async function vercelAI() {
  const { generateText, streamText, tool, stepCountIs } = await import('ai');
  const { createOpenAI } = await import('@ai-sdk/openai');
  const provider = createOpenAI({ baseURL, apiKey: 'sk-test', headers });
  const model = api === 'chat' ? provider.chat('gpt-4o') : provider.responses('gpt-4o');
  const tools = { step: tool({ description: 'Do one step.', inputSchema: z.object({ n: z.number() }), execute: stepImpl }) };
  const args = { model, system, prompt, tools, stopWhen: stepCountIs(6), maxRetries: 0 };
  if (!stream) {
    const r = await generateText(args);
    return r.text;
  }
  const r = streamText({ ...args, onError: () => {} });
  let text = '';
  for await (const part of r.fullStream) {
    if (part.type === 'error') throw part.error;
    if (part.type === 'text-delta') text += part.text ?? part.delta ?? '';
  }
  return text;
}

async function langChain() {
  const { ChatOpenAI } = await import('@langchain/openai');
  const { tool } = await import('@langchain/core/tools');
  const { HumanMessage, SystemMessage } = await import('@langchain/core/messages');
  const step = tool(stepImpl, { name: 'step', description: 'Do one step.', schema: z.object({ n: z.number() }) });
  const llm = new ChatOpenAI({
    model: 'gpt-4o', apiKey: 'sk-test', maxRetries: 0, streaming: stream, useResponsesApi: api === 'responses',
    configuration: { baseURL, defaultHeaders: headers },
  }).bindTools([step]);
  const msgs = [new SystemMessage(system), new HumanMessage(prompt)];
  for (let i = 0; i < 6; i++) {
    let ai;
    if (stream) {
      for await (const c of await llm.stream(msgs)) ai = ai ? ai.concat(c) : c;
    } else {
      ai = await llm.invoke(msgs);
    }
    msgs.push(ai);
    if (!ai.tool_calls || ai.tool_calls.length === 0) return typeof ai.content === 'string' ? ai.content : JSON.stringify(ai.content);
    for (const tc of ai.tool_calls) msgs.push(await step.invoke(tc));
  }
  throw new Error('loop did not end');
}

const fns = { agents: agentsSDK, ai: vercelAI, langchain: langChain };
try {
  const text = await fns[framework]();
  console.log(JSON.stringify({ ok: true, steps, text: String(text ?? '') }));
} catch (e) {
  let err = e;
  // Frameworks wrap the provider error; find the API error underneath.
  let apiError = false;
  for (let x = e, i = 0; x && i < 6; x = x.cause ?? x.error ?? x.lastError, i++) {
    const name = x?.constructor?.name ?? '';
    if (/APIError|APICallError|BadRequestError|InternalServerError|ModelBehaviorError/.test(name) || x?.status === 400 || x?.statusCode === 400) apiError = true;
  }
  console.log(JSON.stringify({ ok: false, steps, error: String(err?.message ?? err), apiError }));
}

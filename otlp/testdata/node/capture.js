// capture.js MODE: runs a two-step tool loop (ask for the weather, the
// model calls get_weather, the tool answers, the model answers) with the
// official `openai` client (or, for vercel, the AI SDK's OpenAI provider)
// against a mock OpenAI upstream started here, instrumented by one of:
//
//   openinference  @arizeai/openinference-instrumentation-openai
//   openllmetry    @traceloop/instrumentation-openai
//   contrib        @opentelemetry/instrumentation-openai (content in log records)
//   vercel         the AI SDK's telemetry, current gen_ai.* spans (ai + @ai-sdk/otel's OpenTelemetry)
//   vercel-legacy  the AI SDK's older ai.* spans (@ai-sdk/otel's LegacyOpenTelemetry)
//
// Spans (and log records) are batched, as the SDKs' defaults do, and
// exported at the end (spans first, then log records) with OTLP/HTTP
// protobuf to
// $VIGIL_OTLP_URL (/v1/traces, /v1/logs) with $VIGIL_API_KEY, and, when
// $CAPTURE_DIR is set, the export request bodies are also written there
// (traces-N.pb, logs-N.pb) to be kept as golden inputs.
"use strict";

const http = require("node:http");
const fs = require("node:fs");
const path = require("node:path");

const mode = process.argv[2];
const base = process.env.VIGIL_OTLP_URL;
const key = process.env.VIGIL_API_KEY;
if (!mode || !base || !key) {
  console.error("usage: VIGIL_OTLP_URL=... VIGIL_API_KEY=... node capture.js openinference|openllmetry|contrib|vercel");
  process.exit(2);
}

// Content capture switches of the instrumentations.
process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT = "true";
process.env.TRACELOOP_TRACE_CONTENT = "true";

const { trace, context } = require("@opentelemetry/api");
const { logs } = require("@opentelemetry/api-logs");
const { TracerProvider, BatchSpanProcessor } = require("@opentelemetry/sdk-trace");
const { LoggerProvider, BatchLogRecordProcessor } = require("@opentelemetry/sdk-logs");
const { AsyncLocalStorageContextManager } = require("@opentelemetry/context-async-hooks");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");
const { OTLPLogExporter } = require("@opentelemetry/exporter-logs-otlp-proto");
const { resourceFromAttributes } = require("@opentelemetry/resources");
const { registerInstrumentations } = require("@opentelemetry/instrumentation");

// Exported bodies go through a recording proxy when CAPTURE_DIR is set.
const captureDir = process.env.CAPTURE_DIR;
let seq = 0;
function proxy() {
  return new Promise((resolve) => {
    const srv = http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        if (captureDir && !req.headers["content-encoding"]) {
          const kind = req.url.endsWith("/v1/logs") ? "logs" : "traces";
          fs.writeFileSync(path.join(captureDir, `${kind}-${String(seq++).padStart(2, "0")}.pb`), body);
        }
        const fwd = http.request(base + req.url, { method: "POST", headers: req.headers }, (r) => {
          res.writeHead(r.statusCode, r.headers);
          r.pipe(res);
        });
        fwd.on("error", (e) => { res.writeHead(502); res.end(String(e)); });
        fwd.end(body);
      });
    });
    srv.listen(0, "127.0.0.1", () => resolve(srv));
  });
}

// The mock OpenAI upstream: the first call gets a tool call, the one
// with the tool's output gets the answer.
function upstream() {
  return new Promise((resolve) => {
    const srv = http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString() || "{}");
        const hasTool = (body.messages || []).some((m) => m.role === "tool");
        const message = hasTool
          ? { role: "assistant", content: "It is 18°C and sunny in Paris." }
          : { role: "assistant", content: null, tool_calls: [{ id: "call_weather_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }] };
        const usage = hasTool ? { prompt_tokens: 60, completion_tokens: 11, total_tokens: 71 } : { prompt_tokens: 40, completion_tokens: 7, total_tokens: 47 };
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({
          id: hasTool ? "chatcmpl-2" : "chatcmpl-1", object: "chat.completion", created: 1767225600, model: "gpt-4o-mini-2024-07-18",
          choices: [{ index: 0, message, finish_reason: hasTool ? "stop" : "tool_calls" }], usage,
        }));
      });
    });
    srv.listen(0, "127.0.0.1", () => resolve(srv));
  });
}

const tools = [{ type: "function", function: { name: "get_weather", description: "Current weather of a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];

function getWeather(args) {
  return args.city === "Paris" ? "18°C, sunny" : "unknown";
}

async function openaiLoop(OpenAI, baseURL) {
  const client = new OpenAI({ apiKey: "sk-test", baseURL });
  const messages = [
    { role: "system", content: "You are a weather assistant." },
    { role: "user", content: "What is the weather in Paris?" },
  ];
  const first = await client.chat.completions.create({ model: "gpt-4o-mini", messages, tools });
  const call = first.choices[0].message.tool_calls[0];
  messages.push(first.choices[0].message);
  messages.push({ role: "tool", tool_call_id: call.id, content: getWeather(JSON.parse(call.function.arguments)) });
  await client.chat.completions.create({ model: "gpt-4o-mini", messages, tools });
}

async function vercelLoop(baseURL, legacy) {
  const { generateText, tool, stepCountIs, registerTelemetry } = require("ai");
  const otel = require("@ai-sdk/otel");
  registerTelemetry(legacy ? new otel.LegacyOpenTelemetry() : new otel.OpenTelemetry());
  const { createOpenAI } = require("@ai-sdk/openai");
  const { z } = require("zod");
  const openai = createOpenAI({ apiKey: "sk-test", baseURL });
  await generateText({
    model: openai.chat("gpt-4o-mini"),
    system: "You are a weather assistant.",
    prompt: "What is the weather in Paris?",
    tools: { get_weather: tool({ description: "Current weather of a city", inputSchema: z.object({ city: z.string() }), execute: async (args) => getWeather(args) }) },
    stopWhen: stepCountIs(5),
    telemetry: { isEnabled: true, functionId: "weather", recordInputs: true, recordOutputs: true },
  });
}

async function main() {
  const up = await upstream();
  const px = await proxy();
  const target = `http://127.0.0.1:${px.address().port}`;
  const headers = { Authorization: `Bearer ${key}` };
  const resource = resourceFromAttributes({ "service.name": `capture-${mode}` });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const tp = new TracerProvider({ resource, spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${target}/v1/traces`, headers }) })] });
  trace.setGlobalTracerProvider(tp);
  const lp = new LoggerProvider({ resource, processors: [new BatchLogRecordProcessor({ exporter: new OTLPLogExporter({ url: `${target}/v1/logs`, headers }) })] });
  logs.setGlobalLoggerProvider(lp);

  let inst;
  switch (mode) {
    case "openinference":
      inst = new (require("@arizeai/openinference-instrumentation-openai").OpenAIInstrumentation)();
      break;
    case "openllmetry":
      inst = new (require("@traceloop/instrumentation-openai").OpenAIInstrumentation)({ traceContent: true });
      break;
    case "contrib":
      inst = new (require("@opentelemetry/instrumentation-openai").OpenAIInstrumentation)({ captureMessageContent: true });
      break;
    case "vercel":
    case "vercel-legacy":
      break;
    default:
      console.error(`unknown mode ${mode}`);
      process.exit(2);
  }
  if (inst) {
    inst.setTracerProvider(tp);
    if (inst.setLoggerProvider) inst.setLoggerProvider(lp);
    registerInstrumentations({ instrumentations: [inst], tracerProvider: tp, loggerProvider: lp });
    // openai 6 exports the client class; manual instrumentation (which
    // OpenInference and OpenLLMetry offer) patches it whatever the module
    // loader did.
    const mod = require("openai");
    if (mode === "openllmetry") inst.manuallyInstrument(mod.OpenAI || mod);
    else if (inst.manuallyInstrument) inst.manuallyInstrument(mod);
  }
  const baseURL = `http://127.0.0.1:${up.address().port}/v1`;
  const tracer = trace.getTracer("capture");
  await tracer.startActiveSpan("weather-agent", async (root) => {
    if (mode.startsWith("vercel")) {
      await vercelLoop(baseURL, mode === "vercel-legacy");
    } else {
      await openaiLoop(require("openai").OpenAI || require("openai"), baseURL);
    }
    root.end();
  });
  await tp.forceFlush();
  await lp.forceFlush();
  await tp.shutdown();
  await lp.shutdown();
  up.close();
  px.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

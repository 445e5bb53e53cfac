// Drives markov's AG-UI endpoint with the official TypeScript client,
// @ag-ui/client's HttpAgent: a run to an interrupt, a resume whose payload
// the schema refuses (RUN_ERROR), a good resume, and a run the client
// leaves mid-stream and reconnects to. Every request is signed as
// markov's HTTP API wants (X-Markov-Timestamp, X-Markov-Signature).
//
//   node script.mjs URL SECRET RELEASE_URL
//
// It prints what it saw as JSON on stdout.
import { createHmac } from "node:crypto";
import { HttpAgent, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";

const [url, secret, releaseURL] = process.argv.slice(2);

// lastEventId is the last SSE id of the answers: where a reconnection
// resumes.
let lastEventId = "";

// signedFetch signs a request for markov, and notes the SSE ids of the
// answer as the client reads it.
async function signedFetch(input, init = {}) {
  const u = new URL(input);
  const method = init.method ?? "GET";
  const body = init.body ?? "";
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac("sha256", secret).update(`${ts}\n${method}\n${u.pathname}${u.search}\n${body}`).digest("hex");
  const headers = { ...(init.headers ?? {}), "X-Markov-Timestamp": ts, "X-Markov-Signature": `sha256=${sig}` };
  const resp = await fetch(input, { ...init, headers });
  if (!resp.body) return resp;
  const [mine, ids] = resp.body.tee();
  (async () => {
    const reader = ids.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.startsWith("id: ")) lastEventId = line.slice(4);
      }
    }
  })().catch(() => {});
  return new Response(mine, { status: resp.status, headers: resp.headers });
}

// ReconnectingAgent connects to a run still going: a GET of the same URL
// naming the thread and the run, from the last event ID received.
class ReconnectingAgent extends HttpAgent {
  connect(input) {
    const u = new URL(this.url);
    u.searchParams.set("threadId", input.threadId);
    u.searchParams.set("runId", input.runId);
    this.abortController = new AbortController();
    return transformHttpEventStream(
      runHttpRequest(() =>
        this.fetch(u.toString(), {
          method: "GET",
          headers: { ...this.headers, Accept: "text/event-stream", "Last-Event-ID": lastEventId },
          signal: this.abortController.signal,
        }),
      ),
    );
  }
}

const agent = new ReconnectingAgent({ url, fetch: signedFetch, threadId: "ts-thread" });
const out = {};

// recorder collects a run's events by type.
function recorder() {
  const seen = { types: [], errors: [], results: [], finished: null };
  return {
    seen,
    onEvent: ({ event }) => {
      seen.types.push(event.type);
    },
    onRunErrorEvent: ({ event }) => {
      seen.errors.push({ code: event.code, message: event.message });
    },
    onToolCallResultEvent: ({ event }) => {
      seen.results.push({ toolCallId: event.toolCallId, content: event.content });
    },
    onRunFinishedEvent: (e) => {
      seen.finished = { outcome: e.outcome, interrupts: e.interrupts ?? [] };
    },
  };
}

function lastAssistant() {
  const msgs = agent.messages.filter((m) => m.role === "assistant" && typeof m.content === "string" && m.content);
  return msgs.length ? msgs[msgs.length - 1].content : "";
}

// 1. A run to an interrupt.
console.error("script: 1. A run to an interrupt.");
agent.addMessage({ id: "m1", role: "user", content: "refund 42" });
let rec = recorder();
await agent.runAgent({ runId: "run-1" }, rec);
out.interrupt = { finished: rec.seen.finished, results: rec.seen.results, pending: agent.pendingInterrupts };
const id = rec.seen.finished.interrupts[0].id;

// 2. A payload the schema refuses.
console.error("script: 2. A payload the schema refuses.");
rec = recorder();
try {
  await agent.runAgent({ runId: "run-2", resume: [{ interruptId: id, status: "resolved", payload: { approved: "yes", by: "ts-e2e" } }] }, rec);
} catch (e) {
  rec.seen.thrown = String(e);
}
out.bad = rec.seen;

// 3. A good answer.
console.error("script: 3. A good answer.");
rec = recorder();
await agent.runAgent({ runId: "run-3", resume: [{ interruptId: id, status: "resolved", payload: { approved: true, by: "ts-e2e" } }] }, rec);
out.good = { finished: rec.seen.finished, results: rec.seen.results, text: lastAssistant(), state: agent.state };

// 4. A run left mid-stream, and reconnected to.
console.error("script: 4. A run left mid-stream, and reconnected to.");
agent.addMessage({ id: "m2", role: "user", content: "slow" });
let firstPart = "";
try {
  await agent.runAgent(
    { runId: "run-4" },
    {
      onTextMessageContentEvent: ({ event }) => {
        firstPart += event.delta;
        agent.abortRun();
      },
    },
  );
} catch (e) {
  // an aborted run may reject
}
const idAtAbort = lastEventId;
console.error("script: aborted at event", idAtAbort);
rec = recorder();
await agent.connectAgent(
  { runId: "run-4" },
  {
    ...rec,
    onRunStartedEvent: async () => {
      await fetch(releaseURL, { method: "POST" }); // the model may go on now
    },
  },
);
out.reconnect = { firstPart, idAtAbort, types: rec.seen.types, finished: rec.seen.finished, text: lastAssistant() };

process.stdout.write(JSON.stringify(out));

// Drives `markov acp` with the official TypeScript ACP client
// (@agentclientprotocol/sdk) through every path of the ACP agent and the
// draft RFC's suspend verbs, and prints what it saw as one JSON object on
// stdout, which acp's TestTypeScriptClient asserts.
//
// Usage: node script.mjs MARKOV_BINARY DATABASE
// (the agent runs the ACP demo's charter: MARKOV_CHARTER=acpdemo).
import { spawn, execFile } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { promisify } from "node:util";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const [markov, db] = process.argv.slice(2);
if (!markov || !db) {
  console.error("usage: node script.mjs MARKOV_BINARY DATABASE");
  process.exit(2);
}
const env = { ...process.env, MARKOV_CHARTER: "acpdemo" };
const agent = spawn(markov, ["--db", db, "acp", "--watch", "20ms", "--sweep", "0"], {
  stdio: ["pipe", "pipe", "inherit"],
  env,
});

// Everything the agent sends, in order.
const seen = [];
const waiters = [];
function record(e) {
  seen.push(e);
  for (const w of [...waiters]) {
    if (w.pred(e)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(e);
    }
  }
}
// waitFor resolves with the first event from index `from` on that
// matches pred.
function waitFor(pred, from = 0, what = "an event") {
  const found = seen.slice(from).find(pred);
  if (found) return Promise.resolve(found);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out waiting for " + what)), 30000);
    waiters.push({ pred, resolve: (e) => { clearTimeout(timer); resolve(e); } });
  });
}
const since = (i) => seen.slice(i);
const textOf = (events) =>
  events.filter((e) => e.kind === "update" && e.update.sessionUpdate === "agent_message_chunk")
    .map((e) => e.update.content.text).join("");
const updatesOf = (events, kind) => events.filter((e) => e.kind === "update" && e.update.sessionUpdate === kind);
const draftOf = (events, kind) => events.filter((e) => e.kind === "draft" && e.update.sessionUpdate === kind).map((e) => e.update);

const answers = [];
const app = client({ name: "markov-e2e" })
  .onNotification(methods.client.session.update, ({ params }) => record({ kind: "update", update: params.update }))
  .onNotification("_session/update", (p) => p, ({ params }) => record({ kind: "draft", update: params.update }))
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    const optionId = answers.shift() ?? "deny";
    record({ kind: "permission", title: params.toolCall.title, optionId, handle: params.toolCall._meta?.handle });
    return { outcome: { outcome: "selected", optionId } };
  })
  .onRequest("_session/await_resumption", (p) => p, ({ params }) => {
    record({ kind: "await", params });
    return { handle: params._meta.handle, suspendedAt: params._meta.suspendedAt };
  });

const out = {};
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
try {
  await app.connectWith(stream, (ctx) => drive(ctx));
} catch (err) {
  console.error("failed after", JSON.stringify(out, null, 1));
  agent.kill();
  throw err;
}
agent.stdin.end();
await new Promise((resolve) => agent.on("exit", resolve));
out.exitCode = agent.exitCode;
console.log(JSON.stringify(out));

async function drive(ctx) {
  const init = await ctx.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: {},
    clientInfo: { name: "ts-e2e", version: "1" },
  });
  out.initialize = { loadSession: init.agentCapabilities.loadSession, suspend: init.agentCapabilities._meta };

  const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
  out.sessionId = sessionId;
  const prompt = (text) => ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });

  // A prompt with streamed chunks.
  let mark = seen.length;
  let r = await prompt("hello there");
  out.chunks = { stopReason: r.stopReason, count: updatesOf(since(mark), "agent_message_chunk").length, text: textOf(since(mark)) };

  // Permission requests: allow, then deny.
  answers.push("allow", "deny");
  mark = seen.length;
  r = await prompt("deploy api");
  out.allow = { stopReason: r.stopReason, permission: since(mark).filter((e) => e.kind === "permission"), text: textOf(since(mark)),
    statuses: since(mark).filter((e) => e.kind === "update" && e.update.toolCallId).map((e) => e.update.status) };
  mark = seen.length;
  r = await prompt("refund 42");
  out.deny = { stopReason: r.stopReason, permission: since(mark).filter((e) => e.kind === "permission"), text: textOf(since(mark)) };

  // A pending tool call, resumed with an input.
  mark = seen.length;
  await prompt("ask what color?");
  const pending = updatesOf(since(mark), "tool_call_update").find((u) => u.update.status === "pending");
  out.pending = { reason: pending.update._meta.reason, status: pending.update.status };
  mark = seen.length;
  r = await ctx.request("_session/resume", { sessionId, handle: pending.update._meta.handle, input: { text: "blue" } });
  out.resumeInput = { stopReason: r.stopReason, text: textOf(since(mark)) };

  // session/suspend in each mode, each time during a prompt, then
  // session/resume: with an input, with continueTranscript false, plain.
  out.modes = {};
  for (const [mode, resume] of [
    ["finish_step", { input: "carry on" }],
    ["interrupt_immediate", { continueTranscript: false }],
    ["wait_for_completion", {}],
  ]) {
    mark = seen.length;
    const turn = prompt("work 4");
    await waitFor((e) => e.kind === "update" && e.update.sessionUpdate === "agent_message_chunk", mark, "the work to start");
    const suspended = await ctx.request("_session/suspend", {
      sessionId, mode, reason: "pause for review (" + mode + ")",
      resumeWhen: { timeout: { durationMinutes: 60, onTimeout: "resume_with_summary" } },
    });
    const turnResult = await turn;
    const during = since(mark);
    mark = seen.length;
    const resumed = await ctx.request("_session/resume", { sessionId, handle: suspended.handle, ...resume });
    out.modes[mode] = {
      response: suspended,
      promptStop: turnResult.stopReason,
      rounds: updatesOf(during, "tool_call").length,
      suspendedUpdates: draftOf(during, "suspended"),
      resumeStop: resumed.stopReason,
      resumedUpdates: draftOf(since(mark), "resumed"),
      afterResume: textOf(since(mark)),
    };
  }

  // A tool parks itself until an event: session/await_resumption; then a
  // signal from another process (markov signal) resumes it.
  mark = seen.length;
  r = await prompt("wait ci.passed");
  const awaited = await waitFor((e) => e.kind === "await", mark, "session/await_resumption");
  out.await = { stopReason: r.stopReason, params: awaited.params, suspendedUpdates: draftOf(since(mark), "suspended") };
  mark = seen.length;
  const signal = await promisify(execFile)(markov, ["--db", db, "signal", "ci.passed", '"green"'], { env });
  const woke = await waitFor((e) => e.kind === "draft" && e.update.sessionUpdate === "resumed", mark, "the resumed update");
  await waitFor((e) => e.kind === "update" && e.update.sessionUpdate === "agent_message_chunk" && /happened/.test(e.update.content.text), mark, "the answer after the signal");
  out.signal = { stdout: signal.stdout.trim(), resumed: woke.update, text: textOf(since(mark)) };

  // session/load replays the history.
  mark = seen.length;
  await ctx.request(methods.agent.session.load, { sessionId, cwd: process.cwd(), mcpServers: [] });
  const replay = since(mark);
  out.load = {
    user: updatesOf(replay, "user_message_chunk").map((e) => e.update.content.text),
    toolCalls: updatesOf(replay, "tool_call").length,
    text: textOf(replay),
  };
}

// Drives a markov A2A server with the official JavaScript SDK's client
// (@a2a-js/sdk) over one binding, and prints what it saw as JSON on its
// last stdout line. Usage: node script.mjs BASE_URL JSONRPC|HTTP+JSON
// [OTHER_BASE_URL] — the auth-required task is resubscribed to at the
// other server (on the same database) when it is given.
//
// For the auth-required step it prints {"resume": SUSPEND_ID} on a line
// of its own and waits for a line on stdin: the Go test resumes the
// suspension (as the console or the HTTP API would) and answers.
import { createInterface } from "node:readline";
import { randomUUID } from "node:crypto";
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";

const [base, binding, otherBase] = process.argv.slice(2);
const factory = new ClientFactory({
  transports: [new JsonRpcTransportFactory(), new RestTransportFactory()],
  preferredTransports: [binding],
});
const client = await factory.createFromUrl(base);
// other is a client of another server on the same database (another
// process): the auth-required task is followed there.
const other = otherBase ? await factory.createFromUrl(otherBase) : client;
const stdin = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const text = (value, metadata) => ({ content: { $case: "text", value }, metadata });
const data = (value, metadata) => ({ content: { $case: "data", value }, metadata });
const message = (parts, taskId) => ({
  message: { messageId: randomUUID(), role: Role.ROLE_USER, parts, taskId: taskId ?? "", contextId: "" },
});
const state = (s) => TaskState[s];
// sendMessage gives the task itself (a message has no status).
const task = (res) => {
  if (!res?.id || !res.status) throw new Error("not a task: " + JSON.stringify(res));
  return res;
};
const answer = (t) =>
  (t.artifacts ?? []).filter((a) => a.artifactId === "answer").flatMap((a) => a.parts.map((p) => p.content?.value)).join("");
const suspensions = (t) =>
  (t.status?.message?.parts ?? []).filter((p) => p.content?.$case === "data").map((p) => p.content.value);
const failure = async (f) => {
  try {
    await f();
    return "no error";
  } catch (e) {
    return String(e.message ?? e);
  }
};

const out = {};

// send → completed, the answer as an artifact.
const hello = task(await client.sendMessage(message([text("hello")])));
out.hello = { state: state(hello.status.state), answer: answer(hello) };

// stream → input-required, with the text as it streams and the tool.
const kinds = [];
let asked;
for await (const ev of client.sendMessageStream(message([text("ask favourite colour?")]))) {
  kinds.push(ev.payload?.$case);
  if (ev.payload?.$case === "statusUpdate") asked = ev.payload.value;
}
out.stream = { kinds: [...new Set(kinds)], state: state(asked.status.state), suspensions: suspensions(asked) };

// stream → the answer's text as artifact updates, then completed.
let streamed = "";
let last;
for await (const ev of client.sendMessageStream(message([text("hi")]))) {
  if (ev.payload?.$case === "artifactUpdate") streamed += ev.payload.value.artifact.parts.map((p) => p.content?.value).join("");
  if (ev.payload?.$case === "statusUpdate") last = state(ev.payload.value.status.state);
}
out.streamText = { text: streamed, state: last };

// input-required → a text answer → completed.
const answered = task(await client.sendMessage(message([text("green")], asked.taskId)));
out.answered = { state: state(answered.status.state), answer: answer(answered) };

// An invalid payload: input-required again with the violation, then a
// valid one.
const order = task(await client.sendMessage(message([text("order pears")])));
const bad = task(await client.sendMessage(message([data({ qty: "lots" })], order.id)));
const good = task(await client.sendMessage(message([data({ qty: 4 }, { suspendId: suspensions(order)[0].suspendId })], order.id)));
out.order = {
  state: state(order.status.state),
  bad: { state: state(bad.status.state), suspensions: suspensions(bad) },
  good: { state: state(good.status.state), answer: answer(good) },
  sameSuspension: suspensions(bad)[0].suspendId === suspensions(order)[0].suspendId,
};

// Bad input: clear errors.
out.errors = {
  unknownTask: await failure(() => client.getTask({ id: "no-such-task" })),
  finishedTask: await failure(() => client.sendMessage(message([text("more")], hello.id))),
};

// cancel.
const toCancel = task(await client.sendMessage(message([text("ask anything?")])));
let cancelled;
for (let i = 0; i < 50 && !cancelled; i++) {
  // The Go SDK refuses a cancel that meets the input-required execution
  // still winding down ("queue is closed"): try again.
  cancelled = await client.cancelTask({ id: toCancel.id }).catch((e) => {
    if (!String(e.message).includes("queue is closed")) throw e;
  });
}
out.cancel = { state: state(cancelled.status.state) };

// auth-required, resolved elsewhere, followed with resubscribe.
const deploy = task(await client.sendMessage(message([text("deploy api")])));
const refused = await failure(() => client.sendMessage(message([data(true)], deploy.id)));
const events = other.resubscribeTask({ id: deploy.id });
const first = await events.next();
console.log(JSON.stringify({ resume: suspensions(deploy)[0].suspendId }));
await stdin.next(); // the Go test resumed it
const states = [];
for await (const ev of { [Symbol.asyncIterator]: () => events }) {
  if (ev.payload?.$case === "statusUpdate") states.push(state(ev.payload.value.status.state));
}
const after = await client.getTask({ id: deploy.id });
out.auth = {
  state: state(deploy.status.state),
  decidedElsewhere: suspensions(deploy)[0].decidedElsewhere,
  refused,
  first: first.value?.payload?.$case,
  states,
  final: state(after.status.state),
  answer: answer(after),
};

console.log(JSON.stringify(out));
process.exit(0);

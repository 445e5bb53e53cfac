// A remote agent built with the official JavaScript A2A SDK's server
// (@a2a-js/sdk, protocol 1.0), which the a2a package's tests call as a
// tool. It listens on 127.0.0.1 (a free port) and prints {"url": ...}
// once ready. What a task does depends on the first message's text:
//   "ask"  — input-required: "what color?" with a JSON Schema of the
//            answer in a data part; the answer's turn works until
//            released, then completes with the artifact "painted <answer>";
//   "slow" — works until released, then completes with "slow done".
// POST /release releases every waiting task. Push notifications go to the
// URL the client registered with its message, with its token.
import express from "express";
import { randomUUID } from "node:crypto";
import { TaskState, Role, AGENT_CARD_PATH } from "@a2a-js/sdk";
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryTaskStore,
  InMemoryPushNotificationStore,
  DefaultPushNotificationSender,
} from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";

const text = (value) => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "text/plain" });
const data = (value) => ({ content: { $case: "data", value }, metadata: undefined, filename: "", mediaType: "application/json" });
const agentMessage = (ctx, parts) => ({
  messageId: randomUUID(), contextId: ctx.contextId, taskId: ctx.taskId, role: Role.ROLE_AGENT,
  parts, metadata: undefined, extensions: [], referenceTaskIds: [],
});
const textOf = (msg) => msg.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");

let waiting = [];
const released = () => new Promise((resolve) => waiting.push(resolve));

const executor = {
  async execute(ctx, bus) {
    const status = (state, message) =>
      bus.publish(AgentEvent.statusUpdate({
        taskId: ctx.taskId, contextId: ctx.contextId, metadata: undefined,
        status: { state, message, timestamp: new Date().toISOString() },
      }));
    const finish = async (result) => {
      status(TaskState.TASK_STATE_WORKING, undefined);
      await released();
      bus.publish(AgentEvent.artifactUpdate({
        taskId: ctx.taskId, contextId: ctx.contextId, append: false, lastChunk: true, metadata: undefined,
        artifact: { artifactId: randomUUID(), name: "result", description: "", parts: [text(result)], metadata: undefined, extensions: [] },
      }));
      status(TaskState.TASK_STATE_COMPLETED, undefined);
    };
    const said = textOf(ctx.userMessage);
    const task = ctx.task ?? {
      id: ctx.taskId, contextId: ctx.contextId, artifacts: [], history: [ctx.userMessage], metadata: undefined,
      status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
    };
    bus.publish(AgentEvent.task(task));
    if (ctx.task && ctx.task.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      await finish("painted " + said);
    } else if (said === "ask") {
      status(TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(ctx, [
        text("what color?"),
        data({ schema: { type: "string", enum: ["red", "blue"] } }),
      ]));
    } else {
      await finish("slow done");
    }
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId: "", metadata: undefined,
      status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() },
    }));
    bus.finished();
  },
};

const app = express();
const server = app.listen(0, "127.0.0.1", () => {
  const url = `http://127.0.0.1:${server.address().port}`;
  const card = {
    name: "JS Painter", description: "paints things, in JavaScript", version: "1.0.0",
    supportedInterfaces: [{ url: `${url}/a2a/jsonrpc`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
    provider: undefined, documentationUrl: undefined, iconUrl: undefined,
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ["text/plain"], defaultOutputModes: ["text/plain"],
    skills: [{ id: "paint", name: "paint", description: "paints in a color you choose", tags: [], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  };
  const pushStore = new InMemoryPushNotificationStore();
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor, undefined,
    pushStore, new DefaultPushNotificationSender(pushStore));
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
  app.use("/a2a/jsonrpc", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  app.post("/release", (_req, res) => {
    const n = waiting.length;
    waiting.forEach((resolve) => resolve());
    waiting = [];
    res.json({ released: n });
  });
  console.log(JSON.stringify({ url }));
});

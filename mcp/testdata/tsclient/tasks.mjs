// Drives "markov mcp" with the official TypeScript MCP client (v2, the
// 2026-07-28 protocol) declaring the tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663), over stdio and over two
// "markov mcp --http" processes on one database: a call that suspends is
// answered with a task; tasks/get, tasks/update (a refused answer, then
// the answer) and tasks/cancel follow, tasks/get answered by the other
// process. Prints what it saw as one JSON object. Arguments: the markov
// binary, a database file, the two servers' URLs.
//
// Client 2.4.0 has no tasks runtime: callTool refuses a result of type
// "task" (UNSUPPORTED_RESULT_TYPE), so the CreateTaskResult is read off
// the client's transport; the extension's requests go through
// client.request with the extension's result schemas.
import { Client, StreamableHTTPClientTransport, fromJsonSchema } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const [bin, db, url, url2] = process.argv.slice(2);
const env = { ...process.env, MARKOV_CHARTER: 'acpdemo', MARKOV_MCP_SECRET: 'a-test-secret-of-at-least-32-bytes!!' };
const TASKS = 'io.modelcontextprotocol/tasks';

// The extension's Task (DetailedTask) and empty acknowledgement.
const Task = fromJsonSchema({
    type: 'object',
    required: ['taskId', 'status', 'createdAt', 'lastUpdatedAt', 'ttlMs'],
    properties: {
        taskId: { type: 'string' },
        status: { enum: ['working', 'input_required', 'completed', 'cancelled', 'failed'] },
        statusMessage: { type: 'string' },
        createdAt: { type: 'string' },
        lastUpdatedAt: { type: 'string' },
        ttlMs: { type: ['integer', 'null'] },
        pollIntervalMs: { type: 'integer' },
        inputRequests: { type: 'object' },
        result: { type: 'object' },
        error: { type: 'object' },
    },
});
const Ack = fromJsonSchema({ type: 'object' });

async function connect(transport) {
    const c = new Client({ name: 'ts-tasks', version: '1.0.0' }, {
        capabilities: { elicitation: { form: {} }, extensions: { [TASKS]: {} } },
        versionNegotiation: { mode: { pin: '2026-07-28' } },
    });
    await c.connect(transport);
    const created = [];
    const inner = transport.onmessage;
    transport.onmessage = (msg, extra) => {
        if (msg?.result?.resultType === 'task') created.push(msg.result);
        inner?.(msg, extra);
    };
    // callTask calls a tool and returns the CreateTaskResult it got.
    c.callTask = async (name, args) => {
        try {
            const r = await c.callTool({ name, arguments: args });
            return { notATask: r };
        } catch (e) {
            if (e.code !== 'UNSUPPORTED_RESULT_TYPE') throw e;
            return created.shift();
        }
    };
    return c;
}

const get = (c, taskId) => c.request({ method: 'tasks/get', params: { taskId } }, Task);
const update = (c, taskId, inputResponses) => c.request({ method: 'tasks/update', params: { taskId, inputResponses } }, Ack);
const cancel = (c, taskId) => c.request({ method: 'tasks/cancel', params: { taskId } }, Ack);
const text = r => (r?.content ?? []).map(c => c.text).join('');

async function until(c, taskId, status) {
    const deadline = Date.now() + 20000;
    for (;;) {
        const t = await get(c, taskId);
        if (t.status === status || Date.now() > deadline) return t;
        await new Promise(r => setTimeout(r, t.pollIntervalMs ?? 100));
    }
}

async function run(c, other, key) {
    const res = {};
    const args = { message: 'refund 42', conversation: key };
    const created = await c.callTask('send_message', args);
    res.created = { resultType: created.resultType, status: created.status, pollIntervalMs: created.pollIntervalMs, ttlMs: created.ttlMs };
    const id = created.taskId;
    const seen = await get(other, id);
    const [[rid, ask]] = Object.entries(seen.inputRequests);
    res.get = { status: seen.status, method: ask.method, message: ask.params.message, schema: ask.params.requestedSchema };
    try {
        await update(c, id, { [rid]: { action: 'accept', content: { approved: 'yes', manager: 'ts-tasks' } } });
        res.bad = 'accepted';
    } catch (e) {
        res.bad = { code: e.code, message: e.message, status: (await get(c, id)).status };
    }
    await update(other, id, { [rid]: { action: 'accept', content: { approved: true, manager: 'ts-tasks' } } });
    const done = await until(c, id, 'completed');
    res.done = { status: done.status, text: text(done.result) };

    const second = await c.callTask('send_message', { message: 'refund 43', conversation: key + '-cancel' });
    await cancel(other, second.taskId);
    res.cancelled = { status: (await until(c, second.taskId, 'cancelled')).status };
    try {
        await get(c, id.slice(0, -2) + 'xx');
        res.tampered = 'accepted';
    } catch (e) {
        res.tampered = { code: e.code, message: e.message };
    }
    return res;
}

const out = {};
const stdio = () => new StdioClientTransport({ command: bin, args: ['mcp', '--db', db], env, stderr: 'inherit' });
const s = await connect(stdio());
out.stdio = await run(s, s, 'tasks-stdio');
await s.close();
const h1 = await connect(new StreamableHTTPClientTransport(new URL(url)));
const h2 = await connect(new StreamableHTTPClientTransport(new URL(url2)));
out.http = await run(h1, h2, 'tasks-http');
await h1.close();
await h2.close();
console.log(JSON.stringify(out));
